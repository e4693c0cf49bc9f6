"""Measurement on the CPU: workloads, metrics, padding accounting, `graphbench run`."""

from __future__ import annotations


import pytest
import torch
from typer.testing import CliRunner

from graphbench.bench import cold_start
from graphbench.bench.metrics import distribution, step_metrics, summarize
from graphbench.reports.stats import quantile
from graphbench.bench.workloads import LengthDist, Workload, load_trace
from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results

runner = CliRunner()


def test_workloads_are_seeded_and_reproducible():
    w = Workload(kind="closed", concurrency=4, prompt_len=LengthDist.parse("uniform:10-20", "p"),
                 output_len=LengthDist.parse("normal:8,2", "o"), seed=5)
    a, b = w.requests(), w.requests()
    assert a == b and len(a) == 16
    assert all(10 <= s.prompt_len <= 20 and s.output_len >= 1 and s.arrival_s is None for s in a)
    assert Workload(kind="closed", concurrency=4, seed=6).requests() == Workload(kind="closed", concurrency=4, seed=6).requests()
    p = Workload(kind="poisson", request_rate=10.0, num_requests=200, seed=1).requests()
    arrivals = [s.arrival_s for s in p]
    assert arrivals == sorted(arrivals) and 10 < arrivals[-1] < 30  # mean gap 0.1 s


@pytest.mark.parametrize("text", ["0", "uniform:5-2", "normal:x", "weird:3", "-4"])
def test_bad_lengths(text):
    with pytest.raises(GraphbenchError):
        LengthDist.parse(text, "--prompt-len")


def test_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0.5, "prompt_len": 10, "output_len": 4}\n\n{"arrival_s": 0.1, "prompt_len": 3, "output_len": 2}\n')
    specs = load_trace(path)
    # sorted, and replayed from the first request
    assert [(s.arrival_s, s.prompt_len, s.output_len) for s in specs] == [(0.0, 3, 2), (pytest.approx(0.4), 10, 4)]
    path.write_text('{"arrival_s": 0.5, "prompt_len": 10}\n')
    with pytest.raises(GraphbenchError, match="t.jsonl:1"):
        load_trace(path)


def test_quantiles_and_summary_exact():
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([10, 20, 30, 40, 50], 0.9) == 46.0
    assert distribution([2.0, 4.0]) == {"mean": 3.0, "p50": 3.0, "p90": 3.8, "p99": 3.98}
    s = summarize([{"output_tokens_per_s": 100.0, "tpot_ms": {"p50": 1.0, "p99": 2.0}},
                   {"output_tokens_per_s": 110.0, "tpot_ms": {"p50": 1.2, "p99": 2.2}},
                   {"output_tokens_per_s": 90.0, "tpot_ms": {"p50": 0.8, "p99": 1.8}}])
    assert s["output_tokens_per_s"] == {"median": 100.0, "iqr": 10.0, "min": 90.0, "max": 110.0,
                                        "spread_pct": 20.0, "n": 3}
    assert s["tpot_p99_ms"]["median"] == 2.0


class _Rec:
    def __init__(self, n, padded, mode, seconds=0.001, launch_seconds=0.0):
        from graphbench.runner.scheduler import BatchDescriptor

        self.descriptor, self.padded_tokens, self.runtime_mode, self.seconds = BatchDescriptor(n, n, True), padded, mode, seconds
        self.launch_seconds, self.capture_seconds = launch_seconds, 0.0


def test_step_metrics_padding_definitions():
    m = step_metrics([_Rec(9, 16, "FULL"), _Rec(16, 16, "FULL", 0.002, 0.0005), _Rec(600, 600, "NONE", 0.009, 0.004)])
    assert m["padding_waste_pct"] == pytest.approx(100 * (7 / 16) / 3)
    assert m["padding_overhead"] == pytest.approx((16 + 16 + 600) / (9 + 16 + 600) - 1)
    assert m["eager_fraction"] == pytest.approx(1 / 3)
    assert m["batch_size_histogram"] == {"9": 1, "16": 1, "600": 1}
    assert m["runtime_modes"] == {"FULL": 2, "NONE": 1}
    assert m["step_ms_by_mode"]["FULL"]["n"] == 2 and m["step_ms_by_mode"]["FULL"]["total_ms"] == pytest.approx(3.0)
    assert m["step_ms_by_mode"]["NONE"]["p50"] == pytest.approx(9.0)
    assert m["step_ms_by_mode"]["FULL"]["launch_total_ms"] == pytest.approx(0.5)
    assert m["slowest_steps"][0]["launch_ms"] == pytest.approx(4.0)
    assert [(s["num_tokens"], s["runtime_mode"]) for s in m["slowest_steps"]] == [(600, "NONE"), (16, "FULL"), (9, "FULL")]


def test_measured_padding_matches_the_ladder_prediction():
    """A uniform-decode workload through a dispatcher with a (simulated, CPU) ladder pads as `graphbench ladder` predicts."""
    from graphbench.bench.driver import run_engine_workload
    from graphbench.config import CUDAGraphMode, load_engine_config
    from graphbench.ladders import capture_sizes, waste
    from graphbench.runner.dispatcher import CudagraphDispatcher
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={"model.device": "cpu", "optimization_level": 0,
                                                  "scheduler.max_num_seqs": 16, "scheduler.max_num_batched_tokens": 256}))
    sizes = list(capture_sizes(16).sizes)
    # On the CPU nothing is recorded: PIECEWISE keys make the eager forward run at the padded size.
    engine.runner.dispatcher = CudagraphDispatcher(CUDAGraphMode.PIECEWISE, sizes, 16)
    workload = Workload(kind="closed", concurrency=11, num_requests=11,
                        prompt_len=LengthDist("fixed", 8), output_len=LengthDist("uniform", 4, 24), seed=3)
    rep = run_engine_workload(engine, workload)
    hist = {int(k): v for k, v in rep["batch_size_histogram"].items()}
    predicted = 100 * sum(v * (waste(sizes, n) or 0.0) for n, v in hist.items()) / sum(hist.values())
    assert abs(rep["padding_waste_pct"] - predicted) < 0.5
    assert rep["padding_waste_pct"] > 0  # decode batches of 11..1 requests were padded
    assert set(rep["runtime_modes"]) <= {"PIECEWISE", "NONE"}


def test_warm_up_is_a_full_pass_of_other_prompts_with_the_same_lengths_and_concurrency(monkeypatch):
    """The warm-up is one whole pass of the workload: the same prompt and output lengths and concurrency
    (so every step size the repeats meet has run once, the long tail of decode batches included), other
    prompts than the measured repeats'."""
    from graphbench.bench import driver
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={"model.device": "cpu", "optimization_level": 0,
                                                  "scheduler.max_num_seqs": 4, "scheduler.max_num_batched_tokens": 64}))
    workload = Workload(kind="closed", concurrency=3, num_requests=5, prompt_len=LengthDist("uniform", 5, 12),
                        output_len=LengthDist("uniform", 2, 40), seed=1)
    added = []
    add_request = engine.add_request
    monkeypatch.setattr(engine, "add_request", lambda prompt, params, lora=None: added.append(
        (list(prompt), params.max_tokens)) or add_request(prompt, params, lora))
    driver.warm_up(engine, workload)
    specs = workload.requests()
    warm = list(added)
    # full outputs, not capped (a capped pass left the first repeat 2-4x slower at high concurrency)
    assert [(len(p), n) for p, n in warm] == [(s.prompt_len, s.output_len) for s in specs]
    assert max(n for _, n in warm) > 16
    added.clear()
    rep = driver.run_engine_workload(engine, workload)  # a measured repeat: the same lengths
    assert [(len(p), n) for p, n in added] == [(s.prompt_len, s.output_len) for s in specs]
    assert all(w[0] != m[0] for w, m in zip(warm, added))  # ... of other prompts
    assert rep["num_requests"] == 5


def test_a_text_workload_reads_its_stop_tokens_before_the_clock_starts(monkeypatch):
    """Loading the checkpoint's tokenizer (0.2-0.9 s) was inside every timed repeat of a text workload."""
    import time

    from graphbench.bench import driver
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={"model.device": "cpu", "optimization_level": 0,
                                                  "scheduler.max_num_seqs": 4, "scheduler.max_num_batched_tokens": 64}))
    workload = Workload(kind="closed", concurrency=2, num_requests=2, prompt_len=LengthDist("fixed", 4),
                        output_len=LengthDist("fixed", 3), prompt_kind="text")
    monkeypatch.setattr(driver, "workload_prompts", lambda w, vocab, offset, model: [[1, 2, 3, 4], [5, 6, 7, 8]])
    monkeypatch.setattr(driver, "checkpoint_stops", lambda model: time.sleep(1.0) or (2,))
    rep = driver.run_engine_workload(engine, workload)
    assert rep["num_requests"] == 2 and rep["duration_s"] < 1.0
    engine.close()


def test_graphbench_run_writes_a_result(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHBENCH_DIRECT_LAUNCH", "0")  # a switch changed from its default ("1")
    monkeypatch.setenv("GRAPHBENCH_PDL", "1")  # a switch set to its default: nothing changed
    result = runner.invoke(app, ["run", "--device", "cpu", "-O0", "--max-num-seqs", "8", "--max-num-batched-tokens", "256",
                                 "--concurrency", "1,2", "--prompt-len", "16", "--output-len", "6", "--repeats", "2",
                                 "--results", str(tmp_path), "--label", "tiny", "-q"])
    assert result.exit_code == 0, result.output
    loaded = load_results([tmp_path])
    assert not loaded.skipped and len(loaded.results) == 1
    r = loaded.results[0]
    assert (r["schema_version"], r["kind"], r["label"], r["status"], r["system"]) == (2, "graphbench-result", "tiny", "ok", "graphbench")
    assert r["environment"]["torch"] and r["environment"]["device"] == "cpu" and r["config_hash"]
    assert r["environment"]["switches"] == {"GRAPHBENCH_DIRECT_LAUNCH": "0"}
    assert r["config"]["optimization_level"] == 0
    assert [w["name"] for w in r["workloads"]] == ["closed-c1", "closed-c2"]
    w = r["workloads"][1]
    assert len(w["repeats"]) == 2 and w["repeats"][0]["num_requests"] == 6  # 3 x C by default
    assert w["summary"]["output_tokens_per_s"]["n"] == 2
    assert r["startup"]["cudagraph_mode"]["resolved"] == "NONE"
    assert r["_path"].endswith("0001_tiny.json")
    # never overwritten: a second run gets the next number
    runner.invoke(app, ["run", "--device", "cpu", "-O0", "--concurrency", "1", "--output-len", "2", "--prompt-len", "4",
                        "--repeats", "1", "--results", str(tmp_path), "--label", "tiny", "-q"])
    names = sorted(p.name for p in tmp_path.rglob("*.json"))
    assert names == ["0001_tiny.json", "0002_tiny.json"]


def test_run_bad_workload_is_exit_2(tmp_path):
    for args in (["--concurrency", "0"], ["--prompt-len", "x"], ["--request-rate", "fast"], ["--repeats", "0"],
                 ["--trace", str(tmp_path / "missing.jsonl"), "--concurrency", ""]):
        result = runner.invoke(app, ["run", "--device", "cpu", "-O0", "--results", str(tmp_path), *args])
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_a_schema_v1_result_is_migrated(tmp_path):
    import json as _json

    v1 = {"schema_version": 1, "kind": "graphbench-result", "label": "old", "system": "graphbench", "status": "ok",
          "startup": {"cold": True, "total_s": 3.0, "dynamo_s": 1.0, "inductor_s": 1.5, "capture_s": 0.2},
          "workloads": []}
    (tmp_path / "0001_old.json").write_text(_json.dumps(v1))
    (tmp_path / "0002_bad.json").write_text("{not json")
    loaded = load_results([tmp_path])
    (r,) = loaded.results
    assert r["schema_version"] == 2
    assert r["startups"] == [r["startup"]] and r["startup"]["cache_cleared"] is True
    assert r["startup"]["compile_loaded"] is False and r["startup"]["loaded_s"] == 0.0
    assert [p.name for p, _ in loaded.skipped] == ["0002_bad.json"]


def test_cold_start_in_its_own_process_then_warm_first_start(tmp_path, monkeypatch):
    # a compiled config's cold start runs in a child process, on every device (so the warm start is its process's first)
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "cache"))
    result = runner.invoke(app, ["run", "--device", "cpu", "-O1", "--max-num-seqs", "4", "--max-num-batched-tokens", "32",
                                 "--concurrency", "1", "--prompt-len", "4", "--output-len", "2", "--repeats", "1",
                                 "--results", str(tmp_path / "results"), "--label", "own", "--cold", "-q"])
    assert result.exit_code == 0, result.output
    cold, warm = load_results([tmp_path / "results"]).results[0]["startups"]
    assert cold["own_process"] is True and cold["cold"] and cold["cache_cleared"] and not cold["compile_loaded"]
    # (every piece is graphbench's ops: it runs as traced, so Inductor compiles nothing at -O1)
    assert cold["dynamo_s"] > 0 and cold["inductor_s"] == 0
    # the warm start found what the child compiled: loaded, no Dynamo, no Inductor, same directory
    assert "own_process" not in warm and not warm["cold"] and warm["compile_loaded"] and warm["dynamo_s"] == 0
    assert warm["compile_cache_dir"] == cold["compile_cache_dir"]


def test_without_compilation_the_cold_start_stays_in_process(tmp_path):
    result = runner.invoke(app, ["run", "--device", "cpu", "-O0", "--concurrency", "1", "--prompt-len", "4",
                                 "--output-len", "2", "--repeats", "1", "--results", str(tmp_path), "--cold", "-q"])
    assert result.exit_code == 0, result.output
    starts = load_results([tmp_path]).results[0]["startups"]
    assert len(starts) == 2 and not any("own_process" in s for s in starts)


def test_a_failed_cold_start_process_fails_the_point_with_its_reason(tmp_path):
    result = runner.invoke(app, ["run", "--device", "cpu", "-O1", "--attention-backend", "triton", "--concurrency", "1",
                                 "--results", str(tmp_path), "--cold", "-q"])
    assert result.exit_code == 2
    assert "the cold start (own process) failed" in result.output and "needs a CUDA device" in result.output


def test_allocator_calls_read_from_the_allocator_stats(monkeypatch):
    import torch

    from graphbench.bench.driver import _allocator_calls

    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {"num_device_alloc": 7, "num_device_free": 2,
                                                             "num_alloc_retries": 1, "allocated_bytes.all.current": 9})
    assert _allocator_calls() == {"device_mallocs": 7, "device_frees": 2, "allocator_retries": 1}
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {})  # a torch without these counters
    assert _allocator_calls() == {"device_mallocs": 0, "device_frees": 0, "allocator_retries": 0}


def test_run_scales_short_closed_loop_repeats_to_the_target(tmp_path):
    """--target-repeat-s: the first pass's duration sets the scale; every repeat then runs scale x the
    requests, and the result records the calibration. --num-requests switches it off."""
    from graphbench.bench.repeats import repeat_scale

    common = ["run", "--device", "cpu", "-O0", "--max-num-seqs", "4", "--concurrency", "1", "--prompt-len", "4",
              "--output-len", "2", "--repeats", "2", "-q"]
    result = runner.invoke(app, [*common, "--target-repeat-s", "1", "--results", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    (r,) = load_results([tmp_path / "a"]).results
    (w,) = r["workloads"]
    cal = w["calibration"]
    assert cal["target_repeat_s"] == 1.0 and cal["scale"] == repeat_scale(cal["first_pass_s"], 1.0) > 1
    assert [rep["num_requests"] for rep in w["repeats"]] == [3 * cal["scale"]] * 2 == [w["num_requests"]] * 2
    result = runner.invoke(app, [*common, "--target-repeat-s", "1", "--num-requests", "3", "--results", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    (w,) = load_results([tmp_path / "b"]).results[0]["workloads"]
    assert w["calibration"]["scale"] == 1 and [rep["num_requests"] for rep in w["repeats"]] == [3, 3]


def test_gpt_fast_peer_needs_a_checkout_and_builds_the_architectures_shapes(tmp_path):
    """benchmarks/decode.py's gpt-fast peer runs gpt-fast's own model.py: a folder without one is a clear error;
    with a stand-in model.py (the ModelArgs/Transformer names gpt-fast defines) the shapes come from the arch."""
    from benchmarks.decode_timing import build_gpt_fast_model
    from graphbench.config import load_arch

    arch = load_arch("tiny-llama")
    with pytest.raises(FileNotFoundError, match="no gpt-fast model.py under"):
        build_gpt_fast_model(str(tmp_path), arch, "cpu")
    (tmp_path / "model.py").write_text(
        "import dataclasses, torch\n"
        "@dataclasses.dataclass\n"
        "class ModelArgs:\n"
        "    block_size: int = 0; vocab_size: int = 0; n_layer: int = 0; n_head: int = 0; dim: int = 0\n"
        "    intermediate_size: int = 0; n_local_heads: int = 0; rope_base: float = 0; norm_eps: float = 0\n"
        "    rope_scaling: object = None\n"
        "class Transformer(torch.nn.Module):\n"
        "    def __init__(self, config):\n"
        "        super().__init__(); self.config = config\n"
        "        self.tok_embeddings = torch.nn.Embedding(config.vocab_size, config.dim)\n"
        "        self.output = torch.nn.Linear(config.dim, config.vocab_size, bias=False)\n")
    model = build_gpt_fast_model(str(tmp_path), arch, "cpu")
    c = model.config
    assert (c.vocab_size, c.n_layer, c.n_head, c.n_local_heads, c.dim, c.intermediate_size) == (
        arch.vocab_size, arch.num_hidden_layers, arch.num_attention_heads, arch.num_key_value_heads,
        arch.hidden_size, arch.intermediate_size)
    assert c.rope_base == arch.rope_theta and model.output.weight.dtype == torch.bfloat16
    assert (model.output.weight is model.tok_embeddings.weight) == arch.tie_word_embeddings


def test_a_round_on_its_own_kernel_search_starts_warm_once_unmeasured_before_the_measured_start(tmp_path, monkeypatch):
    """A sweep round whose config names its own kernel search: a warm start in a child process first (it compiles
    the round's kernels into the entry; on the CPU there are none), then the measured warm start, which records
    the child's seconds as primed_s."""
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "cache"))
    (tmp_path / "round.toml").write_text('[model]\nkernel_search = "0123456789ab-r2"\n')
    args = ["run", "--device", "cpu", "-O1", "--max-num-seqs", "4", "--max-num-batched-tokens", "32", "--concurrency",
            "1", "--prompt-len", "4", "--output-len", "2", "--repeats", "1", "-q"]
    first = runner.invoke(app, [*args, "--results", str(tmp_path / "r1"), "--cold"])
    assert first.exit_code == 0, first.output
    from graphbench.bench import engine_start

    order, real_child, real_start = [], cold_start.start_in_child, engine_start.start_engine

    def child(config, cold):  # the real child process, watched
        record = real_child(config, cold)
        order.append(("child", cold, record))
        return record

    def measured(config, cold):
        order.append(("measured", cold, None))
        return real_start(config, cold)

    monkeypatch.setattr(cold_start, "start_in_child", child)
    monkeypatch.setattr(engine_start, "start_engine", measured)
    later = runner.invoke(app, [*args, "--results", str(tmp_path / "r2"), "--config", str(tmp_path / "round.toml")])
    assert later.exit_code == 0, later.output
    (warm,) = load_results([tmp_path / "r2"]).results[0]["startups"]
    assert warm["primed_s"] > 0 and warm["compile_loaded"] and not warm["cold"] and "own_process" not in warm
    assert [(who, cold) for who, cold, _ in order] == [("child", False), ("measured", False)]  # the child first, warm
    primed = order[0][2]
    assert not primed["cold"] and primed["compile_loaded"] and primed["own_process"]
    assert primed["compile_cache_dir"] == warm["compile_cache_dir"] and warm["primed_s"] == primed["total_s"]
    (plain,) = [s for s in load_results([tmp_path / "r1"]).results[0]["startups"] if not s["cold"]]
    assert "primed_s" not in plain  # a start on its entry's own choices: nothing to compile first
