"""Faults and bad input (issue #13): each case asserts the exit code, the message, and that nothing
partial is written (no traceback, no empty run folder, no torn row, no duplicate row).

The Docker engine of this machine is shared with other work, so these tests never stop, pause or
restart it. A run that must lose its engine talks to it through a unix socket this test owns
(``DOCKER_HOST=unix://…``): ``EngineProxy`` copies bytes both ways between that socket and the real
one, for the Docker SDK's requests and for the ``docker exec`` pipes to the sandbox runners alike.
``down()`` removes the socket and cuts every connection through it — from the run's side exactly
what a stopped engine looks like (connection refused, runner pipes at EOF); ``up()`` is the engine
back. One difference: the run's containers keep running on the real engine, where a real stop would
have killed them; the rerun's prune must remove them, and the test checks that it does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import main
from harness.runs.results import read_rows

ONE = "retry-default-attempts"
THREE = [ONE, "duration-seconds-padding", "semver-unescaped-dot"]
LOCK = ".etai.lock"


def _run_args(out: Path, *, agent: str = "oracle", sessions=(ONE,), extra=()) -> list[str]:
    return [
        "run",
        "--suite",
        "jest-bugfix",
        "--agent",
        agent,
        "--out",
        str(out),
        "--no-progress",
        "--workers",
        "1",
        *[a for s in sessions for a in ("--session", s)],
        *extra,
    ]


def _etai(args: list[str], **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **env},
    )


def _wait_rows(out: Path, n: int, proc: subprocess.Popen, limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "results.jsonl").exists() and len(read_rows(out / "results.jsonl")) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(
        f"no {n} row(s) in {out} (exit {proc.poll()}): {proc.stderr.read() if proc.poll() else ''}"
    )


def _raw_keys(out: Path) -> Counter:
    lines = (out / "results.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"", "the last row ends with a newline"
    return Counter(json.loads(raw)["cache_key"] for raw in lines[:-1])


def _run_main(capsys, args: list[str]) -> tuple[int, str]:
    rc = main(args)
    return rc, capsys.readouterr().err


# ---------------------------------------------------------------------------- the engine
class EngineProxy:
    """A unix socket that forwards to the real engine's; ``down()`` is the engine stopping."""

    def __init__(self, path: Path, target: str):
        self.path, self.target = path, target
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        # set: the run's bytes holding these are dropped and ``seen`` is set
        self.watch: bytes | None = None
        self.seen = threading.Event()

    def up(self) -> None:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(self.path))
        s.listen(64)
        self._server = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def down(self) -> None:
        s, self._server = self._server, None
        self.path.unlink()
        s.shutdown(socket.SHUT_RDWR)  # wakes the accept loop
        s.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(self.target)
            with self._lock:
                self._conns += [client, engine]
            for a, b in ((client, engine), (engine, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        tail = b""
        try:
            while data := src.recv(65536):
                if self.watch and self.watch in tail + data:
                    # The engine stops before this request reaches it: forwarding it and cutting
                    # afterwards raced the episode, which could finish between the two on a fast
                    # step (CI once saw the second session pass). ``down()`` follows.
                    self.seen.set()
                    return
                tail = data[-64:]
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)  # a half-close (docker exec's stdin) travels on
        except OSError:
            pass


def _engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the proxy forwards to a unix socket; DOCKER_HOST is {host}")
    return host[len("unix://") :]


@pytest.mark.docker
@pytest.mark.slow
def test_engine_stopped_mid_run_gives_infra_error_rows_exit_3_and_a_rerun_completes(
    tmp_path, containers_of
):
    sock_dir = Path(
        tempfile.mkdtemp(prefix="etai-engine-", dir="/tmp")
    )  # unix socket paths are short
    proxy = EngineProxy(sock_dir / "docker.sock", _engine_socket())
    proxy.up()
    out = tmp_path / "run"
    args = _run_args(out, sessions=THREE)
    try:
        p = _etai(args, DOCKER_HOST=f"unix://{proxy.path}")
        _wait_rows(out, 1, p)
        proxy.watch = (
            b'"op": "edit"'  # the second episode is acting: its sandbox is started, in use
        )
        assert proxy.seen.wait(120)
        proxy.watch = None
        proxy.down()
        # The timeout is a hang guard, not a speed claim: with the engine gone the remaining rows
        # must be written without waiting on anything (a hang would be the bug).
        stdout, stderr = p.communicate(timeout=120)
        proxy.up()
        assert p.returncode == 3, stderr
        assert "Traceback" not in stderr and "INCOMPLETE" in stdout
        rows = read_rows(out / "results.jsonl")
        statuses = sorted(r["status"] for r in rows)
        # The engine goes while the second episode acts, or, on a busy machine where the cut comes
        # a little later, after it reached its verdict (it keeps it) and the third is acting: one
        # or two infra_error rows, the rest passed; never a failed row made of an outage.
        assert len(statuses) == 3 and statuses[0] == "infra_error", statuses
        assert set(statuses) <= {"infra_error", "passed"} and statuses[-1] == "passed", statuses
        assert not [r for r in rows if "agent or harness error" in (r["reason"] or "")], rows
        assert json.loads((out / "summary.json").read_text())["complete"] is False

        p2 = _etai(args, DOCKER_HOST=f"unix://{proxy.path}")
        _, stderr2 = p2.communicate(timeout=300)
        assert p2.returncode == 0, stderr2
        assert sorted(r["status"] for r in read_rows(out / "results.jsonl")) == ["passed"] * 3
        assert containers_of(p.pid) == [], "the rerun's prune removed what the outage left running"
    finally:
        if proxy._server is not None:
            proxy.down()
        shutil.rmtree(sock_dir, ignore_errors=True)


@pytest.mark.docker
def test_listing_and_pruning_survive_containers_removed_meanwhile(image):
    """Another etai process removing its containers while we list or prune is not an error (the
    SDK's list-then-inspect once crashed a real run with docker.errors.NotFound)."""
    from harness.sandbox import Limits, _docker

    names = [_docker.create_container(image, Limits(memory_mb=128))[1] for _ in range(6)]
    gone = threading.Event()

    def remove_all():
        for n in names:
            _docker.kill_and_remove(n)
        gone.set()

    remover = threading.Thread(target=remove_all)
    remover.start()
    listings = 0
    try:
        while not gone.is_set() or listings < 3:
            _docker.leftovers()
            _docker.leftovers(owner_pid=os.getpid())
            _docker.prune()  # our pid is alive: it removes none of ours, only lists them
            listings += 1
    finally:
        remover.join()
    assert not set(names) & set(_docker.leftovers())


REAP_DURING_CREATE = """
import os, sys, threading
from harness.base.errors import InfraError
from harness.sandbox import Limits, _docker
got = {}
def create():
    try:
        got["container"] = _docker.create_container(sys.argv[1], Limits(memory_mb=128))[1]
    except InfraError as e:
        got["error"] = str(e)
t = threading.Thread(target=create)
t.start()
reaps = 0
while t.is_alive():  # as Ctrl-C or SIGTERM would, while the engine is creating the container
    _docker._reap_own()
    reaps += 1
print(reaps, got, _docker.leftovers(owner_pid=os.getpid()))
"""


@pytest.mark.docker
def test_a_sandbox_being_created_when_its_process_stops_them_is_removed(image, containers_of):
    """A reap (Ctrl-C, SIGTERM, exit) that comes while a container is being created removes it as
    it comes up, instead of leaving it for a later run's prune. In a process of its own: a reap
    removes every sandbox of its process."""
    p = subprocess.Popen(
        [sys.executable, "-c", REAP_DURING_CREATE, image],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = p.communicate(timeout=120)  # a hang guard, not a speed claim
    assert p.returncode == 0, stderr
    reaps, rest = stdout.split(" ", 1)
    assert int(reaps) > 0 and "'error'" in rest and "interrupted" in rest, stdout
    assert rest.rstrip().endswith("[]"), stdout  # nothing left, seen from inside the process
    assert containers_of(p.pid) == []


def test_engine_absent_at_start_exits_3_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    p = _etai(_run_args(out, agent="noop"), DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    _, stderr = p.communicate(timeout=120)
    assert p.returncode == 3, stderr
    assert "no Docker engine answers" in stderr and "Traceback" not in stderr
    assert not out.exists()


# ---------------------------------------------------------------------------- the run folder
@pytest.mark.docker
@pytest.mark.slow
def test_second_run_on_the_same_folder_exits_2_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    # A stale lock first: its holder was SIGKILLed while holding it; the next run takes it over.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, sys, time\n"
                "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.write(str(os.getpid())); f.flush()\n"
                "print('held', flush=True); time.sleep(600)\n"
            ),
            str(out / LOCK),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "held\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()

    args = _run_args(out, sessions=THREE)
    first = _etai(args)
    _wait_rows(out, 1, first)
    # Held still while the second one asks, so it cannot finish first and free the folder (on a
    # quiet machine its last two episodes take about as long as the second one's start).
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        second = _etai(args)
        stdout, stderr = second.communicate(timeout=60)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    assert second.returncode == 2, stderr
    assert stdout == "" and "preflight" not in stderr, "refused before anything ran"
    assert f"in use by another etai run (pid {first.pid})" in stderr and str(out) in stderr
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    keys = _raw_keys(out)
    assert len(keys) == 3 and set(keys.values()) == {1}, "every row exactly once"


def test_out_that_is_a_file_exits_2_and_is_left_alone(tmp_path, capsys):
    out = tmp_path / "out"
    out.write_text("keep me\n")
    rc, err = _run_main(capsys, _run_args(out, agent="noop"))
    assert rc == 2 and f"{out}: the run folder is a file" in err, err
    assert out.read_text() == "keep me\n"


@pytest.mark.parametrize(
    "below", [False, True], ids=["read-only folder", "folder on a read-only disk"]
)
def test_read_only_out_exits_2_before_anything_runs(tmp_path, tmpfs, capsys, below, sandbox_starts):
    ro = tmpfs(tmp_path / "ro", ro=True)
    out = ro / "run" if below else ro
    rc, err = _run_main(capsys, _run_args(out, agent="noop"))
    assert (
        rc == 2 and f"{out}: cannot write the run folder" in err and "Read-only file system" in err
    ), err
    assert sandbox_starts == [], "checked up front, before any sandbox"
    assert os.listdir(ro) == []


@pytest.mark.docker
@pytest.mark.slow
def test_full_disk_on_out_stops_the_run_exit_3_and_a_rerun_completes(tmp_path, tmpfs):
    disk = tmpfs(tmp_path / "disk", size="64k")
    out = disk / "run"
    out.mkdir()
    filler = disk / "filler"
    fd = os.open(
        filler, os.O_WRONLY | os.O_CREAT
    )  # fill the disk, then give one page back: the lock takes it
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(filler, filler.stat().st_size - 4096)
    p = _etai(_run_args(out))
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 3, stderr
    assert (
        "No space left on device" in stderr
        and "results.jsonl" in stderr
        and "Traceback" not in stderr
    )
    assert sorted(os.listdir(out)) == [LOCK], "no torn row, no empty results file, no temp file"

    filler.unlink()
    p2 = _etai(_run_args(out))
    _, stderr2 = p2.communicate(timeout=300)
    assert p2.returncode == 0, stderr2
    assert [r["status"] for r in read_rows(out / "results.jsonl")] == ["passed"]


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "flags,expected",
    [
        (["-k", "0"], "k must be at least 1 (got 0)"),
        (["--max-steps", "0"], "max_steps must be at least 1 (got 0)"),
        (["--workers", "-5"], "workers must be at least 1 (got -5)"),
        (["--samples", "0"], "samples must be at least 1 (got 0)"),
    ],
    ids=["k", "max-steps", "workers", "samples"],
)
def test_zero_and_negative_budgets_are_refused(tmp_path, capsys, flags, expected):
    out = tmp_path / "run"
    rc, err = _run_main(capsys, _run_args(out, agent="noop", extra=flags))
    assert rc == 2 and expected in err, err
    assert not out.exists()


def _bad_utf8_suite(tmp_path: Path, make_suite) -> Path:
    root = make_suite(tmp_path / "suite", [ONE])
    with open(root / "sessions.jsonl", "ab") as f:
        f.write(b'{"session_id": "caf\xe9"}\n')
    return root


def test_non_utf8_sessions_jsonl_is_named_with_its_line(tmp_path, capsys, make_suite):
    root = _bad_utf8_suite(tmp_path, make_suite)
    rc, err = _run_main(capsys, ["suite", "validate", str(root)])
    where = f"{root / 'sessions.jsonl'}: 1 problem(s):\n  line 2: encoding: not valid UTF-8 (byte 0xe9 at offset 19)"
    assert rc == 2 and where in err, err
    out = tmp_path / "run"
    rc, err = _run_main(capsys, ["run", "--suite", str(root), "--agent", "noop", "--out", str(out)])
    assert rc == 2 and where in err, err
    assert not out.exists()


def test_non_utf8_suite_yaml_and_replay_file_are_named(tmp_path, capsys, make_suite):
    root = make_suite(tmp_path / "suite", [ONE])
    (root / "suite.yaml").write_bytes(b"name: caf\xe9\n")
    rc, err = _run_main(capsys, ["suite", "validate", str(root)])
    assert rc == 2 and f"{root / 'suite.yaml'}: not valid UTF-8" in err, err

    replay = tmp_path / "replay.jsonl"
    replay.write_bytes(json.dumps({"session_id": ONE, "actions": []}).encode() + b"\n\xff\n")
    out = tmp_path / "run"
    rc, err = _run_main(capsys, _run_args(out, agent=f"replay:{replay}"))
    assert rc == 2 and f"{replay}:2: not valid UTF-8 (byte 0xff at offset 0)" in err, err
    assert not out.exists()


def test_validate_reports_a_workspace_over_the_size_limit(tmp_path, capsys, make_suite):
    root = make_suite(tmp_path / "suite", [ONE])
    big = root / "workspaces" / ONE / "fixtures" / "big.bin"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.truncate(33 << 20)  # sparse: costs no disk
    rc, err = _run_main(capsys, ["suite", "validate", str(root)])
    assert rc == 2, err
    assert (
        f"line 1 (session {ONE}): workspace: workspaces/{ONE} holds 33.0 MiB, over the sandbox's 32 MiB "
        "(largest: fixtures/big.bin, 33.0 MiB)" in err
    ), err
    out = tmp_path / "run"
    rc, err = _run_main(capsys, ["run", "--suite", str(root), "--agent", "noop", "--out", str(out)])
    assert rc == 2 and "fixtures/big.bin" in err
    assert not out.exists()


SYMLINK_CASES = [
    (
        "ide_context.cursor_position.file",
        "src/leak.js",
        "ide_context.cursor_position.file: src/leak.js is a symlink, which the sandbox does not receive",
    ),
    (
        "ide_context.open_files",
        "src/leak.js",
        "ide_context.open_files[0]: src/leak.js is a symlink, which the sandbox does not receive",
    ),
    (
        "cursor_target.file",
        "hostdir/retry.js",
        "cursor_target.file: hostdir/retry.js is under a symlink (hostdir), which the sandbox does not receive",
    ),
    (
        "verify.test_files",
        "src/leak.js",
        "verify.test_files: src/leak.js is a symlink, which the sandbox does not receive",
    ),
    (
        "cursor_target.file",
        "../../../outside.js",
        "cursor_target.file: ../../../outside.js is outside the workspace",
    ),
]


@pytest.mark.parametrize(
    "field,value,expected", SYMLINK_CASES, ids=[f"{c[0]}={c[1]}" for c in SYMLINK_CASES]
)
def test_validation_does_not_follow_symlinks_out_of_the_workspace(
    tmp_path, capsys, make_suite, field, value, expected
):
    host = tmp_path / "host"
    host.mkdir()
    text = (
        "x" * 200 + "\n"
    ) * 200  # room for every cursor of the session: only the symlink can be wrong
    for f in (host / "secret.js", host / "retry.js", tmp_path / "outside.js"):
        f.write_text(text)

    def point(s):
        obj, *path = s, *field.split(".")
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = [value] if isinstance(obj[path[-1]], list) else value
        return s

    root = make_suite(tmp_path / "suite", [ONE], point)
    ws = root / "workspaces" / ONE
    (ws / "src" / "leak.js").symlink_to(host / "secret.js")
    (ws / "hostdir").symlink_to(host, target_is_directory=True)
    rc, err = _run_main(capsys, ["suite", "validate", str(root)])
    assert rc == 2 and f"line 1 (session {ONE}): {expected}" in err, err


# ---------------------------------------------------------------------------- a model server
@pytest.mark.docker
@pytest.mark.slow
def test_unreachable_server_is_detected_once_per_run(tmp_path, capsys, monkeypatch):
    # Bound but never listening: connections are refused, and the port stays ours for the whole
    # test (a bound-then-closed port could be taken by another process meanwhile).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        monkeypatch.setenv("ETAI_OPENAI_MAX_RETRIES", "2")
        out = tmp_path / "run"
        rc, err = _run_main(
            capsys, _run_args(out, agent=f"openai:http://127.0.0.1:{port}/v1#m", sessions=THREE)
        )
    assert rc == 3, err
    rows = read_rows(out / "results.jsonl")
    assert [r["status"] for r in rows] == ["infra_error"] * 3
    breaker = f"127.0.0.1:{port}/v1 was found unreachable earlier in this run"
    tried = [r for r in rows if breaker not in r["reason"]]
    assert len(tried) == 1 and "gave up after 3 attempt(s)" in tried[0]["reason"], rows
    # The other two never tried the server again: the breaker answered for it.
