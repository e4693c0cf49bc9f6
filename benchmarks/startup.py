"""Start-up cost: cold vs warm compile, and capture time / graph memory per cudagraph mode.

    python benchmarks/startup.py --model llama-3.2-1b --max-num-seqs 256 --out startup.json

Each start is a fresh process. The compile cache root is a fresh folder, so the first -O2
start is cold and the second warm; a changed factor (max_num_seqs) must get a new directory.
The first -O2 start also times the projections' kernel choices; a later start whose entry is new (a new
hash: max_num_seqs, -O3) loads them from the GPU's shared store under the same root, as a user's next
config would (runner/kernel_choice_store.py): each row's "kernel choices" says measured, loaded or shared.
"""

from __future__ import annotations

import time

SCRIPT_STARTED = time.time()  # (wall clock: the parent compares it with its launch time)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402


def worker(args: argparse.Namespace) -> None:
    from graphbench.bytecode import keep_bytecode
    from graphbench.runner.compile.cache import cache_root

    keep_bytecode(cache_root())  # as the `graphbench` command does first

    torch_imported = time.time()
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine
    from preflight import context_for

    overrides = {"model.model": args.model, "optimization_level": args.level,
                 "scheduler.max_num_seqs": args.max_num_seqs, "scheduler.max_num_batched_tokens": 8192,
                 "scheduler.max_model_len": context_for(args.model, 4096), "cache.gpu_memory_utilization": 0.5}
    if args.mode:
        overrides["compilation.cudagraph_mode"] = args.mode
    started, engine_started = time.perf_counter(), time.time()
    profiler = None
    if args.profile:  # the engine's start under cProfile (a start of its own: its figures are not the table's)
        import cProfile

        from cprofile_report import write_cprofile

        profiler = cProfile.Profile()
        profiler.enable()
    engine = Engine(load_engine_config(overrides=overrides))
    if profiler is not None:
        profiler.disable()
        write_cprofile(profiler, args.profile, limit=60)
    report = dict(vars(engine.report), wall_seconds=time.perf_counter() - started, script_started=SCRIPT_STARTED,
                  torch_imported=torch_imported, engine_started=engine_started, engine_ready=time.time())
    print("RESULT " + json.dumps(report), flush=True)


def print_warm_variants(runs: list[dict | None]) -> None:
    """Per side of the warm-start A/B: the median launch-to-ready, engine and capture seconds over its rounds."""
    import statistics

    sides: dict[str, list[dict]] = {}
    for r in runs:
        if r and "variant" in r:
            sides.setdefault(r["variant"], []).append(r)
    for name, rs in sides.items():
        ready, engine, capture = ([x[k] for x in rs] for k in ("ready_seconds", "wall_seconds", "capture_seconds"))
        print(f"O2 warm {'+' + name if name else '(base)':<16} {len(rs)} starts: ready {statistics.median(ready):5.2f} s "
              f"({min(ready):.2f}-{max(ready):.2f}), engine {statistics.median(engine):5.2f}, capture "
              f"{statistics.median(capture):5.2f}", flush=True)


def start(args, label: str, level: int, mode: str | None, max_num_seqs: int, env: dict,
          profile: str | None = None) -> dict | None:
    cmd = [sys.executable, __file__, "--worker", "--model", args.model, "--level", str(level),
           "--max-num-seqs", str(max_num_seqs)] + (["--mode", mode] if mode else []) + (["--profile", profile] if profile else [])
    launched = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    process_seconds = time.time() - launched  # interpreter, imports, the engine's start, exit
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        print(f"{label}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", flush=True)
        return None
    report = json.loads(lines[-1][7:])
    # the process outside the engine: the interpreter's start, `import torch`, graphbench's modules, exit
    report.update(label=label, level=level, requested_mode=mode, max_num_seqs=max_num_seqs,
                  process_seconds=process_seconds, interpreter_seconds=report["script_started"] - launched,
                  torch_import_seconds=report["torch_imported"] - report["script_started"],
                  modules_seconds=report["engine_started"] - report["torch_imported"],
                  exit_seconds=launched + process_seconds - report["engine_ready"],
                  ready_seconds=report["engine_ready"] - launched)  # what a user waits for: launch to a ready engine
    recording = sum(entry[2] for entry in report.get("capture_log", []))
    report["capture_warmup_seconds"] = report["capture_seconds"] - recording  # eager warm-up of each batch, syncs
    report["engine_other_seconds"] = report["wall_seconds"] - sum(report[k] for k in (
        "load_seconds", "kv_cache_seconds", "compile_import_seconds", "dynamo_seconds", "inductor_seconds",
        "compile_sizes_seconds", "compile_loaded_seconds", "capture_seconds"))
    c = report
    kernels = c.get("kernel_choices") or {}  # timed at a cold start (inside "other"), loaded at a warm one
    print(f"{label:<28} ready {c['ready_seconds']:6.1f} s  process {process_seconds:6.1f} s (interpreter {c['interpreter_seconds']:4.1f}, import torch "
          f"{c['torch_import_seconds']:4.1f}, graphbench modules {c['modules_seconds']:4.1f}, exit {c['exit_seconds']:4.1f})  "
          f"engine {c['wall_seconds']:6.1f} s  load {c['load_seconds']:4.1f}  "
          f"kv {c['kv_cache_seconds']:4.1f}  imports {c.get('compile_import_seconds', 0):4.1f}  dynamo {c['dynamo_seconds']:5.1f}  inductor "
          f"{c['inductor_seconds']:6.1f}  sizes {c['compile_sizes_seconds']:5.1f}  loaded {c['compile_loaded_seconds']:5.2f}  "
          f"capture {c['capture_seconds']:5.2f} s (warm-up {c['capture_warmup_seconds']:4.2f})  other {c['engine_other_seconds']:4.2f} "
          f"(kernel choices {kernels.get('source', '-')} {kernels.get('seconds', 0.0):4.1f})  "
          f"graph mem {c['graph_memory_bytes'] / 2**30:.3f} GiB (pool {c.get('graph_pool_bytes', 0) / 2**30:.3f})  graphs {c['num_graphs']}  "
          f"cache {'warm' if c['compile_from_cache'] else 'cold'}", flush=True)
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--mode", default=None)
    p.add_argument("--modes", default="PIECEWISE,FULL,FULL_AND_PIECEWISE")
    p.add_argument("--levels", default="0,1,3", help="other -O levels to start once each")
    p.add_argument("--out", default=None)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--profile", default=None, metavar="FILE",
                   help="after the table's starts, one more -O2 warm start under cProfile: FILE (pstats) and FILE.txt")
    p.add_argument("--warm-variant", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                   help="after the table's starts, -O2 warm starts with and without these variables, interleaved")
    p.add_argument("--warm-rounds", type=int, default=3, help="rounds of those warm starts (with --warm-variant)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    from preflight import check_model

    check_model(args.model, "auto")
    env = dict(os.environ, GRAPHBENCH_CACHE_ROOT=tempfile.mkdtemp(prefix="graphbench-cache-"))
    n = args.max_num_seqs
    runs = [start(args, "O2 cold", 2, None, n, env), start(args, "O2 warm", 2, None, n, env),
            start(args, f"O2 max_num_seqs {n // 2} (new hash)", 2, None, n // 2, env)]
    for mode in [m for m in args.modes.split(",") if m]:
        runs.append(start(args, f"O2 {mode}", 2, mode, n, env))
    for level in [int(x) for x in args.levels.split(",") if x]:
        runs.append(start(args, f"O{level}", level, None, n, env))
    if args.profile:
        start(args, "O2 warm, cProfile", 2, None, n, env, profile=args.profile)
    from variants import parse_variants

    variants = parse_variants(args.warm_variant)
    if variants:  # an A/B of the warm start: the base and each variant in turn, each start its own process
        for round_ in range(1, args.warm_rounds + 1):
            for name, assignments in {"": {}, **variants}.items():
                result = start(args, f"O2 warm{' +' + name if name else ''} (round {round_})", 2, None, n,
                               dict(env, **assignments))
                if result:
                    result["variant"] = name
                    runs.append(result)
        print_warm_variants(runs)
    cold, warm, other = runs[0], runs[1], runs[2]
    if cold and warm:
        def compile_seconds(r: dict) -> float:
            return r["dynamo_seconds"] + r["inductor_seconds"] + r["compile_sizes_seconds"] + r["compile_loaded_seconds"]

        ratio = compile_seconds(warm) / max(1e-9, compile_seconds(cold))
        print(f"\nwarm/cold compile time: {ratio:.2%}; same directory: {cold['compile_cache_dir'] == warm['compile_cache_dir']}")
    if cold and other:
        print(f"changed max_num_seqs -> new directory: {cold['compile_cache_dir'] != other['compile_cache_dir']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump([r for r in runs if r], f, indent=1)


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
