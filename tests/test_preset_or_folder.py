"""A model name is a preset or a checkpoint folder (config/arch.checkpoint_folder): a folder that shares a
preset's name but holds no config.json, such as a results folder named after its model in the folder a command
runs from, does not hide the preset; one with a config.json is the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphbench
from graphbench.checkpoints.text import stop_tokens
from graphbench.cli.main import app
from graphbench.config.arch import auto_dtype, checkpoint_folder, load_arch
from graphbench.errors import GraphbenchError
from tests.hf_checkpoints import save_tiny_checkpoint

ENGINE = str(Path(graphbench.__file__).parent / "sample_configs" / "engines" / "tiny-cpu.toml")


def test_a_results_folder_named_after_a_preset_does_not_hide_it(tmp_path, monkeypatch):
    preset = load_arch("tiny-llama")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny-llama").mkdir()  # e.g. what `graphbench sweep --results tiny-llama` made here
    (tmp_path / "tiny-llama" / "0001_O0.json").write_text("{}")
    assert checkpoint_folder("tiny-llama") is None
    assert load_arch("tiny-llama") == preset and stop_tokens("tiny-llama") == ()
    assert auto_dtype("tiny-llama", "cuda") == "bfloat16"
    answer = CliRunner().invoke(app, ["cache", "diff", ENGINE, ENGINE])  # (its config names model tiny-llama)
    assert answer.exit_code == 0 and "identical" in answer.stdout, answer.output


def test_a_folder_that_is_no_preset_is_still_read_as_a_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-model").mkdir()
    assert checkpoint_folder("my-model") == Path("my-model")
    with pytest.raises(GraphbenchError, match="checkpoint folder my-model has no config.json"):
        load_arch("my-model")


def test_a_folder_with_a_config_is_the_checkpoint_even_under_a_preset_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save_tiny_checkpoint(tmp_path / "tiny-llama", hidden_size=48)
    assert checkpoint_folder("tiny-llama") == Path("tiny-llama")
    assert load_arch("tiny-llama").hidden_size == 48  # the checkpoint's, not the preset's
