"""The SuiteKind protocol and its registry: what the runner needs to know about a kind of suite.

A kind recognises the suites it reads (``claims``), checks a suite, its agents and the settings
before anything runs (``open``), runs the result in a held run folder, names the metrics of its
summary and prints it. The runner, the CLI and the HarnessEval callback know no kind by name; they
ask the registry for the kind that claims a suite. Built in: ``sessions`` (replayed IDE sessions,
harness/runs/session_kind.py). ``humaneval`` (suites/humaneval/kind.py) and third-party kinds plug in
through the entry-point group ``etai.suite_kinds`` — harness never imports ``suites``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.base.errors import InputError
from harness.base.registry import Registry
from harness.session.window import Window


@dataclass(frozen=True)
class RunSettings:
    """What the caller asked for; ``None`` means the suite's default. Checked by the runner and the kind."""

    samples: int = 1
    workers: int = 1
    k: int | None = None
    max_steps: int | None = None
    sandbox: str = "docker"
    options: Mapping[str, Any] = field(default_factory=dict)  # generation options for model agents
    progress: bool = True
    session_ids: Sequence[str] | None = None
    executor: str = (
        "local"  # where jobs run (harness.runs.executors): local, ray[:ADDRESS], a plug-in
    )
    allow_missing: bool = False  # a replay file without a line for some episode: score it empty
    regression: str = "related"  # which test files a graded run runs (harness.grading.verify)
    # --since/--until: only the sessions fixed in this window (harness/session/window.py); None: all
    fix_window: Window | None = None


class OpenSuite(Protocol):
    """A suite checked with its agents and settings, ready to run."""

    name: str  # the default run folder is runs/<name>

    def run(self, out: Path) -> dict[str, Any]:
        """Run every job not already in ``out`` (held by the caller); return the summary, which
        ``out/summary.json`` also holds, with ``kind`` set to the kind's name."""
        ...

    def close(self) -> None:
        """Release the agents (models, connections); called whether or not ``run`` was."""
        ...


class SuiteKind(Protocol):
    name: str
    metrics: tuple[str, ...]  # the per-agent summary fields it reports (README: "Records")
    # True: the kind hands its jobs to settings.executor as Batches (harness.runs.executors), so they
    # may run on other machines. A kind without it runs only on the local executor.
    remote_jobs: bool

    def claims(self, suite: object) -> bool:
        """Whether ``suite`` (a name, a folder, or an object this kind loaded) is of this kind."""
        ...

    def open(self, suite: object, agents: Sequence[str], settings: RunSettings) -> OpenSuite:
        """Load and check everything (InputError naming what and where) before anything runs."""
        ...

    def table(self, summary: Mapping[str, Any]) -> str:
        """The comparison table printed after a run."""
        ...


def pass_ks(samples: int) -> list[int]:
    """The pass@k values a summary reports for ``samples`` rollouts per task (k <= samples)."""
    return [k for k in (1, 2, 5, 10, 20, 50, 100) if k <= samples]


# Metrics beyond a kind's own (harness/runs/metrics.py for sessions): ``metric(rows, *, k) -> JSON value``
# over one agent's rows, reported under ``metrics`` in that agent's summary. Plug-ins: etai.metrics.
Metric = Callable[..., Any]
METRICS: Registry[Metric] = Registry("metric", group="etai.metrics")


def extra_metrics(rows: Sequence[Mapping[str, Any]], *, k: int) -> dict[str, Any]:
    """Every registered extra metric over one agent's rows."""
    return {name: metric(list(rows), k=k) for name, metric in METRICS.items()}


SUITE_KINDS: Registry[SuiteKind] = Registry(
    "suite kind", group="etai.suite_kinds", builtins=("harness.runs.session_kind",), where="--suite"
)


def kind_of(suite: object) -> SuiteKind:
    """The kind that claims ``suite``: plug-ins first (a plug-in may read what looks like a folder),
    then the built-in session kind, which claims every other name and reports it if it is none."""
    names = SUITE_KINDS.names()
    for name in sorted(names, key=lambda n: n == "sessions"):
        kind = SUITE_KINDS.get(name)
        if kind.claims(suite):
            return kind

    raise InputError(f"no suite kind reads {suite!r}; kinds: {', '.join(names)}", where="--suite")
