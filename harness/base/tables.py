"""Plain-text tables for the terminal: one column layout (``grid``) for every printed table."""

from __future__ import annotations

from typing import Any


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def grid(heads: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns, as wide as their widest cell: the header line, then one line per row."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [heads, *rows]]


def session_table(summary: dict[str, Any]) -> str:
    """The short comparison table printed after a run. A ``skipped`` column (episodes a time
    budget kept from starting) appears only when some agent has one: a plain run never does."""
    k = summary["k"]
    agents = summary["agents"]
    skipped = any(m.get("n_skipped_budget") for m in agents.values())
    heads = (
        ["agent"]
        + [f"PA@{j}" for j in range(1, k + 1)]
        + [
            "pass@1",
            "steps→green",
            "path@k",
            "cursor px",
            "invalid",
            "tamper",
            "special-cased",
            "incomplete",
            "infra",
            "broken",
        ]
        + (["skipped"] if skipped else [])
    )
    lines = []
    for spec, m in agents.items():
        lines.append(
            [spec]
            + [_fmt(m["path_accuracy"].get(j)) for j in range(1, k + 1)]
            + [
                _fmt(m["pass_at_k"].get(1)),
                _fmt(m["steps_to_green"]["mean"]),
                _fmt(m["path_match"]),
                _fmt(m["cursor"]["median_px"]),
                str(m["invalid_actions"]),
                _fmt(m["tamper_rate"]),
                _fmt(m.get("special_case_rate")),
                _fmt(m.get("incomplete_rate")),
                str(m["n_infra_error"]),
                str(len(m["reference_broken"])),
            ]
            + ([str(m.get("n_skipped_budget", 0))] if skipped else [])
        )
    out = [
        f"suite {summary['suite']}: {summary['n_sessions']} sessions, k={k}, max_steps={summary['max_steps']}, "
        f"samples={summary['samples']}, image {summary['image']}"
    ]
    out += grid(heads, lines)
    out.append(
        f"rows: {summary['out']}/results.jsonl"
        + (
            ""
            if summary["complete"]
            else "  (INCOMPLETE: infra errors or skipped episodes; rerun to retry them)"
        )
    )
    return "\n".join(out)
