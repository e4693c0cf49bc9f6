"""Write the synthetic result files under tests/data/report/synthetic/ (run once; output is committed).

    PYTHONPATH=src python tests/data/report/make_fixtures.py

Every point follows docs/RESULTS_SCHEMA.md. The curves are chosen so that tests can check exact
numbers (see CURVES): e.g. O2-default has TPOT p99 = 10 ms x concurrency / 4, so a 50 ms limit is
crossed at concurrency 20 exactly. Three repeats per workload at 0.99x, 1x and 1.01x of the curve:
the median is the curve's value. Two files are malformed on purpose (skipped by the loader).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "src"))

from graphbench.config import EngineConfig, ParallelConfig, SchedulerConfig  # noqa: E402
from graphbench.config.parts import CompilationConfig, ModelConfig  # noqa: E402
from graphbench.ladders import num_graphs, pad_to  # noqa: E402
from graphbench.reports.store import write_result  # noqa: E402

OUT = HERE / "synthetic"
MACHINE = "h200-fixture"
MODEL = "llama-3.2-1b"
CONCURRENCIES = (1, 4, 8, 16, 32, 64)
PROMPT, OUTPUT = 128, 64
ENV = {"graphbench": "0.1.0", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "device": "cuda",
       "gpu": "NVIDIA H200", "gpu_driver": "580.159.04", "host": "fixture-host", "python": "3.12.3",
       "git_commit": "0123abc"}  # fmt: skip
MIB = 2**20

# label -> (system, engine kwargs, output tok/s(c), TPOT p99 ms(c), TTFT p99 ms(c))
CURVES = {
    "O0": ("graphbench", {"optimization_level": 0}, lambda c: 30 * c, lambda c: 45 + c / 2, lambda c: 100 + 10 * c),
    "O1-default": ("graphbench", {"optimization_level": 1}, lambda c: 200 * c, lambda c: 1.25 * c,
                   lambda c: 100 + 10 * c),
    "O2-default": ("graphbench", {"optimization_level": 2}, lambda c: 250 * c, lambda c: 10 * c / 4,
                   lambda c: 100 + 10 * c),
    "O2-interactivity": ("graphbench", {"optimization_level": 2, "performance_mode": "interactivity"},
                         lambda c: 260 * c, lambda c: 2 * c, lambda c: 100 + 10 * c),
    "O2-seqs64": ("graphbench", {"optimization_level": 2, "max_num_seqs": 64, "cudagraph_mode": "FULL"},
                  lambda c: 210 * c, lambda c: 1.5625 * c, lambda c: 100 + 10 * c),
    "O2-tp2": ("graphbench", {"optimization_level": 2, "tp": 2}, lambda c: 280 * c, lambda c: float(c),
               lambda c: 100 + 10 * c),
    "O3-default": ("graphbench", {"optimization_level": 3}, lambda c: 300 * c if c <= 32 else 240 * c,
                   lambda c: 2 + c / 32, lambda c: 50 + c),
    "hf-eager": ("hf-eager", {}, lambda c: 20 * c, lambda c: 60 + c, lambda c: 100 + 10 * c),
    "hf-compile": ("hf-compile", {}, lambda c: 120 * c, lambda c: 5 + c / 8, lambda c: 100 * c),
}  # fmt: skip

# label -> startup parts (s) for the cold start, graph memory MiB; warm: parts for a warm start
STARTUP = {
    "O0": ({"load_s": 1.0}, 1.5, 0),
    "O1-default": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.0, "capture_s": 4.0}, 23.0, 200),
    "O2-default": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.5, "capture_s": 8.0}, 27.0, 300),
    "O2-interactivity": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.5, "capture_s": 11.0}, 30.0, 440),
    "O2-seqs64": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.0, "capture_s": 3.0}, 22.0, 120),
    "O2-tp2": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.5, "capture_s": 8.5}, 28.0, 300),
    "O3-default": ({"load_s": 1.0, "dynamo_s": 7.0, "inductor_s": 10.5, "compile_sizes_s": 20.0, "capture_s": 8.0},
                   47.0, 310),
    "hf-eager": ({"load_s": 2.0}, 2.0, None),
    "hf-compile": ({"load_s": 2.0, "dynamo_s": 10.0, "inductor_s": 20.0, "capture_s": 3.0}, 36.0, None),
}  # fmt: skip
WARM = {
    "O2-default": ({"load_s": 1.0, "loaded_s": 3.0, "capture_s": 2.5}, 7.0),
    "O3-default": ({"load_s": 1.0, "loaded_s": 4.0, "capture_s": 2.5}, 8.0),
}
# O2-default: one file with both starts (`startups`: cold then warm; `startup` is the last), as
# `graphbench run` writes it. O3-default: a cold point with workloads and a warm, start-up-only point.
WARM_IN_POINT = {"O2-default"}
PARTS = ("load_s", "dynamo_s", "inductor_s", "compile_sizes_s", "loaded_s", "capture_s")


def engine_config(kwargs: dict) -> dict:
    comp = CompilationConfig(performance_mode=kwargs.get("performance_mode", "default"))
    if "cudagraph_mode" in kwargs:
        comp.cudagraph_mode = kwargs["cudagraph_mode"]
    cfg = EngineConfig(
        optimization_level=kwargs["optimization_level"],
        model=ModelConfig(model=MODEL, dtype="bfloat16"),
        scheduler=SchedulerConfig(max_num_seqs=kwargs.get("max_num_seqs", 256)),
        compilation=comp,
        parallel=ParallelConfig(tensor_parallel_size=kwargs.get("tp", 1)),
    )
    return cfg.resolve().to_dict()


def histogram(c: int, num_requests: int) -> dict[int, int]:
    """Step token counts of a closed loop: prefill chunks of <= 2048 tokens, decode steps of c,
    and a tail of c-1 .. 1 as the last requests finish."""
    hist: dict[int, int] = {}
    for _wave in range(num_requests // c):
        tokens = c * PROMPT
        while tokens > 0:
            hist[min(tokens, 2048)] = hist.get(min(tokens, 2048), 0) + 1
            tokens -= 2048
    hist[c] = hist.get(c, 0) + (num_requests // c) * (OUTPUT - 1) - (c - 1)
    for k in range(1, c):
        hist[k] = hist.get(k, 0) + 1
    return dict(sorted(hist.items()))


def step_stats(
    hist: dict[int, int], sizes: list[int], resolved: str, c: int, label_compiled: bool = False
) -> tuple[float, float, dict]:
    """(padding waste %, eager fraction, runtime modes) as the engine would count them."""
    steps = sum(hist.values())
    wasted, eager, modes = 0.0, 0, {}
    for n, count in hist.items():
        padded = pad_to(sizes, n) if sizes and resolved not in ("NONE", "") else None
        mode = "NONE" if padded is None else ("FULL" if n <= c and resolved.startswith("FULL") else "PIECEWISE")
        if resolved == "":  # a peer: HF compiled with reduce-overhead replays graphs of the exact size
            padded, mode = (n, "FULL") if label_compiled else (None, "NONE")
        modes[mode] = modes.get(mode, 0) + count
        if padded is None:
            eager += count
        else:
            wasted += count * (padded - n) / padded
    return 100 * wasted / steps, eager / steps, modes


def latency(p99: float) -> dict:
    return {"mean": 0.6 * p99, "p50": 0.5 * p99, "p90": 0.9 * p99, "p99": p99}


def summarize(repeats: list[dict]) -> dict:
    def stats(values: list[float]) -> dict:
        q = statistics.quantiles(values, n=4, method="inclusive")
        median = statistics.median(values)
        spread = 100 * (max(values) - min(values)) / median if median else 0.0
        return {"median": median, "iqr": q[2] - q[0], "min": min(values), "max": max(values),
                "spread_pct": spread, "n": len(values)}  # fmt: skip

    out = {}
    for key, value in repeats[0].items():
        if isinstance(value, (int, float)):
            out[key] = stats([r[key] for r in repeats])
        elif key.endswith("_ms"):
            for stat in value:
                out[f"{key[:-3]}_{stat}_ms"] = stats([r[key][stat] for r in repeats])
    return out


def workload(label: str, c: int, sizes: list[int], resolved: str) -> dict:
    _, _, out_tps, tpot99, ttft99 = CURVES[label]
    num_requests = 4 * c
    hist = histogram(c, num_requests)
    waste_pct, eager, modes = step_stats(hist, sizes, resolved, c, label == "hf-compile")
    repeats = []
    for f in (0.99, 1.0, 1.01):
        out = out_tps(c) * f
        tpot, ttft = tpot99(c) / f, ttft99(c) / f
        repeats.append(
            {
                "output_tokens_per_s": out, "total_tokens_per_s": out * (PROMPT + OUTPUT) / OUTPUT,
                "duration_s": num_requests * OUTPUT / out, "num_steps": sum(hist.values()),
                "step_ms": latency(0.9 * tpot), "ttft_ms": latency(ttft), "tpot_ms": latency(tpot),
                "itl_ms": latency(tpot), "e2e_ms": latency(ttft + (OUTPUT - 1) * tpot),
                "padding_waste_pct": waste_pct, "padding_overhead": 0.0, "eager_fraction": eager,
                "runtime_modes": modes, "batch_size_histogram": {str(k): v for k, v in hist.items()},
                "peak_memory_bytes": 5_000_000_000,
            }
        )  # fmt: skip
    return {
        "name": f"closed-c{c}", "kind": "closed", "concurrency": c, "request_rate": None,
        "prompt_len": {"dist": "fixed", "value": PROMPT}, "output_len": {"dist": "fixed", "value": OUTPUT},
        "num_requests": num_requests, "seed": 0, "repeats": repeats, "summary": summarize(repeats),
    }  # fmt: skip


def point(label: str, index: int, *, warm: bool = False) -> dict:
    system, kwargs, *_ = CURVES[label]
    if system == "graphbench":
        config = engine_config(kwargs)
        sizes = config["compilation"]["cudagraph_capture_sizes"]
        requested = config["compilation"]["cudagraph_mode"]
        resolved = "FULL_AND_PIECEWISE" if requested == "FULL" else requested
        reason = "attention backend cannot run mixed batches in a FULL graph" if resolved != requested else ""
        seqs = config["scheduler"]["max_num_seqs"]
        graphs = {m: num_graphs(m, sizes, seqs) for m in ("FULL", "PIECEWISE")} if resolved != "NONE" else {}
        if resolved == "PIECEWISE":
            graphs = {"PIECEWISE": len(sizes)}
        elif resolved == "NONE":
            sizes = []
    else:
        config = {"model": {"model": MODEL, "dtype": "bfloat16"}, "peer": {"static_cache": system == "hf-compile"}}
        sizes, requested, resolved, reason, graphs = [], "", "", "", {}
    def start(cold: bool) -> dict:
        parts, total, mib = STARTUP[label]
        if not cold:
            parts, total = WARM[label]
        out = {p: parts.get(p, 0.0) for p in PARTS}
        out.update(
            cold=cold, total_s=total, graph_memory_bytes=None if mib is None else mib * MIB, num_graphs=graphs,
            kv_cache_tokens=1_000_000, capture_sizes=sizes,
        )  # fmt: skip
        if system == "graphbench":
            out["cudagraph_mode"] = {"requested": requested, "resolved": resolved, "reason": reason}
        return out

    startups = [start(True), start(False)] if label in WARM_IN_POINT else [start(not warm)]
    env = dict(ENV, transformers="5.17.0") if system != "graphbench" else dict(ENV)
    return {
        "label": label, "system": system, "status": "ok", "failure": None,
        "created_utc": f"2026-11-29T10:{index:02d}:00Z", "environment": env, "model": MODEL,
        "config": config, "config_hash": f"{index:010x}",
        "sweep": {"id": "fixture-sweep", "point": {"label": label, "warm": warm}},
        "startup": startups[-1], "startups": startups,
        "workloads": [] if warm else [workload(label, c, sizes, resolved) for c in CONCURRENCIES],
    }  # fmt: skip


def failed_point(index: int) -> dict:
    config = engine_config({"optimization_level": 2, "cudagraph_mode": "FULL"})
    return {
        "label": "O2-FULL-oom", "system": "graphbench", "status": "failed",
        "failure": {"reason": "CUDA out of memory during graph capture (size 512)",
                    "stderr_tail": "Traceback (most recent call last):\n  ...\n"
                                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
        "created_utc": f"2026-11-29T10:{index:02d}:00Z", "environment": dict(ENV), "model": MODEL,
        "config": config, "config_hash": f"{index:010x}",
        "sweep": {"id": "fixture-sweep", "point": {"label": "O2-FULL-oom"}}, "startup": None, "workloads": [],
    }  # fmt: skip


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    index = 0
    for label in CURVES:
        index += 1
        write_result(OUT, MACHINE, label, point(label, index))
        if label in WARM and label not in WARM_IN_POINT:
            index += 1
            write_result(OUT, MACHINE, label, point(label, index, warm=True))
    write_result(OUT, MACHINE, "O2-FULL-oom", failed_point(index + 1))
    bad = OUT / MACHINE
    (bad / "9998_truncated.json").write_text('{"schema_version": 1, "kind": "graphbench-result", "label"')
    (bad / "9999_future.json").write_text(json.dumps({"schema_version": 99, "kind": "graphbench-result"}))
    assert math.isclose(CURVES["O2-default"][3](20), 50.0)
    print(f"wrote {len(list(bad.glob('*.json')))} files under {OUT}")


if __name__ == "__main__":
    main()
