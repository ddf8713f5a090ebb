"""python -m xcsuite <command> [args]: runs a command of xcsuite/cli/; --help lists them."""
from __future__ import annotations

import sys
import textwrap

from xcsuite.cli import COMMANDS, run, summary


def usage() -> str:
    lines = ["usage: python -m xcsuite <command> [args]   (from the repository root; every command: docs/commands.md)", "",
             "commands (`python -m xcsuite <command> --help` describes one):"]
    for c in COMMANDS:
        text = textwrap.shorten(summary(c), 200)
        lines += textwrap.wrap(text, 100, initial_indent=f"  {c:<16} ", subsequent_indent=" " * 19)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    sys.argv[0] = f"python -m xcsuite {argv[0]}"  # argparse's prog in each command's usage line
    return run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
