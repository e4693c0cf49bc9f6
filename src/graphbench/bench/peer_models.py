"""Models and prompts the peers and the harness share: seeded random prompts (never zeros) and a
Hugging Face transformers model of an architecture (the hf-eager and hf-compile peers)."""

from __future__ import annotations


import torch

from graphbench.config.arch import ArchConfig, checkpoint_folder


def random_prompts(num: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab_size, (num, length), generator=g).tolist()


def hf_config(arch: ArchConfig):
    """A transformers config with the same shapes as a graphbench architecture."""
    import transformers

    common = dict(
        vocab_size=arch.vocab_size, hidden_size=arch.hidden_size, intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_hidden_layers, num_attention_heads=arch.num_attention_heads,
        num_key_value_heads=arch.num_key_value_heads, head_dim=arch.head_dim,
        max_position_embeddings=arch.max_position_embeddings, rms_norm_eps=arch.rms_norm_eps,
        tie_word_embeddings=arch.tie_word_embeddings,
    )
    rope = {"rope_type": "default", "rope_theta": arch.rope_theta}
    if arch.rope_scaling:
        # (dynamic's max_position_embeddings is graphbench's note of where it begins: the config has it)
        rope = {k: v for k, v in arch.rope_scaling.items() if k != "max_position_embeddings"} | {
            "rope_theta": arch.rope_theta}
    if arch.architecture == "Qwen2ForCausalLM":
        return transformers.Qwen2Config(**common, rope_parameters=rope)
    return transformers.LlamaConfig(**common, rope_parameters=rope, attention_bias=arch.attention_bias)


def build_hf_model(arch: ArchConfig, dtype: torch.dtype, device: str, seed: int = 0, checkpoint: str | None = None):
    """transformers' model, eval mode, and where its weights came from: a checkpoint folder's own
    ("safetensors": the engine's weights too), else seeded random weights of the architecture ("dummy")."""
    import transformers

    folder = checkpoint_folder(checkpoint) if checkpoint else None
    if folder is not None and any(folder.glob("*.safetensors")):
        model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
        return model.to(device).eval().requires_grad_(False), "safetensors"
    torch.manual_seed(seed)
    config = hf_config(arch)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval().requires_grad_(False), "dummy"
