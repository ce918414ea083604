"""The sandbox image: its recipe, content digest and offline build.

The image is named by a digest of everything that goes into it (Dockerfile, runner, lockfile, base
recipe, Node version), so a result row can name the exact image and a rebuild happens only when
the recipe changed. No registry is assumed: the base is a debootstrap rootfs ``docker import``ed
locally (see recipe/build-base.sh); Jest comes from the host's ``npm ci`` of the committed lockfile.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from harness.base.errors import InfraError

RECIPE = Path(__file__).parent / "recipe"
NODE_VERSION = "20.20.2"
DEBIAN_SUITE = "bookworm"
REPO = "etai-sandbox"
BASE_REPO = "etai-base"
_RUNNER_FILES = (
    "package.json",
    "package-lock.json",
    "runner.js",
    "jest-host.js",
    "jest-warm.js",
    "guard.js",
    "guard-lockdown.js",
    "guard-framework.js",
    "file-sig.js",
    "warm-template.js",
    "transform-cache.js",
    "test-support.js",
    "code-cache.js",
    "code-cache-build.js",
    "sealed.js",
    "fork.cc",
)
_DEPS_FILES = ("package.json", "package-lock.json")


def cache_dir() -> Path:
    d = Path(os.environ.get("ETAI_CACHE", Path.home() / ".cache" / "etai"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _node_package() -> str:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine()
    )
    if arch is None:
        raise InfraError(f"no Node build for this processor ({platform.machine()})")
    return f"node-linux-{arch}@{NODE_VERSION}"


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()


def base_digest() -> str:
    return _digest(
        [(RECIPE / "build-base.sh").read_bytes(), _node_package().encode(), DEBIAN_SUITE.encode()]
    )


def recipe_digest() -> str:
    """Digest of the whole recipe; the image tag is its first 12 hex digits."""
    parts = [base_digest().encode(), (RECIPE / "Dockerfile").read_bytes()]
    parts += [(RECIPE / "runner" / f).read_bytes() for f in _RUNNER_FILES]
    return _digest(parts)


def image_tag() -> str:
    return f"{REPO}:{recipe_digest()[:12]}"


def base_tag() -> str:
    return f"{BASE_REPO}:{base_digest()[:12]}"


def _run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    except FileNotFoundError as e:
        raise InfraError(f"{what}: {cmd[0]} is not installed") from e
    except subprocess.CalledProcessError as e:
        tail = (e.stderr or e.stdout or "").strip()[-2000:]
        raise InfraError(f"{what} failed (exit {e.returncode}):\n{tail}") from e


def runner_dir() -> Path:
    """The runner with Jest installed (``npm ci`` of the lockfile), cached by content digest.

    The docker image copies it in; the ``local`` sandbox runs it straight from here. ``node_modules``
    is installed once per lockfile and shared by the runner folders of every script version.
    """
    digest = _digest([(RECIPE / "runner" / f).read_bytes() for f in _RUNNER_FILES])[:12]
    target = cache_dir() / f"runner-{digest}"
    if (target / "node_modules" / "jest").is_dir():
        return target
    deps = _runner_deps()
    tmp = Path(tempfile.mkdtemp(prefix="runner-", dir=cache_dir()))
    for f in _RUNNER_FILES:
        shutil.copy2(RECIPE / "runner" / f, tmp / f)
    (tmp / "node_modules").symlink_to(deps / "node_modules", target_is_directory=True)
    _compile_fork(tmp)
    try:
        tmp.rename(target)
    except OSError:  # a concurrent build won the race; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _compile_fork(folder: Path) -> None:
    """``fork.node`` from ``fork.cc``, against the headers of the image's own Node: runner.js then
    forks Jest hosts from a warm one (docs/sandbox.md#forked-hosts). Without a C compiler, or where
    the compile fails, the runner starts every host itself, as a slower but equal fallback."""
    cc = shutil.which("c++") or shutil.which("g++")
    if cc is None:
        return
    include = cache_dir() / "node" / f"include-{NODE_VERSION}"
    if not (include / "node" / "node_api.h").exists():
        tmp = Path(tempfile.mkdtemp(prefix="include-", dir=cache_dir()))
        with tarfile.open(_node_tarball()) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/include/node/")]
            for m in members:
                m.name = m.name[len("package/include/") :]
            tar.extractall(tmp, members=members, filter="data")
        try:
            tmp.rename(include)
        except OSError:  # a concurrent build won the race
            shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(
        [
            cc,
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-O2",
            "-I",
            str(include / "node"),
            "-o",
            str(folder / "fork.node"),
            str(folder / "fork.cc"),
        ],
        capture_output=True,
        check=False,
    )


def _runner_deps() -> Path:
    digest = _digest([(RECIPE / "runner" / f).read_bytes() for f in _DEPS_FILES])[:12]
    target = cache_dir() / f"runner-deps-{digest}"
    if (target / "node_modules" / "jest").is_dir():
        return target
    tmp = Path(tempfile.mkdtemp(prefix="runner-deps-", dir=cache_dir()))
    for f in _DEPS_FILES:
        shutil.copy2(RECIPE / "runner" / f, tmp / f)
    _run(
        ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
        "npm ci of the sandbox runner",
        cwd=tmp,
    )
    try:
        tmp.rename(target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _node_tarball() -> Path:
    d = cache_dir() / "node"
    d.mkdir(exist_ok=True)
    name = _node_package().replace("@", "-") + ".tgz"
    if not (d / name).exists():
        _run(["npm", "pack", _node_package(), "--pack-destination", str(d)], "npm pack of Node")
    return d / name


def _debian_mirror() -> str:
    src = Path("/etc/apt/sources.list.d/debian.sources")
    if src.exists():
        for line in src.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    return "http://deb.debian.org/debian"


def docker_client(timeout: int = 120):
    import docker  # lazy: `import harness` stays cheap

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as e:  # docker raises several unrelated types here
        raise InfraError(f"no Docker engine answers ({e}); run scripts/ensure-docker") from e


def _has_image(client, tag: str) -> bool:
    # docker SDK: imported by what starts containers, not by `import harness`
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build(*, base: str | None = None, force: bool = False, log=print) -> str:
    """Build the sandbox image if its digest tag is missing; return the tag.

    ``base`` overrides the offline base (e.g. ``node:20-bookworm-slim`` where a registry answers).
    """
    client = docker_client(timeout=600)
    tag = (
        image_tag()
        if base is None
        else f"{REPO}:{recipe_digest()[:12]}-{hashlib.sha256(base.encode()).hexdigest()[:6]}"
    )
    if not force and _has_image(client, tag):
        log(f"image {tag} is up to date")
        return tag
    if base is None:
        base = base_tag()
        if force or not _has_image(client, base):
            if os.geteuid() != 0 or not shutil.which("debootstrap"):
                raise InfraError(
                    "building the base image needs root and debootstrap (apt-get install debootstrap)"
                )
            log(f"building base {base} with debootstrap (about a minute, one time)")
            _run(
                ["sh", str(RECIPE / "build-base.sh"), base, str(_node_tarball()), _debian_mirror()],
                "base image build",
            )
    log(f"building {tag}")
    with tempfile.TemporaryDirectory(prefix="etai-ctx-") as ctx:
        shutil.copy2(RECIPE / "Dockerfile", Path(ctx) / "Dockerfile")
        shutil.copytree(
            runner_dir(), Path(ctx) / "runner", symlinks=False
        )  # node_modules is a link here
        try:
            client.images.build(
                path=ctx,
                tag=tag,
                buildargs={"BASE": base},
                rm=True,
                forcerm=True,
                pull=False,
                labels={"etai.recipe": recipe_digest()},
            )
        except Exception as e:
            raise InfraError(f"docker build of {tag} failed: {e}") from e
    log(f"built {tag}")
    return tag


def ensure_image(log=lambda *_: None) -> str:
    """The current image's tag, building it first if needed."""
    return build(log=log)
