"""`graphbench sweep`: a grid of configurations (and peers), each point in its own process."""

import json
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.cli.output import console as make_console
from graphbench.cli.paths import check_output_folder
from graphbench.cli.run import check_results_folder, refuse_empty
from graphbench.cli.sweep_summary import print_summary
from graphbench.errors import GraphbenchError
from graphbench.files import write_atomic

GRID = "Grid"
CPU_BANNER = ("[bold yellow]No GPU: CUDA graphs need one.[/bold yellow] On this CPU every cudagraph mode resolves to "
              "NONE, so points that differ only in mode or ladder are one engine, measured once and listed under "
              "each label. This run shows compile start-up (cold vs warm, the compile cache), compiled vs eager "
              "tokens/s on this CPU and the padding each ladder would pay (predicted); it cannot show graph memory, "
              "capture time, replay speed or measured padding.")


def sweep(
    model: Annotated[str, typer.Option("--model", "-m", help="Preset or checkpoint folder.")] = "tiny-llama",
    levels: Annotated[str, typer.Option(help="-O levels to sweep.", rich_help_panel=GRID)] = "0,1,2,3",
    ladders: Annotated[str, typer.Option(help="Capture ladders: default, interactivity, tuned:N (N graphs tuned to the batch sizes measured before it).", rich_help_panel=GRID)] = "default,interactivity",
    grid: Annotated[Optional[list[str]], typer.Option("--grid", "-g", help="More axes: FIELD=v1,v2 (e.g. max_num_seqs=64,256).", rich_help_panel=GRID)] = None,
    sweep_file: Annotated[Optional[Path], typer.Option("--sweep-file", help="TOML with \\[base], \\[grid], \\[workload] tables and peers.", rich_help_panel=GRID)] = None,
    peers: Annotated[Optional[str], typer.Option(help="hf-compile (default on the GPU: transformers at its fastest), hf-eager; 'none' to skip. Peers run in the first round only.")] = None,
    device: Annotated[str, typer.Option(help="auto, cuda or cpu.")] = "auto",
    concurrency: Annotated[Optional[str], typer.Option(help="Closed-loop levels (default 1,6,64 and a Poisson rate of 64/s; CPU 1,3,12 and 100/s).")] = None,
    prompt_len: Annotated[Optional[str], typer.Option(help="Prompt length, drawn per request (default uniform:64-192; CPU uniform:32-96).")] = None,
    output_len: Annotated[Optional[str], typer.Option(help="Output length, drawn per request (default uniform:32-72; CPU uniform:8-24).")] = None,
    num_requests: Annotated[Optional[int], typer.Option(help="Requests per workload (default 3 x concurrency; CPU 2 x; Poisson 32).")] = None,
    repeats: Annotated[int, typer.Option(help="Repeats per workload in each round (within-process spread only).")] = 2,
    rounds: Annotated[Optional[int], typer.Option(help="Processes per graphbench point: the samples every comparison uses (a warm start each after the first; rounds interleaved across points, shuffled). Default 3 on a GPU, 5 on a CPU (shared hosts have shown whole processes ~15% slow).")] = None,
    order_seed: Annotated[Optional[int], typer.Option(help="Seed of each round's shuffled point order (default: drawn, and recorded in every result).")] = None,
    aa: Annotated[bool, typer.Option("--aa", help="A/A run: the grid twice, interleaved, into RESULTS/a and RESULTS/b; prints how many verdicts compare and gate call between identical configurations.")] = False,
    prompt_kind: Annotated[Optional[str], typer.Option(help="random (default); repeated: a 16-token span repeated (n-gram drafting finds it); text: real text through the checkpoint's tokenizer, outputs ending at its eos.")] = None,
    lora_share: Annotated[Optional[str], typer.Option(help="LoRA shares, e.g. 0,0.5,1: each workload once per share (points need --grid lora_modules=... or a [base] lora_modules).")] = None,
    target_repeat_s: Annotated[Optional[float], typer.Option(help="Closed loops: a repeat runs a multiple of the requests to last about this many seconds, e.g. 1 (default 0: off; adds ~70 s to the default H200 sweep).")] = None,
    max_num_seqs: Annotated[Optional[int], typer.Option(help="Engine max_num_seqs (default 256; CPU 64).")] = None,
    results: Annotated[Path, typer.Option(help="Results folder.")] = Path("results"),
    report: Annotated[Optional[Path], typer.Option("--report", "-o", help="Report folder (default RESULTS/report).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per point before it is stopped and recorded as failed.")] = 1200,
    resume: Annotated[bool, typer.Option(help="Skip points that already have an ok result.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the points and exit.")] = False,
    gpus: Annotated[Optional[str], typer.Option(help="Spread points over these GPU ids in parallel, e.g. 0,1 (one point per GPU, or per TP group, at a time).")] = None,
    executor: Annotated[str, typer.Option(help="local (this host), or ray: each point a Ray task asking for its tensor-parallel size in GPUs (pip install -e \".\\[ray]\").")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="With --executor ray: the head node's HOST:PORT (e.g. 10.0.0.1:6379), or auto (the cluster `ray start` started on this machine); default RAY_ADDRESS, else a new Ray on this machine.")] = None,
) -> None:
    """Sweep -O levels x capture ladders (x any config field) with peers; write results and a report."""
    from graphbench.bench.sweep_folder import check_folder_takes
    from graphbench.bench.sweep_lock import check_unlocked
    from graphbench.bench.sweep_options import SweepRequest, plan_sweep

    refuse_empty(("--concurrency", concurrency), ("--prompt-len", prompt_len), ("--output-len", output_len),
                 ("--prompt-kind", prompt_kind), ("--lora-share", lora_share))  # (`run` refuses them too)
    plan = plan_sweep(SweepRequest.from_options(locals()))
    _check_run_values(plan.run_values, plan.points)
    if not dry_run:  # refused before anything is printed or made: the results' folder (a file, under /proc),
        check_results_folder(results)  # then the report's (it was first used after the last point)
        check_output_folder(report or results / "report")
        check_folder_takes(results, plan.points)  # (another model's results there: one report would mix them)
        check_unlocked(results)  # (another sweep writing there)
    else:  # a dry run foresees the refusal its run would meet in the folder (it reads, makes nothing)
        check_folder_takes(results, plan.points)
    console = make_console()
    if not plan.gpu:
        console.print(CPU_BANNER)
    if dry_run:
        _print_plan(console, plan, plan.rounds, aa)
        return
    result, received = _run_with_progress(console, plan, results, timeout, resume, executor, ray_address,
                                          plan.rounds)
    if not any(o.status in ("ok", "failed", "same-engine", "skipped") for o in result.outcomes):
        console.print("[yellow]interrupted before any point finished: no report[/yellow]")
        raise typer.Exit(128 + (received[0] if received else signal.SIGINT))
    if aa:
        _aa_summary(console, results)
    else:
        print_summary(console, results)
    _write_report(console, results / "a" if aa else results, report or results / "report")
    _exit_for(console, result, received)


def _print_plan(console, plan, rounds: int, aa: bool) -> None:
    """--dry-run: the points and what each process runs."""
    from rich.table import Table

    table = Table("#", "label", "system", "settings", "start")
    for i, p in enumerate(plan.points, 1):
        start = f"= {p.same_as} (same engine, not run again)" if p.same_as else "cold+warm" if p.cold else "warm"
        table.add_row(str(i), p.label, p.system, p.describe(), start)
    console.print(table)
    processes = sum(1 for p in plan.planned if p.same_as is None)  # a label measured once for another runs none
    console.print(f"[dim]{len(plan.points)} points, {processes} processes ({rounds} round(s) of each graphbench "
                  f"point{', twice: A/A' if aa else ''}; order seed {plan.seed}); each runs: graphbench run "
                  f"{' '.join(plan.run_args)}[/dim]")
    if plan.gpu and (rounds > 1 or aa):
        console.print("[dim]before the points: a kernel search apart for each round after the first"
                      f"{' and for the second copy' if aa else ''} (5-35 s each; not on Ray)[/dim]")


def _point_text(point) -> str:
    where = f"{point.folder}/" if point.folder else ""
    step = f" r{point.round['index']}" if point.round and point.round["of"] > 1 else ""
    return f"{where}{point.label}{step}"


def _run_with_progress(console, plan, results: Path, timeout: float, resume: bool, executor: str,
                       ray_address: Optional[str], rounds: int):
    """run_sweep with a progress bar and one line per finished process; (result, signals received)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from graphbench.bench.sweep import run_sweep

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn()]
    styles = {"ok": "green", "failed": "red", "same-engine": "cyan", "skipped": "dim", "interrupted": "yellow"}
    with Progress(*columns, console=console) as progress:
        # the bar counts processes that run: a same-engine label or a point --resume keeps runs none, and counted
        # as done in no time they made the ETA say seconds with minutes left
        to_run = [sum(1 for p in plan.planned if p.same_as is None)]
        task = progress.add_task("sweep", total=to_run[0])

        def started(point):
            progress.update(task, description=f"{_point_text(point)} ({point.system})")
            if not progress.console.is_terminal:  # a CI log gets no bar: say what runs through a long silence
                progress.console.print(f"  start {_point_text(point)} ({point.system})")

        def done(outcome):
            if outcome.status == "interrupted":  # not measured: the bar keeps counting what was
                progress.update(task, description="interrupted")
            elif outcome.status == "skipped":  # measured before (--resume): no process ran
                to_run[0] = max(0, to_run[0] - 1)
                progress.update(task, total=to_run[0])
            elif outcome.status != "same-engine":
                progress.advance(task)
            style, status = styles[outcome.status], "same" if outcome.status == "same-engine" else outcome.status
            progress.console.print(f"[{style}]{status:>7}[/{style}] {_point_text(outcome.point)}"
                                   f"{f'  {outcome.seconds:.0f} s' if outcome.seconds else ''}"
                                   f"{f'  {outcome.reason}' if outcome.reason else ''}")

        with _stop_on_signals() as received:
            result = run_sweep(plan.points, results, plan.run_args, timeout_s=timeout, resume=resume,
                               on_start=started, on_done=done, gpus=plan.gpu_ids, executor=executor,
                               ray_address=ray_address, rounds=rounds, seed=plan.seed, folders=plan.folders,
                               search_rounds=plan.gpu, on_search=lambda line: progress.console.print(f"[dim]{line}[/dim]"))
    return result, received


def _exit_for(console, result, received: list[int]) -> None:
    """Failed points (exit 1 when none was measured), an interruption (exit 128 + signal)."""
    if result.num_failed:
        console.print(f"[red]{result.num_failed} point(s) failed; see the report's Failures section[/red]")
        if not any(o.status in ("ok", "skipped") for o in result.outcomes) and not result.interrupted:
            console.print("[red]no point was measured[/red]")
            raise typer.Exit(1)
    if result.interrupted:
        left = sum(o.status == "interrupted" for o in result.outcomes)
        console.print(f"[yellow]interrupted: {left} point(s) not measured; the report covers the others. "
                      f"The same command with --resume measures the rest.[/yellow]")
        raise typer.Exit(128 + (received[0] if received else signal.SIGINT))


def _aa_summary(console, results: Path) -> None:
    """The A/A verdicts: compare and gate between the two identical copies of the grid."""
    from graphbench.reports.aa import aa_check

    check = aa_check(results / "a", results / "b")
    write_atomic(results / "aa.json", json.dumps(check.to_dict(), indent=1) + "\n")
    style = "green" if check.false_alarms == 0 else "red"
    console.print(f"[{style}]A/A: {check.summary()}[/{style}]")
    for line in check.alarms[:20]:
        console.print(f"  {line}")
    console.print(f"[dim]written: {results / 'aa.json'}[/dim]")


@contextmanager
def _stop_on_signals():
    """SIGINT/SIGTERM (Ctrl-C, a CI job's time limit) stop the sweep cleanly: running points are killed,
    and what finished still gets its summary and report. Yields the list of signals received."""
    from graphbench.bench.sweep import request_stop

    received: list[int] = []

    def handler(signum, _frame):
        received.append(signum)
        request_stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _check_run_values(values: dict[str, str], points) -> None:
    """What each point's `graphbench run` would reject, rejected now (before any point starts)."""
    from graphbench.bench.sweep_grid import nest_overrides
    from graphbench.cli.run import (
        build_workloads,
        check_lengths,
        check_lora_shares,
        check_measure_options,
        max_model_len,
    )
    from graphbench.config import config_from_dict
    from graphbench.runner.loader import check_start_inputs

    def number(key: str, kind):
        try:
            return kind(values[key]) if key in values else None
        except ValueError:
            raise GraphbenchError(f"--{key} must be a number, got {values[key]!r}") from None

    check_measure_options(number("repeats", int), number("target-repeat-s", float))
    workloads = build_workloads(values.get("concurrency"), values.get("request-rate"), None, values["prompt-len"],
                                values["output-len"], number("num-requests", int), 0,
                                number("num-requests-per-concurrency", int) or 4, values.get("prompt-kind", "random"),
                                values.get("lora-share"))
    checked: set = set()
    for point in points:  # what each run checks before its start (else: every point fails, the sweep exits 1)
        if (key := json.dumps(point.overrides, sort_keys=True, default=str)) in checked:
            continue
        checked.add(key)
        config = config_from_dict(nest_overrides(point.overrides), source="sweep point").resolve()
        weights = (repr(config.model), repr(config.lora), config.compilation.mode, point.system)  # what it reads
        try:
            check_lengths(workloads, max_model_len(config))  # against its model's context
            if point.system == "graphbench":
                check_lora_shares(workloads, config, "--grid lora_modules=... or a [base] lora_modules")
            if point.system == "graphbench" and weights not in checked:
                checked.add(weights)
                check_start_inputs(config)  # its checkpoint, adapters, compile cache root
        except GraphbenchError as exc:
            raise GraphbenchError(f"sweep point {point.label}: {exc}") from None


def _write_report(console, results: Path, out: Path) -> None:
    try:
        from graphbench.reports.report import write_report
    except ImportError:
        console.print("[dim]report module not available; results are in the folder above[/dim]")
        return
    written = write_report([results], out)
    console.print(f"report: {getattr(written, 'html', out)}")
