"""`etai`: a thin command line over the Python API. The only place errors become exit codes.

Exit codes: 0 success, 1 a gate or check failed, 2 bad input (nothing run or written),
3 infrastructure error (Docker, image, server), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from harness.base.errors import EtaiError
from harness.base.interrupts import interrupted, sigterm_as_interrupt
from harness.base.registry import Registry
from harness.cli.outputs import check_outputs

Handler = Callable[[argparse.Namespace], int]


def _image_build(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.sandbox import image

    tag = image.build(base=args.base, force=args.force, log=lambda m: print(m, file=sys.stderr))
    print(tag)
    return 0


def _image_tag(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.sandbox import image

    print(image.image_tag())
    return 0


def _sandbox_prune(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.sandbox import provider

    removed = provider(args.sandbox).prune(all_owners=args.all)
    print(f"removed {len(removed)} sandbox(es)" + (": " + ", ".join(removed) if removed else ""))
    return 0


def _sandbox_list(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.sandbox import SANDBOXES

    for name, p in SANDBOXES.items():
        left = p.leftovers()
        print(
            f"{name}: {p.description}; {len(left)} sandbox(es) left"
            + "".join(f"\n  {n}" for n in left)
        )
    return 0


def _sandbox_check(args: argparse.Namespace) -> int:
    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.tools import conformance

    def show(r) -> None:
        print(
            f"{'ok  ' if r.ok else 'FAIL'}  {r.name} ({r.seconds:.1f} s)"
            + ("" if r.ok else f": {r.detail}"),
            flush=True,
        )

    results = conformance.run_all(args.name, on_result=show)
    failed = [r.name for r in results if not r.ok]
    print(f"{args.name}: {len(results) - len(failed)} of {len(results)} conformance checks passed")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="etai",
        description="Execution-aware evaluation of coding agents: replay IDE sessions in hardened "
        "Docker sandboxes and score Path Accuracy@k, pass@k and cursor error.",
        epilog="Exit codes: 0 ok, 1 gate/check failed, 2 bad input, 3 infrastructure error, "
        "130 interrupted, 143 terminated (SIGTERM).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    img = sub.add_parser("image", help="build or name the sandbox image").add_subparsers(
        dest="sub", required=True
    )
    b = img.add_parser(
        "build", help="build the sandbox image offline (debootstrap base + Jest); no-op if current"
    )
    b.add_argument(
        "--base",
        help="build on this base instead of the local debootstrap one "
        "(e.g. node:20-bookworm-slim where a registry is reachable)",
    )
    b.add_argument("--force", action="store_true", help="rebuild even if the digest tag exists")
    b.set_defaults(func=_image_build)
    img.add_parser("tag", help="print the tag the current recipe builds").set_defaults(
        func=_image_tag
    )

    sb = sub.add_parser("sandbox", help="inspect or clean up sandboxes").add_subparsers(
        dest="sub", required=True
    )
    pr = sb.add_parser("prune", help="remove sandboxes left by dead processes")
    pr.add_argument("--all", action="store_true", help="remove every ETAI sandbox, also live ones")
    pr.add_argument("--sandbox", default="docker", help="which implementation (default docker)")
    pr.set_defaults(func=_sandbox_prune)
    sb.add_parser("list", help="list sandbox implementations and what each has left").set_defaults(
        func=_sandbox_list
    )
    ck = sb.add_parser(
        "check",
        help="run the conformance checks against an implementation; exit 1 if one fails",
        description="Start sandboxes of NAME on small Node projects and check what every backend "
        "must do: exec, deadlines, output caps, file confinement, Jest results, "
        "warm-host isolation, close. A plug-in backend is checked the same way.",
    )
    ck.add_argument("name", help="a registered implementation (see `etai sandbox list`)")
    ck.set_defaults(func=_sandbox_check)

    # the command's code, imported when it runs: `etai --help` stays fast
    from harness.cli import run as cli_run

    cli_run.add_parsers(sub)
    for _, add_parsers in COMMANDS.items():
        add_parsers(sub)
    return p


# Subcommands from other packages (humaneval, train, report: see pyproject.toml) and from plug-ins:
# entry points in the group etai.commands, each a function that adds its parsers to the
# subparsers it is given. The CLI thus imports no other package by name, and none imports it.
COMMANDS = Registry("command", group="etai.commands")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_outputs(args)  # files and folders a command writes at its end, before its work
        with sigterm_as_interrupt():  # SIGTERM stops as Ctrl-C does (harness/base/interrupts.py)
            return int(args.func(args) or 0)
    except EtaiError as e:
        print(f"etai: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        return interrupted(e)
