"""The dashboard's job page shows the unique key a job holds, escaped."""

from __future__ import annotations

import html
import re

from jobvisor import Queue, Unique
from tests.support.web import Browser


def _unique_cell(page: str) -> str:
    found = re.search(r"<th>unique key</th><td>(.*?)</td>", page)
    assert found is not None
    return found.group(1)


def test_a_job_page_shows_its_unique_key_as_text(dashboard: Browser, queue: Queue) -> None:
    job_id = queue.enqueue("report", unique=Unique(key="<script>alert(1)</script>"))
    key = queue.get(job_id).unique_key
    assert key is not None
    status, page = dashboard.get(f"/jobs/{job_id}")
    assert status == 200
    cell = _unique_cell(page)
    assert "<" not in cell and html.unescape(cell) == key
    assert "<script>alert(1)" not in page
    _, page = dashboard.get(f"/jobs/{queue.enqueue('report')}")
    assert _unique_cell(page) == "-"
