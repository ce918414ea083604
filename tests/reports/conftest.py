"""Run folders for the report and gate tests: real ones made once per test session by the real
commands (`etai run` on the bundled suite, shared with tests/harness/test_runner.py through
tests/conftest.py; `etai train` tiny-cpu with HarnessEval on), and hand-built ones written in
milliseconds for the unit tests."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from etai_cmd import TIMES, TRAIN_SESSIONS, etai

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def bundled_run(bundled_oracle_noop) -> Path:
    """oracle and noop on the whole bundled suite (`etai run --suite jest-bugfix ...`): the run
    tests/conftest.py makes once per test session, which tests/harness/test_runner.py checks too."""
    TIMES["etai run (bundled suite, oracle + noop)"] = bundled_oracle_noop.seconds
    return bundled_oracle_noop.out


@pytest.fixture(scope="session")
def training_folder(tmp_path_factory) -> Path:
    """`etai train finetune/configs/tiny-cpu.yaml` for 8 batches with HarnessEval every 4 on two
    sessions: harness-eval/ba4 and ba8 (about a minute on 2 cores)."""
    pytest.importorskip("composer", reason="needs the train extra")
    root = tmp_path_factory.mktemp("train")
    evals = (
        f"{{interval: 4ba, sessions: [{', '.join(TRAIN_SESSIONS)}], k: 2, max_steps: 2, workers: 2, "
        "generation: {max_new_tokens: 24}, allow_overlap: true}"  # trained on: memorisation is fine
    )
    sets = [
        f"data.mds_dir={root / 'mds'}",
        f"train.save_folder={root / 'ckpt'}",
        f"train.log_file={root / 'log.txt'}",
        "train.max_duration=8ba",
        "train.save_interval=100ep",
        "train.autoresume=false",
        f"callbacks.harness_eval={evals}",
    ]
    t0 = time.monotonic()
    p = etai(
        "train",
        str(PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"),
        *(x for s in sets for x in ("--set", s)),
        cwd=root,
    )
    TIMES["etai train tiny-cpu with HarnessEval (8 batches, 2 evals)"] = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return root / "ckpt"


def row(
    session: str,
    agent: str,
    status: str,
    *,
    steps_to_green: int | None = None,
    sample: int = 0,
    intent: str = "fix_off_by_one",
    session_hash: str | None = "h",
    k: int = 3,
    **extra,
) -> dict:
    """One result row as the runner writes it (only the fields reports read)."""
    return {
        "cache_key": f"{agent}-{session}-{sample}-{extra.get('key', '')}",
        "session_id": session,
        "agent": agent,
        "sample": sample,
        "status": status,
        "steps_to_green": steps_to_green,
        "intent": intent,
        "k": k,
        "max_steps": 10,
        "suite": extra.pop("suite", "hand"),
        "session_hash": f"{session}-{session_hash}" if session_hash else None,
        "steps_used": 3,
        "n_invalid": 0,
        "duration_s": 1.0,
        "cursor": extra.pop("cursor", None),
        "cursor_target": {"file": "a.js", "line": 3, "column": 1},
        "viewport": {},
        "agent_path": [],
        "human_path": [],
        **extra,
    }


def write_run(
    folder: Path,
    rows: list[dict],
    *,
    samples: int = 1,
    k: int = 3,
    summary: bool = True,
    suite: str = "hand",
) -> Path:
    """A run folder from rows; the summary says complete unless a row is an infra_error."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary:
        (folder / "summary.json").write_text(
            json.dumps(
                {
                    "suite": suite,
                    "k": k,
                    "max_steps": 10,
                    "samples": samples,
                    "n_sessions": len({r["session_id"] for r in rows}),
                    "complete": all(r["status"] != "infra_error" for r in rows),
                    "agents": {},
                }
            )
        )
    return folder


@pytest.fixture
def make_run():
    return write_run


def pytest_terminal_summary(terminalreporter):
    for what, s in TIMES.items():
        terminalreporter.write_line(f"reports fixture: {what}: {s:.1f} s")


@pytest.fixture
def make_row():
    return row
