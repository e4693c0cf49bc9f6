"""`graphbench run`: one configuration, one fresh process, one result file."""

from typing import Annotated, Optional

import typer

from graphbench.ascii_numbers import ascii_float
from graphbench.bench.workloads import GPU_TRAFFIC
from graphbench.cli.engine_options import parse_int_list, with_engine_options
from graphbench.cli.engine_report import kernel_choices_line, precompiled_note, variants_line
from graphbench.cli.output import console as make_console
from graphbench.cli.paths import cannot_create
from graphbench.config import EngineConfig
from graphbench.errors import GraphbenchError

WORKLOAD = "Workload options"


def refuse_empty(*options: tuple[str, Optional[str]]) -> None:
    """An option given an empty value (`--request-rate ""`, an unset shell variable) is an error, never
    read as the option left out (which runs the default traffic)."""
    for option, text in options:
        if text is not None and not text.strip():
            raise GraphbenchError(f"{option} is empty (got {text!r}): give a value (see --help), or leave the option out")


def build_workloads(concurrency: Optional[str], request_rate: Optional[str], trace: Optional[str], prompt_len: str,
                    output_len: str, num_requests: Optional[int], seed: int,
                    per_concurrency: int = GPU_TRAFFIC.requests_per_concurrency, prompt_kind: str = "random",
                    lora_shares: str | None = None) -> list:
    """The workloads a run measures: closed-loop levels, Poisson rates, a trace. None of the three
    given: the default traffic (GPU_TRAFFIC's levels and rate); rates or a trace alone: only those."""
    from graphbench.bench.workloads import LengthDist, Workload, load_trace

    prompt, output = LengthDist.parse(prompt_len, "--prompt-len"), LengthDist.parse(output_len, "--output-len")
    if num_requests is not None and num_requests < 1:
        raise GraphbenchError(f"--num-requests must be >= 1, got {num_requests}")
    if per_concurrency < 1:
        raise GraphbenchError(f"--num-requests-per-concurrency must be >= 1, got {per_concurrency}")
    refuse_empty(("--request-rate", request_rate), ("--trace", trace), ("--lora-share", lora_shares))
    common = dict(prompt_len=prompt, output_len=output, num_requests=num_requests, seed=seed, prompt_kind=prompt_kind)
    if concurrency is None and not (request_rate or trace):
        concurrency, request_rate = GPU_TRAFFIC.concurrency, GPU_TRAFFIC.request_rate
    levels = parse_int_list(concurrency, "--concurrency") or []
    bad = [c for c in levels if c < 1]
    if bad:
        raise GraphbenchError(f"--concurrency levels must be >= 1, got {bad[0]}")
    workloads = [Workload(kind="closed", concurrency=c, **dict(common, num_requests=num_requests or per_concurrency * c))
                 for c in levels]
    for text in request_rate.split(",") if request_rate else []:
        try:
            rate = ascii_float(text)
        except ValueError:  # (an empty part too, as --concurrency 1,,2 is refused)
            raise GraphbenchError(f"--request-rate must be numbers like 2,8.5; got {request_rate!r}") from None
        if not rate > 0:
            raise GraphbenchError(f"--request-rate must be > 0, got {text.strip()}")
        workloads.append(Workload(kind="poisson", request_rate=rate, **common))
    if trace:
        load_trace(trace)  # a missing or malformed trace fails now, not after the other workloads
        workloads.append(Workload(kind="trace", trace=trace, seed=seed))
    if not workloads:
        raise GraphbenchError("no workload: give --concurrency, --request-rate or --trace")
    if lora_shares:
        import dataclasses

        shares = []
        for text in lora_shares.split(","):
            try:
                shares.append(ascii_float(text))
            except ValueError:
                raise GraphbenchError(f"--lora-share must be numbers in [0, 1] like 0,0.5,1; got {text!r}") from None
        workloads = [dataclasses.replace(w, lora_share=share) for w in workloads for share in shares]
    names = [w.name for w in workloads]  # one workload twice: a result that counts its repeats as two processes
    if twice := next((n for i, n in enumerate(names) if n in names[:i]), None):
        raise GraphbenchError(f"workload {twice} is given twice (--concurrency, --request-rate and --lora-share "
                              "values repeated, or equal as shown): give each value once")
    return workloads


MAX_REPEATS = 1000
MAX_TARGET_REPEAT_S = 3600.0


def check_measure_options(repeats: int, target_repeat_s: float) -> None:
    """--repeats and --target-repeat-s, checked before anything starts (run and sweep)."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise GraphbenchError(f"--repeats must be in 1..{MAX_REPEATS}, got {repeats}")
    if not 0 <= target_repeat_s <= MAX_TARGET_REPEAT_S:  # (NaN fails this too)
        raise GraphbenchError(f"--target-repeat-s must be in 0..{MAX_TARGET_REPEAT_S:g} seconds, got {target_repeat_s}")


def check_lengths(workloads: list, max_model_len: int) -> None:
    """No request of these workloads may exceed the model's context (prompt + output)."""
    for workload in workloads:
        if workload.kind == "trace":
            from graphbench.bench.workloads import load_trace

            longest = max(r.prompt_len + r.output_len for r in load_trace(workload.trace))
            given = f"trace {workload.trace} has a request of {longest} tokens"
        else:
            longest = workload.prompt_len.max() + workload.output_len.max()
            given = (f"--prompt-len {workload.prompt_len.text()} + --output-len {workload.output_len.text()} "
                     f"reach {longest} tokens")
        if longest > max_model_len:
            raise GraphbenchError(f"{given}, over max_model_len {max_model_len} (--max-model-len)")


def check_lora_shares(workloads: list, config: EngineConfig,
                      give: str = "--lora-modules NAME=PATH or dummy:r=RANK") -> None:
    """A workload with a LoRA share needs adapters to share: refused before the start-up, not at its first request."""
    shared = next((w for w in workloads if w.lora_share), None)
    if shared is not None and not config.lora.enabled:
        raise GraphbenchError(f"--lora-share {shared.lora_share:g} (workload {shared.name}) needs adapters: give "
                              f"{give}, or leave --lora-share out")


def check_text_prompts(prompt_kind: str, model: str) -> None:
    """Text prompts need the checkpoint's tokenizer: checked before a start-up that may take minutes."""
    if prompt_kind == "text":
        from graphbench.checkpoints.text import load_text

        load_text(model)


def check_results_folder(path) -> None:
    """The results folder can be created (or is one) before any measurement starts. Not the current folder
    (what `--results ''` becomes): every JSON below it would be read as results, the repository's included."""
    from pathlib import Path

    folder = Path(path)
    try:
        resolved = folder.resolve()
    except (OSError, RuntimeError) as exc:  # a link that points at itself ("Symlink loop"), an unreadable parent
        raise GraphbenchError(f"results folder {folder}: {exc}") from None
    if str(path).strip() in ("", ".") or resolved == Path.cwd().resolve():
        raise GraphbenchError("--results is empty or the current folder: name a folder for the results "
                              "(default: results)")
    blocked = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise GraphbenchError(f"results folder {folder}: {blocked} exists and is not a folder")
    # tried, not made: the result's writer makes it, so a run refused later (a bad checkpoint) leaves none
    existing = next(p for p in [folder, *folder.parents] if p.exists() or p == p.parent)
    why = cannot_create(existing, "file" if existing == folder else "folder")
    if why:
        what = f"write into the results folder {folder}" if existing == folder else f"create the results folder {folder}"
        raise GraphbenchError(f"cannot {what}: {why} in {existing}: name a folder you can write (--results)")


@with_engine_options
def run(
    engine_config: EngineConfig,
    concurrency: Annotated[Optional[str], typer.Option(help="Closed-loop concurrency levels (default 1,6,64 and a Poisson rate of 64/s, unless --request-rate or --trace).", rich_help_panel=WORKLOAD)] = None,
    request_rate: Annotated[Optional[str], typer.Option(help="Poisson open-loop rates (requests/s), e.g. 2,8.", rich_help_panel=WORKLOAD)] = None,
    trace: Annotated[Optional[str], typer.Option(help="Replay a trace: JSONL (arrival_s, prompt_len, output_len), or a `vllm bench serve --save-result --save-detailed` result (its requests at their start_times).", rich_help_panel=WORKLOAD)] = None,
    prompt_len: Annotated[str, typer.Option(help="Prompt tokens per request: 128, uniform:64-256 or normal:128,32 (drawn per request, seeded).", rich_help_panel=WORKLOAD)] = GPU_TRAFFIC.prompt_len,
    output_len: Annotated[str, typer.Option(help="Output tokens per request (same forms).", rich_help_panel=WORKLOAD)] = GPU_TRAFFIC.output_len,
    num_requests: Annotated[Optional[int], typer.Option(help="Requests per workload (default 3 x concurrency; Poisson 32).", rich_help_panel=WORKLOAD)] = None,
    num_requests_per_concurrency: Annotated[int, typer.Option(help="Closed loop: requests = this x concurrency, unless --num-requests.", rich_help_panel=WORKLOAD)] = GPU_TRAFFIC.requests_per_concurrency,
    workload_seed: Annotated[int, typer.Option(help="Seed of the request lengths and prompts.", rich_help_panel=WORKLOAD)] = 0,
    prompt_kind: Annotated[str, typer.Option(help="random token ids; repeated: a 16-token span repeated (n-gram drafting finds it); text: real text (the standard library's sources) through the checkpoint's tokenizer, outputs ending at its eos.", rich_help_panel=WORKLOAD)] = "random",
    lora_share: Annotated[Optional[str], typer.Option(help="Fractions of requests with a LoRA adapter, e.g. 0,0.5,1: each workload once per share (needs --lora-modules).", rich_help_panel=WORKLOAD)] = None,
    repeats: Annotated[int, typer.Option(help="Measured repeats per workload, after a warm-up.")] = 3,
    target_repeat_s: Annotated[float, typer.Option(help="Closed loops: when a pass of the requests is shorter, each repeat runs a multiple of them to last about this many seconds, e.g. 1 (0: off; off with --num-requests).")] = 0.0,
    cold: Annotated[bool, typer.Option("--cold/--warm", help="--cold: clear this config's compile cache, start cold, then start again warm.")] = False,
    results: Annotated[str, typer.Option(help="Results folder.")] = "results",
    label: Annotated[Optional[str], typer.Option(help="Point label (default from the config).")] = None,
    system: Annotated[str, typer.Option(help="graphbench, or a peer: hf-eager, hf-compile.")] = "graphbench",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    stands_for: Annotated[Optional[str], typer.Option(hidden=True, help="Sweep: other labels of this very engine.")] = None,
    same_engine_reason: Annotated[str, typer.Option(hidden=True, help="Sweep: why they are this engine.")] = "",
    sweep_identity: Annotated[Optional[str], typer.Option(hidden=True, help="Sweep: the point's identity (JSON), for --resume.")] = None,
    sweep_round: Annotated[Optional[str], typer.Option(hidden=True, help="Sweep: which round (process) of the point this is (JSON).")] = None,
) -> None:
    """Measure one configuration: start-up (cold and/or warm), then each workload with repeats."""
    from graphbench.bench.point import PointSpec, run_point

    check_measure_options(repeats, target_repeat_s)
    workloads = build_workloads(concurrency, request_rate, trace, prompt_len, output_len, num_requests, workload_seed,
                                num_requests_per_concurrency, prompt_kind, lora_share)
    resolved = engine_config.resolve()
    check_lengths(workloads, max_model_len(resolved))
    check_results_folder(results)
    if system == "graphbench":  # the checkpoint's files, names, shapes: before the start-up's progress lines
        check_lora_shares(workloads, resolved)
        from graphbench.runner.device import resolve_device
        from graphbench.runner.loader import check_start_inputs  # (imports torch)

        check_start_inputs(resolved)
        resolve_device(resolved.model.device)  # --device cuda without one: before the start's progress line
    check_text_prompts(prompt_kind, engine_config.model.model)
    if num_requests is not None:
        target_repeat_s = 0.0  # the request count was given: measure exactly that
    console = make_console(stderr=True, quiet=quiet)
    sweep = _sweep_record(sweep_identity, sweep_round)
    if system in ("hf-eager", "hf-compile"):
        from graphbench.bench.peers import run_peer_point

        label = label or system
        model = resolved.model
        path = run_peer_point(system, model.model, model.dtype, model.device, workloads, repeats, label, results,
                              model.seed, progress=lambda message: console.print(f"[dim]{label}: {message}[/dim]"),
                              target_repeat_s=target_repeat_s, sweep=sweep)
        _print_summary(path)
        return
    if system != "graphbench":
        raise GraphbenchError(f"unknown --system {system!r}; choose from graphbench, hf-eager, hf-compile")
    # the label a sweep gives the same point (sweep_grid.point_label)
    label = label or f"O{resolved.optimization_level}_{resolved.compilation.performance_mode}"
    spec = PointSpec(engine_config, workloads, label, repeats, ("cold", "warm") if cold else ("warm",),
                     target_repeat_s=target_repeat_s,
                     stands_for=[x for x in (stands_for or "").split(",") if x], same_engine_reason=same_engine_reason,
                     sweep=sweep)
    path = run_point(spec, results, progress=lambda message: console.print(f"[dim]{label}: {message}[/dim]"))
    _print_summary(path)


def _sweep_record(identity: Optional[str], round_info: Optional[str]) -> dict:
    """What a sweep tells its point's process (JSON options): recorded in the result's `sweep`."""
    import json

    sweep = {}
    for key, text in (("identity", identity), ("round", round_info)):
        try:
            if text:
                sweep[key] = json.loads(text)
        except (ValueError, RecursionError):
            raise GraphbenchError(f"--sweep-{key} must be JSON, got {text[:80]!r}") from None
    return sweep


def max_model_len(config: EngineConfig) -> int:
    """The context a resolved config runs with: --max-model-len, else the model's max_position_embeddings."""
    from graphbench.config import load_arch

    return config.scheduler.max_model_len or load_arch(config.model.model).max_position_embeddings


def _print_summary(path) -> None:
    import json

    from rich.table import Table

    data = json.loads(path.read_text())
    console = make_console()
    for line in _startup_lines(data):
        console.print(line)
    table = Table("workload", "output tok/s", "spread", "TTFT p50 ms", "TPOT p50 ms", "TPOT p99 ms", "padding %", "eager")

    def cell(m, key, fmt):
        return format(m[key]["median"], fmt) if key in m else "-"

    for w in data["workloads"]:
        m = w["summary"]
        table.add_row(w["name"], cell(m, "output_tokens_per_s", ".0f"), f"{m['output_tokens_per_s']['spread_pct']:.1f}%",
                      cell(m, "ttft_p50_ms", ".1f"), cell(m, "tpot_p50_ms", ".2f"), cell(m, "tpot_p99_ms", ".2f"),
                      cell(m, "padding_waste_pct", ".1f"), cell(m, "eager_fraction", ".0%"))
    console.print(table)
    console.print(f"[dim]result: {path}[/dim]")


def _startup_lines(data: dict) -> list[str]:
    """The summary's start-up: a peer's load and first call (it records no compile or capture of its own:
    bench/peers.py); graphbench's compile, capture and graph memory, with --cold for the cold start and the warm one."""
    head = (f"[bold]{data['label']}[/bold] ({data['system']}) {data['model']} on "
            f"{data['environment'].get('gpu') or 'cpu'}: ")
    s = data["startup"]
    if data["system"] != "graphbench":
        return [head + f"start-up {s['total_s']:.1f} s (load {s.get('load_s', s['total_s']):.1f} s; the first call, "
                f"its compile included, {s.get('first_call_s', 0.0):.1f} s)"]
    starts = data.get("startups") or [s]
    lines = []
    for one in starts:  # with --cold: the cold start, then the warm one the workloads ran on
        kind = ("cold " if one.get("cold") else "warm ") if len(starts) > 1 else ""
        compiled = sum(float(one.get(key) or 0.0) for key in ("dynamo_s", "inductor_s", "compile_sizes_s", "loaded_s"))
        lines.append(f"{kind}start-up {one['total_s']:.1f} s (compile {compiled:.1f} s, capture "
                     f"{float(one.get('capture_s') or 0.0):.1f} s{precompiled_note(one.get('capture_precompiled') or [0, 0.0])}, "
                     f"graph memory {float(one.get('graph_memory_bytes') or 0) / 2**30:.2f} GiB), mode "
                     f"{(one.get('cudagraph_mode') or {}).get('resolved', '-')}")
        lines += [line for line in (variants_line(one.get("static_variants") or {}),
                                    kernel_choices_line(one.get("kernel_choices") or {})) if line]
    return [head + lines[0]] + lines[1:]
