"""HumanEval as a suite kind: ``etai run --suite humaneval --agent SPEC --samples N``.

Registered through the entry point ``etai.suite_kinds: humaneval`` (pyproject.toml), so the runner
and the CLI reach it without harness importing ``suites``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.suites.kinds import RunSettings, pass_ks
from suites.humaneval import agents as _agents


class HumanEvalKind:
    """HumanEval: each agent completes every task's function; the sandbox runs its checks (pass@k)."""

    name = "humaneval"
    metrics = ("pass_at_k", "status_counts")

    def claims(self, suite: object) -> bool:
        return suite == self.name

    def open(self, suite: object, agents: Sequence[str], settings: RunSettings) -> OpenHumanEval:
        problems = _agents.problems_of(settings.session_ids)
        return OpenHumanEval(problems, _agents.completers_of(agents, settings.options), settings)

    def table(self, summary: Mapping[str, Any]) -> str:
        return _agents.table(dict(summary))


@dataclass
class OpenHumanEval:
    problems: Mapping[str, Any]
    completers: Mapping[str, tuple]
    settings: RunSettings
    name: str = HumanEvalKind.name

    def run(self, out: Path) -> dict[str, Any]:
        s = self.settings
        return _agents.run_agents(
            self.completers,
            self.problems,
            samples=s.samples,
            ks=pass_ks(s.samples),
            out=out,
            workers=s.workers,
            progress=s.progress,
        )

    def close(self) -> None:
        for _, _, close in self.completers.values():
            close()


KIND = HumanEvalKind()
