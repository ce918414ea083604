"""Shared fixtures: the real sandbox image and small Node projects written on the fly."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.tools.conformance import PROJECT, write_project

# One OpenMP/MKL thread for the tests' torch work (and the processes they start), unless told
# otherwise. torch's default is a thread per core; on two cores shared with sandbox containers and
# another process, its threads wait on each other: a tiny model's fit measured 5x slower than on
# one thread here (tests/harness/tiny_model.py), tests/finetune's single-process runs about 2.5x.
# Numbers agree either way within the tests' tolerances; only the waiting goes.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

BUNDLED = Path(__file__).resolve().parents[1] / "suites" / "jest-bugfix"


def copy_suite(root: Path, ids: list[str], mutate=None) -> Path:
    """A suite at ``root`` holding the bundled sessions ``ids`` (each passed through ``mutate`` if given)."""
    lines = []
    for line in (BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines():
        s = json.loads(line)
        if s["session_id"] in ids:
            shutil.copytree(BUNDLED / s["workspace"], root / s["workspace"])
            if s.get("held_out_tests"):
                shutil.copytree(BUNDLED / s["held_out_tests"], root / s["held_out_tests"])
            lines.append(json.dumps(mutate(copy.deepcopy(s)) if mutate else s))
    (root / "sessions.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def make_suite():
    """The suite writer: make_suite(root, session_ids, mutate=None)."""
    return copy_suite


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs: tmpfs(path, size="64k", ro=False); unmounted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (make test runs as root)")
    mounted: list[Path] = []

    def mount(path: Path, size: str = "64k", ro: bool = False) -> Path:
        path.mkdir(parents=True)
        subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={size}" + (",ro" if ro else ""),
                "tmpfs",
                str(path),
            ],
            check=True,
        )
        mounted.append(path)
        return path

    yield mount
    for p in reversed(mounted):
        subprocess.run(["umount", "-l", str(p)], check=False)


@pytest.fixture
def make_project():
    """The project writer, for tests that need their own files: make_project(root, files)."""
    return write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Two test files: tests/sum.test.js passes (2 tests), tests/str.test.js fails (1 test)."""
    return write_project(tmp_path / "proj", PROJECT)


def sandboxes_of(pid: int) -> list[str]:
    """The sandbox containers a run (its process id) left, on an engine other work may share."""
    from harness.sandbox import _docker

    return _docker.leftovers(owner_pid=pid)


def reserve_port() -> int:
    """A loopback port for a server that takes its port as an argument (`transformers serve`,
    Composer's master port, a server started later in the test).

    Binding port 0 and closing leaves the port free for anyone until the server binds it. Here it
    is left in TIME_WAIT instead (the accepted side closes first), so the OS hands it to no other
    socket for about a minute, while a server that binds with SO_REUSEADDR (uvicorn, torch's TCP
    store, http.server) still can: the technique of Yelp's ephemeral-port-reserve, ten lines here
    rather than a dependency. A bound socket kept open would block such a server too."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = s.accept()
            accepted.close()  # the accepted side closes first: TIME_WAIT sits on our port
    return port


@pytest.fixture(scope="session")
def free_port():
    """free_port(): a loopback port reserved for a server the test starts (see reserve_port)."""
    return reserve_port


def count_sandbox_starts(patcher: pytest.MonkeyPatch) -> list[str]:
    """Through ``patcher``: the names of the sandbox containers this process creates from then on
    (the real ``create_container`` still runs; this only counts)."""
    from harness.sandbox import _docker

    made: list[str] = []
    real = _docker.create_container

    def counting(*args, **kwargs):
        c, name = real(*args, **kwargs)
        made.append(name)
        return c, name

    patcher.setattr(_docker, "create_container", counting)
    return made


@pytest.fixture
def sandbox_starts(monkeypatch):
    """The sandbox containers this process creates from now on: "nothing ran" is then a count,
    not a time."""
    return count_sandbox_starts(monkeypatch)


@pytest.fixture
def containers_of():
    """containers_of(pid): the sandboxes one etai process left. Tests check only their own runs; the
    global count is CI's final check (.ci/run), where nothing else runs."""
    return sandboxes_of


@pytest.fixture(scope="session", autouse=True)
def _own_cache(tmp_path_factory):
    """An ETAI_CACHE of this test session's own, so no verdict cached by the user, by an earlier
    version of the code or by a test session running beside this one is ever reused. The build
    artefacts (Node tarball, runner folders, projects' node_modules installed from their lockfiles)
    are content-addressed by their inputs and never change once built, so they are linked in rather
    than rebuilt; the verdict cache starts empty."""
    from harness.sandbox import image as im

    shared = im.cache_dir()
    mine = tmp_path_factory.mktemp("etai-cache")
    for entry in shared.iterdir():
        if entry.name == "node" or (
            entry.name.startswith(("runner-", "deps-")) and (entry / "node_modules").exists()
        ):
            (mine / entry.name).symlink_to(entry, target_is_directory=True)
    before = os.environ.get("ETAI_CACHE")
    os.environ["ETAI_CACHE"] = str(mine)  # subprocesses (the CLI tests) inherit it
    yield mine
    if before is None:
        os.environ.pop("ETAI_CACHE", None)
    else:
        os.environ["ETAI_CACHE"] = before


@pytest.fixture(scope="session")
def image() -> str:
    """The real sandbox image (built if missing). No Docker engine is an error here, never a skip."""
    from harness.sandbox import image as im

    return im.ensure_image()


@dataclass(frozen=True)
class BundledRun:
    out: Path  # the run folder: results.jsonl and summary.json
    printed: dict  # the summary `--json` printed
    sandboxes: int  # sandbox containers the run created
    seconds: float

    @staticmethod
    def command(out: Path) -> list[str]:
        """The command that made it, writing to ``out``: a test reruns it on a copy."""
        run = ["run", "--suite", "jest-bugfix", "--agent", "oracle", "--agent", "noop"]
        return [*run, "--out", str(out), "--json", "--no-progress"]


@pytest.fixture(scope="session")
def bundled_oracle_noop(tmp_path_factory) -> BundledRun:
    """`etai run --suite jest-bugfix --agent oracle --agent noop --json` once per test session (about
    a minute of sandboxes): tests/harness/test_runner.py checks its scores and resume, the report
    and gate tests read its folder. Nobody writes to ``out``; a test that reruns copies it first.
    Run in this process (``harness.cli.main``) so that the sandboxes it starts can be counted."""
    from harness.cli import main

    out = tmp_path_factory.mktemp("runs") / "bundled"
    printed = io.StringIO()
    t0 = time.monotonic()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        made = count_sandbox_starts(mp)
        rc = main(BundledRun.command(out))
    assert rc == 0, printed.getvalue()[-2000:]
    return BundledRun(out, json.loads(printed.getvalue()), len(made), time.monotonic() - t0)
