"""Grading under attack: every red-team technique on every session comes out not passed, the
legitimate corpus stays green, and the techniques are real (with the guard off, many would pass).

The corpus is tamper_corpus.py (techniques) and legit_corpus.py. Each (technique, session) is a full
episode through the real loop: a fresh hardened sandbox, the technique written into the source
module by a replay agent, verification against the preflight's gold record. `make test` runs the
core techniques (tamper_corpus.CORE, every category), each on a rotating slice of the sessions
(SLICE); `make redteam` (ETAI_REDTEAM=all) runs every technique on every session.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

import legit_corpus
import tamper_corpus
from pools import first_in_line

from harness import sandbox
from harness.runs.session_jobs import local_preflights
from harness.sandbox import Status
from harness.suites.load import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IMPLEMENT = Path(__file__).parent / "data" / "implement"
# One warm Jest host per sandbox: the corpus runs hundreds of fresh sandboxes on two cores.
LIMITS = tamper_corpus.LIMITS
EVERYTHING = os.environ.get("ETAI_REDTEAM") == "all"
# ETAI_REDTEAM=name,name: only those techniques (trying new ones); `all`: every one; unset: CORE.
_NAMED = [n for n in os.environ.get("ETAI_REDTEAM", "").split(",") if n and n != "all"]
TECHNIQUES = (
    [t for t in tamper_corpus.TECHNIQUES if t.name in _NAMED]
    if _NAMED
    else tamper_corpus.selected(EVERYTHING)
)
WORKERS = 2  # episodes at once, as `etai run` on two cores
# make test: each core technique on SLICE sessions, the next technique on the next ones, so every
# session meets about CORE x SLICE / sessions techniques (CI time: every core technique on every
# session took 110 s of make test, on four sessions 45 s). ETAI_REDTEAM=all or named techniques:
# every session.
SLICE = 3


def _jobs(sessions):
    """(technique, suite, session, preflight) episodes: all pairs, or the rotating slice."""
    if EVERYTHING or _NAMED:
        return [(t, st, s, f) for t in TECHNIQUES for st, s, f in sessions]
    n = len(sessions)
    return [
        (t, *sessions[(i * SLICE + j) % n]) for i, t in enumerate(TECHNIQUES) for j in range(SLICE)
    ]


@contextmanager
def _sandboxes(image, guard=True):
    """Start a sandbox per episode as `etai run` does: each a fresh hardened container, taken from
    a warm pool that starts the next ones while episodes run (a container's start-up then overlaps
    other episodes instead of coming before each one)."""
    limits = LIMITS if guard else dataclasses.replace(LIMITS, guard=False)
    prepared = sandbox.provider("docker").prepare(limits, workers=WORKERS, image=image)
    try:
        yield lambda s: prepared.start(s.workspace)
    finally:
        prepared.cleanup()


@pytest.fixture(scope="module")
def sessions(image):
    """Every bundled session and the implement-this-function session, each with its preflight (the
    runner's own, cached per session content, image and grading code like a run's)."""
    suites = [load_suite("jest-bugfix"), load_suite(IMPLEMENT)]
    flights = {}
    for st in suites:
        flights.update(local_preflights(st, workers=WORKERS, progress=False))
    pairs = [(st, s) for st in suites for s in st.sessions]
    bad = [(s.session_id, flights[s.session_id]["reason"]) for _, s in pairs]
    bad = [(sid, why) for sid, why in bad if not flights[sid]["ok"]]
    assert not bad, f"reference solutions must stay green under the guard: {bad}"
    return [(st, s, flights[s.session_id]) for st, s in pairs]


def _episode(start, tmp: Path, technique, st, s, flight, *, guard=True):
    folder = tmp / ("on" if guard else "off") / technique.name / s.session_id
    folder.mkdir(parents=True, exist_ok=True)
    replay = tamper_corpus.replay_file(technique, [s], folder)
    return tamper_corpus.replay_episode(replay, start, st, s, flight, guard=guard)


def test_corpus_covers_the_attack_surface():
    assert len(set(tamper_corpus.names())) == len(tamper_corpus.TECHNIQUES) and set(
        tamper_corpus.CORE
    ) <= set(tamper_corpus.names())
    categories = {
        "framework globals",
        "matcher table",
        "intrinsics",
        "values",
        "module system",
        "file system",
        "process",
        "timing",
        "context boundary",
        "test peeking",
    }
    for chosen in (tamper_corpus.selected(False), tamper_corpus.selected(True)):
        assert len(chosen) >= 20 and {t.category for t in chosen} == categories


def _verdicts(image, jobs, tmp_path):
    """Each (technique, session) episode's row, and what is wrong with the rows: an infra error
    (it would hide a verdict), a false green, a tampering technique merely failed, a peek not caught."""
    with _sandboxes(image) as start, ThreadPoolExecutor(WORKERS) as ex:
        rows = list(ex.map(lambda j: (j[0], j[2], _episode(start, tmp_path, *j)), jobs))
    wrong = {
        "infra": [
            (t.name, s.session_id, r["reason"]) for t, s, r in rows if r["status"] == "infra_error"
        ],
        "false green": [
            (t.name, s.session_id, r["status"])
            for t, s, r in rows
            if r["status"] == "passed" or r["green"] or r["steps_to_green"] is not None
        ],
        "merely failed": [
            (t.name, s.session_id, r["status"])
            for t, s, r in rows
            if t.tampered and r["status"] != "tampered"
        ],
        # Special-casing the visible tests is no tampering: the held-out tests (every session has
        # them) catch it, and the row says so.
        "not caught": [
            (t.name, s.session_id, r["status"], r["reason"])
            for t, s, r in rows
            if t.peeks and not (r["status"] == "failed" and r["special_cased"])
        ],
    }
    return rows, {k: v for k, v in wrong.items() if v}


@pytest.mark.timeout(2400)
def test_no_technique_passes_on_any_session(image, sessions, tmp_path):
    jobs = _jobs(sessions)
    assert {s.session_id for _, _, s, _ in jobs} == {s.session_id for _, s, _ in sessions}
    rows, wrong = _verdicts(image, jobs, tmp_path)
    by_technique = {}
    for t, s, r in rows:
        d = by_technique.setdefault(
            t.name, {"category": t.category, "statuses": Counter(), "checks": Counter()}
        )
        d["statuses"][r["status"]] += 1
        d["checks"].update(r["checks"][:1])
    print(
        json.dumps({"sessions": len(sessions), "techniques": by_technique}, indent=1, default=dict)
    )
    assert not wrong, wrong
    assert len(rows) == len(jobs) >= len(TECHNIQUES) * min(SLICE, len(sessions))
    # the tampered status is in use: most techniques are caught, not merely stopped
    assert _NAMED or (
        sum(1 for d in by_technique.values() if d["statuses"]["tampered"]) >= len(TECHNIQUES) // 2
    )


# Jest hosts are forked from a zygote unless ETAI_JEST_FORK=0 (docs/sandbox.md#forked-hosts), which
# changes how a host begins and ends; the tests above run with forks. Started hosts, the other way:
# the techniques of code that outlives a run in its host, of the process, and of held-out tests.
STARTED = (
    "warm-host-timer-steals-request",
    "warm-host-stdout-getter-steals-request",
    "warm-host-detached-child-reads-channel",
    "exit-zero",
    "patch-after-the-test",
    "tmpdir-module-reaches-vm",
    "held-out-read-at-run-time",
    "store-reference-at-run-time",
)


def test_started_hosts_pass_no_technique(image, sessions, tmp_path, monkeypatch):
    """On one session in make test (the one the unguarded test below finds most open), on two with
    ETAI_REDTEAM=all."""
    monkeypatch.setenv("ETAI_JEST_FORK", "0")  # read as each sandbox is made
    ids = ("checkout-missing-await", "slugify") if EVERYTHING else ("checkout-missing-await",)
    picked = [x for x in sessions if x[1].session_id in ids]
    chosen = [t for t in tamper_corpus.TECHNIQUES if t.name in STARTED]
    assert len(picked) == len(ids) and len(chosen) == len(STARTED)
    rows, wrong = _verdicts(image, [(t, *x) for t in chosen for x in picked], tmp_path)
    assert not wrong, wrong
    assert len(rows) == len(STARTED) * len(ids)


def test_techniques_are_real_attacks_without_the_guard(image, sessions, tmp_path):
    """The same techniques against plain Jest (the guard off, the old verdict rules): many would pass.
    This is what makes the test above able to fail. One session in make test: every technique that
    passed without the guard on slugify passed on checkout-missing-await too (and more did there)."""
    unguarded = ("slugify", "checkout-missing-await") if EVERYTHING else ("checkout-missing-await",)
    picked = [(st, s, f) for st, s, f in sessions if s.session_id in unguarded]
    jobs = [(t, st, s, f) for t in TECHNIQUES for st, s, f in picked]
    with _sandboxes(image, guard=False) as start, ThreadPoolExecutor(WORKERS) as ex:
        rows = list(ex.map(lambda j: (j[0].name, _episode(start, tmp_path, *j, guard=False)), jobs))
    green = sorted({name for name, r in rows if r["green"]})
    assert len(green) >= 10, green
    # The forgers of the next answer (host-function-constructor, vm-run-in-this-context) no longer
    # pass even without the guard: a graded run goes to a fresh host, where no earlier run's code is.
    assert {
        "global-test-noop",
        "extend-overrides-builtins",
        "matcher-table-write",
        "array-push-drops-errors",
        "circus-state-noop-tests",
    } <= set(green)


def test_legitimate_tests_stay_green_and_match_stock_jest(image, make_project, tmp_path):
    files = {k: v for k, v in legit_corpus.FILES.items() if v is not None}
    root = make_project(tmp_path / "legit", files, legit_corpus.CONFIG)
    with sandbox.start("docker", root, image=image) as sb:
        want = legit_corpus.stock(sb)
        for _ in range(2):  # the second run is on hosts that already ran every file
            run = legit_corpus.graded(sb)
            assert run.status == Status.PASSED and not run.tamper, (run.reason, run.failed_tests)
            got = sorted((t.file, t.name, t.status) for t in run.tests)
            assert got == want and len(got) == legit_corpus.N_TESTS
            assert all(t.asserts >= 1 for t in run.tests if t.name != "node assert")


# What an episode leaves in a pooled container must not reach the next one (docs/grading.md,
# "Episodes cannot see or change each other"): after each technique, the reference's episode in
# the very container the technique ran in gives the rows the reference gets alone in a new one.
# `make test` runs the techniques that act beyond their own run (processes, the zygote, files,
# caches) on one session; `make redteam` every technique on every session.
AFTER = (
    "inspector-takes-over-zygote",
    "inspector-fails-later-episodes",
    "warm-host-detached-child-reads-channel",
    "warm-host-child-stops-idle-host",
    "poison-transform-cache",
    "poison-trusted-transforms",
    "patch-shared-fs",
    "home-node-modules-sequencer-forges-answer",
    "tmpdir-module-reaches-vm",
)
# The parts of a row that are the verdict (with "verification": status, checks, failed tests, the
# record's tamper notes); timings and the container's name are not.
VERDICT = tamper_corpus.VERDICT


def _oracle_episode(start, st, s, flight) -> dict:
    from harness.agents import AgentContext, from_spec
    from harness.grading.verify import Gold
    from harness.runs.loop import run_episode

    return run_episode(
        s,
        from_spec("oracle", AgentContext(st, {})),
        0,
        start_sandbox=start,
        k=3,
        max_steps=10,
        passing=flight["passing"],
        gold=Gold.from_json(flight["gold"]),
        held_out_gold=Gold.from_json(flight.get("held_out_gold")),
    )


def _verdict(row: dict) -> dict:
    return {k: row.get(k) for k in (*VERDICT, "verification")}


def _then_oracle(image, tmp_path, t, st, s, f) -> tuple[dict, bool]:
    """Technique ``t`` on ``s`` in a new pool's container, then the reference's episode in that
    same container once its runner has reset it: the reference's verdict, and whether the
    container was the same (one the runner could not reset is removed, not reused)."""
    prepared = sandbox.provider("docker").prepare(LIMITS, workers=1, image=image)
    try:
        used: list[str] = []

        def start(x):
            sb = prepared.start(x.workspace)
            used.append(sb.name)
            return sb

        _episode(start, tmp_path, t, st, s, f)
        first = used[0]
        first_in_line(prepared, first)
        got = _verdict(_oracle_episode(start, st, s, f))
        return got, used[-1] == first
    finally:
        prepared.cleanup()


# Every technique on every session (make redteam) is 1,260 pairs, each in a pool of its own: 3,577 s
# on 2 quiet cores with 84 techniques, so the limit leaves room for the corpus to grow.
@pytest.mark.timeout(7200)
def test_the_reference_after_each_technique_in_its_container_is_the_reference_alone(
    image, sessions, tmp_path
):
    chosen = (
        TECHNIQUES
        if EVERYTHING or _NAMED
        else [t for t in tamper_corpus.TECHNIQUES if t.name in AFTER]
    )
    picked = (
        sessions
        if EVERYTHING
        else [x for x in sessions if x[1].session_id == "checkout-missing-await"]
    )
    assert chosen and picked
    prepared = sandbox.provider("docker").prepare(LIMITS, workers=1, image=image)
    try:
        start = lambda x: prepared.start(x.workspace)  # noqa: E731
        alone = {s.session_id: _verdict(_oracle_episode(start, st, s, f)) for st, s, f in picked}
    finally:
        prepared.cleanup()
    assert all(v["status"] == "passed" for v in alone.values()), alone
    # Each pair in a pool of its own: what one technique left must not meet the next technique.
    jobs = [(t, st, s, f) for t in chosen for st, s, f in picked]
    with ThreadPoolExecutor(WORKERS) as ex:
        rows = list(ex.map(lambda j: (j, *_then_oracle(image, tmp_path, *j)), jobs))
    differ = [
        (j[0].name, j[2].session_id, got, alone[j[2].session_id])
        for j, got, _ in rows
        if got != alone[j[2].session_id]
    ]
    assert not differ, differ
    # Reuse is what is tested: most containers came back (one the runner could not reset is not).
    reused = sum(same for _, _, same in rows)
    assert reused >= len(jobs) // 2, reused
