"""The sandbox image: digest tagging, no-op rebuilds, and what is inside."""

from __future__ import annotations

import shutil

import pytest

from harness import sandbox
from harness.sandbox import Status, image
from harness.sandbox.image import NODE_VERSION


def test_tag_is_a_digest_of_the_whole_recipe(tmp_path, monkeypatch):
    before = image.image_tag()
    copy = tmp_path / "recipe"
    shutil.copytree(image.RECIPE, copy, ignore=shutil.ignore_patterns("node_modules"))
    monkeypatch.setattr(image, "RECIPE", copy)
    assert image.image_tag() == before
    for f in ("Dockerfile", "build-base.sh", "runner/runner.js", "runner/package-lock.json"):
        original = (copy / f).read_text()
        (copy / f).write_text(original + "\n")
        assert image.image_tag() != before, f"{f} is not part of the digest"
        (copy / f).write_text(original)
    monkeypatch.setattr(image, "NODE_VERSION", "20.0.0")
    assert image.image_tag() != before


@pytest.mark.docker
def test_build_is_a_no_op_when_current(image):
    from harness.sandbox import image as im

    said = []
    assert im.build(log=said.append) == image
    assert said == [f"image {image} is up to date"]


@pytest.mark.docker
def test_image_holds_node_jest_git_python_and_a_non_root_user(image, project):
    with sandbox.start("docker", project, image=image) as sb:
        r = sb.exec(
            [
                "sh",
                "-c",
                "node --version; git --version; python3 --version; id -u; "
                "node -p \"require('/opt/etai/node_modules/jest/package.json').version\"",
            ]
        )
    assert r.status == Status.PASSED
    node, git, py, uid, jest = r.stdout.split("\n")[:5]
    assert (
        node == f"v{NODE_VERSION}"
        and git.startswith("git version 2.")
        and py.startswith("Python 3.11")
    )
    assert uid == "10001" and jest == "29.7.0"
