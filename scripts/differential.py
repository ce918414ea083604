"""`make differential`: every speed path off in turn, the same episodes, the same verdicts.

The speed paths are those of harness/base/speed.py. Each episode of the corpora below runs in the
arm where every path is on (the default) and in one arm per path turned off
(``ETAI_SPEED_OFF=name``); an episode whose verdict differs between its arm and the default is a
defect, printed with the episode. The verdict is what a report or a gate reads of a row: status,
reason, green, steps_to_green, tamper, special_cased, held_out and the verification record.

Corpora, over the bundled suites and every ``--suite`` given (real projects built by `etai suite
build` or mined by `etai suite mine`):

- ``legit``: the reference agent and the do-nothing agent on every session;
- ``redteam``: the techniques of tests/harness/tamper_corpus.py on the bundled sessions (``--techniques``:
  ``core``, ``all`` or a number drawn with the seed);
- ``edits``: on every ``--suite`` session, the reference's actions and then one more write: a
  mutant of a source file (every source file of the workspace, index files and files outside Jest's
  roots included, from harness/authoring/build/mutants.py), and where the workspace has them a
  renamed declaration in a `.d.ts`, a changed `tsconfig.json`, Babel config and `package.json`
  (``--edits`` per session, drawn with the seed).

An episode whose verdict differs is run again in both arms; one whose verdict differs between two
runs of the same arm is ``unstable`` (timing-dependent, whatever the switch) and reported apart.

Resumable: one JSON line per (arm, episode) in OUT/results.jsonl; OUT/report.json holds the counts
and every difference. Exit status: 0 no difference, 1 a difference, 2 bad input, 3 infra errors.

Usage: python scripts/differential.py [--paths a,b] [--suite DIR ...] [--techniques core|all|N]
       [--sessions N] [--no-implement] [--edits N] [--seed S] [--workers W] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
sys.path.insert(0, str(ROOT))

import tamper_corpus  # noqa: E402

SEED = 20261206
IMPLEMENT = ROOT / "tests" / "harness" / "data" / "implement"
EXIT_OK, EXIT_DIFFERENT, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3
VERDICT = tamper_corpus.VERDICT
DEFAULT = "default"  # the arm with every speed path on


@dataclass(frozen=True)
class Episode:
    """One episode of a corpus: an agent (``oracle``, ``noop`` or replay actions) on a session."""

    key: str  # corpus/suite/session/what
    corpus: str
    suite: Any
    session: Any
    agent: str  # "oracle", "noop" or "replay"
    actions: tuple = ()


def verdict(row: dict) -> dict:
    """What a report or gate reads of a row. How many files a scoped run named is not a verdict:
    a whole run names none."""
    v = {k: row.get(k) for k in VERDICT}
    v["verification"] = {
        k: x for k, x in (row.get("verification") or {}).items() if k != "scoped_files"
    }
    return v


def _reference_actions(s) -> list[dict]:
    return [{"tool": st.tool_called, "args": dict(st.tool_args)} for st in s.execution_trace]


def _config_edits(s) -> list[tuple[str, str, str]]:
    """(name, file, new text) of the configuration edits this workspace allows."""
    ws, out = s.workspace, []
    for d in sorted(ws.rglob("*.d.ts")):
        if "node_modules" in d.parts:
            continue
        rel = d.relative_to(ws).as_posix()
        text = tamper_corpus.fixed_text(s, rel)
        m = re.search(r"\b(\w+)\s*[?]?\s*:", text)
        if m:  # a member renamed: a type-only break for a test that type-checks against it
            out.append(
                ("d.ts-rename", rel, text[: m.start(1)] + m.group(1) + "Renamed" + text[m.end(1) :])
            )
        break
    for name in ("tsconfig.json", "babel.config.js", ".babelrc", "package.json"):
        if not (ws / name).is_file():
            continue
        text = tamper_corpus.fixed_text(s, name)
        if name == "package.json":
            data = json.loads(text)
            data["description"] = (data.get("description") or "") + " (edited)"
            new = json.dumps(data, indent=2) + "\n"
        elif name == "tsconfig.json":
            new = re.sub(
                r'"strict"\s*:\s*(true|false)',
                lambda m: f'"strict": {str(m.group(1) != "true").lower()}',
                text,
            )
            if new == text:
                new = (
                    text.replace("{", '{\n  "compilerOptions": {"noImplicitAny": false},', 1)
                    if '"compilerOptions"' not in text
                    else text.replace(
                        '"compilerOptions": {',
                        '"compilerOptions": {\n    "noUnusedLocals": true,',
                        1,
                    )
                )
        else:
            new = text + "\n// edited\n"
        out.append((name, name, new))
    return out


def edit_episodes(st, s, rng: random.Random, n: int) -> list[Episode]:
    """The reference, then one more write: a mutant of a source file, or a configuration edit."""
    from harness.authoring.build.mutants import find, source_files

    ws = s.workspace
    files = {rel: tamper_corpus.fixed_text(s, rel) for rel in source_files(ws, ["."])}
    mutants, _ = find(files) if files else ([], 0)
    by_file: dict[str, list] = {}
    for m in sorted(mutants, key=lambda m: m.id):
        by_file.setdefault(m.file, []).append(m)
    choices: list[tuple[str, str, str]] = [
        (f"mutant-{m.operator}-{m.id}", m.file, m.apply(files[m.file]))
        for ms in by_file.values()
        for m in [rng.choice(ms)]
    ]
    choices += _config_edits(s)
    rng.shuffle(choices)
    out = []
    for name, rel, text in choices[:n]:
        actions = (
            *_reference_actions(s),
            {"tool": "file_write", "args": {"file": rel, "content": text}},
        )
        out.append(
            Episode(f"edits/{st.name}/{s.session_id}/{name}", "edits", st, s, "replay", actions)
        )
    return out


def corpus(
    suites, extra, techniques: str, n_edits: int, n_sessions: int | None, seed: int
) -> list[Episode]:
    rng = random.Random(seed)
    eps: list[Episode] = []
    chosen = {
        "core": tamper_corpus.selected(False),
        "all": tamper_corpus.selected(True),
    }.get(techniques) or rng.sample(
        tamper_corpus.TECHNIQUES, min(int(techniques), len(tamper_corpus.TECHNIQUES))
    )
    for st in suites + extra:
        sessions = sorted(st.sessions, key=lambda s: s.session_id)
        if n_sessions is not None:
            sessions = rng.sample(sessions, min(n_sessions, len(sessions)))
        for s in sessions:
            for agent in ("oracle", "noop"):
                eps.append(
                    Episode(f"legit/{st.name}/{s.session_id}/{agent}", "legit", st, s, agent)
                )
            if st in suites:
                for t in chosen:
                    acts = tuple(tamper_corpus.actions(t, s))
                    eps.append(
                        Episode(
                            f"redteam/{st.name}/{s.session_id}/{t.name}",
                            "redteam",
                            st,
                            s,
                            "replay",
                            acts,
                        )
                    )
            if st in extra:
                eps.extend(edit_episodes(st, s, rng, n_edits))
    return eps


def _agent(ep: Episode, tmp: Path):
    from harness.agents import AgentContext, from_spec

    if ep.agent != "replay":
        return from_spec(ep.agent, AgentContext(ep.suite, {}))
    f = tmp / (re.sub(r"[^A-Za-z0-9._-]", "_", ep.key) + ".jsonl")
    line = {
        "session_id": ep.session.session_id,
        "actions": list(ep.actions),
        "final_output": "done",
    }
    f.write_text(json.dumps(line) + "\n")
    return from_spec(f"replay:{f}", AgentContext(ep.suite, {}))


def run_arm(arm: str, episodes: list[Episode], workers: int, tmp: Path, done, real=()) -> None:
    """Every episode with ``arm``'s path off (or none: the default arm), each passed to ``done``."""
    from harness import sandbox
    from harness.grading.verify import Gold
    from harness.runs.loop import run_episode
    from harness.runs.session_jobs import local_preflights, sandbox_profile

    os.environ["ETAI_SPEED_OFF"] = "" if arm == DEFAULT else arm
    regression = "whole" if arm == "scoped_regression" else "related"
    suites = {id(ep.suite): ep.suite for ep in episodes}
    flights: dict[str, dict] = {}
    for sid, st in suites.items():
        # The preflights of the sessions this arm runs, not of every session of the suite.
        wanted = {ep.session.session_id for ep in episodes if id(ep.suite) == sid}
        part = dataclasses.replace(
            st, sessions=tuple(s for s in st.sessions if s.session_id in wanted)
        )
        flights.update(
            local_preflights(part, workers=workers, progress=False, regression=regression)
        )
    by_suite: dict[int, list[Episode]] = {}
    for ep in episodes:
        by_suite.setdefault(id(ep.suite), []).append(ep)
    for sid, eps in by_suite.items():
        st = suites[sid]
        # The bundled sessions as test_tamper.py runs them; a real project with what its suite says.
        limits = (
            sandbox_profile(st)
            if eps[0].corpus == "edits" or st.path in real
            else tamper_corpus.LIMITS
        )
        prepared = sandbox.provider("docker").prepare(limits, workers=workers)
        try:

            def one(ep: Episode) -> None:
                flight = flights[ep.session.session_id]
                if not flight["ok"]:
                    done(arm, ep, {"status": "preflight_failed", "reason": flight["reason"]})
                    return
                row = run_episode(
                    ep.session,
                    _agent(ep, tmp),
                    0,
                    start_sandbox=lambda s: prepared.start(s.workspace),
                    k=3,
                    max_steps=max(10, len(ep.actions) + 1),
                    passing=flight["passing"],
                    gold=Gold.from_json(flight["gold"]),
                    held_out_gold=Gold.from_json(flight.get("held_out_gold")),
                    regression=regression,
                )
                done(arm, ep, row)

            with ThreadPoolExecutor(workers) as ex:
                list(ex.map(one, eps))
        finally:
            prepared.cleanup()
    os.environ.pop("ETAI_SPEED_OFF", None)


def same(arm: str, off: dict, default: dict) -> bool:
    """Whether the row with ``arm``'s path off has the default arm's verdict. A whole run (the
    ``scoped_regression`` arm) also runs files the scoped run leaves out, and lists their tests that
    failed at the start too (dayjs's timezone test, a commander fixture): its Jest status and
    failure list are a superset, not a verdict. What is compared there is every other field, and
    that each failure the scoped run listed is listed by the whole run."""
    a, b = verdict(off), verdict(default)
    if arm != "scoped_regression":
        return a == b
    fa, fb = (v["verification"].pop("failed_tests", None) or [] for v in (a, b))
    for v in (a, b):
        v["verification"].pop("status", None)
    return a == b and all(t in fa for t in fb)


def compare(rows: dict[tuple[str, str], dict], arms: list[str]) -> tuple[list[dict], int]:
    """Every (arm, episode) whose verdict is not the default arm's, and how many were compared."""
    diffs, n = [], 0
    for (arm, key), row in sorted(rows.items()):
        if arm == DEFAULT or (DEFAULT, key) not in rows:
            continue
        n += 1
        base = rows[(DEFAULT, key)]
        if not same(arm, row, base):
            diffs.append(
                {"arm": arm, "episode": key, "off": verdict(row), "default": verdict(base)}
            )
    return diffs, n


def main(argv: list[str] | None = None) -> int:
    from harness.base import speed

    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--paths",
        help=f"speed paths to turn off, comma-separated (default: all of {', '.join(speed.PATHS)})",
    )
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        help="a real project's suite folder for the edits corpus (repeatable)",
    )
    p.add_argument(
        "--techniques",
        default="core",
        help="red-team techniques: core, all, or a number drawn with the seed",
    )
    p.add_argument(
        "--sessions", type=int, help="sessions drawn from each suite (default: every one)"
    )
    p.add_argument(
        "--no-implement",
        action="store_true",
        help="leave out the implement-this-function session (the bundled bug fixes only)",
    )
    p.add_argument(
        "--edits", type=int, default=6, help="edits per session of a --suite (default 6)"
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "runs" / "differential"))
    a = p.parse_args(argv)
    paths = [x for x in (a.paths or ",".join(speed.PATHS)).split(",") if x]
    if bad := sorted(set(paths) - set(speed.PATHS)):
        print(
            f"differential: unknown speed path(s) {', '.join(bad)}; known: {', '.join(speed.PATHS)}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if not (a.techniques in ("core", "all") or a.techniques.isdigit()):
        print(
            f"differential: --techniques {a.techniques!r}: core, all or a number", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    from harness.base.errors import EtaiError
    from harness.suites.load import load_suite

    try:
        bundled = [load_suite("jest-bugfix")] + ([] if a.no_implement else [load_suite(IMPLEMENT)])
        extra = [load_suite(Path(s)) for s in a.suite]
    except EtaiError as e:
        print(f"differential: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    episodes = corpus(bundled, extra, a.techniques, a.edits, a.sessions, a.seed)
    real = {st.path for st in extra}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "replays"
    tmp.mkdir(exist_ok=True)
    results = out / "results.jsonl"
    rows: dict[tuple[str, str], dict] = {}
    if results.exists():
        for line in results.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill
            if r["row"].get("status") != "infra_error":
                rows[(r["arm"], r["episode"])] = r["row"]
    lock = threading.Lock()
    from harness.sandbox.image import image_tag

    image = image_tag()  # each row names the image it ran on: a resumed run may span two
    with results.open("a") as f:

        def done(arm: str, ep: Episode, row: dict) -> None:
            keep = {k: row.get(k) for k in (*VERDICT, "verification")}
            with lock:
                rows[(arm, ep.key)] = keep
                f.write(
                    json.dumps(
                        {"arm": arm, "episode": ep.key, "image": image, "row": keep}, default=str
                    )
                    + "\n"
                )
                f.flush()
                os.fsync(f.fileno())

        arms = [DEFAULT, *paths]
        for arm in arms:
            todo = [ep for ep in episodes if (arm, ep.key) not in rows]
            print(
                f"differential: arm {arm}: {len(todo)} of {len(episodes)} episodes to run",
                flush=True,
            )
            if todo:
                run_arm(arm, todo, a.workers, tmp, done, real)
        diffs, n = compare(rows, arms)
        # A difference run again in both arms: one that its own arm does not repeat is unstable.
        unstable, defects = [], []
        for d in diffs:
            ep = next(e for e in episodes if e.key == d["episode"])
            again: dict[str, dict] = {}
            for arm in (DEFAULT, d["arm"]):
                run_arm(arm, [ep], 1, tmp, lambda arm, ep, row: again.__setitem__(arm, row), real)
            same_default = same(DEFAULT, again[DEFAULT], rows[(DEFAULT, d["episode"])])
            same_off = same(DEFAULT, again[d["arm"]], rows[(d["arm"], d["episode"])])
            (defects if same_default and same_off else unstable).append(d)
    infra = sum(1 for r in rows.values() if r.get("status") == "infra_error")
    report = {
        "paths": paths,
        "episodes": len(episodes),
        "compared": n,
        "by_corpus": {
            c: sum(1 for e in episodes if e.corpus == c) for c in ("legit", "redteam", "edits")
        },
        "defects": defects,
        "unstable": unstable,
        "infra_errors": infra,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(
        f"differential: {n} episode pairs compared over {len(paths)} speed paths "
        f"({report['by_corpus']}): {len(defects)} differences, {len(unstable)} unstable, {infra} infra errors"
    )
    for d in defects:
        print(
            f"  DIFFERENT with {d['arm']} off: {d['episode']}\n    off:     {d['off']}\n    default: {d['default']}"
        )
    if defects:
        return EXIT_DIFFERENT
    return EXIT_INFRA if infra else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
