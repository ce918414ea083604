"""What the in-training evaluation (``callbacks.harness_eval``) runs and what it reports, with no
model and no torch: the suites and sessions, the settings checked at config time (exit 2, not a
failure at batch 200), the folders the rows go to, and the metrics over the rows.

``suite`` may name several suites (a project split holds out whole projects, each a suite with
its own base and node_modules): session ids are unique across them, each suite's sessions run
into ``<folder>/<suite name>/`` and the metrics are over all of them.

The time budget (``budget_s``, from the evaluation's start: image, preflight, rollouts) is
enforced by the agent (``harness.agents.hf``): past it, an episode not yet started never starts
its sandbox (a ``skipped_budget`` row: not run), one whose sandbox is still starting is given up
at the deadline (``harness.runs.loop``; ``skipped_budget`` too), and a running one stops at its
next generation (an ``infra_error`` row); at most the verification already under way finishes.
Both are in no denominator, are retried by a rerun, and are counted as
``harness/skipped_budget`` and ``harness/stopped_budget``; ``harness/complete`` is 0. The image
and the preflight are cached on the machine after the first evaluation; a cold first one is not
cut short.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from finetune.config import PROJECT_ROOT
from finetune.errors import ConfigError
from harness.agents import Generation
from harness.agents.hf import BUDGET_SPENT
from harness.base.errors import EtaiError, InputError
from harness.runs import metrics
from harness.runs.results import ResultStore, write_json_atomic
from harness.suites.load import load_suite

KEY = "callbacks.harness_eval"
GENERATION_KEYS = ("temperature", "top_p", "max_new_tokens", "batch_size", "batch_wait_ms")
DEFAULT_SUITE = "jest-bugfix"  # the bundled suite (suites/jest-bugfix)
# Under FSDP: each rank generates with a full copy gathered once per evaluation, or with the
# sharded model, every token's forward a collective (finetune/lockstep.py; no copy to fit).
FSDP_GENERATION = ("gathered", "lockstep")


# ---------------------------------------------------------------------------------- settings
def load_eval_suites(
    suite: str | Path | Sequence[str | Path], sessions: Sequence[str] | None
) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """Load the suite or suites now (each a bundled name or a folder, relative to the working
    directory or the project): a missing suite, a session id two suites share, or an unknown
    session fails at config time (exit 2), not at batch 200."""
    names = [suite] if isinstance(suite, (str, Path)) else list(suite)
    if not names:
        raise ConfigError(f"{KEY}.suite", "names no suite")
    suites = []
    for name in names:
        path = Path(name).expanduser()
        if not path.is_absolute() and not path.is_dir() and (PROJECT_ROOT / path).is_dir():
            path = PROJECT_ROOT / path
        try:
            suites.append(load_suite(path if path.is_dir() else name))
        except EtaiError as e:
            raise ConfigError(f"{KEY}.suite", str(e)) from None
    for what, values in (
        ("suite name", [st.name for st in suites]),
        ("session id", [s.session_id for st in suites for s in st.sessions]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:  # rows are told apart by session id, results folders by suite name
            raise ConfigError(f"{KEY}.suite", f"{what} in two suites: {', '.join(twice[:5])}")
    if sessions is None:
        return tuple(suites), ()
    ids = tuple(sessions)
    if not ids:
        raise ConfigError(
            f"{KEY}.sessions", "empty subset; leave the key out to evaluate every session"
        )
    known = {s.session_id for st in suites for s in st.sessions}
    unknown = sorted(set(ids) - known)
    if unknown:
        where = ", ".join(st.name for st in suites)
        raise ConfigError(f"{KEY}.sessions", f"not in suite {where}: {', '.join(unknown)}")
    return tuple(suites), ids


def run_limits(
    suites: Sequence[Any], k: int | None, max_steps: int | None, workers: int, budget_s: float
) -> tuple[int, int, int, float]:
    """(k, max_steps, workers, budget_s), checked; k and max_steps unless given: the first
    suite's defaults."""
    defaults = suites[0].defaults
    k = int(k or defaults.get("k", 3))
    max_steps = int(max_steps or defaults.get("max_steps", 10))
    if k < 1 or max_steps < k:
        raise ConfigError(
            f"{KEY}.k", f"need 1 <= k <= max_steps (got k={k}, max_steps={max_steps})"
        )
    if workers < 1 or not budget_s > 0:
        raise ConfigError(f"{KEY}.workers", "workers and budget_s must be positive")
    return k, max_steps, int(workers), float(budget_s)


def generation_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``generation`` options the agent is given, checked as it will check them."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(GENERATION_KEYS))
    if unknown:
        raise ConfigError(
            f"{KEY}.generation", f"unknown option(s) {unknown}; known: {GENERATION_KEYS}"
        )
    try:
        Generation.from_options(options)
    except InputError as e:
        raise ConfigError(f"{KEY}.generation", str(e)) from None
    return options


def check_fsdp_generation(value: str) -> str:
    if value not in FSDP_GENERATION:
        raise ConfigError(
            f"{KEY}.fsdp_generation",
            f"expected one of {', '.join(FSDP_GENERATION)}, got {value!r}",
        )
    return value


def suite_parts(
    suites: Sequence[Any], ids: Sequence[str], out: Path
) -> list[tuple[Path, Any, list[str]]]:
    """(folder, suite, its ids) for each suite with a session in ``ids``: ``out`` itself for
    one suite, ``out/<suite name>`` for several."""
    parts = []
    for suite in suites:
        names = {s.session_id for s in suite.sessions}
        mine = [i for i in ids if i in names]
        if mine:
            parts.append((out if len(suites) == 1 else out / suite.name, suite, mine))
    return parts


# ---------------------------------------------------------------------------------- results
def write_merged(out: Path, rows: Sequence[Mapping[str, Any]], *, k: int) -> None:
    """The one folder of a sharded (or several-suite) evaluation: every rank's rows and their
    summary."""
    store = ResultStore(out)
    for row in rows:
        if not store.has(row["cache_key"]):
            store.append(dict(row))
    agents = sorted({r["agent"] for r in rows})
    summary = {
        "shards": sorted(str(p) for p in out.glob("rank*")),
        "agents": {a: metrics.summarize([r for r in rows if r["agent"] == a], k=k) for a in agents},
    }
    write_json_atomic(out / "summary.json", summary)


def eval_metrics(
    rows: Sequence[Mapping[str, Any]], *, k: int, n: int, skipped_before: int = 0
) -> dict[str, float]:
    """The logged metrics over the evaluation's rows (every rank's): ``n`` sessions were asked
    for; ``skipped_before`` of them had no row because the budget was spent before they started."""
    agent = metrics.summarize(list(rows), k=k)
    skipped, stopped = _budget_counts(rows)
    skipped += skipped_before
    complete = len(rows) == n and not agent["n_infra_error"] and not agent["n_skipped_budget"]
    out = {f"harness/path_accuracy@{j}": _nan(v) for j, v in agent["path_accuracy"].items()}
    out["harness/pass@1"] = _nan(agent["pass_at_k"].get(1))
    out["harness/steps_to_green"] = _nan(agent["steps_to_green"]["mean"])
    out["harness/invalid_actions"] = float(agent["invalid_actions"])
    out["harness/tamper_rate"] = _nan(agent.get("tamper_rate"))
    out["harness/special_case_rate"] = _nan(agent.get("special_case_rate"))
    out["harness/incomplete_rate"] = _nan(agent.get("incomplete_rate"))
    out["harness/infra_errors"] = float(agent["n_infra_error"] - stopped)
    out["harness/skipped_budget"], out["harness/stopped_budget"] = float(skipped), float(stopped)
    out["harness/complete"] = float(complete)
    out["harness/error"] = 0.0
    return out


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)  # undefined (no valid rows) is not zero


def _budget_counts(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(skipped, stopped): rows the deadline kept from starting (``skipped_budget``), and
    ``infra_error`` rows it stopped mid-way (their reason says so)."""
    skipped = sum(r.get("status") == "skipped_budget" for r in rows)
    stopped = sum(
        r.get("status") == "infra_error" and BUDGET_SPENT in str(r.get("reason") or "")
        for r in rows
    )
    return skipped, stopped
