"""A third-party plug-in (tests/harness/data/plugin: an agent, a metric, a suite kind, entry points
only) is pip-installed into the test venv and used through `etai run` without touching the repo,
then uninstalled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).parent / "data" / "plugin"
pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "-q", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    # A copy, so the build's own folders (build/, *.egg-info) never land in the repository.
    src = tmp_path_factory.mktemp("plugin-src")
    for f in PLUGIN.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    _pip("install", "--no-deps", str(src))  # built in isolation, as pip builds any package
    try:
        yield
    finally:
        _pip("uninstall", "-y", "etai-demo-plugin")


def _etai(*args: str) -> subprocess.CompletedProcess:
    # A fresh process: entry points are read when a registry is first used.
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_without_the_plugin_its_names_are_unknown(tmp_path):
    # First in the file: the module's plug-in is installed from the next test on.
    p = _etai("run", "--suite", "jest-bugfix", "--agent", "tester", "--out", str(tmp_path / "r"))
    assert p.returncode == 2 and "unknown agent 'tester'" in p.stderr


def test_the_plugin_is_listed_by_its_entry_points(installed):
    from importlib.metadata import entry_points

    assert "tester" in {ep.name for ep in entry_points(group="etai.agents")}
    assert {"countdown", "humaneval"} <= {ep.name for ep in entry_points(group="etai.suite_kinds")}
    assert "jest_share" in {ep.name for ep in entry_points(group="etai.metrics")}


def test_agent_and_metric_from_a_plugin_run_through_etai_run(installed, tmp_path, make_suite):
    root = make_suite(tmp_path / "suite", ["retry-default-attempts", "semver-unescaped-dot"])
    p = _etai(
        "run",
        "--suite",
        str(root),
        "--agent",
        "tester",
        "--agent",
        "noop",
        "--out",
        str(tmp_path / "run"),
        "--json",
        "--no-progress",
    )
    assert p.returncode == 0, p.stderr
    agents = json.loads(p.stdout)["agents"]
    # The tester only runs the failing tests: never green, and every first action is jest_run.
    assert agents["tester"]["path_accuracy"]["3"] == 0.0 and agents["tester"]["n_valid"] == 2
    assert agents["tester"]["metrics"] == {"jest_share": 1.0}
    assert agents["noop"]["metrics"] == {"jest_share": 0.0}


def test_suite_kind_from_a_plugin_runs_and_prints_its_table(installed, tmp_path):
    out = tmp_path / "cd"
    p = _etai("run", "--suite", "countdown:7", "--agent", "oracle", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "oracle: counted 7"
    assert json.loads((out / "summary.json").read_text())["kind"] == "countdown"
