"""The dashboard in a real browser: Debian's chromium, headless, driven by
Selenium through /usr/bin/chromedriver, on both engines. Each test takes a
screenshot into its temporary directory (and into `JOBVISOR_SCREENSHOTS`
when set: that is how docs/dashboard.png is made)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.queue.fleet import SupervisorBeat
from jobvisor.queue.internal import service_ops
from jobvisor.web import app
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock
from tests.support.web import TOKEN, serving

from .test_pages import dead_job

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [p for p in (CHROMEDRIVER, CHROMIUM) if not shutil.which(p)]
    if missing:
        pytest.skip(
            f"no {' or '.join(missing)}: apt-get install -y chromium chromium-driver"
            " (.ci/run does it)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def site(browser: WebDriver, queue: Queue, url: str) -> Iterator[str]:
    """The dashboard (admin token set) served on the test's database; the
    browser starts logged out."""
    with serving(url, lambda q: app(q, admin_token=TOKEN)) as base:
        browser.delete_all_cookies()
        yield base


def shot(browser: WebDriver, tmp_path: Path, name: str) -> None:
    browser.save_screenshot(str(tmp_path / f"{name}.png"))
    wanted = os.environ.get("JOBVISOR_SCREENSHOTS")
    if wanted:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(wanted) / f"{name}.png"))


def go(browser: WebDriver, by: str, value: str) -> None:
    """Click what leads to another page, and wait until that page is there
    (a click returns before the page it asked for has loaded)."""
    wait = WebDriverWait(browser, 15)
    wait.until(loaded)
    old = browser.find_element(By.TAG_NAME, "html")
    try:
        browser.find_element(by, value).click()
    except WebDriverException as exc:
        # chromedriver looks at the clicked node once more after the click;
        # when the click has already replaced the page (a busy machine), it
        # says so. The wait below still fails if nothing was clicked.
        if "does not belong to the document" not in str(exc):
            raise
    wait.until(lambda _: gone(old))
    wait.until(loaded)


def gone(element: WebElement) -> bool:
    """Whether the page holding the element has been replaced. Chromedriver
    answers a node of a replaced page either as stale or, while the new page
    is being attached, as "not belonging to the document"; both mean gone."""
    try:
        element.is_enabled()
    except WebDriverException as exc:
        if isinstance(exc, StaleElementReferenceException):
            return True
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


def loaded(browser: WebDriver) -> bool:
    return bool(browser.execute_script("return document.readyState") == "complete")


def text(browser: WebDriver, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def last_hour(url: str) -> None:
    """Jobs finished over the last hour, minute by minute (a queue on a
    clock set back), so the chart has a shape."""
    clock = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=55))
    with jobvisor.connect(url, clock=clock) as past:
        for minute in range(55):
            done = 6 + (minute * 7) % 13
            failing = 2 if minute % 9 == 4 else 0
            past.enqueue_many([{"job_type": "resize", "queue": "images"}] * done)
            past.enqueue_many([{"job_type": "charge", "max_attempts": 1}] * failing)
            for job in past.claim("w-7f3a", limit=done + failing):
                if job.job_type == "charge":
                    past.fail(job, "OSError: card network unreachable")
                else:
                    past.complete(job)
            clock.advance(60)


def fill(queue: Queue, url: str) -> None:
    """A fleet worth looking at: three queues, a paused one, dead and
    finished jobs, a supervisor with two workers."""
    last_hour(url)
    queue.enqueue_many([{"job_type": "send_email", "queue": "mail"}] * 12)
    queue.enqueue_many([{"job_type": "resize", "queue": "images", "payload": {"w": 640}}] * 5)
    for job in queue.claim("w-7f3a", limit=4, queues=["images"]):
        queue.complete(job, {"ok": True})
    workers = [
        {"id": "w-7f3a", "pid": 4101, "slot": 0, "restarts": 0},
        {"id": "w-91c2", "pid": 4102, "slot": 1, "restarts": 1},
    ]
    service_ops(queue).supervisor_heartbeat(
        SupervisorBeat("s-5e1d", "app-1", 4100, "0.1.0", True, workers)
    )


def test_overview_filter_open_refuse_then_requeue_with_the_token(
    browser: WebDriver, site: str, queue: Queue, url: str, tmp_path: Path
) -> None:
    fill(queue, url)
    job_id = dead_job(queue, "charge_card", {"order": 1234, "note": "<script>alert(1)</script>"})
    browser.get(site + "/")
    assert "mail" in text(browser, "#queues")
    assert "app-1" in text(browser, "#fleet")
    shot(browser, tmp_path, "dashboard")

    go(browser, By.LINK_TEXT, "Jobs")
    Select(browser.find_element(By.NAME, "status")).select_by_value("dead")
    browser.find_element(By.NAME, "job_type").send_keys("charge_card")
    go(browser, By.ID, "apply")
    rows = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
    assert [r.get_attribute("data-status") for r in rows] == ["dead"]
    assert "<script>alert(1)</script>" in text(browser, "#jobs")  # shown as text
    shot(browser, tmp_path, "jobs")

    go(browser, By.LINK_TEXT, str(job_id))
    assert text(browser, "#job-status") == "dead"
    assert "no such account" in text(browser, "#errors")
    go(browser, By.CSS_SELECTOR, 'button[data-action="requeue"]')
    assert "log in first" in text(browser, "#refused")
    assert queue.get(job_id).status == JobStatus.DEAD
    shot(browser, tmp_path, "refused")

    go(browser, By.LINK_TEXT, "Log in")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    go(browser, By.CSS_SELECTOR, "#login button")
    assert "Logged in" in text(browser, "#flash")
    browser.get(f"{site}/jobs/{job_id}")
    go(browser, By.CSS_SELECTOR, 'button[data-action="requeue"]')
    assert "Requeue 1 dead job" in text(browser, "#describe")
    go(browser, By.ID, "yes")
    assert text(browser, "#flash") == "Requeued 1 dead job."
    assert text(browser, "#job-status") == "pending"
    assert queue.get(job_id).status == JobStatus.PENDING
    assert_invariants(url)


def test_pause_and_resume_a_queue(
    browser: WebDriver, site: str, queue: Queue, tmp_path: Path
) -> None:
    queue.enqueue("send_email", queue="mail")
    browser.get(site + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    go(browser, By.CSS_SELECTOR, "#login button")

    def row() -> str:
        return text(browser, '#queues tr[data-queue="mail"]')

    def button(action: str) -> None:
        css = f'tr[data-queue="mail"] button[data-action="{action}"]'
        go(browser, By.CSS_SELECTOR, css)

    button("pause")
    go(browser, By.ID, "yes")
    assert text(browser, "#flash") == "Paused queue 'mail'."
    assert "paused" in row() and queue.paused() == ["mail"]
    shot(browser, tmp_path, "paused")
    button("resume")
    go(browser, By.ID, "yes")
    assert text(browser, "#flash") == "Resumed queue 'mail'."
    assert queue.paused() == []


def test_open_a_workflow_and_cancel_it(
    browser: WebDriver, site: str, queue: Queue, url: str, tmp_path: Path
) -> None:
    wf = jobvisor.Workflow("nightly-report")
    orders = wf.add("fetch_orders", {"day": "2026-12-04"}, queue="reports")
    refunds = wf.add("fetch_refunds", {"day": "2026-12-04"}, queue="reports")
    report = wf.add("build_report", {"o": orders.result, "r": refunds.result}, queue="reports")
    wf.add("publish", {"report": report.result}, queue="reports")
    wid = queue.enqueue_workflow(wf)
    (first, _) = queue.claim("w-7f3a", limit=2, queues=["reports"])
    queue.complete(first, [1, 2])
    browser.get(site + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    go(browser, By.CSS_SELECTOR, "#login button")
    go(browser, By.LINK_TEXT, "Workflows")
    go(browser, By.LINK_TEXT, str(wid))
    assert text(browser, "#workflow-name") == "nightly-report"
    boxes = browser.find_elements(By.CSS_SELECTOR, "#graph g.node")
    assert len(boxes) == 4
    assert {b.get_attribute("data-status") for b in boxes} == {"completed", "running", "waiting"}
    shot(browser, tmp_path, "workflow")
    go(browser, By.CSS_SELECTOR, 'button[data-action="cancel-workflow"]')
    assert f"Cancel workflow {wid}" in text(browser, "#describe")
    go(browser, By.ID, "yes")
    assert text(browser, "#flash").startswith(f"Cancelled 3 jobs of workflow {wid} (")
    boxes = browser.find_elements(By.CSS_SELECTOR, "#graph g.node")
    statuses = sorted(str(b.get_attribute("data-status")) for b in boxes)
    assert statuses == ["cancelled", "cancelled", "completed", "running"]  # asked to stop
    assert queue.workflow(wid).counts == {
        JobStatus.COMPLETED: 1,
        JobStatus.RUNNING: 1,
        JobStatus.CANCELLED: 2,
    }
    assert_invariants(url)


def test_a_parked_job_shows_its_steps_and_takes_a_signal_from_its_page(
    browser: WebDriver, site: str, queue: Queue, url: str, tmp_path: Path
) -> None:
    queue.enqueue("approve_refund", {"order": 1234})
    (job,) = queue.claim("w-7f3a")
    svc = service_ops(queue)
    started = dt.datetime.now(dt.UTC)
    svc.step_save(job, 0, "check", started=started, result='{"refundable": true}')
    svc.event_set(job, "stage", "<b>waiting for a human</b>")
    svc.step_wait(job, 1, "signal:approved", signal="approved", timeout=86400)
    browser.get(site + "/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    go(browser, By.CSS_SELECTOR, "#login button")
    browser.get(f"{site}/jobs/{job.id}")
    assert "check" in text(browser, "#steps") and "waiting" in text(browser, "#steps")
    assert "<b>waiting for a human</b>" in text(browser, "#events")  # shown as text
    browser.find_element(By.NAME, "signal").send_keys("approved")
    browser.find_element(By.NAME, "payload").send_keys('{"by": "ann"}')
    shot(browser, tmp_path, "steps")
    go(browser, By.CSS_SELECTOR, 'button[data-action="signal"]')
    assert f"Send the signal 'approved' to job {job.id}" in text(browser, "#describe")
    go(browser, By.ID, "yes")
    assert text(browser, "#flash") == f"Sent the signal 'approved' to job {job.id}."
    assert "approved" in text(browser, "#signals")
    (again,) = queue.claim("w-7f3a")  # due at once
    wait = svc.step_wait(again, 1, "signal:approved", signal="approved", timeout=86400)
    assert wait.payload == {"by": "ann"}
    assert_invariants(url)
