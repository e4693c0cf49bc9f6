"""`graphbench generate` through typer's runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from graphbench.cli.main import app

runner = CliRunner()
BASE = ["generate", "--device", "cpu", "-O0", "--max-num-seqs", "4", "--max-num-batched-tokens", "64"]


def test_generate_json_prints_exactly_the_outputs():
    result = runner.invoke(app, [*BASE, "-p", "1,2,3", "-p", "4,5", "--max-tokens", "6", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [o["prompt_token_ids"] for o in data["outputs"]] == [[1, 2, 3], [4, 5]]
    assert [len(o["token_ids"]) for o in data["outputs"]] == [6, 6]
    assert set(data) == {"outputs"}


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
    assert as_json.stdout == json.dumps({"outputs": [{"prompt_token_ids": [1, 2, 3],
                                                      "token_ids": [int(t) for t in table_tokens.split(",")],
                                                      "finish_reason": "length"}]}) + "\n"
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
