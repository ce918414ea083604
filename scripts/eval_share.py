#!/usr/bin/env python
"""Eval share of wall time for tiny-cpu with HarnessEval at a small interval: sync, sharded
(2 ranks), async, each against the same training without evaluation (finetune/README.md).

    .venv/bin/python scripts/eval_share.py [--out runs/eval-share] [--batches 8] [--interval 4ba]

Each mode is a fresh process (``python -m finetune.train``, or ``composer -n 2`` for 2 ranks),
the wall clock measured around it; the evaluation's own seconds come from the run's log
(``harness/eval_seconds``; async also ``harness/export_seconds``, what training waited).
overhead = wall − wall of the same ranks without evaluation; share = overhead / wall.
Needs Docker (the sandboxes). Prints a markdown table and the load average before and after.
"""

from __future__ import annotations

import argparse
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/eval-share")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--interval", default="4ba")
    return ap.parse_args(argv)


def main() -> None:
    args = parse()
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
