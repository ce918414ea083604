"""A demo ETAI plug-in, written against ETAI's public modules only."""

from __future__ import annotations

import json
from pathlib import Path

from harness.agents.etai_format import Action, FinalAnswer


class _RunTestsOnce:
    def __init__(self):
        self.done = False

    def act(self, observations):
        if self.done:
            return FinalAnswer("ran the tests")
        self.done = True
        return Action("jest_run", {})


class Tester:
    """Runs the tests once and finishes (tester or tester:ANYTHING)."""

    fingerprint = ""

    def __init__(self, spec):
        self.spec = spec

    def start(self, task, sample):
        return _RunTestsOnce()

    def close(self):
        pass


def make_tester(arg, ctx):
    return Tester("tester" + (f":{arg}" if arg else ""))


def jest_share(rows, *, k):
    """Share of one agent's episodes whose first action ran the tests."""
    if not rows:
        return None
    first = [(r.get("actions") or [{}])[0].get("tool") for r in rows]
    return sum(t == "jest_run" for t in first) / len(rows)


class Countdown:
    """A suite kind that needs no sandbox: each agent 'solves' countdown:N by counting to N."""

    name = "countdown"
    metrics = ("counted",)

    def claims(self, suite):
        return isinstance(suite, str) and suite.startswith("countdown:")

    def open(self, suite, agents, settings):
        return _Open(int(suite.split(":", 1)[1]), list(agents))

    def table(self, summary):
        return "\n".join(f"{a}: counted {m['counted']}" for a, m in summary["agents"].items())


class _Open:
    def __init__(self, n, agents):
        self.n, self.agents, self.name = n, agents, f"countdown-{n}"

    def run(self, out: Path):
        summary = {
            "kind": "countdown",
            "suite": self.name,
            "complete": True,
            "agents": {a: {"counted": self.n} for a in self.agents},
        }
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    def close(self):
        pass


KIND = Countdown()
