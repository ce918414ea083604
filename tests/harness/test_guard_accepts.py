"""Real project code the guard once refused, through the real sandbox: each project must come out
green, untampered, and test for test what stock Jest reports (legit_corpus.stock, legit_corpus.graded).

The guard's side of each is in docs/threat-model.md ("the framework", "realm lockdown"); what an
agent could make of the same openings is in tamper_corpus.py (category "openings").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import legit_corpus

from harness import sandbox
from harness.sandbox import Status

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CASES = {
    # (a) and (c) are in the legitimate corpus too; here each alone.
    "es5-map-and-set-subclasses": (
        {
            "src/collections.js": legit_corpus.FILES["src/collections.js"],
            "tests/builtins.test.js": legit_corpus.BUILTINS_SUBCLASS_TESTS,
        },
        {},
    ),
    "static-symbol-has-instance": (
        {
            "src/brand.js": legit_corpus.FILES["src/brand.js"],
            "tests/brand.test.js": legit_corpus.HAS_INSTANCE_TESTS,
        },
        {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_guard_accepts_real_code(case, image, make_project, tmp_path):
    files, config = CASES[case]
    root = make_project(tmp_path / case, files, config)
    with sandbox.start("docker", root, image=image) as sb:
        want, run = legit_corpus.stock(sb), legit_corpus.graded(sb)
    assert run.status == Status.PASSED and not run.tamper, (
        run.reason,
        run.tamper,
        run.failed_tests,
    )
    got = sorted((t.file, t.name, t.status) for t in run.tests)
    assert got == want and all(status == "passed" for *_, status in got), (got, want)
