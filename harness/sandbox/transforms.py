"""The trusted transform cache's store on this machine (docs/transform-cache.md).

Jest hosts write each file they transform, under a key over everything the transform depends on, to
the sandbox's ``/scratch/transforms`` (runner/transform-cache.js). ``harvest`` copies that folder
out of a sandbox in which only the pristine workspace has run (a preflight, after its baseline and
before the reference's actions) into ``store()``; every Docker sandbox gets the store read-only at
``MOUNT``, and its hosts take transformed code from there instead of transforming again. Nothing a
sandbox user runs can write the store: it is written here, by this process, from trusted sandboxes.

An entry is named by an HMAC of its key under its file's token (``file_keys``): a secret made here
from this machine's own (``secret()``, never in a sandbox) and the file's path and pristine content.
A sandbox gets the tokens of its own session's files only, so it can name no entry of a file it
does not hold: no other session's original file or fix (docs/transform-cache.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import re
import shutil
import tarfile
import threading
import time
from pathlib import Path

from harness.base.errors import InfraError
from harness.sandbox import image as _image
from harness.sandbox import process_alive

MOUNT = "/etai-transforms"  # where a sandbox sees the store (read-only)
OUT = "/scratch/transforms"  # where its hosts write what they transformed
_NAME = re.compile(r"^[0-9a-f]{64}(\.map)?$")
MAX_ENTRY = 16 << 20  # bytes of one transformed file or map kept at most
MAX_HARVEST = 512 << 20  # bytes taken from one sandbox at most
# The store's folder under $ETAI_CACHE, named by what its entries may hold. Every sandbox can read
# the store (the code under test too), so it holds only what the agent sees anyway: the pristine
# workspace's files, never a sealed file's transform (a held-out test: transform-cache.js writes
# none) nor a file as the reference changed it (the fix). A store in a folder of another name may,
# and is removed when the store is opened.
NAME = "transforms-4"
# transforms-3's entries were named by their key alone, which the code under test can compute.
_OTHER_NAMES = ("transforms", "transforms-2", "transforms-3")
# In $ETAI_CACHE beside the store, never inside it (the store is mounted into sandboxes).
SECRET = "transforms.secret"


def store() -> Path:
    """The store folder (made if missing): ``$ETAI_CACHE/<NAME>``, without the partial files of a
    harvest whose process is gone (SIGKILL)."""
    for other in _OTHER_NAMES:
        shutil.rmtree(_image.cache_dir() / other, ignore_errors=True)
    d = _image.cache_dir() / NAME
    d.mkdir(parents=True, exist_ok=True)
    # Entries are found by key alone, never listed: the sandbox user (every other user) may pass
    # through the folders but not read them, so the code under test cannot look for an entry whose
    # source it does not already hold (a later session of a mined suite holds an earlier one's
    # fix and held-out tests, and its pristine transforms are stored too).
    for folder in (d, *(p for p in d.iterdir() if p.is_dir())):
        if folder.stat().st_mode & 0o777 != 0o711:
            folder.chmod(0o711)
    for tmp in d.glob(".*.tmp"):
        pid = tmp.name.split(".")[-2]
        if pid.isdigit() and not process_alive(int(pid)):
            tmp.unlink(missing_ok=True)
    return d


def secret() -> bytes:
    """This machine's secret for the store's names: 32 random bytes in ``$ETAI_CACHE/<SECRET>``
    (mode 0600), made once; the first process to make it wins a race."""
    path = _image.cache_dir() / SECRET
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        made = os.urandom(32)
        with os.fdopen(fd, "wb") as f:
            f.write(made)
        return made
    for _ in range(50):  # another process made it a moment ago and is writing it
        data = path.read_bytes()
        if len(data) == 32:
            return data
        time.sleep(0.01)
    raise InfraError(f"{path} is not a 32-byte secret (remove it: a new one is made)")


def scope(image: str | None, node_modules: str | None, env: tuple[tuple[str, str], ...]) -> str:
    """What a sandbox's transforms depend on beyond its files: the image (its Jest, its Node),
    the dependencies' folder (named by the lockfile's digest: every Babel plugin's and preset's
    version) and the suite's environment variables (a Babel config may read any of them)."""
    return json.dumps([image or "", node_modules or "", sorted(env)])


def file_keys(files: dict[str, str], scope_text: str) -> dict[str, str]:
    """Each file's token: ``{relative path: hex}`` for a workspace given as {path: base64}. The
    HMAC of the path and content under a key made from ``secret()`` and ``scope_text``: equal for
    equal files in equal sandboxes of any session, and not computable without the secret."""
    key = hmac.new(secret(), b"etai-transforms\0" + scope_text.encode(), hashlib.sha256).digest()
    out = {}
    for rel, b64 in files.items():
        digest = hashlib.sha256(base64.b64decode(b64)).hexdigest()
        out[rel] = hmac.new(key, f"{rel}\0{digest}".encode(), hashlib.sha256).hexdigest()
    return out


def _valid(name: str, data: bytes) -> bool:
    """A code entry is its sha256, a newline, then the code; a map entry is kept as it is."""
    if name.endswith(".map"):
        return True
    head, _, code = data.partition(b"\n")
    return head == hashlib.sha256(code).hexdigest().encode()


def harvest(sb) -> int:
    """Copy what ``sb``'s hosts transformed into the store; return the entries added. Call it only
    on a sandbox where nothing but the pristine workspace has run. Not a Docker sandbox, or nothing
    there: 0. An entry already in the store is kept as it is (the key names its content)."""
    if getattr(sb, "kind", None) != "docker":
        return 0
    data = sb.archive(OUT)
    if not data:
        return 0
    root, added, taken = store(), 0, 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        # Maps first: a host that finds a code entry looks for its map once, then.
        for member in sorted(tar.getmembers(), key=lambda m: not m.name.endswith(".map")):
            base = os.path.basename(member.name)
            if not member.isfile() or not _NAME.match(base) or member.size > MAX_ENTRY:
                continue
            taken += member.size
            if taken > MAX_HARVEST:
                break
            target = root / base[:2] / base
            if target.exists():
                continue
            f = tar.extractfile(member)
            body = f.read() if f else b""
            if not _valid(base, body):
                continue
            # in the store's root, where store() finds what a killed process left
            tmp = root / f".{base}.{threading.get_ident()}.{os.getpid()}.tmp"
            try:
                target.parent.mkdir(mode=0o711, exist_ok=True)
                target.parent.chmod(0o711)  # not listable (store()), whatever the umask
                tmp.write_bytes(body)
                os.replace(tmp, target)  # whole or absent, for a sandbox that reads it now
            except OSError:  # a full disk: the store is a cache, the run goes on without it
                tmp.unlink(missing_ok=True)
                break
            added += 1
    return added
