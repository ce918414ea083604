"""The site's CLI reference (generated from the parser by scripts/docs_cli.py at build) says exactly
what `etai ... --help` prints, for every command and subcommand; the commands are found by asking
the real `etai`, not the parser the page was made from."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

ETAI = str(Path(sys.executable).parent / "etai")
WIDTH = "100"  # scripts/docs_cli.py's WIDTH: argparse wraps at the terminal's width


def real_help(path: list[str]) -> str:
    p = subprocess.run(
        [ETAI, *path, "--help"],
        env={**os.environ, "COLUMNS": WIDTH},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def subcommands(text: str) -> list[str]:
    """The subcommands a --help lists: `{a,b} ...` in its usage (an option's choices are `{a,b}`
    without the dots), or the names under a COMMAND metavar (the top level's)."""
    usage = text.split("\n\n", 1)[0]
    if m := re.search(r"\{([\w,-]+)\} \.\.\.", usage):
        return m.group(1).split(",")
    if " COMMAND ..." in usage:
        block = text.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
        return re.findall(r"^    (\w[\w-]*)", block, flags=re.M)
    return []


def page_sections(site: Path) -> dict[str, str]:
    """`etai ...` heading -> the text of the code block under it, as a reader sees it."""
    page = (site / "reference" / "cli" / "index.html").read_text()
    found = re.findall(
        r"<h2 id=[^>]*><code>(etai[^<]*)</code>.*?<pre>(.*?)</pre>", page, flags=re.S
    )
    return {name: html.unescape(re.sub(r"<[^>]+>", "", block)) for name, block in found}


def test_the_cli_reference_matches_every_help_of_the_real_etai(site: Path):
    sections = page_sections(site)
    todo, helps = [[]], {}
    while todo:
        path = todo.pop(0)
        assert len(path) < 4, path  # a subcommand found in an option's choices would recurse
        helps[" ".join(["etai", *path])] = text = real_help(path)
        todo += [[*path, sub] for sub in subcommands(text)]
    assert {"etai suite mine", "etai sandbox check", "etai gate", "etai image build"} <= set(helps)
    assert len(helps) >= 15
    assert sorted(sections) == sorted(helps)
    for name, text in helps.items():
        assert sections[name].rstrip("\n") == text.rstrip("\n"), name


def test_the_check_sees_a_help_that_differs(site: Path):
    """What a drifted page looks like to the comparison above: a changed option's help differs."""
    sections = page_sections(site)
    real = real_help(["gate"])
    assert sections["etai gate"].rstrip("\n") == real.rstrip("\n")
    assert sections["etai gate"].replace("--baseline", "--base") != real.rstrip("\n")
