"""A project's node_modules: installed once on the host from its lockfile, cached by the lockfile's
digest, and given to every sandbox of the suite read-only (never part of a workspace or its hash).

``npm ci --ignore-scripts`` runs no code of the project or of its dependencies: the install is a
download and an unpack, which is why it may happen on the host. Debian's npm is installed when the
host has none (the same idempotent step as scripts/ensure-docker)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.base.errors import InfraError, InputError
from harness.sandbox.image import cache_dir

# What the installers read besides the manifest and the lockfile (dinero's .npmrc sets
# legacy-peer-deps; .yarnrc a yarn project's registry).
INSTALL_FILES = (
    "package.json", "package-lock.json", "npm-shrinkwrap.json", ".npmrc",
    "yarn.lock", ".yarnrc", "pnpm-lock.yaml",
)  # fmt: skip
# Each lockfile with the installer that honours it, by the same rule as `npm ci`: exactly what the
# lockfile pins, an error where it does not match the manifest, no lifecycle script run. npm's own
# comes first; yarn 1 and pnpm are fetched from the npm registry by npx (the version range that
# reads that lockfile format).
_INSTALLERS = (
    ("package-lock.json", ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]),
    ("npm-shrinkwrap.json", ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]),
    ("yarn.lock", ["exec", "--yes", "--", "yarn@1", "install", "--frozen-lockfile",
                   "--ignore-scripts", "--non-interactive", "--no-progress", "--silent"]),
    # hoisted: a plain node_modules folder as npm's, not links into a store outside it
    ("pnpm-lock.yaml", ["exec", "--yes", "--", "pnpm@8", "install", "--frozen-lockfile",
                        "--ignore-scripts", "--config.node-linker=hoisted", "--reporter=silent"]),
)  # fmt: skip


def lockfile(project: Path) -> str | None:
    """The lockfile an install of ``project`` follows (None: it has none)."""
    return next((f for f, _ in _INSTALLERS if (project / f).is_file()), None)


def has_lockfile(project: Path) -> bool:
    return lockfile(project) is not None


def lockfile_digest(project: Path) -> str:
    """Digest of what decides the install: manifest, lockfile, .npmrc. InputError without a lockfile."""
    if not has_lockfile(project):
        raise InputError(
            "no package-lock.json (nor yarn.lock, pnpm-lock.yaml): an install needs a lockfile",
            where=str(project),
        )
    h = hashlib.sha256()
    for f in INSTALL_FILES:
        p = project / f
        h.update(f.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"-") + b"\0")
    return h.hexdigest()[:16]


def _npm() -> str:
    npm = shutil.which("npm")
    if npm:
        return npm
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "npm"]):
            subprocess.run(cmd, check=False, capture_output=True, env=env)
    npm = shutil.which("npm")
    if npm is None:
        raise InfraError("npm is not installed (apt-get install npm) and could not be installed")
    return npm


# A dist-tag ("latest", "next") rather than a version range: letters first, no URL, path or alias.
_DIST_TAG = re.compile(r"^[A-Za-z][\w.-]*$")


def _pin_dist_tags(folder: Path) -> list[str]:
    """Replace dist-tag specs in ``folder``'s package.json with the versions its lockfile holds.

    A tag names whatever the registry calls it today, so ``npm ci`` (npm >= 10) refuses a lockfile
    made when "latest" was older (luxon's ``documentation: latest``, locked at 14.0.1). The lockfile
    is what the project was tested with, so the install follows it; returns the names pinned."""
    manifest, lock = folder / "package.json", folder / "package-lock.json"
    if not (manifest.is_file() and lock.is_file()):
        return []
    m = json.loads(manifest.read_text())
    locked = json.loads(lock.read_text()).get("packages", {})
    pinned = []
    for section in ("dependencies", "devDependencies", "optionalDependencies"):
        for name, spec in (m.get(section) or {}).items():
            version = locked.get(f"node_modules/{name}", {}).get("version")
            if (
                isinstance(spec, str)
                and _DIST_TAG.match(spec)
                and spec not in ("x", "X")
                and version
            ):
                m[section][name] = version
                pinned.append(f"{name}@{spec}->{version}")
    if pinned:
        manifest.write_text(json.dumps(m, indent=2) + "\n")
    return pinned


def resolve_lockfile(folder: Path, *, log=lambda m: None) -> None:
    """Write a package-lock.json into ``folder`` (a suite's base snapshot) from its manifest alone.

    For a project that ships none (dinero keeps a yarn.lock upstream, not in the corpus copy): the
    versions are the registry's today, so the lockfile stays with the suite and every later install
    of it is the same. Peer dependencies are resolved as npm 6 and yarn 1 did (not installed, a
    conflict not fatal), which is what such a project was tested with; an ``.npmrc`` line tells
    ``npm ci`` the same. Only the registry's metadata is read: nothing is installed or run."""
    npmrc = folder / ".npmrc"
    lines = npmrc.read_text().splitlines() if npmrc.is_file() else []
    if not any(line.replace(" ", "").startswith("legacy-peer-deps=") for line in lines):
        npmrc.write_text("\n".join([*lines, "legacy-peer-deps=true"]) + "\n")
    log(f"resolving a lockfile for {folder} (npm install --package-lock-only, one time)")
    r = subprocess.run(
        [_npm(), "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund",
         "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )  # fmt: skip
    if r.returncode != 0 or not has_lockfile(folder):
        raise InfraError(
            f"npm could not resolve a lockfile in {folder}:\n{(r.stderr or r.stdout)[-2000:]}"
        )


def node_modules(project: Path, *, log=lambda m: None) -> Path:
    """The host folder holding ``project``'s node_modules, installed if missing (cached by digest)."""

    digest = lockfile_digest(project)
    target = cache_dir() / f"deps-{digest}"
    if (target / ".complete").is_file():
        return target / "node_modules"
    lock = lockfile(project)
    args = dict(_INSTALLERS)[lock]
    if lock == "yarn.lock" and "__metadata:" in (project / lock).read_text(errors="replace"):
        raise InputError("a yarn 2+ lockfile: only yarn 1's is installed here", where=str(project))
    log(f"installing dependencies of {project.name} ({lock}, scripts off, one time)")
    tmp = Path(tempfile.mkdtemp(prefix="deps-", dir=cache_dir()))
    try:
        for f in INSTALL_FILES:
            if (project / f).is_file():
                shutil.copy2(project / f, tmp / f)
        pinned = _pin_dist_tags(tmp)
        if pinned:
            log(f"  dist-tags pinned to the lockfile's versions: {', '.join(pinned)}")
        r = subprocess.run(
            [_npm(), *args],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )
        if r.returncode != 0:
            raise InfraError(
                f"installing {project}'s {lock} failed:\n{(r.stderr or r.stdout)[-2000:]}"
            )
        # A project without dependencies gets no node_modules from npm; the sandbox mounts one.
        (tmp / "node_modules").mkdir(exist_ok=True)
        (tmp / ".complete").write_text(digest + "\n")
        try:
            tmp.rename(target)
        except OSError:  # a concurrent install won the race; its copy is identical
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target / "node_modules"


def sandbox_limits(suite, limits):
    """``limits`` with what ``suite`` declares for its sandboxes (env, deadline, memory; node_modules
    installed now)."""

    sb = suite.sandbox
    if not sb.env and sb.node_modules is None and sb.timeout_s is None and sb.memory_mb is None:
        return limits
    nm = str(node_modules(sb.node_modules)) if sb.node_modules is not None else None
    timeout = limits.timeout_s if sb.timeout_s is None else sb.timeout_s
    memory = limits.memory_mb if sb.memory_mb is None else sb.memory_mb
    return dataclasses.replace(
        limits, env=sb.env, node_modules=nm, timeout_s=timeout, memory_mb=memory
    )
