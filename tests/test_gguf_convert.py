"""`graphbench convert` on tiny GGUF files written as llama.cpp writes them (Q/K rows permuted for llama,
quantized tensors, rope scaling as keys or as llama.cpp's rope_freqs tensor), against the model they came from."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from graphbench.checkpoints.gguf import convert_gguf  # noqa: E402
from graphbench.errors import GraphbenchError  # noqa: E402
from tests.test_cli_bad_inputs import assert_one_error, invoke  # noqa: E402
from tests.test_engine_parity import make_engine  # noqa: E402

Q = gguf.GGMLQuantizationType
HEADS, KV, HIDDEN, FFN = 4, 2, 64, 96
PROMPT = list(range(3, 70))  # past llama3's original context (64) below


def _vocab():
    chars = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0xAD)] + [chr(c) for c in range(0xAE, 0x100)]
    chars += [chr(0x100 + n) for n in range(256 - len(chars))]  # (byte-level BPE: one char a byte)
    merges = ["Ġ t", "h e", "Ġt he"]
    tokens = chars + [m.replace(" ", "") for m in merges] + ["<|endoftext|>"]
    return tokens, merges


def _permute(w, heads):  # llama.cpp's convert_hf_to_gguf permutation of q_proj/k_proj rows
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _unpermute(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, arch="llama", qtype="F32", tied=True, rope=None, skip_keys=(), drop=()):
    """Write a 2-layer model's GGUF; the transformers model that holds what the file holds (dequantized)."""
    tokens, merges = _vocab()
    theta = 500000.0 if rope == "llama3" else 10000.0
    scaling = {"llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64},
               "linear": {"rope_type": "linear", "factor": 4.0},
               "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}}.get(rope)
    config = dict(vocab_size=len(tokens), hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2,
                  num_attention_heads=HEADS, num_key_value_heads=KV, max_position_embeddings=256, rms_norm_eps=1e-5,
                  tie_word_embeddings=tied, bos_token_id=None, eos_token_id=len(tokens) - 1,
                  rope_parameters={"rope_type": "default", **(scaling or {}), "rope_theta": theta})
    torch.manual_seed(0)
    model = (transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**config)) if arch == "qwen2"
             else transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.uniform_(0.5, 1.5) if "norm" in name else p.normal_(0, 0.3 if "bias" in name else 0.08)
    writer = gguf.GGUFWriter(path, arch)
    add = writer.add_key_value
    writer.add_key_value = lambda key, *a, **k: None if key in skip_keys else add(key, *a, **k)
    writer.add_name(f"tiny {arch}")
    writer.add_context_length(256), writer.add_embedding_length(HIDDEN), writer.add_block_count(2)
    writer.add_feed_forward_length(FFN), writer.add_head_count(HEADS), writer.add_head_count_kv(KV)
    writer.add_layer_norm_rms_eps(1e-5), writer.add_rope_freq_base(theta)
    if rope in ("linear", "yarn"):
        writer.add_rope_scaling_type(gguf.RopeScalingType(rope)), writer.add_rope_scaling_factor(4.0)
        if rope == "yarn":
            writer.add_rope_scaling_orig_ctx_len(32)
    writer.add_tokenizer_model("gpt2"), writer.add_tokenizer_pre("llama-bpe"), writer.add_token_list(tokens)
    writer.add_token_merges(merges), writer.add_eos_token_id(len(tokens) - 1)
    writer.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    names = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    names.update({f"model.layers.{i}.{hf}": f"blk.{i}.{g}" for i in range(2) for hf, g in parts.items()})
    held = {}
    for hf, tensor in model.state_dict().items():
        stem, kind = hf.rsplit(".", 1)
        name = f"{names[stem]}.{kind}"
        if (hf == "lm_head.weight" and tied) or name in drop:
            continue
        permuted = arch == "llama" and name.endswith((".attn_q.weight", ".attn_k.weight"))
        heads = (HEADS if ".attn_q." in name else KV) if permuted else 0
        data = tensor.numpy()
        data = _permute(data, heads) if heads else data
        qt = getattr(Q, qtype) if data.ndim == 2 else Q.F32
        if qt in (Q.F32, Q.F16):
            stored = data.astype(np.float16 if qt == Q.F16 else np.float32)
            writer.add_tensor(name, stored)
        else:
            stored = gguf.quants.quantize(data, qt)
            writer.add_tensor(name, stored, raw_shape=stored.shape, raw_dtype=qt)
        back = gguf.quants.dequantize(stored, qt).astype(np.float32)
        held[hf] = torch.from_numpy(np.ascontiguousarray(_unpermute(back, heads) if heads else back))
    if rope == "llama3":  # llama.cpp stores llama3 scaling as each frequency's divisor, no rope.scaling keys
        dim, (factor, low, high, old) = HIDDEN // HEADS, (8.0, 1.0, 4.0, 64)
        waves = 2 * math.pi * theta ** (np.arange(0, dim, 2) / dim)
        smooth = (old / waves - low) / (high - low)
        divisors = np.where(waves < old / high, 1.0, np.where(waves > old / low, factor,
                                                              1 / ((1 - smooth) / factor + smooth)))
        writer.add_tensor("rope_freqs.weight", divisors.astype(np.float32))
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    model.load_state_dict(held, strict=False)
    return model.eval()


def _logits(model, prompt=PROMPT):
    with torch.no_grad():
        return model(torch.tensor([prompt])).logits[0].float()


@pytest.mark.parametrize("arch,qtype,tied,rope", [
    ("llama", "Q8_0", False, None),  # GQA: k rows permuted by the KV head count
    ("llama", "Q4_0", True, "llama3"),  # Llama 3.1+: rope_freqs.weight
    ("llama", "BF16", True, "linear"),
    ("qwen2", "F16", True, "yarn"),  # q/k/v biases, no permutation
])
def test_converted_checkpoint_computes_what_the_gguf_holds(tmp_path, arch, qtype, tied, rope):
    # the rope scalings were dropped (a llama3 or yarn model's logits off by units); the rest held
    reference = write_gguf(tmp_path / "m.gguf", arch, qtype, tied, rope)
    folder = convert_gguf(tmp_path / "m.gguf", tmp_path / "ckpt", dtype="float32")
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    assert (_logits(hf) - _logits(reference)).abs().max().item() < 1e-4
    assert hf.config.tie_word_embeddings == tied
    if rope:
        assert hf.config.rope_parameters["rope_type"] == rope
    ours = make_engine(folder).prompt_logits([PROMPT])[0]
    assert (ours - _logits(hf)).abs().max().item() < 1e-4
    assert transformers.AutoTokenizer.from_pretrained(folder).chat_template is not None


def test_a_gguf_that_cannot_be_rebuilt_is_refused_in_one_line(tmp_path):
    # a missing block_count gave a 32-layer model (30 layers random) and a missing tensor a random one, both
    # with exit 0; a missing tokens list said "error: ...: 'tokens'"
    for case, args, words in (
        ("layers", dict(skip_keys={"llama.block_count"}), ["lacks the metadata key(s) llama.block_count"]),
        ("eps", dict(skip_keys={"llama.attention.layer_norm_rms_epsilon"}), ["layer_norm_rms_epsilon"]),
        ("tokens", dict(skip_keys={"tokenizer.ggml.tokens"}), ["tokenizer.ggml.tokens"]),
        ("merges", dict(skip_keys={"tokenizer.ggml.merges"}), ["tokenizer.ggml.merges"]),
        ("kv", dict(skip_keys={"llama.attention.head_count_kv"}), ["shapes do not match"]),
        ("tensor", dict(drop={"blk.1.ffn_up.weight"}), ["has no tensor for 1", "model.layers.1.mlp.up_proj"]),
    ):
        source = tmp_path / f"{case}.gguf"
        write_gguf(source, **args)
        assert_one_error(invoke("convert", source, tmp_path / case), str(source), *words)
        assert not (tmp_path / case).exists()
    whole = (tmp_path / "layers.gguf").read_bytes()
    for case, data in (("cut", whole[: len(whole) // 2]), ("head", whole[:100]), ("text", b"not a gguf\n" * 9)):
        (tmp_path / f"{case}.gguf").write_bytes(data)
        assert_one_error(invoke("convert", tmp_path / f"{case}.gguf", tmp_path / case),
                         "is not a GGUF model file that can be read (not GGUF, truncated or corrupt)")


def test_an_output_folder_with_files_is_refused(tmp_path):
    # its files were overwritten (model.safetensors) or kept beside the checkpoint
    write_gguf(tmp_path / "m.gguf")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "model.safetensors").write_text("other")
    assert_one_error(invoke("convert", tmp_path / "m.gguf", tmp_path / "out"), "is not empty")
    assert (tmp_path / "out" / "model.safetensors").read_text() == "other"
    with pytest.raises(GraphbenchError, match="holds tensors of 2 layers but its llama.block_count is 1"):
        write_gguf(tmp_path / "short.gguf", skip_keys={"llama.block_count"})
        _append_key(tmp_path / "short.gguf")
        convert_gguf(tmp_path / "short.gguf", tmp_path / "short")


def _append_key(path):
    """Rewrite the GGUF with llama.block_count 1 (its tensors hold 2 layers)."""
    reader = gguf.GGUFReader(path)
    writer = gguf.GGUFWriter(str(path) + ".new", "llama")
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = field.contents()
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, kind, sub_type=sub)
    writer.add_block_count(1)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.asarray(t.data), raw_shape=list(reversed([int(d) for d in t.shape])),
                          raw_dtype=t.tensor_type)
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    (path.parent / (path.name + ".new")).replace(path)
