"""The runner end to end with real Docker: scores, resume after SIGKILL, Ctrl-C, reference_broken, replay."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import main
from harness.runs.results import read_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SOME = [
    "profile-display-name-null",
    "paginate-page-size-off-by-one",
    "checkout-missing-await",
    "semver-unescaped-dot",
    "duration-seconds-padding",
    "retry-default-attempts",
]


def _etai(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_oracle_and_noop_on_the_bundled_suite(
    bundled_oracle_noop, tmp_path, capsys, sandbox_starts
):
    # The run itself is tests/conftest.py's (once per test session: the report tests read it too).
    summary = bundled_oracle_noop.printed
    oracle, noop = summary["agents"]["oracle"], summary["agents"]["noop"]
    # (JSON keys are strings)
    assert oracle["path_accuracy"]["3"] == 1.0 and noop["path_accuracy"]["3"] == 0.0
    assert oracle["pass_at_k"]["1"] == 1.0 and noop["pass_at_k"]["1"] == 0.0
    assert oracle["reference_broken"] == [] and noop["reference_broken"] == []
    assert oracle["cursor"]["median_px"] == 0.0  # the oracle's first edit starts where the fix goes
    rows = read_rows(bundled_oracle_noop.out / "results.jsonl")
    assert len(rows) == 2 * summary["n_sessions"] and all(r["cache_key"] for r in rows)
    assert (
        json.loads((bundled_oracle_noop.out / "summary.json").read_text())["agents"]["oracle"][
            "n_valid"
        ]
        == summary["n_sessions"]
    )
    # The same command again runs nothing new (no sandbox at all) and reports the same numbers.
    # It runs on a copy of the folder: the shared one stays as the run left it.
    assert bundled_oracle_noop.sandboxes, "the first run started sandboxes"
    out = tmp_path / "run"
    shutil.copytree(bundled_oracle_noop.out, out)
    assert main(bundled_oracle_noop.command(out)) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["agents"] == summary["agents"]
    assert sandbox_starts == []
    assert len(read_rows(out / "results.jsonl")) == len(rows)


def test_sigkill_mid_run_then_rerun_loses_and_duplicates_nothing(tmp_path, containers_of):
    out = tmp_path / "run"
    args = [
        "run",
        "--suite",
        "jest-bugfix",
        "--agent",
        "oracle",
        "--agent",
        "noop",
        "--out",
        str(out),
        "--workers",
        "1",
        "--no-progress",
        *[a for s in SOME for a in ("--session", s)],
    ]
    p = _etai(*args)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if (out / "results.jsonl").exists() and len(read_rows(out / "results.jsonl")) >= 3:
            break
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    written = len(read_rows(out / "results.jsonl"))
    assert 3 <= written < 2 * len(SOME), "the kill must land mid-run"
    p2 = _etai(*args)
    assert p2.wait(timeout=300) == 0, p2.stderr.read()
    raw = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    keys = Counter(r["cache_key"] for r in raw)
    assert len(keys) == 2 * len(SOME) and set(keys.values()) == {1}, "every row exactly once"
    assert {(r["session_id"], r["agent"]) for r in raw} == {
        (s, a) for s in SOME for a in ("oracle", "noop")
    }
    assert containers_of(p.pid) == [], "the rerun's reaper removed the killed run's containers"
    assert containers_of(p2.pid) == []


@pytest.mark.parametrize(
    "sig, code, said",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_removes_containers_and_keeps_rows(tmp_path, containers_of, sig, code, said):
    # SIGTERM is what schedulers, `docker stop`, `timeout` and CI cancellation send, to the etai
    # process alone (Ctrl-C reaches the whole process group): the same clean stop, exit 128 + 15.
    out = tmp_path / "run"
    p = _etai(
        "run",
        "--suite",
        "jest-bugfix",
        "--agent",
        "oracle",
        "--out",
        str(out),
        "--workers",
        "2",
        "--no-progress",
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "results.jsonl").exists():
        time.sleep(0.1)
    if sig == signal.SIGINT:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    assert p.wait(timeout=120) == code
    err = p.stderr.read()
    assert f"etai: {said}; containers of this run removed, rows written so far kept" in err, err
    assert "Traceback" not in err
    assert containers_of(p.pid) == []
    rows = read_rows(out / "results.jsonl")
    assert rows and all(
        r["status"] == "passed" for r in rows
    )  # no half-killed episode written as a result


def test_samples_are_bounded_before_anything_is_planned(tmp_path, capsys, sandbox_starts):
    # Every episode is planned before the first runs: a billion samples was minutes of a spinning
    # core before any output. Refused at once, naming the bound; the largest allowed plans fast.
    out = tmp_path / "run"
    t0 = time.monotonic()
    args = ["run", "--suite", "jest-bugfix", "--agent", "noop", "--out", str(out), "--no-progress"]
    assert main([*args, "--samples", "1000000000"]) == 2
    assert "samples must be at most 10000 (got 1000000000)" in capsys.readouterr().err
    assert time.monotonic() - t0 < 5 and not out.exists() and sandbox_starts == []


def test_progress_without_a_terminal_is_lines_not_carriage_returns(tmp_path):
    # stderr is a pipe here, as in CI: each frame a line of its own, the last one how far it got.
    out = tmp_path / "run"
    args = ["run", "--suite", "jest-bugfix", "--agent", "noop", "--session", SOME[0],
            "--samples", "2", "--out", str(out)]  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, timeout=300
    )
    err = p.stderr.decode()  # bytes as written: text mode would turn each \r into \n
    assert p.returncode == 0, err
    assert "\r" not in err
    assert "episodes: 100%|" in err and "| 2/2 [" in err, err


def test_reference_broken_is_reported_and_excluded(tmp_path, capsys, make_suite):
    def break_it(s):
        if (
            s["session_id"] == "semver-unescaped-dot"
        ):  # the "fix" edits a comment instead of the regex
            s["execution_trace"] = [
                {
                    "step": 1,
                    "tool_called": "file_read",
                    "tool_args": {"file": "src/semver.js"},
                    "execution_result": {},
                }
            ]
        return s

    root = make_suite(
        tmp_path / "suite", ["semver-unescaped-dot", "retry-default-attempts"], break_it
    )
    assert (
        main(
            [
                "run",
                "--suite",
                str(root),
                "--agent",
                "oracle",
                "--out",
                str(tmp_path / "r"),
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    m = json.loads(capsys.readouterr().out)["agents"]["oracle"]
    assert m["reference_broken"] == ["semver-unescaped-dot"]
    assert m["n_valid"] == 1 and m["path_accuracy"]["3"] == 1.0  # 1 of 1 valid, not 1 of 2


def test_replay_agent_counts_invalid_actions(tmp_path, capsys, make_suite):
    sid = "duration-seconds-padding"
    root = make_suite(tmp_path / "suite", [sid])
    ref = json.loads((root / "sessions.jsonl").read_text())["execution_trace"]
    replay = tmp_path / "replay.jsonl"
    good = [{"tool": st["tool_called"], "args": st["tool_args"]} for st in ref]
    replay.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "session_id": sid,
                    "sample": 0,
                    "actions": ["garbage", {"tool": "rm_rf", "args": {}}, *good],
                },
                {"session_id": sid, "sample": 1, "actions": good},
            ]
        )
        + "\n"
    )
    out = tmp_path / "r"
    assert (
        main(
            [
                "run",
                "--suite",
                str(root),
                "--agent",
                f"replay:{replay}",
                "--samples",
                "2",
                "-k",
                "3",
                "--max-steps",
                "10",
                "--out",
                str(out),
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    m = json.loads(capsys.readouterr().out)["agents"][f"replay:{replay}"]
    rows = sorted(read_rows(out / "results.jsonl"), key=lambda r: r["sample"])
    assert [r["n_invalid"] for r in rows] == [2, 0]
    assert [s["status"] for s in rows[0]["steps"][:2]] == ["invalid_action", "invalid_action"]
    assert "unknown tool 'rm_rf'" in rows[0]["steps"][1]["error"]
    # sample 0 reaches green only at step 2 + len(good) > 3: not within k; sample 1 within k.
    assert rows[0]["green"] and rows[0]["steps_to_green"] > 3
    assert rows[1]["steps_to_green"] <= 3
    assert m["path_accuracy"]["3"] == 0.5 and m["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert m["invalid_actions"] == 2


def test_a_changed_verifier_is_never_served_old_verdicts(
    tmp_path, capsys, make_suite, monkeypatch, _own_cache
):
    """The preflight verdict cache is keyed by the grading code (harness.grading_digest), not only by
    the version string: the same session under changed grading code is replayed again."""
    from harness.base import provenance

    root = make_suite(tmp_path / "suite", ["retry-default-attempts"])

    def flights() -> list[dict]:  # this session's preflight verdicts (other tests share the cache)
        rows = read_rows(_own_cache / "preflight" / "results.jsonl")
        return [r for r in rows if r["session_id"] == "retry-default-attempts"]

    def run(out: str) -> None:
        assert (
            main(
                [
                    "run",
                    "--suite",
                    str(root),
                    "--agent",
                    "noop",
                    "--out",
                    str(tmp_path / out),
                    "--no-progress",
                ]
            )
            == 0
        )
        capsys.readouterr()

    run("a")
    before = flights()
    assert before, "the first run replayed the reference"
    run("b")
    assert flights() == before, "same grading code: the verdict is reused"
    monkeypatch.setattr(provenance, "_digest", "0" * 16)  # what a changed verify.py digests to
    run("c")
    after = flights()
    assert len(after) == len(before) + 1 and after[-1]["cache_key"] not in {
        r["cache_key"] for r in before
    }
    assert after[-1]["ok"], "the fresh preflight judged the reference sound again"


def test_the_regression_mode_is_part_of_keys_and_summary(tmp_path, capsys, make_suite, _own_cache):
    """`--regression whole` is another verdict than the default `related`: the preflight's and the
    episodes' cache keys differ, and summary.json names the mode. A mode not known is exit 2 on the
    command line and an InputError through the API, before any sandbox starts."""
    from harness.base.errors import InputError
    from harness.base.provenance import grading_digest, version
    from harness.runs.results import cache_key
    from harness.runs.runner import run as run_api
    from harness.runs.session_jobs import preflight_key
    from harness.suites.load import load_suite

    sid = "retry-default-attempts"
    root = make_suite(tmp_path / "suite", [sid])

    def run(out: str, *mode: str) -> tuple[dict, list[dict]]:
        cmd = ["run", "--suite", str(root), "--agent", "noop", "--out", str(tmp_path / out)]
        assert main([*cmd, "--no-progress", *mode]) == 0
        capsys.readouterr()
        summary = json.loads((tmp_path / out / "summary.json").read_text())
        return summary, read_rows(tmp_path / out / "results.jsonl")

    related, related_rows = run("a")
    whole, whole_rows = run("b", "--regression", "whole")
    assert (related["regression"], whole["regression"]) == ("related", "whole")
    assert [r["status"] for r in related_rows + whole_rows] == ["failed", "failed"]
    assert related_rows[0]["cache_key"] != whole_rows[0]["cache_key"]
    # both preflights are in the shared cache, each under its own key (other tests add theirs)
    session = next(x for x in load_suite(root).sessions if x.session_id == sid)
    flights = {r["cache_key"]: r for r in read_rows(_own_cache / "preflight" / "results.jsonl")}
    for mode in ("related", "whole"):
        key = preflight_key(session, whole["image"], mode)
        assert flights[key]["ok"], mode
        assert key == cache_key(  # the key as it reads, with the preflight's repeat (speed path)
            "preflight", session.content_hash, whole["image"], version(), grading_digest(), mode,
            "rerun:verification", "baseline:base", "first:verification", "final:kept",
        )  # fmt: skip

    with pytest.raises(SystemExit) as e:
        main(["run", "--suite", str(root), "--agent", "noop", "--regression", "some"])
    assert e.value.code == 2
    assert "invalid choice: 'some'" in capsys.readouterr().err
    with pytest.raises(InputError, match="regression must be one of related, whole"):
        run_api(str(root), ["noop"], out=tmp_path / "c", regression="some")
    assert not (tmp_path / "c").exists()


def test_grading_digest_follows_the_grading_code_only(tmp_path):
    """A comment added to verify.py changes the digest; one added to the CLI (not grading) does not."""
    import importlib.util
    import shutil

    import harness

    src = os.path.dirname(harness.__file__)

    def digest_with(change: str | None) -> str:
        root = tmp_path / (change or "none").replace("/", "_")
        shutil.copytree(src, root, ignore=shutil.ignore_patterns("__pycache__"))
        if change:
            with open(root / change, "a") as f:
                f.write("\n# changed\n")
        # The copy's own provenance module (loaded by path: the editable install would win over
        # PYTHONPATH), which digests the files of the copy it sits in.
        where = root / "base" / "provenance.py"
        spec = importlib.util.spec_from_file_location(f"harness_copy_{root.name}", where)
        copy = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(copy)
        assert copy.__file__ == str(where)
        return copy.grading_digest()

    base = digest_with(None)
    assert base == harness.grading_digest(), "an unchanged copy digests like the original"
    assert digest_with("cli/__init__.py") == base
    for graded in (
        "grading/verify.py",
        "grading/jest.py",
        "runs/loop.py",
        "sandbox/__init__.py",
        "runs/held_out.py",  # the reading of a held-out failure: special-cased or incomplete
        "grading/js/case-calls.js",
    ):
        assert digest_with(graded) != base, graded


def test_an_agents_run_after_a_change_is_not_type_checked_against_what_was_there(tmp_path, image):
    """ts-jest's type checker keeps every file it read for the life of its process: in the agent's
    warm host, a test that failed to compile against a source kept failing after the source was
    fixed (a fresh host passed it). A host whose transformer may keep state (not babel-jest) serves
    no run after a write: the next run starts a new host (runner.js `generation`). ts-jest and
    typescript: fastest-validator's dependencies."""
    sys.path.insert(0, str(Path(__file__).parent))
    from realrepos import realrepos

    from harness import sandbox
    from harness.grading import jest
    from harness.sandbox import Limits, Status
    from harness.sandbox.deps import node_modules
    from harness.tools.conformance import write_project

    cfg = {"testEnvironment": "node", "transform": {"^.+\\.ts$": "ts-jest"}}
    ws = write_project(tmp_path / "ws", {
        "package.json": json.dumps({"name": "p", "private": True, "jest": cfg}),
        "tsconfig.json": '{"compilerOptions": {"strict": true, "esModuleInterop": true}}',
        "src/calc.ts": "export const plus = (a: number, b: number): number => a + b;\n",
        "tests/calc.test.ts": "import { add } from '../src/calc';\n"
                              "test('adds', () => { expect(add(1, 2)).toBe(3); });\n",
    })  # fmt: skip
    limits = Limits(memory_mb=2048, timeout_s=120, node_modules=str(node_modules(realrepos() / "fastest-validator")))  # fmt: skip
    prepared = sandbox.provider("docker").prepare(limits, workers=1, image=image)
    try:
        sb = prepared.start(ws)
        try:
            run = {"test_files": ["tests/calc.test.ts"], "timeout_ms": 120000}
            before = jest.from_runner(sb.request("jest", run, timeout=150))
            sb.write_file("src/calc.ts", b"export const add = (a: number, b: number): number => a + b;\n")  # fmt: skip
            after = jest.from_runner(sb.request("jest", run, timeout=150))
        finally:
            sb.close()
    finally:
        prepared.cleanup()
    assert before.status is Status.FAILED and "TS2305" in before.failed_tests[0].message, before
    assert after.status is Status.PASSED and after.num_passed == 1, after.failed_tests
