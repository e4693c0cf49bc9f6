"""The `graphbench` command. Subcommands register themselves on `app`; library errors exit with code 2."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from graphbench import __version__
from graphbench.errors import GraphbenchError


class _ErrorHandlingGroup(TyperGroup):
    """Turns GraphbenchError into `error: <message>` on stderr and exit code 2, never a traceback."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except GraphbenchError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    name="graphbench",
    cls=_ErrorHandlingGroup,
    help="Measure what torch.compile and CUDA graphs cost and buy in LLM decoding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"graphbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """graphbench: capture ladders, compile and CUDA-graph sweeps, reports, CI gates, capacity plans."""


def main() -> None:
    """Console-script entry point."""
    app()



# Each module adds its commands to `app`. Keep their top-level imports light: no torch.
from graphbench.cli import ladder  # noqa: E402,F401
from graphbench.cli import generate  # noqa: E402,F401
from graphbench.cli import cache  # noqa: E402,F401
from graphbench.cli import run  # noqa: E402,F401
from graphbench.cli import sweep  # noqa: E402,F401
from graphbench.cli import compare_gate  # noqa: E402,F401
from graphbench.cli import tune  # noqa: E402,F401
