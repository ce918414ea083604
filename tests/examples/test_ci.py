"""examples/ci: the GitHub Actions workflow and the GitLab CI job run the same `etai` command
sequence, and that sequence, run here with the oracle as candidate and baseline on two sessions,
passes the gate and leaves what the CI jobs publish (JUnit XML, Markdown, JSON, the report)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"


def _etai_lines(script: list[str] | str) -> list[str]:
    lines = (
        script.splitlines()
        if isinstance(script, str)
        else [x for s in script for x in s.splitlines()]
    )
    return [line.strip() for line in lines if line.strip().startswith("etai ")]


def github_sequence() -> list[str]:
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    return [
        x
        for job in wf["jobs"].values()
        for step in job["steps"]
        for x in _etai_lines(step.get("run", ""))
    ]


def gitlab_sequence() -> list[str]:
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["etai-gate"]
    return _etai_lines(job["script"]) + _etai_lines(job["after_script"])


def test_both_examples_run_the_same_commands():
    seq = github_sequence()
    assert seq == gitlab_sequence()
    assert [line.split()[1] for line in seq] == ["run", "run", "gate", "report"]


@pytest.mark.docker
@pytest.mark.slow
def test_the_sequence_gates_and_publishes(tmp_path, make_suite):
    suite = make_suite(
        tmp_path / "suite", ["profile-display-name-null", "paginate-page-size-off-by-one"]
    )
    work = tmp_path / "job"
    shutil.copytree(CI, work / "examples" / "ci")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SUITE": str(suite),
        "AGENT": "oracle",
        "BASELINE_AGENT": "oracle",
    }
    script = "set -e\n" + "\n".join(github_sequence()) + "\n"
    p = subprocess.run(
        ["bash", "-c", script],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "✅ gate passed" in (work / "gate.md").read_text()
    from junitparser import JUnitXml

    xml = JUnitXml.fromfile(str(work / "gate.xml"))
    assert (xml.tests, xml.failures, xml.errors) == (5 + 2, 0, 0)
    assert (work / "report" / "report.html").is_file() and (work / "report" / "report.md").is_file()

    # A candidate that does nothing fails the same gate: exit 1, as the CI job would (a fresh job
    # has no runs/candidate; the baseline's rows are reused).
    shutil.rmtree(work / "runs" / "candidate")
    env["AGENT"] = "noop"
    p = subprocess.run(
        ["bash", "-c", script],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "❌ gate failed" in (work / "gate.md").read_text()
