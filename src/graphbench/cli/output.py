"""The rich console the commands print with."""

from __future__ import annotations

import sys

# Rich draws tables to the terminal's width, and to 80 columns when the output is not a terminal (CI
# logs, `| tee`), where it cuts labels to "O2_de…": a wide fixed width there keeps tables whole.
PIPE_WIDTH = 200


def console(stderr: bool = False, **options):
    """A rich Console on stdout (or stderr), full width when that is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    options.setdefault("highlight", False)
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH, **options)
