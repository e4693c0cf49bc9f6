"""What LoRA adapters cost in graphs and in steps, on a GPU.

    python benchmarks/lora.py --model llama-3.2-1b --rank 16 --out lora.json

Engines at -O2 (FULL_AND_PIECEWISE) one after the other: no adapters; 1 and 4 seeded dummy adapters
of rank --rank on all seven target modules with cudagraph_specialize_lora on; 4 with it off. Per
engine: graph keys, capture seconds, graph memory, then a closed loop of --concurrency requests
(128-token prompts and outputs, greedy) at LoRA shares 0, 0.5 and 1 (requests with an adapter take
the loaded ones in turn): output tokens/s and TPOT p50, medians of 3 repeats after a warm-up.
Then the check that a recording replays what the un-captured run computes: the same -O2 config with
4 adapters and cudagraph_mode NONE must give the same greedy tokens for a mixed batch.
--compare-torch adds the 4-adapter setup once more with the torch path instead of the Triton kernels.

    python benchmarks/lora.py --setups none,1,4 --rounds 3 \
        --variant base=PYTHONPATH=$PWD/.ab-base/src:$PWD

An A/B of trees (or of environment variables): this tree and each variant run the setups in processes of
their own, interleaved, --rounds times each (a process is the unit of replication: two processes of one
tree differ more than repeats inside one). Prints each process's overheads over no adapters as it ends, then
per side the median over its processes of each setup's TPOT (share 1; no adapters: share 0) and, for a
variant, its difference from this tree's and the verdict on it (faster, slower or a tie within the processes'
noise: reports/verdict.py's rule; --rounds 3 or more, or there is none); each side's last process also runs the
replay check (with 4 adapters among the setups); the JSON holds every process's rows.

    python benchmarks/lora.py --delta --model llama-3.2-1b --rank 16 --out lora-delta.json

The delta alone (no engine): one CUDA graph holding every layer's four LoRA ops (qkv, o, gate/up,
down; each layer its own slot buffers of 1 or 4 seeded adapters) at T tokens, recorded once per path:
the Triton kernels (recorded inside graph_launches, with PDL as the engine records them), the op's
torch path (runner/lora/weights.lora_delta: each slot's delta, kept for its own tokens) and the einsums
with a one-hot made once per step (the path before the kernels). Each replay timed with CUDA events, medians of --replays after
a warm-up; share 1 (every token with an adapter, in turn) and 0.5 (every other token none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


# --setups' names: each setup's label and its engine options, given the rank
SETUPS = {"none": ("no adapters", lambda rank: {}),
          "1": ("1 adapter", lambda rank: {"lora.modules": [f"dummy:r={rank}"]}),
          "4": ("4 adapters", lambda rank: {"lora.modules": [f"dummy:r={rank},n=4"]}),
          "4-unspecialised": ("4 adapters, not specialised", lambda rank: {
              "lora.modules": [f"dummy:r={rank},n=4"], "lora.cudagraph_specialize_lora": False})}


def setup_tpot(rows: list[dict]) -> dict[str, float]:
    """Each setup's TPOT p50 with every request on an adapter (share 1; no adapters: share 0)."""
    return {r["setup"]: next(w["tpot_p50_ms"] for w in r["workloads"]
                             if w["share"] == (0.0 if r["setup"] == "no adapters" else 1.0)) for r in rows}


def _mixed_tokens(engine, names: list[str]) -> list[list[int]]:
    from graphbench.runner.request import SamplingParams

    prompts = [[(7 * i + j) % 1000 + 1 for j in range(24)] for i in range(6)]
    loras = [names[i % len(names)] if i % 2 == 0 else None for i in range(6)]
    return engine.generate(prompts, SamplingParams(max_tokens=32), loras)


def step_overheads(rows: list[dict]) -> dict[str, float]:
    """Each adapter setup's TPOT with every request on an adapter (share 1) over the TPOT without adapters,
    minus 1 (0.2: 20% slower): what LoRA costs a decode step."""
    base = next(w["tpot_p50_ms"] for r in rows if r["setup"] == "no adapters" for w in r["workloads"])
    return {r["setup"]: w["tpot_p50_ms"] / base - 1 for r in rows if r["setup"] != "no adapters"
            for w in r["workloads"] if w["share"] == 1.0}


def run_sides(args: argparse.Namespace) -> dict:
    """--variant / --rounds: each side's processes, interleaved; every process runs the setups once."""
    import os
    import subprocess
    import sys
    import tempfile

    from variants import parse_variants

    sides = {"this tree": {}, **parse_variants(args.variant)}
    processes: dict[str, list[dict]] = {name: [] for name in sides}
    for round_index in range(args.rounds):
        for name, variables in sides.items():
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                # each side's last process checks that its recordings replay the un-captured run
                check = round_index == args.rounds - 1 and not args.no_replay_check
                cmd = [sys.executable, __file__, "--model", args.model, "--rank", str(args.rank), "--concurrency",
                       str(args.concurrency), "--repeats", str(args.repeats), "--setups", args.setups,
                       "--out", out.name] + ([] if check else ["--no-replay-check"])
                done = subprocess.run(cmd, env=dict(os.environ, **variables), capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"{name}, round {round_index + 1} failed:\n{done.stderr[-3000:]}")
                processes[name].append(json.load(open(out.name)))
            if getattr(args, "out", None):  # what has run so far survives a time limit that cuts the A/B short
                with open(args.out, "w") as f:
                    json.dump({"model": args.model, "rank": args.rank, "rounds": args.rounds, "partial": True,
                               "processes": processes}, f, indent=1)
            overheads = processes[name][-1]["step_overheads"]
            print(f"round {round_index + 1} {name:12s}: " + ", ".join(
                f"{setup} {100 * v:+.1f}%" for setup, v in overheads.items()), flush=True)
    tpot = {name: {setup: statistics.median(setup_tpot(p["rows"])[setup] for p in runs)
                   for setup in setup_tpot(runs[0]["rows"])} for name, runs in processes.items()}
    for name, by_setup in tpot.items():
        versus = "" if name == "this tree" else " (against this tree: " + ", ".join(
            f"{setup} {100 * (ms / tpot['this tree'][setup] - 1):+.1f}%" for setup, ms in by_setup.items()) + ")"
        print(f"{name:12s} TPOT p50 (median of processes): " + ", ".join(
            f"{setup} {ms:.3f} ms" for setup, ms in by_setup.items()) + versus, flush=True)
    verdicts = side_verdicts(processes)
    for v in verdicts:
        print(f"{v['side']}, {v['setup']}: {v['verdict']} ({v['reason']})", flush=True)
    replay = {name: runs[-1].get("replay_equals_uncaptured") for name, runs in processes.items()}
    for name, same in replay.items():
        if same is not None:
            print(f"{name}: recordings replay the un-captured run's greedy tokens (mixed batch, 4 adapters): {same}",
                  flush=True)
    return {"model": args.model, "rank": args.rank, "rounds": args.rounds, "tpot_ms": tpot, "verdicts": verdicts,
            "replay_equals_uncaptured": replay, "processes": processes}


def side_verdicts(processes: dict[str, list[dict]]) -> list[dict]:
    """Each variant's TPOT per setup against this tree's, over their processes (variants.time_verdict)."""
    from variants import time_verdict

    def samples(side: str, setup: str) -> list[float]:
        return [setup_tpot(p["rows"])[setup] for p in processes[side]]

    setups = list(setup_tpot(processes["this tree"][0]["rows"]))
    return [{"side": side, "setup": setup, **time_verdict(samples("this tree", setup), samples(side, setup),
                                                          "tpot_p50_ms")}
            for side in processes if side != "this tree" for setup in setups]


def measure(engine, names: list[str], share: float, concurrency: int, repeats: int) -> dict:
    from graphbench.bench.peer_models import random_prompts
    from graphbench.runner.request import SamplingParams

    vocab = engine.arch.vocab_size
    with_adapter = round(share * concurrency)
    loras = [names[i % len(names)] if names and i < with_adapter else None for i in range(concurrency)]
    runs = []
    for repeat in range(repeats + 1):  # the first pass warms up
        prompts = random_prompts(concurrency, 128, vocab, 1000 + repeat)
        first = len(engine.records)
        started = time.perf_counter()
        requests = [engine.add_request(p, SamplingParams(max_tokens=128), lora) for p, lora in zip(prompts, loras)]
        while engine.has_unfinished():
            engine.step()
        seconds = time.perf_counter() - started
        tpot = [(r.finish_time - r.first_token_time) / (len(r.output_token_ids) - 1) * 1e3 for r in requests]
        modes: dict[str, int] = {}
        for record in engine.records[first:]:
            key = f"{record.runtime_mode}{'+lora' if record.descriptor.has_lora else ''}"
            modes[key] = modes.get(key, 0) + 1
        del engine.records[first:]
        if repeat:
            runs.append((128 * concurrency / seconds, statistics.median(tpot), modes))
    return {"share": share, "concurrency": concurrency, "output_tokens_per_s": statistics.median(r[0] for r in runs),
            "tpot_p50_ms": statistics.median(r[1] for r in runs), "step_modes": runs[-1][2]}


def step_deltas(layers, acts: dict, index, onehot, path: str) -> None:
    """Every layer's four LoRA ops on the shared activations acts (path: triton, torch, einsum)."""
    import torch

    from graphbench.runner.kernels.lora_bgmv import lora_add_triton
    from graphbench.runner.lora.weights import lora_delta

    for lora in layers:
        for out, x, a, b, segments in ((acts["qkv"], acts["h"], lora.qkv_a, lora.qkv_b, lora.qkv_segments),
                                       (acts["o"], acts["flat"], lora.o_a, lora.o_b, lora.out_segments),
                                       (acts["gate_up"], acts["h"], lora.gate_up_a, lora.gate_up_b,
                                        lora.gate_up_segments),
                                       (acts["down"], acts["hidden"], lora.down_a, lora.down_b, lora.out_segments)):
            if path == "triton":
                lora_add_triton(out, x, a, b, index, segments)
            elif path == "torch":
                out.add_(lora_delta(x, a, b, index))
            else:  # the einsums with the step's one-hot (made once, outside the ops)
                y = torch.einsum("ti,sri->tsr", x, a) * onehot[:, :, None]
                out.add_(torch.einsum("tsr,sor->to", y, b))


def _delta_graph(layers, acts: dict, index, path: str):
    """A CUDA graph of step_deltas."""
    import torch

    from graphbench.runner.kernels.pdl import graph_launches

    onehot = (index[:, None] == torch.arange(layers[0].qkv_a.shape[0], device=index.device)).to(acts["h"].dtype)

    def run():
        step_deltas(layers, acts, index, onehot, path)

    with graph_launches():  # PDL for the Triton kernels, as the engine's capture phase launches them
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            run()  # warm-up: compiles and loads every kernel outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
    return graph


def _replay_ms(graph, replays: int) -> float:
    import torch

    times = []
    for i in range(replays + 5):  # the first 5 warm up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        if i >= 5:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_deltas(model: str, rank: int, replays: int, token_counts: list[int]) -> list[dict]:
    """The delta of a whole step (every layer), per path, at each T, 1 and 4 adapters, share 1 and 0.5."""
    import torch

    from graphbench.config.arch import load_arch
    from graphbench.runner.lora.adapters import dummy_adapter
    from graphbench.runner.lora.weights import LayerLoRA

    arch = load_arch(model)
    q = arch.num_attention_heads * arch.head_dim
    rows = []
    for num_adapters in (1, 4):
        layers = [LayerLoRA(arch, num_adapters, rank, torch.bfloat16, "cuda") for _ in range(arch.num_hidden_layers)]
        for row in range(num_adapters):
            adapter = dummy_adapter(f"d{row}", rank, arch, seed=row)
            for i, layer in enumerate(layers):
                layer.load(row, adapter, i)
        for t in token_counts:
            g = torch.Generator().manual_seed(t)
            shapes = {"h": arch.hidden_size, "flat": q, "hidden": arch.intermediate_size,
                      "qkv": layers[0].qkv_b.shape[1], "o": arch.hidden_size, "gate_up": 2 * arch.intermediate_size,
                      "down": arch.hidden_size}
            acts = {name: torch.randn(t, n, generator=g).to(torch.bfloat16).cuda() for name, n in shapes.items()}
            for share in (1.0, 0.5):
                every = 1 if share == 1.0 else 2  # share 0.5: the odd tokens have no adapter
                index = torch.tensor([(i // every) % num_adapters if i % every == 0 else -1 for i in range(t)],
                                     dtype=torch.int32, device="cuda")
                row = {"adapters": num_adapters, "tokens": t, "share": share}
                for path in ("triton", "torch", "einsum"):
                    graph = _delta_graph(layers, acts, index, path)
                    row[f"{path}_ms"] = _replay_ms(graph, replays)
                    del graph
                rows.append(row)
                print(f"adapters {num_adapters} T {t:4d} share {share:.1f}: triton {row['triton_ms']:.3f} ms, "
                      f"torch {row['torch_ms']:.3f} ms, einsum (one-hot once) {row['einsum_ms']:.3f} ms a step "
                      f"({arch.num_hidden_layers} layers x 4 ops)", flush=True)
        del layers
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.2-1b")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="lora.json")
    parser.add_argument("--compare-torch", action="store_true", help="also the 4-adapter setup on the torch path")
    parser.add_argument("--delta", action="store_true", help="time the LoRA delta alone (no engine)")
    parser.add_argument("--tokens", default="1,8,16,64,256,512", help="--delta: token counts")
    parser.add_argument("--replays", type=int, default=30, help="--delta: timed replays per graph")
    parser.add_argument("--setups", default="none,1,4,4-unspecialised",
                        help="comma-separated, from " + ", ".join(SETUPS) + " (none first: the others' base)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                        help="another side of an A/B, in processes of its own with these environment variables")
    parser.add_argument("--rounds", type=int, default=1, help="processes per side, interleaved (with --variant)")
    parser.add_argument("--no-replay-check", action="store_true", help="skip the replay-equals-uncaptured check")
    args = parser.parse_args()
    from preflight import check_model_and_gpu, context_for

    check_model_and_gpu(args.model, "auto", "lora.py")
    if args.variant or args.rounds > 1:
        result = run_sides(args)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        return
    if args.delta:
        rows = time_deltas(args.model, args.rank, args.replays, [int(t) for t in args.tokens.split(",")])
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "rank": args.rank, "replays": args.replays, "rows": rows}, f, indent=1)
        return

    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine
    from graphbench.runner.lora.weights import use_lora_kernel

    base = {"model.model": args.model, "optimization_level": 2, "scheduler.max_num_seqs": 64,
            "scheduler.max_model_len": context_for(args.model, 1024), "lora.max_lora_rank": args.rank}
    chosen = [name.strip() for name in args.setups.split(",")]
    if chosen[0] != "none" or any(name not in SETUPS for name in chosen):
        raise SystemExit(f"--setups: comma-separated, from {', '.join(SETUPS)}, none first; got {args.setups!r}")
    setups = [(SETUPS[name][0], SETUPS[name][1](args.rank)) for name in chosen]
    if args.compare_torch:
        setups.append(("4 adapters, torch path", SETUPS["4"][1](args.rank)))
    rows, tokens = [], {}
    for label, extra in setups:
        use_lora_kernel(not label.endswith("torch path"))  # a recording keeps the path it was captured with
        engine = Engine(load_engine_config(overrides={**base, **extra}))
        names = list(engine.lora_slots)
        report = engine.report
        # graph memory less the process's first cuBLAS capture, which only the first engine here pays
        row = {"setup": label, "num_graphs": report.num_graphs, "capture_s": report.capture_seconds,
               "graph_memory_mib": (report.graph_memory_bytes - report.graph_setup_bytes) / 2**20, "startup_s": report.total_seconds,
               "workloads": [measure(engine, names, share, args.concurrency, args.repeats)
                             for share in ((0.0, 0.5, 1.0) if names else (0.0,))]}
        if label == "4 adapters":
            tokens["graphs"] = _mixed_tokens(engine, names)
        rows.append(row)
        print(f"{label:28s} graphs {report.num_graphs} capture {report.capture_seconds:.2f} s "
              f"graph memory {row['graph_memory_mib']:.0f} MiB start {report.total_seconds:.1f} s", flush=True)
        for w in row["workloads"]:
            print(f"    LoRA share {w['share']:.1f}: {w['output_tokens_per_s']:8.1f} tok/s, TPOT p50 "
                  f"{w['tpot_p50_ms']:.3f} ms, steps {w['step_modes']}", flush=True)
        engine.close()
    use_lora_kernel(True)
    overheads = step_overheads(rows)
    print("TPOT with every request on an adapter, against no adapters: "
          + ", ".join(f"{setup} {100 * value:+.1f}%" for setup, value in overheads.items()), flush=True)
    same = None
    if "graphs" in tokens and not args.no_replay_check:
        eager = Engine(load_engine_config(overrides={**base, **SETUPS["4"][1](args.rank),
                                                     "compilation.cudagraph_mode": "NONE"}))
        tokens["uncaptured"] = _mixed_tokens(eager, list(eager.lora_slots))
        eager.close()
        same = tokens["graphs"] == tokens["uncaptured"]
        print(f"recordings replay the un-captured run's greedy tokens (mixed batch, 4 adapters): {same}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "rank": args.rank, "rows": rows, "step_overheads": overheads,
                   "replay_equals_uncaptured": same,
                   "tokens": tokens}, f, indent=1)


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
