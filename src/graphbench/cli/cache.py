"""`graphbench cache list|clear|diff`: the on-disk torch.compile cache (docs/MACHINERY.md §1.6).

Entries live under <cache_root>/torch_compile_cache/<hash>/ (cache root: GRAPHBENCH_CACHE_ROOT,
default ~/.cache/graphbench). No torch import: listing, clearing and diffing must start fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from graphbench import env
from graphbench.cli.output import confirm_or_exit
from graphbench.cli.output import console as make_console
from graphbench.errors import GraphbenchError
from graphbench.runner.compile.cache_diff import FactorSet, diff_factors, factor_set
from graphbench.runner.compile.cache import (
    CACHE_SUBDIR,
    CacheEntry,
    cache_root,
    clear_entries,
    clear_kernel_choices,
    kernel_choice_files,
    kernel_choice_summary,
    kernel_choices_dir,
    list_entries,
    select_entries,
)

FORMATS = ("table", "json")

cache_app = typer.Typer(
    name="cache",
    help="List, clear or diff the on-disk torch.compile cache.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# its line in `graphbench --help` (cli/main.py adds cache_app under this help)
CACHE_HELP = f"List, clear or diff the on-disk torch.compile cache ({env.CACHE_ROOT}, default {env.DEFAULT_CACHE_ROOT})."


def human_size(num_bytes: int) -> str:
    """1023 -> '1023 B', 1536 -> '1.5 KiB', 5 * 2**20 -> '5.0 MiB'."""
    if num_bytes < 1024:
        return f"{num_bytes} B"
    value = float(num_bytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def local_time(epoch: float | None) -> str:
    """Creation time as local time, '?' when the entry has no (readable) metadata."""
    if epoch is None:
        return "?"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(epoch)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _plural(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _entry_dict(entry: CacheEntry) -> dict[str, object]:
    return {
        "hash": entry.hash,
        "path": str(entry.path),
        "size_bytes": entry.size_bytes,
        "size": human_size(entry.size_bytes),
        "created": entry.created,
        "created_local": local_time(entry.created),
        "summary": entry.summary,
    }


@cache_app.command("list")
def list_command(
    output_format: Annotated[str, typer.Option("--format", help="table|json.")] = "table",
) -> None:
    """Every compile-cache entry: hash, size, creation time and the config it was compiled for; then each GPU's
    kernel choices (their file and how many models' shapes they hold)."""
    if output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}")
    entries = list_entries()
    base = cache_root() / CACHE_SUBDIR
    total = sum(e.size_bytes for e in entries)
    choices = [kernel_choice_summary(p) for p in kernel_choice_files()]
    if output_format == "json":
        typer.echo(json.dumps({"root": str(base), "entries": [_entry_dict(e) for e in entries],
                               "total_bytes": total, "kernel_choices": choices}))
        return
    if not entries:
        typer.echo(f"compile cache is empty: no entries under {base}")
        _echo_kernel_choices(choices)
        return

    from rich.table import Table
    from rich.text import Text

    console = make_console(soft_wrap=False)
    typer.echo(f"compile cache: {base}")  # (a table's title folds a root longer than the table at its width)
    table = Table()
    table.add_column("hash", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("config", overflow="fold")
    for e in entries:
        table.add_row(Text(e.hash), human_size(e.size_bytes), local_time(e.created), Text(e.summary))
    console.print(table)
    typer.echo(f"total: {_plural(len(entries))}, {human_size(total)} ({total} bytes)")
    _echo_kernel_choices(choices)


def _echo_kernel_choices(choices: list[dict]) -> None:
    """Each GPU's timed kernel choices (loaded by any cold start of the same model shapes there)."""
    for c in choices:
        models = "unreadable" if c["models"] is None else f"{c['models']} model{'' if c['models'] == 1 else 's'}"
        typer.echo(f"kernel choices: {c['file']} ({models})")


@cache_app.command("clear")
def clear_command(
    hashes: Annotated[
        list[str] | None,
        typer.Argument(help="Entries to remove, by hash or unique hash prefix (see `graphbench cache list`); none: all."),
    ] = None,
    all_entries: Annotated[
        bool, typer.Option("--all", help="Remove every entry (the default when no hash is given).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove compile-cache entries (all of them: the kernel choices each GPU timed too). Asks first unless
    --yes; a declined confirmation exits 1, an unanswered one (no terminal, no --yes) exits 2."""
    hashes = list(hashes or [])
    if hashes and all_entries:
        raise GraphbenchError("give entry hashes or --all, not both")
    selected = select_entries(hashes)
    choices = [] if hashes else kernel_choice_files()  # all: each GPU's timed kernel choices too
    base = cache_root() / CACHE_SUBDIR
    if not selected and not choices:
        typer.echo(f"compile cache is empty: nothing to remove under {base}")
        return
    total = sum(e.size_bytes for e in selected)
    if not yes:
        _confirm_clear(selected, choices, base, total)
    removed = clear_entries([e.hash for e in selected]) if selected else []
    left = [e for e in removed if e.path.exists()]
    for e in removed:
        if e not in left:
            typer.echo(f"removed {e.hash} ({human_size(e.size_bytes)})")
    if selected:
        freed = sum(e.size_bytes for e in removed if e not in left)
        typer.echo(f"freed {human_size(freed)} ({freed} bytes) from {_plural(len(removed) - len(left))}")
    choices_left = clear_kernel_choices(choices)
    if len(choices) > len(choices_left):
        typer.echo(f"removed {_timed_on(len(choices) - len(choices_left))} ({kernel_choices_dir()})")
    if left or choices_left:
        raise GraphbenchError(f"could not remove {', '.join([str(e.path) for e in left] + list(map(str, choices_left)))}")


def _confirm_clear(selected: list[CacheEntry], choices: list[Path], base: Path, total: int) -> None:
    what = [f"{_plural(len(selected))}, {human_size(total)}"] if selected else []
    if selected:
        typer.echo(f"will remove {_plural(len(selected))} from {base}:")
        for e in selected:
            typer.echo(f"  {e.hash}  {human_size(e.size_bytes)}  {e.summary}")
    if choices:  # timed again at each GPU's next cold start
        typer.echo(f"will remove {_timed_on(len(choices))} ({kernel_choices_dir()})")
        what.append("the kernel choices")
    confirm_or_exit(f"remove {' and '.join(what)}?", declined="aborted: nothing removed")


def _timed_on(count: int) -> str:
    """(one file per GPU, launch mode and kernel sources)"""
    plural = "" if count == 1 else "s"
    return f"the kernel choices of {count} GPU{plural} and launch mode{plural}"


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _side(name: str, side: FactorSet) -> str:
    what = f"entry {side.label} ({side.path})" if side.kind == "entry" else f"config {side.label} (for this machine)"
    extra = "; ".join(x for x in (side.summary, side.device_name and f"on {side.device_name}") if x)
    return f"{name}: {what}" + (f": {extra}" if extra else "")


@cache_app.command("diff")
def diff_command(
    a: Annotated[str, typer.Argument(help="A cache entry (hash, unique hash prefix or its directory) or an "
                                     "engine config (TOML, as `run --config` takes).")],
    b: Annotated[str, typer.Argument(help="The other entry or config.")],
    output_format: Annotated[str, typer.Option("--format", help="table|json.")] = "table",
) -> None:
    """The compile-cache hash factors that differ between A and B: which flag or version made a start cold."""
    if output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}")
    left, right = factor_set(a), factor_set(b)
    diffs = diff_factors(left, right)
    if output_format == "json":
        typer.echo(json.dumps({"a": left.to_dict(), "b": right.to_dict(), "identical": not diffs,
                               "differences": [{"factor": d.name, "a": d.a, "b": d.b} for d in diffs]}))
        return
    typer.echo(_side("A", left))
    typer.echo(_side("B", right))
    for note in dict.fromkeys([*left.notes, *right.notes]):
        typer.echo(f"note: {note}")
    if not diffs:
        typer.echo("identical: no hash factor differs (a start of one loads the other's entry)")
        return
    rows = [(d.name, _value(d.a), _value(d.b)) for d in diffs]
    widths = [max(len(r[i]) for r in [("factor", "A", "B"), *rows]) for i in range(3)]
    for row in [("factor", "A", "B"), *rows]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if left.device_name != right.device_name and left.device_name and right.device_name:
        typer.echo(f"devices: {left.device_name} vs {right.device_name} (not a factor itself; it sets the defaults above)")
