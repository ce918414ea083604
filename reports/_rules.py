"""The gate's rules: ``METRIC OP VALUE`` or ``METRIC OP baseline [- MARGIN] [alpha=A]`` parsed
into a Rule, checked against a suite kind's metric names, and each metric's value read off a run's
metrics (reports/_gate.py applies them; its docstring says what the rules mean)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.base.errors import InputError
from reports._compare import pass_at
from reports._kinds import SESSIONS
from reports._load import STATUSES

ALPHA = 0.05
_RULE = re.compile(
    r"^\s*(?:(?P<suite>[a-z0-9][\w.-]*)\s*:\s*)?(?P<metric>[a-z_][a-z0-9_.]*(?:@\d+)?)\s*(?P<op>>=|<=|==|!=|>|<)\s*"
    r"(?:(?P<base>baseline)\s*(?:(?P<sign>[-+])\s*(?P<margin>\d+(?:\.\d*)?|\.\d+))?|"
    r"(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?))"
    r"\s*(?:,?\s*alpha\s*=\s*(?P<alpha>0?\.\d+))?\s*$",
    re.IGNORECASE,
)
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: abs(a - b) <= 1e-12,
    "!=": lambda a, b: abs(a - b) > 1e-12,
}


@dataclass(frozen=True)
class Rule:
    """A parsed rule. ``margin`` is set for baseline rules (how much worse is tolerated)."""

    text: str
    metric: str
    op: str
    value: float | None = None
    margin: float | None = None
    alpha: float = ALPHA
    suite: str | None = None  # only the run of this suite (or kind); None: every run

    @property
    def against_baseline(self) -> bool:
        return self.margin is not None


def parse_rule(text: str, alpha: float = ALPHA) -> Rule:
    m = _RULE.match(text)
    if not m:
        raise InputError(
            f"cannot read rule {text!r}: expected METRIC OP NUMBER (pass@1>=0.6) or "
            "METRIC OP baseline [- MARGIN] [alpha=A] (pass@1 >= baseline - 0.05)",
            where="--rule",
        )
    metric = m["metric"].lower().replace("path_accuracy@", "pa@")
    suite = m["suite"]
    if re.fullmatch(r"(pass|pa)@0+", metric):
        raise InputError(f"{metric}: k counts from 1", where=text)
    a = float(m["alpha"]) if m["alpha"] else alpha
    if not 0 < a < 1:
        raise InputError(f"alpha must be between 0 and 1 (got {a})", where=text)
    if not m["base"]:
        if m["alpha"]:
            raise InputError("alpha belongs to baseline rules only", where=text)
        # the gate's alpha: the level its smallest detectable difference is stated at
        return Rule(text.strip(), metric, m["op"], value=float(m["value"]), alpha=a, suite=suite)
    if m["op"] in ("==", "!="):
        raise InputError("a baseline rule needs a direction (>=, >, <=, <)", where=text)
    margin = float(m["margin"] or 0.0)
    worse_side = "-" if m["op"] in (">=", ">") else "+"
    if m["sign"] and m["sign"] != worse_side:
        raise InputError(
            f"the margin is how much worse is tolerated: write baseline {worse_side} {m['margin']}",
            where=text,
        )
    paired(metric, text)
    return Rule(text.strip(), metric, m["op"], margin=margin, alpha=a, suite=suite)


def check_metric(r: Rule, kind: str, own: Sequence[str]) -> None:
    """InputError unless ``r.metric`` is a metric of ``kind`` (``own``: its summary's names)."""
    name, _, n = r.metric.partition("@")
    sessions = kind == SESSIONS
    if n and (name == "pass" or (name == "pa" and sessions)):
        return
    if not n and (r.metric in STATUSES or r.metric == "n_valid"):
        return
    if not n and ((sessions and r.metric in _VALUE) or (not sessions and r.metric in own)):
        return
    names = ["pa@J (path_accuracy@J)", *_VALUE] if sessions else [*own, "n_valid"] if own else []
    raise InputError(
        f"unknown metric {r.metric!r} for a {kind} run; known: pass@N, "
        f"{', '.join([*names, ''])}and status counts ({', '.join(STATUSES)})",
        where=r.text,
    )


# Metrics read off arm_metrics' cells; pass@N, pa@J and status counts are parsed from the name.
_VALUE = (
    "tamper_rate",
    "special_case_rate",
    "incomplete_rate",
    "path_match",
    "steps_to_green",
    "cursor_px",
    "wrong_file_rate",
    "invalid_actions",
    "n_valid",
)


def paired(metric: str, text: str) -> tuple[str, int]:
    """What a baseline rule compares per session (session_values' kind and j)."""
    if metric == "pass@1":
        return "pass", 1
    if metric.startswith("pa@"):
        return "pa", int(metric[3:])
    per_session = {
        "tamper_rate": "tampered",
        "special_case_rate": "special_cased",
        "incomplete_rate": "incomplete",
    }
    if metric in (*per_session, "path_match", "cursor_px"):
        return per_session.get(metric, metric), 1
    raise InputError(
        f"{metric} has no paired test; baseline rules take pass@1, pa@J, tamper_rate, "
        "special_case_rate, incomplete_rate, path_match or cursor_px (use an absolute rule for "
        "the rest)",
        where=text,
    )


def value_of(metric: str, rows: pd.DataFrame, m: dict[str, Any], k: int) -> float | None:
    name, _, n = metric.partition("@")
    if name == "pass":
        sizes = rows[rows["valid"]].groupby("session_id", observed=True).size()
        fewest = int(sizes.min()) if len(sizes) else 0  # min() of none is NaN
        if int(n) > max(fewest, 1):
            raise InputError(
                f"{metric} needs at least {n} samples of every session (the run has {fewest})"
            )
        return m["pass@1"]["value"] if n == "1" else pass_at(rows, int(n))
    if name == "pa":
        cell = m["path_accuracy"].get(int(n))
        if cell is None:
            raise InputError(f"{metric}: the run's budget is k={k}")
        return cell["value"]
    if metric in STATUSES:
        return float(m["status_counts"][metric])
    if metric in ("invalid_actions", "n_valid"):
        return float(m[metric])
    if "own" in m:  # a task kind: the rest is what its summary states
        return m["own"].get(metric)
    return m[metric]["value"]
