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
