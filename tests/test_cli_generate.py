"""`graphbench generate` through typer's runner."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from graphbench.cli.main import app

runner = CliRunner()
BASE = ["generate", "--device", "cpu", "-O0", "--max-num-seqs", "4", "--max-num-batched-tokens", "64"]


def test_generate_json_prints_the_outputs_the_startup_and_each_steps_mode():
    result = runner.invoke(app, [*BASE, "-p", "1,2,3", "-p", "4,5", "--max-tokens", "6", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [o["prompt_token_ids"] for o in data["outputs"]] == [[1, 2, 3], [4, 5]]
    assert [len(o["token_ids"]) for o in data["outputs"]] == [6, 6]
    assert set(data) == {"outputs", "startup", "runtime_modes", "steps"}
    # the start-up as a result file keeps it (docs/RESULTS_SCHEMA.md), from the engine's own report
    startup = data["startup"]
    assert {"total_s", "load_s", "kv_cache_s", "dynamo_s", "inductor_s", "capture_s", "graph_memory_bytes",
            "num_graphs", "cudagraph_mode", "kv_cache_tokens"} <= set(startup)
    assert startup["total_s"] >= startup["load_s"] > 0 and startup["cudagraph_mode"]["resolved"] == "NONE"
    # one prefill step for both prompts, then 5 decode steps of 2 requests; on the CPU every step runs NONE
    assert data["runtime_modes"] == {"decode": {"NONE": 5}, "mixed": {"NONE": 1}}
    assert [(s["kind"], s["num_tokens"], s["num_reqs"], s["runtime_mode"]) for s in data["steps"]] == [
        ("mixed", 5, 2, "NONE"), *[("decode", 2, 2, "NONE")] * 5]
    assert all(s["ms"] > 0 and s["padded_tokens"] == s["num_tokens"] for s in data["steps"])


def test_generate_matches_the_library():
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine
    from graphbench.runner.request import SamplingParams

    result = runner.invoke(app, [*BASE, "-p", "9,8,7", "--max-tokens", "5", "--format", "json"])
    engine = Engine(load_engine_config(overrides={"model.device": "cpu", "optimization_level": 0,
                                                  "scheduler.max_num_seqs": 4,
                                                  "scheduler.max_num_batched_tokens": 64}))
    assert json.loads(result.stdout)["outputs"][0]["token_ids"] == engine.generate([[9, 8, 7]], SamplingParams(max_tokens=5))[0]


def test_generate_table():
    result = runner.invoke(app, [*BASE, "-p", "1,2,3", "--max-tokens", "3"])
    assert result.exit_code == 0
    assert "tiny-llama -O0" in result.stdout and "1,2,3" in result.stdout
    # the README's promise: the start-up report's phases and which runtime mode each step ran
    lines = result.stdout.splitlines()
    assert any(re.fullmatch(r"start-up \d+\.\d\d s: weights \d+\.\d\d s(, .+)?", line) for line in lines), lines
    assert "CUDA graphs: none (cudagraph mode NONE)" in lines
    assert any(line.startswith("KV cache ") and " tokens (" in line for line in lines)
    assert lines[-1] == "steps by runtime mode: decode NONE 2; mixed (prefill) NONE 1"


def test_generate_bad_input_is_one_line_exit_2():
    for args in (["-p", "1,x"], ["-p", "1", "--max-tokens", "0"], ["--model", "nope"], ["--dtype", "fp8"],
                 ["-p", "1", "--max-model-len", "2", "--max-tokens", "4"], ["--format", "xml"]):
        result = runner.invoke(app, [*BASE, *args])
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
        assert result.stderr.strip().startswith("error:") and len(result.stderr.strip().splitlines()) == 1


def test_prompts_are_checked_before_the_engine_starts(monkeypatch):
    """A bad token or length fails in seconds, not after a start-up that may compile for minutes."""
    import graphbench.runner.engine as engine_module

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine should not start")

    monkeypatch.setattr(engine_module, "Engine", no_engine)
    result = runner.invoke(app, [*BASE, "-O2", "-p", "1,2,999999"])
    assert result.exit_code == 2 and result.stderr.strip() == "error: prompt token 999999 is outside the vocabulary (0..511)"
    result = runner.invoke(app, [*BASE, "-p", "1,2,3", "--max-model-len", "8", "--max-tokens", "6"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: prompt of 3 tokens + max_tokens 6 = 9 exceeds max_model_len 8"


# --- the resolved cudagraph mode and the start-up phases -------------------------------------

NO_GRAPHS_ON_CPU = "CUDA graphs need a CUDA device; running on cpu"


def test_header_names_the_resolved_mode_and_why_it_differs(caplog, monkeypatch):
    """On the CPU FULL_AND_PIECEWISE resolves to NONE: the header says NONE, a note says why."""
    monkeypatch.setattr("graphbench.cli.generate.PHASE_LINE_DELAY_S", 0.0)  # every phase's line, however short
    args = [*BASE, "-O2", "--compilation-mode", "none", "--cudagraph-mode", "FULL_AND_PIECEWISE", "-p", "1,2,3",
            "--max-tokens", "3"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tiny-llama -O2 NONE seqs=4 ladder=0 on ") and lines[0].endswith(" (float32)")
    assert "FULL_AND_PIECEWISE" not in lines[0]
    assert f"cudagraph mode: requested FULL_AND_PIECEWISE, resolved NONE: {NO_GRAPHS_ON_CPU}" in lines
    # progress on stderr, one line per phase when stderr is not a terminal
    assert result.stderr.splitlines() == ["loading weights, sizing the KV cache...",
                                          "generating 3 tokens for 1 prompt(s)..."]
    # the engine's warning still reaches the handlers it reached before (here pytest's; else stderr)
    assert [r.getMessage() for r in caplog.records if r.name == "graphbench.engine"] == [
        f"cudagraph mode FULL_AND_PIECEWISE -> NONE: {NO_GRAPHS_ON_CPU}"]
    as_json = runner.invoke(app, [*args, "--format", "json"])
    table_tokens = lines[lines.index("┃ prompt ┃ generated token ids ┃ ended      ┃") + 2].split("│")[2].strip()
    assert json.loads(as_json.stdout)["outputs"] == [{"prompt_token_ids": [1, 2, 3],
                                                      "token_ids": [int(t) for t in table_tokens.split(",")],
                                                      "finish_reason": "length"}]
    assert as_json.stderr.splitlines()[-1] == "generating 3 tokens for 1 prompt(s)..."


def test_a_start_that_fails_at_once_prints_its_error_alone(tmp_path):
    # phases shorter than PHASE_LINE_DELAY_S print no line: a checkpoint whose weights do not match its
    # config fails while loading weights, and its error is the one line
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 4}))
    result = runner.invoke(app, ["generate", "--model", str(tmp_path), "--device", "cpu", "-p", "1,2"])
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: checkpoint weight"), result.stderr


def test_no_note_when_the_mode_runs_as_asked():
    result = runner.invoke(app, [*BASE, "-p", "1,2,3", "--max-tokens", "2"])
    assert result.stdout.splitlines()[0].startswith("tiny-llama -O0 NONE seqs=4 ladder=0 on ")
    assert not any(line.startswith("cudagraph mode") for line in result.stdout.splitlines() + result.stderr.splitlines())


def test_startup_lines_of_a_gpu_start():
    """The start-up lines of a record with CUDA graphs (a GPU's; the CPU records none): phases, graphs, memory."""
    from graphbench.cli.engine_report import runtime_modes_line, startup_lines

    record = {"total_s": 51.15, "load_s": 23.28, "kv_cache_s": 0.4, "kernel_choices_s": 0.0, "compile_import_s": 3.0,
              "dynamo_s": 9.5, "inductor_s": 12.0, "compile_sizes_s": 0.0, "loaded_s": 0.0, "capture_s": 2.5,
              "capture_precompiled": [14, 1.25], "cold": True, "compile_cache_dir": "/c/e515f320cb/rank_0_0",
              "num_graphs": {"FULL": 35, "PIECEWISE": 51}, "num_recordings": {"FULL": 35, "PIECEWISE": 867},
              "graph_memory_bytes": 2**28, "graph_pool_bytes": 2**26, "kv_cache_tokens": 1024, "kv_cache_bytes": 2**30,
              "weights_bytes": 2**31, "cudagraph_mode": {"resolved": "FULL_AND_PIECEWISE"}}
    assert startup_lines(record) == [
        "start-up 51.15 s (cold: compiled): weights 23.28 s, KV cache 0.40 s, compile stack import 3.00 s, Dynamo 9.50 s, "
        "Inductor 12.00 s, capture 2.50 s (14 kernels compiled ahead in 1.2 s), other 0.47 s",
        "CUDA graphs: FULL 35, PIECEWISE 51 keys (902 recordings), graph memory 0.250 GiB (pool 0.062 GiB)",
        "KV cache 1024 tokens (1.000 GiB), weights 2.000 GiB"]
    # the part the capture stream's cuBLAS setup takes is named (from 1 MiB on)
    assert startup_lines({**record, "graph_setup_bytes": 72 * 2**20})[1] == (
        "CUDA graphs: FULL 35, PIECEWISE 51 keys (902 recordings), graph memory 0.250 GiB (pool 0.062 GiB); "
        "of it 0.070 GiB the capture stream's cuBLAS setup")
    assert startup_lines({**record, "graph_setup_bytes": 2**19})[1].endswith("(pool 0.062 GiB)")
    assert runtime_modes_line({"decode": {"FULL": 15}, "mixed": {"NONE": 1, "PIECEWISE": 2}}) == (
        "steps by runtime mode: decode FULL 15; mixed (prefill) NONE 1, PIECEWISE 2")
