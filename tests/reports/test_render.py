"""`etai report` end to end: two agents of the bundled suite and a HarnessEval training folder from
`etai train`, every section in Markdown and HTML, the HTML opened in a real headless chromium."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper module beside this file

import headless
from etai_cmd import TIMES, TRAIN_SESSIONS, etai

SECTIONS = [
    "runs",
    "agents",
    "clusters",
    "pa-curve",
    "intents",
    "dates",
    "statuses",
    "cursor",
    "steps-to-green",
    "pairwise",
    "training",
    "sessions",
    "changes",
]
TITLES = [
    "Runs",
    "Per-agent results",
    "Error bars by project",
    "Path Accuracy@1..k",
    "Per-intent breakdown",
    "Results by fix date",
    "Status breakdown",
    "Cursor-error distribution",
    "Steps to green",
    "Pairwise comparison (paired tests)",
    "Metrics vs training step",
    "Every session",
    "Sessions whose status changed",
]
FIGURES = [
    s for s in SECTIONS if s not in ("runs", "agents", "clusters", "dates", "sessions", "changes")
]
PNG = b"\x89PNG\r\n\x1a\n"


def _report(runs: list[Path], out: Path, *fmt: str) -> Path:
    t0 = time.monotonic()
    p = etai(
        "report", *map(str, runs), "--out", str(out), *(x for f in fmt for x in ("--format", f))
    )
    TIMES[f"etai report {' '.join(r.name for r in runs)} ({', '.join(fmt) or 'md, html'})"] = (
        time.monotonic() - t0
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def _every_section(out: Path) -> str:
    """Every section in both documents, each figure a PNG; returns the Markdown."""
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert [line[3:] for line in md.splitlines() if line.startswith("## ")] == TITLES
    for fid in FIGURES:
        assert f"](figures/{fid}.png)" in md
        assert (out / "figures" / f"{fid}.png").read_bytes().startswith(PNG)
        assert f'<img id="fig-{fid}"' in page
    assert [f'<section id="{s}">' in page for s in SECTIONS] == [True] * len(SECTIONS)
    assert (
        'src="http' not in page and "<script" not in page
    )  # self-contained: nothing fetched, nothing run
    for status in (
        "passed",
        "failed",
        "timeout",
        "invalid_action",
        "tampered",
        "infra_error",
        "reference_broken",
        "skipped_budget",
    ):
        assert f"<th>{status}</th>" in page
    return md


def _in_the_browser(html: Path) -> headless.Page:
    """Rendered in headless chromium: every section, every figure decoded and shown, a quiet console."""
    page = headless.open_page(html)
    assert page.title == "ETAI report" and page.sections == SECTIONS
    assert [i["id"] for i in page.images] == [f"fig-{f}" for f in FIGURES]
    assert all(
        i["complete"] and i["width"] > 100 and i["height"] > 100 and i["shown"] for i in page.images
    ), page.images
    assert page.console_errors == []
    assert page.screenshot.startswith(PNG)
    return page


@pytest.mark.docker
@pytest.mark.slow
def test_report_on_two_agents_of_the_bundled_suite(bundled_run, tmp_path):
    out = tmp_path / "report"
    md = _every_section(_report([bundled_run], out))
    assert (
        "| oracle | 14 | 14 | 0.000 [0.000, 0.215] | 0.429 [0.214, 0.674] | 1.000 [0.785, 1.000] |"
        in md
    )
    assert (
        "| oracle | noop | 14 | 14 | 0 | exact McNemar | 0.0001221 | 3 | +1.000 [+1.000, +1.000] |"
        in md
    )
    # noop fails every session oracle passes, each linked to its episode in view.html
    assert md.count("| broken by noop |") == 14 and (out / "view.html").exists()
    assert not (out / "report.json").exists()
    _report([bundled_run], tmp_path / "json", "json")
    data = json.loads((tmp_path / "json" / "report.json").read_text())
    assert [a["arm"] for a in data["arms"]] == ["oracle", "noop"] and data["pairs"][0][
        "mcnemar_p"
    ] == 2 / 2**14
    assert not (tmp_path / "json" / "report.html").exists()

    page = _in_the_browser(out / "report.html")
    keep = os.environ.get("ETAI_REPORT_SCREENSHOT")  # a path: keep the screenshot (docs/report.png)
    if keep:
        Path(keep).write_bytes(page.screenshot)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.train
def test_report_on_a_training_folder(training_folder, tmp_path):
    out = tmp_path / "report"
    md = _every_section(_report([training_folder], out))
    training = md.split("## Metrics vs training step")[1]
    assert "| series | step | arm | PA@1 | PA@2 | pass@1 |" in training
    assert (
        "| ckpt | 4 | hfmem:tiny-cpu-ba4 |" in training
        and "| ckpt | 8 | hfmem:tiny-cpu-ba8 |" in training
    )
    assert f"{len(TRAIN_SESSIONS)} session(s) compared" in md
    _in_the_browser(out / "report.html")


def test_report_shows_the_special_case_rate(tmp_path, make_run, make_row):
    """`etai report` on hand-built rows: the special-cased rate (green on the visible verification
    tests, red on the held-out ones, issue #30) beside the tamper rate with its Wilson interval, in
    the Markdown and the JSON; a row without the key counts as not special-cased."""
    from reports._stats import wilson

    rows = [
        make_row("s1", "m", "passed", steps_to_green=1, special_cased=False),
        make_row("s2", "m", "failed", special_cased=True, checks=["held_out"]),
        make_row("s3", "m", "timeout", special_cased=True, checks=["held_out"]),
        make_row("s4", "m", "failed"),  # written before held-out tests existed
    ]
    out = _report([make_run(tmp_path / "run", rows)], tmp_path / "rep", "md", "json")
    md = (out / "report.md").read_text()
    heads = next(line for line in md.splitlines() if line.startswith("| arm | sessions |"))
    cells = next(line for line in md.splitlines() if line.startswith("| m | 4 | 4 |"))
    named = dict(zip(heads.split(" | "), cells.split(" | ")))
    lo, hi = wilson(2, 4)
    assert named["tamper rate"] == f"0.000 [0.000, {wilson(0, 4)[1]:.3f}]"
    assert named["special-cased rate"] == f"0.500 [{lo:.3f}, {hi:.3f}]"
    (arm,) = json.loads((out / "report.json").read_text())["arms"]
    assert arm["special_case_rate"] == {"value": 0.5, "lo": lo, "hi": hi, "n": 4}
    assert named["incomplete rate"] == f"0.000 [0.000, {wilson(0, 4)[1]:.3f}]"


def test_report_shows_both_readings_of_a_held_out_failure(tmp_path, make_run, make_row):
    """A held-out failure read as special-casing and one read as an incomplete fix land in their
    own columns of the Markdown and the JSON (harness/runs/held_out.py)."""
    from reports._stats import wilson

    rows = [
        make_row("s1", "m", "passed", steps_to_green=1),
        make_row("s2", "m", "failed", special_cased=True, incomplete=False, checks=["held_out"]),
        make_row("s3", "m", "failed", special_cased=False, incomplete=True, checks=["held_out"]),
        make_row("s4", "m", "failed", special_cased=False, incomplete=True, checks=["held_out"]),
    ]
    out = _report([make_run(tmp_path / "run", rows)], tmp_path / "rep", "md", "json")
    md = (out / "report.md").read_text()
    heads = next(line for line in md.splitlines() if line.startswith("| arm | sessions |"))
    cells = next(line for line in md.splitlines() if line.startswith("| m | 4 | 4 |"))
    named = dict(zip(heads.split(" | "), cells.split(" | ")))
    assert named["special-cased rate"] == f"0.250 [{wilson(1, 4)[0]:.3f}, {wilson(1, 4)[1]:.3f}]"
    assert named["incomplete rate"] == f"0.500 [{wilson(2, 4)[0]:.3f}, {wilson(2, 4)[1]:.3f}]"
    assert "Incomplete rate:" in md
    (arm,) = json.loads((out / "report.json").read_text())["arms"]
    assert arm["incomplete_rate"]["value"] == 0.5 and arm["special_case_rate"]["value"] == 0.25


def test_chromium_is_installed():
    """`make test` installs it (scripts/ensure-browser); a missing browser fails, never skips."""
    assert headless.chromium(), "no chromium: run `make browser`"
    assert shutil.which("fc-list"), "fontconfig missing"
