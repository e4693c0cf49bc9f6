"""Tiny random transformers checkpoints and PEFT adapters saved with save_pretrained (no hub access needed)."""

from __future__ import annotations

from pathlib import Path

import torch


def save_tiny_checkpoint(folder: Path, kind: str = "llama", seed: int = 0, **overrides) -> Path:
    """Write a tiny Llama or Qwen2 checkpoint (config.json + model.safetensors) and return the folder."""
    import transformers

    common = dict(
        vocab_size=256, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    )
    common.update(overrides)
    torch.manual_seed(seed)
    if kind == "llama":
        config = transformers.LlamaConfig(**common)
        model = transformers.LlamaForCausalLM(config)
    elif kind == "qwen2":
        config = transformers.Qwen2Config(**{"tie_word_embeddings": True, **common})
        model = transformers.Qwen2ForCausalLM(config)
    else:
        raise ValueError(kind)
    # Make the norms non-trivial so the test sees them.
    return _fill_and_save(model, "norm", lambda p: p.uniform_(0.5, 1.5), folder, safe=True)


def load_hf(folder: Path):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def save_peft_adapter(checkpoint: Path, folder: Path, *, seed: int = 0, safe: bool = True, **config) -> Path:
    """peft's own adapter folder for a LoraConfig (r 4, alpha 8, q/v unless given) on the checkpoint, with
    random A and B (PEFT starts B at zero: no effect)."""
    import peft

    torch.manual_seed(seed)
    config = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"], **config}
    model = peft.get_peft_model(load_hf(checkpoint), peft.LoraConfig(**config))
    return _fill_and_save(model, "lora_", lambda p: p.normal_(0, 0.1), folder, safe)


def _fill_and_save(model, part: str, fill, folder: Path, safe: bool) -> Path:
    """fill(p) every parameter whose name holds part, then save_pretrained the model to folder."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if part in name:
                fill(p)
    model.save_pretrained(folder, safe_serialization=safe)
    return folder
