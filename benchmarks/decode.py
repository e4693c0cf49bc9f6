"""Decode step time: graphbench at each -O level vs transformers eager and static-cache+compile, and gpt-fast.

    python benchmarks/decode.py --model llama-3.2-1b --batches 1,16,64,256 --levels 0,1,2,3 \
        --peers hf-eager,hf-compile --out decode.json

Every system runs in its own process (fresh CUDA context, fresh compile state). Prints one
table with step time, tokens/s, the fraction of the weight-bandwidth floor and ratios.

    python benchmarks/decode.py --levels 2 --peers hf-compile --variant nopdl=GRAPHBENCH_PDL=0 \
        --variant before=PYTHONPATH=$PWD/.ab-base/src:$PWD

adds graphbench-O2+nopdl and graphbench-O2+before: the same level in a process with those environment
variables (an A/B of a debug hatch, or of another tree of graphbench, in one run, with the peers' ratios
and a "vs base" column).
`--rounds 3` runs each graphbench system three times, interleaved (base, variants, base, ...), each in its
own process: the table gives the median of the rounds' medians and their range, and under it each variant's
verdict against its base (faster, slower, or a tie within the noise these processes show: reports/verdict.py's
rule, as compare and gate call differences; fewer than 3 processes a side give no verdict).

The gpt-fast peer (`--peers gpt-fast`) runs gpt-fast's own model.py, unmodified, from a checkout
(`--gpt-fast-dir`, default `.peers/gpt-fast`, ignored by git; nothing is downloaded): its one-token
forward compiled with mode="reduce-overhead", as its generate.py does, greedy; timed under math SDPA (as its
generate.py decodes) and under PyTorch's default SDPA choice, the faster being its figure (the row names both).

`--cold` starts every graphbench process from its own empty cache root: each compiles and searches its kernel
choices again, so the rounds' spread includes the start-up's search (two machines, or a sweep's measured cold
starts, each search their own; without it every process after the first loads the first one's choices).

`--model` takes a preset or a checkpoint folder; `--load-format dummy` runs a folder's shape with seeded
random weights (graphbench and the transformers peers alike).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def worker(args: argparse.Namespace) -> None:
    import torch

    from decode_timing import copy_bandwidth_gbs, measure_engine_decode, measure_hf_decode
    from graphbench.bench.peer_models import build_hf_model
    from graphbench.config import load_arch, load_engine_config

    batches = [int(b) for b in args.batches.split(",")]
    out: dict = {"system": args.system, "model": args.model, "results": []}
    if args.system == "bandwidth":
        out["copy_gbs"] = copy_bandwidth_gbs()
    elif args.system.startswith("graphbench"):
        from graphbench.runner.engine import Engine
        from preflight import context_for

        level = int(args.system.split("-O")[1].split("+")[0])  # graphbench-O2 or graphbench-O2+variant
        overrides = {"model.model": args.model, "model.load_format": args.load_format, "optimization_level": level,
                     "scheduler.max_num_seqs": max(batches), "scheduler.max_num_batched_tokens": 8192,
                     "scheduler.max_model_len": context_for(args.model, 4096)}
        if args.cudagraph_mode:
            overrides["compilation.cudagraph_mode"] = args.cudagraph_mode
        if args.tp > 1:
            overrides["parallel.tensor_parallel_size"] = args.tp
        started = time.perf_counter()
        engine = Engine(load_engine_config(overrides=overrides))
        out["startup_seconds"] = time.perf_counter() - started
        out["startup"] = {k: v for k, v in vars(engine.report).items()}
        for b in batches:
            out["results"].append(measure_engine_decode(engine, b, args.prompt_len))
        engine.close()
    elif args.system == "gpt-fast":
        from decode_timing import build_gpt_fast_model, measure_gpt_fast_decode

        arch = load_arch(args.model)
        model = build_gpt_fast_model(args.gpt_fast_dir, arch, "cuda")
        if arch.attention_bias:  # (Qwen2's q/k/v biases: its model.py has none)
            out["note"] = "gpt-fast's model has no q/k/v bias: it runs this shape without one (a little less work)"
        for b in batches:
            # its generate.py decodes under math SDPA; PyTorch's default choice is faster at some batches:
            # both are timed, the faster is its figure (the peer in its fastest configuration)
            timed = {}
            for sdpa in ("math", "default"):
                timed[sdpa] = measure_gpt_fast_decode(model, b, args.prompt_len, sdpa=sdpa)
                torch._dynamo.reset()  # a fresh compile (and CUDA graph) per case, as a separate run would have
            best = min(timed, key=lambda k: timed[k]["step_ms"])
            out["results"].append(dict(timed[best], sdpa=best, sdpa_step_ms={k: v["step_ms"] for k, v in timed.items()}))
    else:
        arch = load_arch(args.model)
        model, _ = build_hf_model(arch, torch.bfloat16, "cuda",
                                  checkpoint=None if args.load_format == "dummy" else args.model)
        for b in batches:
            out["results"].append(measure_hf_decode(model, b, args.prompt_len, static_cache=args.system == "hf-compile"))
    out["weights_bytes"] = 2 * load_arch(args.model).num_params()
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b", help="a preset or a checkpoint folder")
    p.add_argument("--load-format", default="auto", choices=["auto", "dummy", "safetensors"],
                   help="dummy: a checkpoint folder's shape with seeded random weights (no weights read)")
    p.add_argument("--batches", default="1,16,64,256")
    p.add_argument("--levels", default="0,1,2,3")
    p.add_argument("--peers", default="hf-eager,hf-compile")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gpt-fast-dir", default=os.environ.get("GPT_FAST_DIR", ".peers/gpt-fast"),
                   help="a checkout of pytorch-labs/gpt-fast (its model.py), for the gpt-fast peer")
    p.add_argument("--cudagraph-mode", default=None)
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size of the graphbench systems")
    p.add_argument("--out", default=None)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--order", default="", help="systems to run first, e.g. graphbench-O2,hf-compile")
    p.add_argument("--rounds", type=int, default=1, help="processes per graphbench system, interleaved")
    p.add_argument("--cold", action="store_true",
                   help="every graphbench process from its own empty cache root (its own kernel search)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                   help="also run each level with these environment variables, as graphbench-O<level>+NAME")
    p.add_argument("--worker", dest="system", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    from preflight import check_model_and_gpu, one_line_errors

    if args.system:
        with one_line_errors():
            worker(args)
        return
    from variants import parse_variants

    variants = parse_variants(args.variant)
    levels = [lvl for lvl in args.levels.split(",") if lvl]
    if args.rounds < 1:
        raise SystemExit("--rounds must be >= 1")
    check_model_and_gpu(args.model, args.load_format, "decode.py")
    ours = [f"graphbench-O{lvl}{suffix}" for lvl in levels for suffix in ["", *(f"+{n}" for n in variants)]]
    systems = ["bandwidth"] + ours + [s for s in args.peers.split(",") if s]
    if args.order:  # run these first (so that a time limit cuts the least important ones)
        first = [s for s in args.order.split(",") if s in systems]
        systems = ["bandwidth"] + first + [s for s in systems if s not in first and s != "bandwidth"]
    # later rounds of graphbench's systems after the first pass, interleaved with one another
    systems += [s for _ in range(args.rounds - 1) for s in systems if s in ours]
    results = []
    for system in systems:
        cmd = [sys.executable, __file__, "--worker", system, "--model", args.model, "--batches", args.batches,
               "--prompt-len", str(args.prompt_len), "--load-format", args.load_format]
        if args.cudagraph_mode:
            cmd += ["--cudagraph-mode", args.cudagraph_mode]
        cmd += ["--tp", str(args.tp), "--gpt-fast-dir", args.gpt_fast_dir]
        env, cold_root = process_env(system, variants, args.cold)
        started = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            print(f"{system}: timed out after {args.timeout} s", flush=True)
            continue
        finally:
            if cold_root:
                shutil.rmtree(cold_root, ignore_errors=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            said = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")][-1:] if proc.returncode == 2 else []
            print(f"{system}: failed (exit {proc.returncode})" + (f": {said[0]}" if said else f"\n{proc.stderr[-3000:]}"),
                  flush=True)
            continue
        result = json.loads(lines[-1][len("RESULT "):])
        result["wall_seconds"] = time.perf_counter() - started
        results.append(result)
        print(f"{system}: done in {result['wall_seconds']:.0f} s", flush=True)
        for t in (result.get("startup", {}).get("static_variants") or {}).get("sizes", []):
            print(f"  compile size {t['size']}: step {t['static_ms']:.3f} ms with its variants, "
                  f"{t['dynamic_ms']:.3f} ms dynamic: {t['kept']} kept", flush=True)
        report(results, args, quiet=True)  # partial results survive a time limit
    report(results, args)
    if ours and not any(r["system"] in ours for r in results):
        raise SystemExit(f"no graphbench system ran ({', '.join(ours)}): see each one's failure above")


def process_env(system: str, variants: dict[str, dict[str, str]], cold: bool) -> tuple[dict[str, str], str | None]:
    """The environment of one system's process (its variant's variables), and with cold a graphbench
    process's own empty cache root (returned, to be removed after the process)."""
    env = dict(os.environ, **variants.get(system.partition("+")[2], {}))
    if not (cold and system.startswith("graphbench-")):
        return env, None
    env["GRAPHBENCH_CACHE_ROOT"] = tempfile.mkdtemp(prefix="graphbench-cold-")
    return env, env["GRAPHBENCH_CACHE_ROOT"]


def merge_rounds(results: list[dict]) -> list[dict]:
    """One entry per system: a system run in several processes gets, per batch, the median of their
    median steps (and `round_step_ms`, each process's); its processes' own entries go under `rounds`."""
    import statistics

    merged: dict[str, dict] = {}
    for r in results:
        if r["system"] not in merged:
            merged[r["system"]] = dict(r, rounds=[r])
        else:
            merged[r["system"]]["rounds"].append(r)
    for entry in merged.values():
        rounds = entry.pop("rounds")
        if len(rounds) == 1:
            continue
        entry["rounds"] = rounds
        batches = [x["batch"] for x in rounds[0]["results"]]
        entry["results"] = []
        for b in batches:
            steps = [x["step_ms"] for r in rounds for x in r["results"] if x["batch"] == b]
            launches = [x["launch_ms"] for r in rounds for x in r["results"] if x["batch"] == b and "launch_ms" in x]
            step = statistics.median(steps)
            entry["results"].append({"batch": b, "step_ms": step, "tokens_per_s": b * 1e3 / step, "round_step_ms": steps,
                                     **({"launch_ms": statistics.median(launches), "round_launch_ms": launches}
                                        if launches else {})})
    return list(merged.values())


def choice_sets(processes: list[dict]) -> int:
    """How many different sets of start-up kernel choices these processes ran (0: none recorded)."""
    from graphbench.reports.kernel_choices_diff import choices_by_shape

    sets = {frozenset((shape, kernel) for shape, kernels in choices_by_shape([p]).items() for kernel in kernels)
            for p in processes}
    return len(sets - {frozenset()})


def shapes_chosen_apart(processes: list[dict]) -> tuple[list[str], int]:
    """(the shapes whose kernel the processes chose differently, as "op NxK at R rows", widest rows first; how
    many shapes were chosen) over these processes' start-ups."""
    from graphbench.reports.kernel_choices_diff import choices_by_shape

    by_shape = choices_by_shape(processes)
    apart = sorted((s for s, kernels in by_shape.items() if len(kernels) > 1), key=lambda s: (-s[3], s))
    return [f"{op} {n}x{k} at {rows} row{'s' if rows > 1 else ''}" for op, n, k, rows in apart], len(by_shape)


def search_seconds(processes: list[dict]) -> list[float]:
    """The seconds each of these processes' start-ups spent searching its kernel choices (those that searched:
    a cold start, not one that loaded them)."""
    out = []
    for p in processes:
        record = (p.get("startup") or {}).get("kernel_choices") or {}
        if record.get("source") == "measured" and isinstance(record.get("seconds"), (int, float)):
            out.append(float(record["seconds"]))
    return out


def report(results: list[dict], args: argparse.Namespace, quiet: bool = False) -> None:
    results = merge_rounds(results)
    bandwidth = next((r["copy_gbs"] for r in results if r["system"] == "bandwidth"), None)
    rows = [r for r in results if r["system"] != "bandwidth"]
    by_system = {r["system"]: {x["batch"]: x for x in r["results"]} for r in rows}
    weights = rows[0]["weights_bytes"] if rows else 0
    floor_ms = weights / (bandwidth * 1e9) * 1e3 if bandwidth else None
    cold = getattr(args, "cold", False)
    summary = {"model": args.model, "cold": cold, "copy_gbs": bandwidth, "floor_ms": floor_ms, "results": results}
    if quiet:
        if args.out:
            with open(args.out, "w") as f:
                json.dump(summary, f, indent=1)
        return
    print(f"\nmodel {args.model}, prompt {args.prompt_len}; weights {weights / 1e9:.2f} GB; copy bandwidth "
          f"{bandwidth or 0:.0f} GB/s; floor {floor_ms or 0:.3f} ms/step"
          f"{'; every graphbench process from a cold start' if cold else ''}")
    width = max([16] + [len(s) + 2 for s in by_system])
    header = (f"{'system':<{width}}{'batch':>6}{'step ms':>10}{'tok/s':>11}{'floor %':>9}{'vs hf-eager':>12}"
              f"{'vs hf-compile':>14}{'vs base':>9}{'  rounds (min-max ms)' if args.rounds > 1 else ''}")
    print(header)
    for system, per_batch in by_system.items():
        for batch, x in sorted(per_batch.items()):
            ratios = []
            # a variant's base is the same level without it: base step / variant step (> 1: faster)
            for other_system in ("hf-eager", "hf-compile", system.partition("+")[0] if "+" in system else None):
                other = by_system.get(other_system, {}).get(batch)
                ratios.append(f"{other['step_ms'] / x['step_ms']:.3f}x" if other else "-")
            floor = f"{100 * floor_ms / x['step_ms']:.0f}%" if floor_ms else "-"
            steps = x.get("round_step_ms")
            spread = f"  {len(steps)}: {min(steps):.3f}-{max(steps):.3f}" if steps else ""
            sdpa = ("  SDPA " + ", ".join(f"{k} {v:.3f}" for k, v in x["sdpa_step_ms"].items())
                    if "sdpa_step_ms" in x else "")
            launches = x.get("round_launch_ms") or ([x["launch_ms"]] if "launch_ms" in x else [])
            if launches:  # near the step: the host bound that process
                sdpa += "  host launch " + "/".join(f"{v:.3f}" for v in launches)
            print(f"{system:<{width}}{batch:>6}{x['step_ms']:>10.3f}{x['tokens_per_s']:>11.0f}{floor:>9}"
                  f"{ratios[0]:>12}{ratios[1]:>14}{ratios[2]:>9}{spread}{sdpa}")
    for row in rows:
        if row.get("note"):
            print(f"{row['system']}: {row['note']}")
        sets = choice_sets(row.get("rounds", []))
        if sets > 1:  # (with --cold: each process searched its own)
            apart, shapes = shapes_chosen_apart(row["rounds"])
            print(f"{row['system']}: its {len(row['rounds'])} processes chose {sets} different sets of kernels "
                  f"at start-up ({len(apart)} of {shapes} shapes apart: {', '.join(apart)})")
        if searched := search_seconds(row.get("rounds", [row])):
            print(f"{row['system']}: start-up's kernel search took " + ", ".join(f"{s:.1f}" for s in searched) + " s")
    verdicts = variant_verdicts(by_system)
    for v in verdicts:
        print(f"{v['system']} batch {v['batch']} against {v['base']}: {v['verdict']} ({v['reason']})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(summary, verdicts=verdicts), f, indent=1)


def variant_verdicts(by_system: dict[str, dict[int, dict]]) -> list[dict]:
    """Each variant's step against its base level's, per batch, over their processes (variants.time_verdict)."""
    pairs = [(system, system.partition("+")[0], batch, x) for system, per_batch in by_system.items()
             for batch, x in sorted(per_batch.items())
             if "+" in system and batch in by_system.get(system.partition("+")[0], {})]
    if not pairs:
        return []
    from variants import time_verdict

    def samples(x: dict) -> list[float]:
        return x.get("round_step_ms") or [x["step_ms"]]

    return [{"system": system, "base": base, "batch": batch,
             **time_verdict(samples(by_system[base][batch]), samples(x), "full_step_ms")}
            for system, base, batch, x in pairs]


if __name__ == "__main__":
    main()
