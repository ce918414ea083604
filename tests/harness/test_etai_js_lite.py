"""The etai-js lite subset (harness/authoring/etai_js/lite.py): its apportionment and fix sizes by
hand, the rule's guarantees on a manifest of twelve projects made here (at most 60 sessions, every
project, every size class of a large project, the same subset every time), and `etai suite fetch
--lite --list` through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.authoring.etai_js import lite, manifest
from harness.cli import main

SIZES = {f"p{i:02d}": n for i, n in enumerate([40, 30, 20, 10, 10, 5, 5, 3, 2, 1, 1, 1])}


def _row(project: str, i: int) -> dict:
    sid = f"{project}-{i:03d}"
    lines = (i * 7) % 23 + 1  # fix sizes spread from 2 to 46 changed lines
    old = "\n".join(f"old {j}" for j in range(lines))
    new = "\n".join(f"new {j}" for j in range(lines))
    return {
        "session_id": sid, "project": project, "base_commit": "a" * 40,
        "base_date": "2020-01-01T00:00:00Z", "fix_commit": "b" * 40,
        "fix_date": f"2020-01-{i % 28 + 1:02d}T00:00:00Z", "subject": "fix", "test_patch": "",
        "held_out_files": [], "held_out_patch": "",
        "reference": [{"file": "lib/a.js", "old": old, "new": new}],
        "instruction": "fix it", "intent": "fix_test_failure", "held_out": [],
        "fail_to_pass": [], "pass_to_pass": 0, "gold": {"session_id": sid},
        "workspace_sha256": "c" * 64,
    }  # fmt: skip


@pytest.fixture
def big(tmp_path) -> Path:
    """A draft manifest version of 128 sessions over twelve projects (nothing here is fetched)."""
    folder = tmp_path / "m" / "1"
    projects = {}
    for p in SIZES:
        (folder / "projects" / p).mkdir(parents=True)
        (folder / "projects" / p / "package.json").write_text('{"name": "x"}')
        projects[p] = {"url": f"https://example.org/{p}.git", "license": "MIT", "suite": {}}
    meta = {"format": "etai-js", "version": 1, "projects": projects}
    (folder / "manifest.json").write_text(json.dumps(meta))
    rows = [_row(p, i) for p, n in SIZES.items() for i in range(n)]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_apportion_by_hand():
    assert lite.apportion({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    # floor 1 each, 7 left over 96:1:0 -> 6.93, 0.07, 0: a's remainder takes the last seat
    assert lite.apportion({"a": 97, "b": 2, "c": 1}, 10, floor=1) == {"a": 8, "b": 1, "c": 1}
    assert lite.apportion({"x": 1, "y": 1}, 1) == {"x": 1, "y": 0}  # a tie: the first listed
    assert lite.apportion({"x": 2, "y": 3}, 9) == {"x": 2, "y": 3}  # room for all
    assert lite.apportion({"x": 5, "y": 5, "z": 5}, 2, floor=1) == {"x": 1, "y": 1, "z": 0}


def test_fix_size_counts_changed_lines_by_hand():
    edit = {"file": "a.js", "old": "a\nb\nc", "new": "a\nB\nc\nd"}  # b -> B, d added
    assert lite.fix_size({"reference": [edit]}) == 3
    assert lite.fix_size({"reference": [edit, {"file": "b.js", "old": "x", "new": "y"}]}) == 5


def test_the_lite_subset_is_stratified_and_fixed(big):
    m = manifest.load(big)
    picked = lite.select(m.rows)
    assert len(picked) == lite.SIZE
    per = {p: sum(r["project"] == p for r in picked) for p in SIZES}
    assert per == lite.apportion(SIZES, lite.SIZE, floor=1) and min(per.values()) == 1
    # by hand: one seat each, 48 left over the 116 others: p00 48*39/116 = 16.14, p01 12.0,
    # p02 7.86, p03 and p04 3.72, p05 and p06 1.66, p07 0.83, p08 0.41; 43 whole seats, the last
    # 5 to the largest remainders p02, p07, p03, p04 and p05 (tied with p06, listed first)
    assert list(per.values()) == [17, 13, 9, 5, 5, 3, 2, 2, 1, 1, 1, 1]
    classes = lite.size_classes(m.rows)
    for p in ("p00", "p01", "p02"):  # every size class of each large project is in
        assert {classes[r["session_id"]] for r in picked if r["project"] == p} == set(lite.CLASSES)
    assert [r["session_id"] for r in picked] == [
        r["session_id"] for r in m.rows if r in picked
    ]  # the manifest's order
    assert lite.select(m.rows) == picked  # the same every time
    assert lite.select(m.rows, seed="another") != picked
    assert lite.of(m).label == "etai-js@1-lite" and lite.of(m).rows == picked


def test_a_small_version_is_its_own_lite_subset():
    m = manifest.load("etai-js@1")
    assert lite.of(m).rows == m.rows and len(m.rows) <= lite.SIZE


def test_fetch_lite_list(big, capsys):
    assert main(["suite", "fetch", str(big), "--lite", "--list"]) == 0
    out, err = capsys.readouterr()
    ids = [line.split("\t")[0] for line in out.splitlines()]
    assert ids == [r["session_id"] for r in lite.select(manifest.load(big).rows)]
    assert err.strip() == "etai-js@1-lite: 60 session(s)"
    first = out.splitlines()[0].split("\t")
    assert first[1:] == ["p00", "2", "small", "2020-01-01T00:00:00Z"]  # p00-000: one line each way
    assert main(["suite", "fetch", str(big), "--lite", "--list", "--only", "p11"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["suite", "fetch", str(big), "--list", "--only", "nope"]) == 2
    assert "--only: no project 'nope'" in capsys.readouterr().err
