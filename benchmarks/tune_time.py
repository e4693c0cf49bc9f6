"""Does `tune --objective time` predict what a ladder costs? The curve, two traffics, four runs.

    python benchmarks/tune_time.py --model llama-3.2-1b --max-size 512 --graphs 16 --out-dir $OUT/tune-time

1. `graphbench curve`: the step time of every batch size 1..MAX (own FULL recordings) and eager every 32.
2. For each traffic (a batch-size distribution), `tune --objective time` with at most N graphs: the
   tuned ladder and its expected ms per step; the default ladder's expectation beside it.
3. Each ladder in a fresh engine (FULL_DECODE_ONLY, that ladder only), the traffic replayed as a
   seeded sequence of pure-decode batch sizes (bench/curve_measure.py's `replay_batch_sizes`): the
   measured mean ms per step against the prediction. Prints one table; writes JSON and charts.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path


def traffics(max_size: int) -> dict[str, dict[int, float]]:
    """Two batch-size distributions: every size alike, and six closed-loop levels with their tails."""
    uniform = {n: 1.0 for n in range(1, max_size + 1)}
    levels = [c for c in (6, 12, 48, 100, 200, 333) if c <= max_size]
    mixed: dict[int, float] = {}
    for c in levels:  # 0.9 on C, 0.1 spread over 1..C-1 (tune's closed:C model), the levels alike
        mixed[c] = mixed.get(c, 0.0) + 0.9
        for n in range(1, c):
            mixed[n] = mixed.get(n, 0.0) + 0.1 / (c - 1)
    return {"uniform-1-%d" % max_size: uniform, "closed-levels-" + "-".join(map(str, levels)): mixed}


def draw(dist: dict[int, float], steps: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    sizes, weights = list(dist), list(dist.values())
    return rng.choices(sizes, weights, k=steps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--max-size", type=int, default=512)
    p.add_argument("--graphs", type=int, default=16)
    p.add_argument("--eager-every", type=int, default=32)
    p.add_argument("--steps", type=int, default=3000, help="replayed steps per traffic and ladder")
    p.add_argument("--out-dir", default="tune-time")
    args = p.parse_args()
    from preflight import check_model

    check_model(args.model, "auto")

    from graphbench.bench.curve_measure import DecodePool, derived_config, measure_step_curve, replay_batch_sizes
    from graphbench.config import load_engine_config
    from graphbench.ladders.plot_curve import plot_step_curve
    from graphbench.ladders.sizes import capture_sizes
    from graphbench.ladders.step_curve import write_curve
    from graphbench.ladders.tune import evaluate_ladder, tune_ladder
    from graphbench.runner.engine import Engine

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = load_engine_config(overrides={"model.model": args.model, "optimization_level": args.level})
    started = time.perf_counter()
    curve = measure_step_curve(config, args.max_size, eager_every=args.eager_every)
    curve_s = time.perf_counter() - started
    write_curve(out / "curve.json", curve)
    print(f"curve 1..{args.max_size}: {curve_s:.0f} s in all ({curve.meta['startup']['capture_s']:.1f} s of capture, "
          f"{len(curve.eager_ms)} eager sizes); {curve.graph_ms[1]:.3f} ms at 1, "
          f"{curve.graph_ms[args.max_size]:.3f} ms at {args.max_size}", flush=True)

    default = tuple(capture_sizes(args.max_size).sizes)
    rows, plans = [], []
    for name, dist in traffics(args.max_size).items():
        tuned = tune_ladder(dist, args.graphs, objective="time", top=args.max_size, step_curve=curve)
        base = evaluate_ladder(default, dist, objective="time", step_curve=curve)
        plans.append((name, dist, {"tuned": tuned, "default": base}))
        plot_step_curve(curve, out / f"{name}.png", {"tuned": tuned.sizes, "default": default})
    for name, dist, ladders in plans:
        sequence = draw(dist, args.steps, seed=0)
        for label, ladder in ladders.items():
            engine = Engine(derived_config(config, {
                "scheduler.max_num_seqs": args.max_size, "compilation.cudagraph_mode": "FULL_DECODE_ONLY",
                "compilation.cudagraph_capture_sizes": list(ladder.sizes),
                "compilation.max_cudagraph_capture_size": max(ladder.sizes)}))
            try:
                measured = replay_batch_sizes(engine, DecodePool(engine, args.max_size), sequence)
                capture = {"capture_s": engine.report.capture_seconds, "graph_memory_bytes": engine.report.graph_memory_bytes}
            finally:
                engine.close()
            row = {"traffic": name, "ladder": label, "num_graphs": len(ladder.sizes), "sizes": list(ladder.sizes),
                   "predicted_ms": ladder.expected_step_ms, "measured_ms": measured["mean_step_ms"],
                   "measured": measured, **capture}
            row["error_pct"] = 100 * (row["predicted_ms"] / row["measured_ms"] - 1)
            rows.append(row)
            print(f"{name} {label}: predicted {row['predicted_ms']:.4f} ms, measured {row['measured_ms']:.4f} ms "
                  f"({row['error_pct']:+.2f}%), {len(ladder.sizes)} graphs", flush=True)
    (out / "tune-time.json").write_text(json.dumps({"curve_seconds": curve_s, "rows": rows}, indent=1))
    print(f"\n{'traffic':<34}{'ladder':<9}{'graphs':>7}{'predicted':>11}{'measured':>10}{'error':>8}{'capture s':>10}")
    for r in rows:
        print(f"{r['traffic']:<34}{r['ladder']:<9}{r['num_graphs']:>7}{r['predicted_ms']:>11.4f}{r['measured_ms']:>10.4f}"
              f"{r['error_pct']:>+7.2f}%{r['capture_s']:>10.2f}")
    for name, _, _ in plans:
        t, d = (next(r for r in rows if r["traffic"] == name and r["ladder"] == lab) for lab in ("tuned", "default"))
        print(f"{name}: tuned {t['measured_ms']:.4f} ms vs default {d['measured_ms']:.4f} ms measured "
              f"({100 * (t['measured_ms'] / d['measured_ms'] - 1):+.2f}%)")


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
