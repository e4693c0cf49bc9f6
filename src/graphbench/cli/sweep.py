"""`graphbench sweep`: a grid of configurations (and peers), each point in its own process."""

import json
import random
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.cli.output import console as make_console
from graphbench.cli.run import check_results_folder
from graphbench.cli.sweep_summary import print_summary
from graphbench.errors import GraphbenchError

GRID = "Grid"
CPU_BANNER = ("[bold yellow]No GPU: CUDA graphs need one.[/bold yellow] On this CPU every cudagraph mode resolves to "
              "NONE, so points that differ only in mode or ladder are one engine, measured once and listed under "
              "each label. This run shows compile start-up (cold vs warm, the compile cache), compiled vs eager "
              "tokens/s on this CPU and the padding each ladder would pay (predicted); it cannot show graph memory, "
              "capture time, replay speed or measured padding.")


def _parse_values(text: str) -> list:
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.append(int(part))
        except ValueError:
            try:
                values.append(float(part))
            except ValueError:
                values.append(part)
    return values


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
    rounds: Annotated[int, typer.Option(help="Processes per graphbench point: the samples every comparison uses (a warm start each after the first; rounds interleaved across points, shuffled).")] = 3,
    order_seed: Annotated[Optional[int], typer.Option(help="Seed of each round's shuffled point order (default: drawn, and recorded in every result).")] = None,
    aa: Annotated[bool, typer.Option("--aa", help="A/A run: the grid twice, interleaved, into RESULTS/a and RESULTS/b; prints how many verdicts compare and gate call between identical configurations.")] = False,
    prompt_kind: Annotated[Optional[str], typer.Option(help="random (default) or repeated: a 16-token span repeated (n-gram drafting finds it).")] = None,
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Table

    from graphbench.bench.sweep import build_grid, load_sweep_file, plan_rounds, run_sweep
    from graphbench.bench.sweep_parallel import parse_gpus

    gpu_ids = parse_gpus(gpus)
    if executor not in ("local", "ray"):
        raise GraphbenchError(f"--executor must be local or ray, got {executor!r}")
    if executor == "local" and ray_address is not None:
        raise GraphbenchError("--ray-address needs --executor ray")
    if executor == "ray" and gpu_ids:
        raise GraphbenchError("--gpus is for --executor local: on Ray each point asks for the GPUs it needs")

    gpu = _has_gpu(device) if executor == "local" else _cluster_has_gpu(device, ray_address)
    if gpu_ids and not gpu:
        raise GraphbenchError(f"--gpus {gpus}: no CUDA GPU is visible{' (--device cpu)' if device == 'cpu' else ''}")
    if not 0 < timeout <= 7 * 86400:  # (NaN fails this too: it would switch every timeout off)
        raise GraphbenchError(f"--timeout must be in (0, 604800] seconds, got {timeout:g}")
    for name, text in (("--levels", levels), ("--ladders", ladders)):
        if not _parse_values(text):
            raise GraphbenchError(f"{name} names nothing (got {text!r}): give at least one, e.g. --levels 2")
    if max_num_seqs is not None and max_num_seqs < 1:
        raise GraphbenchError(f"--max-num-seqs must be >= 1, got {max_num_seqs}")
    base: dict = {"model.model": model, "model.device": device}
    axes: dict[str, list] = {"level": _parse_values(levels), "ladder": _parse_values(ladders)}
    workload: dict = {}
    if sweep_file is not None:
        file_base, file_grid, workload = load_sweep_file(sweep_file)
        base.update(file_base)
        axes = dict(file_grid) or axes
    for item in grid or []:
        if "=" not in item:
            raise GraphbenchError(f"--grid must look like FIELD=v1,v2; got {item!r}")
        name, values = item.split("=", 1)
        axes[name.strip()] = _parse_values(values)
    base.setdefault("scheduler.max_num_seqs", max_num_seqs or (256 if gpu else 64))
    if max_num_seqs:
        base["scheduler.max_num_seqs"] = max_num_seqs
    peer_list = _parse_peers(peers if peers is not None else workload.pop("peers", None), gpu)
    points = build_grid(base, {k: v for k, v in axes.items() if v}, peer_list, graphs_possible=gpu)
    _check_tuned_points(points, results)
    run_values = _run_values(workload, concurrency, prompt_len, output_len, num_requests, repeats, gpu, target_repeat_s,
                             prompt_kind, lora_share)
    _check_run_values(run_values)
    run_args = [arg for key, value in run_values.items() for arg in (f"--{key}", str(value))]
    if not 1 <= rounds <= 100:
        raise GraphbenchError(f"--rounds must be in 1..100, got {rounds}")
    seed = order_seed if order_seed is not None else random.SystemRandom().randrange(2**31)
    folders = ("a", "b") if aa else ("",)
    planned = plan_rounds(points, rounds, seed, "", folders)

    console = make_console()
    if not gpu:
        console.print(CPU_BANNER)
    if dry_run:
        table = Table("#", "label", "system", "settings", "start")
        for i, p in enumerate(points, 1):
            start = f"= {p.same_as} (same engine, not run again)" if p.same_as else "cold+warm" if p.cold else "warm"
            table.add_row(str(i), p.label, p.system, p.describe(), start)
        console.print(table)
        console.print(f"[dim]{len(points)} points, {len(planned)} processes ({rounds} round(s) of each graphbench "
                      f"point{', twice: A/A' if aa else ''}; order seed {seed}); each runs: graphbench run "
                      f"{' '.join(run_args)}[/dim]")
        return
    check_results_folder(results)  # (a file, a path under /proc: refused before any point starts)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn()]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("sweep", total=len(planned))

        def started(point):
            where = f"{point.folder}/" if point.folder else ""
            step = f" round {point.round['index']}/{point.round['of']}" if point.round and point.round["of"] > 1 else ""
            progress.update(task, description=f"{where}{point.label} ({point.system}){step}")

        def done(outcome):
            progress.advance(task)
            style = {"ok": "green", "failed": "red", "same-engine": "cyan", "skipped": "dim",
                     "interrupted": "yellow"}[outcome.status]
            status = "same" if outcome.status == "same-engine" else outcome.status
            p = outcome.point
            step = f" r{p.round['index']}" if p.round and p.round["of"] > 1 else ""
            progress.console.print(f"[{style}]{status:>7}[/{style}] {p.folder + '/' if p.folder else ''}{p.label}{step}"
                                   f"{f'  {outcome.seconds:.0f} s' if outcome.seconds else ''}"
                                   f"{f'  {outcome.reason}' if outcome.reason else ''}")

        with _stop_on_signals() as received:
            result = run_sweep(points, results, run_args, timeout_s=timeout, resume=resume, on_start=started,
                               on_done=done, gpus=gpu_ids, executor=executor, ray_address=ray_address,
                               rounds=rounds, seed=seed, folders=folders)
    if not any(o.status in ("ok", "failed", "same-engine", "skipped") for o in result.outcomes):
        console.print("[yellow]interrupted before any point finished: no report[/yellow]")
        raise typer.Exit(128 + (received[0] if received else signal.SIGINT))
    if aa:
        _aa_summary(console, results)
        _write_report(console, results / "a", report or results / "report")
    else:
        print_summary(console, results)
        _write_report(console, results, report or results / "report")
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
    (results / "aa.json").write_text(json.dumps(check.to_dict(), indent=1) + "\n")
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


def _has_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _cluster_has_gpu(device: str, address: Optional[str]) -> bool:
    """Whether the sweep's points get GPUs on the Ray cluster (the grid's CUDA-graph rules follow it)."""
    from graphbench.bench.sweep_ray import connect

    return device != "cpu" and any(count > 0 for count in connect(address).values())


def _parse_peers(text, gpu: bool) -> list[str]:
    if text is None:
        # the peer in its fastest configuration (transformers' static cache + torch.compile); hf-eager on request
        return ["hf-compile"] if gpu else []
    if isinstance(text, list):
        return text
    return [] if text.strip().lower() in ("", "none") else [p.strip() for p in text.split(",") if p.strip()]


def _check_tuned_points(points: list, results: Path) -> None:
    """A tuned:N ladder is tuned from batch sizes measured before it: in this sweep or in the folder."""
    from graphbench.reports.store import load_results

    first = next((i for i, p in enumerate(points) if p.tuned_graphs is not None), None)
    if first is None or any(p.system == "graphbench" and p.tuned_graphs is None for p in points[:first]):
        return
    if results.is_dir() and any(r.get("status") == "ok" and r.get("system") == "graphbench"
                                for r in load_results([results]).results):
        return
    raise GraphbenchError(f"{points[first].label}: a tuned:N ladder is tuned from the batch sizes measured before it; "
                          "put a default or interactivity ladder first (--ladders default,tuned:N)")


def _check_run_values(values: dict[str, str]) -> None:
    """What each point's `graphbench run` would reject, rejected now (before any point starts)."""
    from graphbench.cli.run import build_workloads, check_measure_options

    def number(key: str, kind):
        try:
            return kind(values[key]) if key in values else None
        except ValueError:
            raise GraphbenchError(f"--{key} must be a number, got {values[key]!r}") from None

    check_measure_options(number("repeats", int), number("target-repeat-s", float))
    build_workloads(values.get("concurrency"), values.get("request-rate"), None, values["prompt-len"],
                    values["output-len"], number("num-requests", int), 0, number("num-requests-per-concurrency", int) or 4,
                    values.get("prompt-kind", "random"), values.get("lora-share"))


def _run_values(workload: dict, concurrency, prompt_len, output_len, num_requests, repeats: int, gpu: bool,
                target_repeat_s: float | None = None, prompt_kind: str | None = None,
                lora_share: str | None = None) -> dict[str, str]:
    """Each point's `graphbench run` workload options (flag name -> value), defaults filled in: the
    default traffic (bench/workloads.py) unless closed-loop levels or rates were given."""
    from graphbench.bench.workloads import default_traffic

    traffic = default_traffic(gpu)
    if target_repeat_s is None:
        target_repeat_s = workload.get("target_repeat_s", 0.0)
    closed = concurrency or workload.get("concurrency")
    rates = workload.get("request_rate")
    if not closed and not rates:
        closed, rates = traffic.concurrency, traffic.request_rate
    values = {
        "concurrency": closed,
        "prompt-len": prompt_len or workload.get("prompt_len") or traffic.prompt_len,
        "output-len": output_len or workload.get("output_len") or traffic.output_len,
        "repeats": str(workload.get("repeats", repeats)),
        "target-repeat-s": f"{float(target_repeat_s):g}",
    }
    if isinstance(values["concurrency"], list):
        values["concurrency"] = ",".join(map(str, values["concurrency"]))
    if not values["concurrency"]:
        del values["concurrency"]
    if num_requests or workload.get("num_requests"):
        values["num-requests"] = str(num_requests or workload["num_requests"])
    else:
        values["num-requests-per-concurrency"] = str(traffic.requests_per_concurrency)
    if rates:
        values["request-rate"] = ",".join(map(str, rates)) if isinstance(rates, list) else str(rates)
    kind = prompt_kind or workload.get("prompt_kind")
    if kind and kind != "random":
        values["prompt-kind"] = kind
    shares = lora_share or workload.get("lora_share")
    if shares:
        values["lora-share"] = ",".join(map(str, shares)) if isinstance(shares, list) else str(shares)
    return {key: str(value) for key, value in values.items()}


def _write_report(console, results: Path, out: Path) -> None:
    try:
        from graphbench.reports.report import write_report
    except ImportError:
        console.print("[dim]report module not available; results are in the folder above[/dim]")
        return
    written = write_report([results], out)
    console.print(f"report: {getattr(written, 'html', out)}")
