"""The `graphbench` command: the app, its error handling (library errors exit with code 2), and the
subcommands, registered here from the command modules (which know nothing of the app)."""

from __future__ import annotations

import sys
import typing
from pathlib import Path

import typer
from typer.core import TyperGroup

try:  # recent typer vendors its own click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on plain click
    from click import exceptions as click_exceptions

from graphbench import __version__, env
# The command modules: keep their top-level imports light (no torch).
from graphbench.cli import cache, compare_gate, convert, curve, generate, ladder, report_plan, run, sweep, tune
from graphbench.cli.output import ABORTS
from graphbench.errors import GraphbenchError

_NO_ARGS_IS_HELP = getattr(click_exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
# commands that read no variable run whatever the environment says (the ladder: a quick look)
_NO_ENVIRONMENT = {"ladder"}


def _takes_paths(param) -> bool:
    """Whether an option's values are paths (Path, Optional[Path], list[Path]: typer's annotation, or click's
    path type where typer gives none)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return getattr(getattr(param, "type", None), "name", "") == "path"
    pending = [descriptor.annotation]
    while pending:
        annotation = pending.pop()
        if annotation is Path:
            return True
        pending += typing.get_args(annotation)
    return False


def _refuse_empty_paths(command, args: list[str]) -> None:
    """A path given as "" (`-o "$OUT"` with OUT unset) is an error: the parser would read it as ".", the current
    folder, and write or read there."""
    params = list(getattr(command, "params", ()))
    valued = {opt: _takes_paths(p) for p in params if p.param_type_name == "option" and not getattr(p, "is_flag", False)
              for opt in p.opts}
    path_arguments = any(p.param_type_name == "argument" and _takes_paths(p) for p in params)
    option = None  # the option whose value the next argument is
    for arg in args:
        name, eq, value = arg.partition("=")
        if option is not None:
            what, empty, option = option, valued[option] and not arg.strip(), None
        elif name in valued:
            if not eq:
                option = name
                continue
            what, empty = name, valued[name] and not value.strip()
        else:
            what, empty = "a path argument", path_arguments and not arg.strip()
        if empty:
            raise click_exceptions.UsageError(f"{what} is empty (an unset variable?): give a path, or '.' for the "
                                              f"current folder")


class _ErrorHandlingGroup(TyperGroup):
    """Bad input, ours (GraphbenchError) or the parser's, becomes one `error: ...` line and exit code 2."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except GraphbenchError as exc:
            typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
            raise typer.Exit(2) from None
        except OSError as exc:
            # A path the user named that the checks let through (a name too long, a full disk, a file
            # under /proc that cannot be read): the system's one-line reason, not a traceback.
            where = f": {exc.filename}" if exc.filename else ""
            typer.echo(f"error: {' '.join((exc.strerror or str(exc)).split())}{where}", err=True)
            raise typer.Exit(2) from None

    def resolve_command(self, ctx, args):  # type: ignore[override]
        """The command, and (unless it reads no variable, or asks for its help) every GRAPHBENCH_* variable
        checked before it starts: a bad value is one error line even where nothing would read it (PDL on the
        CPU); a name graphbench does not read is a warning."""
        name, command, rest = super().resolve_command(ctx, args)
        _refuse_empty_paths(command, rest)
        if name not in _NO_ENVIRONMENT and not set(ctx.help_option_names) & set(rest):
            for unknown in env.check_all():
                typer.echo(f"warning: {unknown} is not a variable graphbench reads (it reads "
                           f"{', '.join(env.KNOWN)}): it changes nothing", err=True)
        return name, command, rest

    def main(self, *args, standalone_mode: bool = True, **kwargs):  # type: ignore[override]
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _NO_ARGS_IS_HELP as exc:
            # Building the exception rendered the help already: with rich, get_help() prints it and returns
            # "" (so the message is empty); without rich, the help text is the message. Print it once.
            help_text = exc.format_message()
            if help_text:
                typer.echo(help_text)
            code = 0
        except click_exceptions.UsageError as exc:
            hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            typer.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
            code = 2
        except click_exceptions.ClickException as exc:
            typer.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
            code = exc.exit_code
        except ABORTS:  # typer's own Abort and click's: not related classes (commands that ask catch theirs)
            typer.echo("aborted", err=True)
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


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


# in the order `graphbench --help` lists them
app.command("ladder")(ladder.ladder_command)
app.command("generate")(generate.generate)
app.command("convert")(convert.convert_command)
app.add_typer(cache.cache_app, name="cache", help=cache.CACHE_HELP)
app.command("run")(run.run)
app.command("sweep")(sweep.sweep)
app.command("compare")(compare_gate.compare_command)
app.command("gate")(compare_gate.gate_command)
app.command("report")(report_plan.report_command)
app.command("plan")(report_plan.plan_command)
app.command("tune")(tune.tune_command)
app.command("curve")(curve.curve_command)


def main() -> None:
    """Console-script entry point."""
    from graphbench.bytecode import keep_bytecode
    from graphbench.errors import GraphbenchError
    from graphbench.runner.compile.cache import cache_root

    try:
        root = cache_root()
    except GraphbenchError:  # a command that uses the cache says why, in one line; --version, ladder, ... run
        root = None
    if root is not None:
        keep_bytecode(root)  # before any command imports torch (bytecode.py says why)
    app()
