"""The CLI reference page of the documentation site, generated from `etai`'s own parser
(harness.cli.build_parser) at every `mkdocs build`, so it cannot drift from `etai --help`.

Run by mkdocs-gen-files (mkdocs.yml); tests/docs/test_cli_reference.py compares each section with
the real `etai ... --help` output, at the same width."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

# argparse wraps help at the terminal's width (shutil.get_terminal_size reads COLUMNS first):
# one fixed width makes the page the same on every machine, and the test asks `etai` for it too.
WIDTH = "100"
PAGE = "reference/cli.md"


def commands() -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    """Every command path of `etai` (the top level first), depth first in the parser's order."""
    from harness.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: list[str]):
        yield path, parser
        for action in parser._actions:  # argparse has no public walk over subparsers
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])

    yield from walk(build_parser(), [])


def help_text(parser: argparse.ArgumentParser) -> str:
    """What `--help` prints for this parser, at the fixed width."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def page() -> str:
    out = [
        "# CLI reference",
        "",
        "Every command and subcommand of `etai`, as its `--help` prints it (generated from the",
        "parser in `harness/cli/__init__.py` when the site is built; commands of other packages and",
        "plug-ins come in through the `etai.commands` entry points). Exit codes: 0 ok, 1 a gate or",
        "check failed, 2 bad input, 3 infrastructure error, 130 interrupted, 143 terminated.",
        "",
    ]
    for path, parser in commands():
        name = " ".join(["etai", *path])
        out += [f"## `{name}`", "", "```text", help_text(parser).rstrip("\n"), "```", ""]
    return "\n".join(out)


if __name__ != "__main__":  # run by mkdocs-gen-files during a build
    import mkdocs_gen_files

    with mkdocs_gen_files.open(PAGE, "w") as f:
        f.write(page())
else:
    print(page())
