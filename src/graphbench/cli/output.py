"""The rich console the commands print with, and the one way a command asks for confirmation."""

from __future__ import annotations

import importlib
import sys

# Rich draws tables to the terminal's width, and to 80 columns when the output is not a terminal (CI
# logs, `| tee`), where it cuts labels to "O2_de…": a wide fixed width there keeps tables whole.
PIPE_WIDTH = 200

NOT_INTERACTIVE_HINT = "use --yes when not interactive"


def console(stderr: bool = False, **options):
    """A rich Console on stdout (or stderr), full width when that is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    options.setdefault("highlight", False)
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH, **options)


def _abort_classes() -> tuple[type[BaseException], ...]:
    """Every "abort" exception a prompt may raise. Recent typer vendors click and raises its own
    typer.Abort, unrelated to click.exceptions.Abort (plain click, still installed alongside)."""
    classes: list[type[BaseException]] = []
    for module_name in ("typer", "typer.exceptions", "typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, "Abort", None)
        if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in classes:
            classes.append(cls)
    return tuple(classes)


ABORTS: tuple[type[BaseException], ...] = _abort_classes()


def confirm_or_exit(question: str, *, declined: str, hint: str = NOT_INTERACTIVE_HINT) -> None:
    """Ask `question [y/N]` and return on yes. No prints `declined` and exits 1. No answer at all
    (stdin not a terminal and empty, as in CI, or Ctrl-C / Ctrl-D at the prompt) prints
    `declined (no answer; <hint>)` on a line of its own and exits 2, a usage error (the hint says what
    to give): never a traceback."""
    import typer

    try:
        answer = typer.confirm(question, default=False)
    except ABORTS:
        typer.echo()  # end the prompt's line: nothing was typed after it
        typer.echo(f"{declined} (no answer; {hint})")
        raise typer.Exit(2) from None
    if not answer:
        typer.echo(declined)
        raise typer.Exit(1)
