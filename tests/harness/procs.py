"""What runs in a sandbox's container, listed from inside it by a Python one-liner the sandbox
user runs (its own process shows as ``listing``): shared by the tests that count Jest hosts."""

from __future__ import annotations

import json
from typing import NamedTuple

# Every process: pid -> [uid, parent pid, command line with its NULs].
LISTING = (
    "import json, os\n"
    "out = {}\n"
    "for p in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        st = open(f'/proc/{p}/status').read()\n"
    "        uid = int(st.split('Uid:')[1].split()[0])\n"
    "        ppid = int(st.split('PPid:')[1].split()[0])\n"
    "        out[p] = [uid, ppid, open(f'/proc/{p}/cmdline', 'rb').read().decode('latin1')]\n"
    "    except (OSError, IndexError):\n"
    "        pass\n"
    "print(json.dumps(out))\n"
)


class Proc(NamedTuple):
    uid: int
    ppid: int
    cmd: str


def processes(sb) -> dict[int, Proc]:
    """Every process in ``sb``'s container now, by pid."""
    r = sb.exec(["python3", "-c", LISTING], timeout=30)
    assert r.exit_code == 0, r.stderr
    return {int(pid): Proc(*row) for pid, row in json.loads(r.stdout).items()}


def is_host(p: Proc) -> bool:
    return p.cmd.endswith("/opt/etai/jest-host.js\0")


def is_runner(p: Proc) -> bool:
    return p.cmd.endswith("/opt/etai/runner.js\0")
