"""The bundled etai-js manifest's real slice: its fastest-validator sessions materialised offline
from the history in ../shared/realrepos-history (read in place, never copied here) with the
project's lockfile from the manifest, every content hash checked on the way, then replayed: the
oracle green within k. make test replays one session with the oracle (CI time); `make etai-js`
(ETAI_JS=all) replays every session with the oracle and the do-nothing agent, which must stay red."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.authoring.etai_js import manifest
from harness.cli import main
from harness.runs.runner import run
from harness.suites.load import load_suite

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from realrepos import realrepos  # noqa: E402

MIRROR = realrepos().parent / "realrepos-history"
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_real_slice_materialises_from_the_bundle_and_replays_green(tmp_path, image):
    if not (MIRROR / "fastest-validator.bundle").is_file():
        pytest.fail(
            f"{MIRROR}/fastest-validator.bundle is missing: the shared histories are the input"
        )
    rows = [r for r in manifest.load("etai-js").rows if r["project"] == "fastest-validator"]
    assert rows, "the bundled manifest holds no fastest-validator session"
    out = tmp_path / "etai-js"
    argv = ["suite", "fetch", "etai-js", "--only", "fastest-validator", "--mirror", str(MIRROR)]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    suite = load_suite(out / "fastest-validator")
    assert [s.session_id for s in suite.sessions] == [r["session_id"] for r in rows]
    for s, r in zip(suite.sessions, rows, strict=True):
        assert s.raw["provenance"]["commit"] == r["fix_commit"]
        assert sorted(s.held_out) == sorted(r["held_out_files"])
    every = os.environ.get("ETAI_JS") == "all"
    agents = ["oracle", "noop"] if every else ["oracle"]
    ids = None if every else [rows[0]["session_id"]]
    summary = run(str(out / "fastest-validator"), agents, out=tmp_path / "run", session_ids=ids,
                  progress=False)  # fmt: skip
    oracle, k = summary["agents"]["oracle"], summary["k"]
    assert summary["n_sessions"] == (len(rows) if every else 1), summary
    assert oracle["reference_broken"] == [] and oracle["n_infra_error"] == 0
    assert oracle["path_accuracy"][k] == 1.0
    if every:
        assert summary["agents"]["noop"]["path_accuracy"][k] == 0.0
