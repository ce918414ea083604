#!/usr/bin/env python
"""Eval share of wall time for tiny-cpu with HarnessEval at a small interval: sync, sharded
(2 ranks), async, each against the same training without evaluation (finetune/README.md).

    .venv/bin/python scripts/eval_share.py [--out runs/eval-share] [--batches 8] [--interval 4ba]

Each mode is a fresh process (``python -m finetune.train``, or ``composer -n 2`` for 2 ranks),
the wall clock measured around it; the evaluation's own seconds come from the run's log
(``harness/eval_seconds``; async also ``harness/export_seconds``, what training waited).
overhead = wall − wall of the same ranks without evaluation; share = overhead / wall.
Needs Docker (the sandboxes). Prints a markdown table and the load average before and after.

    .venv/bin/python scripts/eval_share.py --estimate finetune/configs/agent-8xa100.yaml \
        --rows RUN_ON_EVAL_SUITE [--rows ...] [--ranks 8] [--assume bench/eval_share_a100.json]

The estimate for a config no machine here can train (finetune/eval_budget.py): what can be
measured here is (the config's data pipeline and callback, the evaluated sessions' prompts and
actions in tokens, container, tool and verification seconds from the rows of runs on the
evaluated suites); the GPU figures come from the --assume file, each with where it comes from.
Prints every input with its source, then the synchronous and asynchronous shares.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
SESSIONS = ["profile-display-name-null", "paginate-page-size-off-by-one"]  # held-out ids
ASSUMED = PROJECT / "bench" / "eval_share_a100.json"  # the GPU figures nothing here can measure
_METRIC = re.compile(r"\[metric\]\[batch=(\d+)\]: (harness/[a-z_@0-9]+): (\S+)")


def _run(mode: str, ranks: int, args: argparse.Namespace) -> dict:
    # Absolute: the child runs in this folder, and a relative --out in the paths handed to it
    # would be joined again under it (log0.txt written one level deeper than it is read).
    folder = Path(args.out).resolve() / f"{mode}-{ranks}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    sets = {
        "data.format": "memory",
        "data.mds_dir": str(folder / "mds"),
        "train.max_duration": f"{args.batches}ba",
        "train.save_folder": str(folder / "ckpt"),
        "train.save_interval": "1000ep",
        "train.autoresume": "false",
        "train.log_file": str(folder / "log{rank}.txt"),  # Composer fills in the rank
    }
    if mode != "none":
        extra = "mode: async, " if mode == "async" else ""
        sets["callbacks.harness_eval"] = (
            f"{{interval: {args.interval}, {extra}sessions: [{', '.join(SESSIONS)}], k: 1, "
            "max_steps: 2, workers: 2, budget_s: 150, allow_overlap: true, "
            "generation: {max_new_tokens: 16}}"
        )
    bin_ = Path(sys.executable).parent
    cmd = [str(bin_ / "python"), "-m", "finetune.train"]
    if ranks > 1:
        cmd = [str(bin_ / "composer"), "-n", str(ranks), "-m", "finetune.train"]
    cmd += [str(CONFIG), *(x for k, v in sets.items() for x in ("--set", f"{k}={v}"))]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{mode}-{ranks} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    logged: dict[str, list[tuple[int, float]]] = {}
    for batch, key, value in _METRIC.findall((folder / "log0.txt").read_text()):
        logged.setdefault(key, []).append((int(batch), float(value)))
    return {"wall": wall, "logged": logged}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="runs/eval-share")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--interval", default="4ba")
    est = ap.add_argument_group("estimate (--estimate CONFIG): no training runs")
    est.add_argument("--estimate", metavar="CONFIG", help="a training config, e.g. agent-8xa100")
    est.add_argument("--ranks", type=int, default=8)
    est.add_argument("--rows", action="append", default=[], help="run folders on the eval suites")
    est.add_argument("--rows-agent", default="oracle", help="whose rows give the sandbox seconds")
    est.add_argument("--assume", default=str(ASSUMED), help="what cannot be measured here (JSON)")
    est.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    return ap.parse_args(argv)


def measured(args: argparse.Namespace) -> tuple[dict, dict]:
    """(inputs, where) measured on this machine: the config's data pipeline and callback, the
    evaluated sessions in the pipeline's tokenizer, sandbox seconds from ``--rows``."""
    sys.path.insert(0, str(PROJECT))
    from finetune.callbacks import HarnessEval
    from finetune.config import load_config
    from finetune.epoch import epoch_of, pipeline
    from harness.agents.etai_format import render_action, render_prompt
    from harness.runs.results import read_rows

    cfg = load_config(args.estimate, args.overrides)
    made = pipeline(cfg)
    epoch = epoch_of(cfg, args.ranks, made)
    [cb] = [c for c in made.callbacks if isinstance(c, HarnessEval)]
    ids = set(cb.evaluated_ids())
    sessions = [s.raw for st in cb.suites for s in st.sessions if s.session_id in ids]
    chars = cfg.get("data.max_result_chars", int, 4000)
    count = lambda text: len(made.tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    actions, prompts = [], []
    for s in sessions:
        trace = s.get("execution_trace") or []
        for i, step in enumerate(trace):
            actions.append(count(render_action(step["tool_called"], step.get("tool_args"))))
            prompts.append(count(render_prompt(s, trace[:i], chars)))
    rows = [
        r
        for folder in args.rows
        for r in read_rows(Path(folder) / "results.jsonl")
        if r["session_id"] in ids and r["agent"] == args.rows_agent and r.get("phases")
    ]
    if not rows:
        raise ValueError("--rows: no row of an evaluated session with timings (run them first)")
    steps = [st["latency_s"] for r in rows for st in r["steps"]]
    max_new = int(cb.generation.get("max_new_tokens", 512))
    values = {
        "ranks": args.ranks,
        "global_batch": epoch.global_batch,
        "interval_steps": epoch.eval_every_steps,
        "tokens_per_example": epoch.tokens / epoch.examples,
        "eval_sessions": len(ids),
        "max_steps": cb.max_steps,
        "workers": cb.workers,
        "gen_batch": int(cb.generation.get("batch_size", 8)),
        "action_tokens": min(max_new, _quantile(actions, 0.9)),
        "prompt_tokens": sum(prompts) / len(prompts),
        "acquire_s": sum(r["phases"]["acquire"] for r in rows) / len(rows),
        "tool_s": sum(steps) / len(steps),
        "verify_s": sum(r["phases"]["verify"] for r in rows) / len(rows),
    }
    here = f"measured here ({time.strftime('%Y-%m-%d')}, load {os.getloadavg()[0]:.1f})"
    where = {k: f"the config's data pipeline (python -m finetune.epoch), {here}" for k in values}
    where.update(
        {
            k: f"callbacks.harness_eval of {Path(args.estimate).name}"
            for k in ("eval_sessions", "max_steps", "workers", "gen_batch")
        }
    )
    where["ranks"] = "--ranks"
    where["action_tokens"] = (
        f"p90 of the evaluated sessions' reference actions ({len(actions)}) in the pipeline's "
        f"tokenizer, at most max_new_tokens {max_new}; {here}"
    )
    where["prompt_tokens"] = f"mean prompt before each reference step ({len(prompts)}); {here}"
    for k in ("acquire_s", "tool_s", "verify_s"):
        where[k] = f"mean over {len(rows)} {args.rows_agent} rows of {', '.join(args.rows)}; {here}"
    return values, where


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def estimate_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(PROJECT))
    from finetune.errors import ConfigError, DataError
    from finetune.eval_budget import Inputs, estimate, table

    try:
        values, where = measured(args)
    except (ConfigError, DataError, ValueError, OSError) as exc:
        print(f"eval_share: {exc}", file=sys.stderr)
        sys.exit(2)
    for key, item in json.loads(Path(args.assume).read_text()).items():
        if key.startswith("_"):
            continue
        values[key], where[key] = item["value"], f"assumed: {item['where']}"
    x = Inputs(**values)
    print(table(x, estimate(x), where))


def main() -> None:
    args = parse()
    if args.estimate:
        estimate_main(args)
        return
    print("load before:", os.getloadavg())
    runs = {
        key: _run(mode, ranks, args)
        for key, (mode, ranks) in {
            "none-1": ("none", 1),
            "sync-1": ("sync", 1),
            "async-1": ("async", 1),
            "none-2": ("none", 2),
            "sharded-2": ("sync", 2),
        }.items()
    }
    print("load after:", os.getloadavg())
    print(
        "| mode | ranks | wall s | no-eval wall s | overhead s | eval share | evals | "
        "eval s (each) | training waited s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key, r in runs.items():
        mode, ranks = key.split("-")
        if mode == "none":
            continue
        base = runs[f"none-{ranks}"]["wall"]
        evals = r["logged"].get("harness/eval_seconds", [])
        each = ", ".join(f"ba{b}: {v:.1f}" for b, v in evals)
        waited = (
            sum(v for _, v in r["logged"].get("harness/export_seconds", []))
            if (mode == "async")
            else sum(v for _, v in evals)
        )
        over = r["wall"] - base
        errors = sum(v for _, v in r["logged"].get("harness/error", []))
        print(
            f"| {mode} | {ranks} | {r['wall']:.1f} | {base:.1f} | {over:.1f} | "
            f"{over / r['wall']:.0%} | {len(evals)} (errors {errors:.0f}) | {each} | {waited:.1f} |"
        )


if __name__ == "__main__":
    main()
