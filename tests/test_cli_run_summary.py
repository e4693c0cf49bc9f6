"""`graphbench run`'s closing summary, read back from the result file: a peer's and graphbench's."""

from __future__ import annotations

import json

from graphbench.cli.run import _print_summary


def _result(tmp_path, system: str, startups: list[dict]) -> object:
    summary = {"output_tokens_per_s": {"median": 123.0, "spread_pct": 1.5}, "tpot_p50_ms": {"median": 2.0}}
    workload = {"name": "closed-c1", "summary": summary}
    data = {"label": system if system != "graphbench" else "O2_default", "system": system, "model": "tiny-llama",
            "environment": {"gpu": None}, "startup": startups[-1], "startups": startups, "workloads": [workload]}
    path = tmp_path / "0001.json"
    path.write_text(json.dumps(data))
    return path


def _graphbench_startup(cold: bool, total_s: float, dynamo_s: float) -> dict:
    return {"cold": cold, "total_s": total_s, "load_s": 0.01, "dynamo_s": dynamo_s, "inductor_s": 0.0,
            "compile_sizes_s": 0.0, "loaded_s": 0.0, "capture_s": 0.0, "capture_precompiled": [0, 0.0],
            "graph_memory_bytes": 0, "cudagraph_mode": {"resolved": "NONE"}, "static_variants": {}, "kernel_choices": {}}


def test_a_peer_run_prints_its_load_and_first_call(tmp_path, capsys) -> None:
    # a peer's start-up has no compile or capture fields (bench/peers.py): the summary read them and failed
    startup = {"cold": True, "total_s": 2.8, "load_s": 2.8, "first_call_s": 1.3, "num_graphs": {}, "cudagraph_mode": {},
               "capture_sizes": []}
    _print_summary(_result(tmp_path, "hf-compile", [startup]))
    out = capsys.readouterr().out
    assert "hf-compile (hf-compile) tiny-llama on cpu: start-up 2.8 s (load 2.8 s; the first call, its compile " \
           "included, 1.3 s)" in out
    assert "closed-c1" in out and "123" in out


def test_a_graphbench_run_prints_its_start_up(tmp_path, capsys) -> None:
    _print_summary(_result(tmp_path, "graphbench", [_graphbench_startup(False, 0.2, 0.0)]))
    out = capsys.readouterr().out
    assert "O2_default (graphbench) tiny-llama on cpu: start-up 0.2 s (compile 0.0 s, capture 0.0 s, graph memory " \
           "0.00 GiB), mode NONE" in out


def test_a_cold_run_prints_the_cold_start_and_the_warm_one(tmp_path, capsys) -> None:
    # `run --cold` measures a cold start, then a warm one: the summary showed only the warm one
    starts = [_graphbench_startup(True, 2.5, 2.3), _graphbench_startup(False, 0.1, 0.0)]
    _print_summary(_result(tmp_path, "graphbench", starts))
    out = capsys.readouterr().out
    assert "tiny-llama on cpu: cold start-up 2.5 s (compile 2.3 s, capture 0.0 s, graph memory 0.00 GiB), mode NONE" in out
    assert "\nwarm start-up 0.1 s (compile 0.0 s, capture 0.0 s" in out
