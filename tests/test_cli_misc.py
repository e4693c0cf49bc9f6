"""CLI wiring shared by every command: help without arguments, aborts and confirmation prompts."""

from __future__ import annotations

import click
import pytest
import typer
from typer.testing import CliRunner

from graphbench.cli.main import _ErrorHandlingGroup, app
from graphbench.cli.output import ABORTS, confirm_or_exit

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


# --- no arguments: the help, once ------------------------------------------------------------


@pytest.mark.parametrize("args", [[], ["cache"]], ids=["graphbench", "graphbench-cache"])
def test_no_arguments_prints_the_help_once(args: list[str]) -> None:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("Usage:") == 1
    assert result.stderr == ""
    assert result.stdout.rstrip() == runner.invoke(app, [*args, "--help"], env=WIDE).stdout.rstrip()


# --- aborts: one line, exit 1, never a traceback ---------------------------------------------


def test_both_abort_classes_are_handled() -> None:
    # typer >= 0.20 vendors click: typer.Abort is not click.exceptions.Abort, and prompts raise typer's.
    assert typer.Abort in ABORTS and click.exceptions.Abort in ABORTS


def _scratch_app() -> typer.Typer:
    """An app with graphbench's error handling and commands that abort or ask."""
    scratch = typer.Typer(cls=_ErrorHandlingGroup, add_completion=False, pretty_exceptions_enable=False)

    @scratch.command("typer-abort")
    def typer_abort() -> None:
        raise typer.Abort()

    @scratch.command("click-abort")
    def click_abort() -> None:
        raise click.exceptions.Abort()

    @scratch.command("ask")
    def ask() -> None:
        confirm_or_exit("go on?", declined="aborted: nothing done")
        typer.echo("done")

    return scratch


@pytest.mark.parametrize("command", ["typer-abort", "click-abort"])
def test_an_abort_is_one_line_and_exit_1(command: str) -> None:
    result = runner.invoke(_scratch_app(), [command])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    assert result.stderr == "aborted\n"


@pytest.mark.parametrize(
    ("answer", "code", "lines"),
    [
        ("y\n", 0, ["go on? [y/N]: y", "done"]),
        ("n\n", 1, ["go on? [y/N]: n", "aborted: nothing done"]),
        ("\n", 1, ["go on? [y/N]: ", "aborted: nothing done"]),
        ("", 2, ["go on? [y/N]: ", "aborted: nothing done (no answer; use --yes when not interactive)"]),
    ],
    ids=["yes", "no", "default", "no-answer"],
)
def test_confirm_or_exit(answer: str, code: int, lines: list[str]) -> None:
    result = runner.invoke(_scratch_app(), ["ask"], input=answer)
    assert result.exit_code == code, result.output
    assert result.stdout.splitlines() == lines
    assert result.stderr == ""
    if code:
        assert isinstance(result.exception, SystemExit), result.exception
