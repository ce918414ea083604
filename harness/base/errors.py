"""Typed errors of the library. Only the CLI turns them into messages and exit codes."""

from __future__ import annotations


class EtaiError(Exception):
    """Base class: every error the library raises on purpose."""

    exit_code = 1


class InputError(EtaiError):
    """Bad input from the user (a file, a flag, a suite): exit code 2, nothing run or written."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class InfraError(EtaiError):
    """The machinery failed (Docker engine, image, a server): never the agent's fault."""

    exit_code = 3


class SandboxDead(InfraError):
    """The sandbox's runner is gone (killed by its own code, by a deadline, or by the engine)."""


class SandboxTimeout(SandboxDead):
    """A request to the sandbox outlived its deadline; the sandbox was killed for it (the agent's
    code ran too long: a ``timeout`` result, not an infrastructure failure)."""


class BudgetSkipped(InfraError):
    """The evaluation's time budget was spent before this episode started: no sandbox was started
    and nothing was judged (a ``skipped_budget`` row, in no denominator, run by a rerun). An
    InfraError, so a caller that knows nothing of budgets still sees "not the agent's fault"."""


class ServerUnreachable(InfraError):
    """A model server could not be reached (refused, reset, no route) through all of a call's retries."""


class ConfigIsCode(InputError):
    """The project's Jest config is JavaScript or TypeScript: its code, which ETAI does not rewrite
    (what to add to it is in the message)."""


class FolderBusy(InputError):
    """Another live process holds the run folder's lock."""

    def __init__(self, message: str, *, where: str, holder: int | None):
        self.holder = holder
        super().__init__(message, where=where)
