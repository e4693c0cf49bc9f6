"""Tensor parallelism on the CPU: gloo, two processes (this one is rank 0, one worker), against TP=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphbench.config import load_arch, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.engine import Engine
from graphbench.runner.loader import build_model, fill_dummy_weights
from graphbench.runner.parallel import Shard, local_arch
from graphbench.runner.request import SamplingParams
from tests.hf_checkpoints import save_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [[1, 2, 3], list(range(10, 50)), [7], list(range(100, 117))]


def engine(tp: int, **overrides) -> Engine:
    values = {"model.model": "tiny-llama", "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
              "scheduler.max_num_seqs": 8, "scheduler.max_num_batched_tokens": 64,
              "parallel.tensor_parallel_size": tp}
    values.update(overrides)
    return Engine(load_engine_config(overrides=values))


def logits_and_tokens(tp: int, **overrides):
    e = engine(tp, **overrides)
    try:
        logits = e.prompt_logits(PROMPTS)
        tokens = e.generate(PROMPTS, SamplingParams(max_tokens=10))
        return logits, tokens, e
    finally:
        e.close()


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2"])  # qwen2: 1 KV head, replicated on both ranks
def test_tp2_matches_tp1(model):
    ref_logits, ref_tokens, _ = logits_and_tokens(1, **{"model.model": model})
    logits, tokens, e = logits_and_tokens(2, **{"model.model": model})
    assert e.shard == Shard(0, 2) and e.local_arch.num_attention_heads == e.arch.num_attention_heads // 2
    for x, y in zip(logits, ref_logits):
        assert x.shape == y.shape
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    assert tokens == ref_tokens


def test_tp2_compiled_split_at_attention_matches_tp1_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path))
    ref_logits, ref_tokens, _ = logits_and_tokens(1)
    logits, tokens, e = logits_and_tokens(2, optimization_level=1)
    assert Path(e.report.compile_cache_dir).name == "rank_0_0"
    assert (Path(e.report.compile_cache_dir).parent / "rank_1_0").is_dir()  # the worker compiled its own
    for x, y in zip(logits, ref_logits):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)
    assert tokens == ref_tokens


def test_tp2_loads_a_checkpoint_split_across_ranks(tmp_path):
    folder = save_tiny_checkpoint(tmp_path / "ckpt", "qwen2", seed=5)  # qkv bias, tied embeddings
    ref_logits, ref_tokens, _ = logits_and_tokens(1, **{"model.model": str(folder)})
    logits, tokens, _ = logits_and_tokens(2, **{"model.model": str(folder)})
    for x, y in zip(logits, ref_logits):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    assert tokens == ref_tokens


def test_generate_command_prints_the_same_tokens_at_tp2():
    def start(tp: int) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "graphbench", "generate", "--model", "tiny-llama", "--device", "cpu",
               "--tensor-parallel-size", str(tp), "-O", "0", "--prompt-token-ids", "1,2,3",
               "--prompt-token-ids", "40,41,42,43,44", "--max-tokens", "12", "--format", "json"]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def result(proc: subprocess.Popen) -> dict:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        return json.loads(stdout)

    # both commands at once (independent processes; most of each is importing torch, on one core)
    procs = [start(1), start(2)]
    one, two = [result(proc) for proc in procs]
    assert two["outputs"] == one["outputs"] and len(one["outputs"][1]["token_ids"]) == 12
    assert two["runtime_modes"] == one["runtime_modes"]


def test_dummy_weights_of_each_rank_are_slices_of_the_tp1_weights():
    arch = load_arch("tiny-llama")
    full = build_model(arch, 64, torch.float32, torch.device("cpu"))
    fill_dummy_weights(full, seed=3)
    q, kv, hd = arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
    inter, vocab = arch.intermediate_size, arch.vocab_size
    for rank in (0, 1):
        shard = Shard(rank, 2)
        part = build_model(local_arch(arch, shard), 64, torch.float32, torch.device("cpu"), shard)
        fill_dummy_weights(part, seed=3, arch=arch)
        f, p = dict(full.named_parameters()), dict(part.named_parameters())
        qkv = f["layers.1.self_attn.qkv_proj.weight"]
        heads, kv_heads = q // 2, kv // 2
        expected = torch.cat([qkv[rank * heads * hd:(rank + 1) * heads * hd],
                              qkv[q * hd + rank * kv_heads * hd:q * hd + (rank + 1) * kv_heads * hd],
                              qkv[(q + kv) * hd + rank * kv_heads * hd:(q + kv) * hd + (rank + 1) * kv_heads * hd]])
        assert torch.equal(p["layers.1.self_attn.qkv_proj.weight"], expected)
        gate_up = f["layers.0.mlp.gate_up_proj.weight"]
        half = inter // 2
        assert torch.equal(p["layers.0.mlp.gate_up_proj.weight"], torch.cat(
            [gate_up[rank * half:(rank + 1) * half], gate_up[inter + rank * half:inter + (rank + 1) * half]]))
        assert torch.equal(p["layers.0.mlp.down_proj.weight"], f["layers.0.mlp.down_proj.weight"][:, rank * half:(rank + 1) * half])
        o_cols = q * hd // 2
        assert torch.equal(p["layers.0.self_attn.o_proj.weight"],
                           f["layers.0.self_attn.o_proj.weight"][:, rank * o_cols:(rank + 1) * o_cols])
        rows = vocab // 2
        assert torch.equal(p["embed_tokens.weight"], f["embed_tokens.weight"][rank * rows:(rank + 1) * rows])
        assert torch.equal(p["norm.weight"], f["norm.weight"])


def test_tp_size_must_divide_the_model():
    with pytest.raises(GraphbenchError, match="must divide the model's 4 attention heads"):
        engine(3)
    assert "RANK" not in os.environ  # nothing was started
