"""Building the model and filling its weights: seeded dummy weights or an HF safetensors checkpoint."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch

from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError
from graphbench.runner.model import CausalLM
from graphbench.runner.parallel import Shard, full_shape, shard_checkpoint_tensor, shard_param

DUMMY_STD = 0.02  # HF initializer_range


def build_model(arch: ArchConfig, max_positions: int, dtype: torch.dtype, device: torch.device,
                shard: Shard = Shard(), kernels: str = "graphbench") -> CausalLM:
    """Construct the model directly on the device in the target dtype (RoPE tables stay float32).

    arch: this rank's shape (parallel.local_arch) under tensor parallelism; kernels: config.model.kernels."""
    check_context(arch, max_positions)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = CausalLM(arch, max_positions, shard, kernels)
    finally:
        torch.set_default_dtype(previous)
    return model.eval().requires_grad_(False)


def check_context(arch: ArchConfig, max_model_len: int) -> None:
    """A context the model computes as its checkpoint does: within its sliding window and its positions."""
    if arch.sliding_window is not None and max_model_len > arch.sliding_window:
        # the attention here is full: it equals the checkpoint's sliding-window attention only that far
        raise GraphbenchError(f"max_model_len {max_model_len} (--max-model-len) is above the sliding_window "
                              f"{arch.sliding_window} of {arch.source or 'the model'} (graphbench attends over the "
                              "whole context)")
    if max_model_len > arch.max_position_embeddings:
        # (vLLM refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN): positions the model was never trained on
        raise GraphbenchError(f"max_model_len {max_model_len} (--max-model-len) is above the "
                              f"max_position_embeddings {arch.max_position_embeddings} of "
                              f"{arch.source or 'the model'}: use at most {arch.max_position_embeddings}")


def fill_dummy_weights(model: CausalLM, seed: int, arch: ArchConfig | None = None) -> None:
    """Seeded random weights: normal(0, 0.02) for matrices and biases, ones for norms.

    Under tensor parallelism (arch: the full model's shape) every rank draws the full tensors in the
    same order and keeps its part, so any TP size holds the same model as TP=1."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    shard, arch = model.shard, arch or model.arch
    for name, param in model.named_parameters():
        if name.endswith("layernorm.weight") or name == "norm.weight":
            param.fill_(1.0)
        elif shard.size == 1:
            param.normal_(0.0, DUMMY_STD, generator=generator)
        else:
            full = torch.empty(full_shape(name, param, arch, shard), dtype=param.dtype, device=device)
            param.copy_(shard_param(name, full.normal_(0.0, DUMMY_STD, generator=generator), arch, shard))


def _stacked_target(name: str, arch: ArchConfig) -> tuple[str, int, int] | None:
    """Map an HF per-projection name to (fused param name, row start, row count)."""
    q = arch.num_attention_heads * arch.head_dim
    kv = arch.num_key_value_heads * arch.head_dim
    inter = arch.intermediate_size
    table = {
        "self_attn.q_proj": ("self_attn.qkv_proj", 0, q),
        "self_attn.k_proj": ("self_attn.qkv_proj", q, kv),
        "self_attn.v_proj": ("self_attn.qkv_proj", q + kv, kv),
        "mlp.gate_proj": ("mlp.gate_up_proj", 0, inter),
        "mlp.up_proj": ("mlp.gate_up_proj", inter, inter),
    }
    for hf, (ours, start, rows) in table.items():
        if f".{hf}." in name:
            return name.replace(hf, ours), start, rows
    return None


def checkpoint_files(folder: Path) -> list[Path]:
    """The safetensors files of a checkpoint, from its index when sharded. model.safetensors beside an index
    (save_pretrained leaves the other form's files behind when it saves again) is loaded where the index's
    shards are all gone, as transformers loads it; where both are there, which is stale is unknown (transformers
    loads model.safetensors, vLLM the shards): refused."""
    index = folder / "model.safetensors.index.json"
    single = folder / "model.safetensors"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as exc:
            raise GraphbenchError(f"{index} is not a valid safetensors index: {type(exc).__name__} {exc}") from None
        if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
            raise GraphbenchError(f"{index}: weight_map must map tensor names to file names")
        # an index may only name the checkpoint's own shards: by their bare names, which may be links (the hub
        # cache's snapshot folders link each file to its blob elsewhere)
        outside = [f for f in weight_map.values() if Path(f).name != f or f in ("", ".", "..")]
        if outside:
            raise GraphbenchError(f"{index} names {folder / outside[0]}, outside the checkpoint folder {folder}")
        files = sorted({folder / f for f in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if single.is_file() and single not in files:
            if len(missing) == len(files):  # a stale index: its shards were replaced by model.safetensors
                return [single]
            raise GraphbenchError(f"checkpoint {folder} holds both model.safetensors and the shards of "
                                  f"{index.name}, two copies of its weights (transformers loads the first, vLLM the "
                                  "second): remove the stale one")
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise GraphbenchError(f"checkpoint {folder} is missing shard(s) that {index.name} names: "
                                  f"{', '.join(missing[:3])}{more}")
        return files
    if single.is_file():  # as transformers: other files (consolidated.safetensors,
        return [single]   # adapter_model.safetensors) are not this model's weights
    files = sorted(f for f in folder.glob("*.safetensors") if f.is_file())
    if not files:
        raise GraphbenchError(f"checkpoint {folder} has no *.safetensors weights (only safetensors are supported)")
    return files


def load_checkpoint(model: CausalLM, folder: Path, arch: ArchConfig | None = None) -> None:
    """Copy an HF Llama/Qwen2 checkpoint into the fused model; every weight (each of q, k, v, gate and up
    in the fused ones) must be found.

    arch: the full model's shape; under tensor parallelism each rank keeps its part of each tensor."""
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    tied_head: list[torch.Tensor] = []  # a tied model's lm_head.weight, when the checkpoint has one
    for file, hf_name, tensor in _weights(folder, header_only=False):
        with _naming(file):
            _load_one(model, arch or model.arch, params, loaded, hf_name, tensor, tied_head)
    _check_complete(model, params, loaded, folder)
    if tied_head and not torch.equal(tied_head[0].to(params["embed_tokens.weight"]), params["embed_tokens.weight"]):
        # transformers 5 would untie them and use this lm_head; vLLM ignores it: refuse the ambiguity
        raise GraphbenchError(f"checkpoint {folder} has an lm_head.weight unlike embed_tokens.weight although its "
                              "config.json sets tie_word_embeddings true")


def check_checkpoint(arch: ArchConfig, folder: Path, kernels: str = "graphbench") -> None:
    """load_checkpoint's checks from the safetensors headers alone (no tensor is read), on the model built on
    the meta device: every file readable, each weight's place, dtype and shape, none missing. Run before a
    start-up, whose progress lines would otherwise come before the error."""
    model = build_model(arch, 1, torch.float32, torch.device("meta"), kernels=kernels)
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    for file, hf_name, part in _weights(folder, header_only=True):
        dtype = part.get_dtype()  # safetensors' names: F16, BF16, F32, F8_E4M3, ... float; I*, U*, BOOL not
        with _naming(file):
            place = _checked(model, arch, params, hf_name, tuple(part.get_shape()), dtype.startswith(("F", "BF")),
                             dtype)
        if place is not None and not (arch.tie_word_embeddings and hf_name.removeprefix("model.") == "lm_head.weight"):
            loaded.update(_pieces(place) if _stacked_target(place, arch) is None else [place])
    _check_complete(model, params, loaded, folder)


@contextmanager
def _naming(file: Path):
    """A weight's error with the file that holds it (a sharded checkpoint has many)."""
    try:
        yield
    except GraphbenchError as exc:
        raise GraphbenchError(f"{exc} (in {file})") from None


def _weights(folder: Path, header_only: bool):
    """(file, name, tensor) of every weight of the checkpoint, or (file, name, its safetensors slice) with
    header_only."""
    from safetensors import SafetensorError, safe_open

    for file in checkpoint_files(folder):
        try:
            with safe_open(str(file), framework="pt", device="cpu") as f:
                for hf_name in f.keys():
                    yield file, hf_name, (f.get_slice(hf_name) if header_only else f.get_tensor(hf_name))
        except SafetensorError as exc:
            raise GraphbenchError(f"cannot read {file}: {exc} (corrupt or truncated safetensors file?)") from None
        except OSError as exc:
            raise GraphbenchError(f"cannot read {file}: {exc}") from None


def _check_complete(model: CausalLM, params: dict, loaded: set[str], folder: Path) -> None:
    expected = {p for n in params if not (model.arch.tie_word_embeddings and n == "lm_head.weight")
                for p in _pieces(n)}
    missing = sorted(expected - loaded)
    if missing:
        raise GraphbenchError(
            f"checkpoint {folder} lacks {len(missing)} weight(s), e.g. {', '.join(missing[:3])}"
        )


FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def _pieces(name: str) -> list[str]:
    """The HF weights (without "model.") that fill one of the model's parameters: a fused projection is
    only loaded when each of its parts is (a missing v_proj left random rows in qkv_proj)."""
    for ours, theirs in FUSED.items():
        if f".{ours}." in name:
            return [name.replace(ours, hf) for hf in theirs]
    return [name]


def _checked(model, full_arch, params, hf_name: str, shape: tuple[int, ...], floating: bool, dtype) -> str | None:
    """The weight's name in the model (None: not a weight, the rotary tables), its place, dtype and full
    TP=1 shape checked."""
    name = hf_name.removeprefix("model.")
    if "rotary_emb" in name:
        return None
    if name == "lm_head.weight" and model.arch.tie_word_embeddings:
        name = "embed_tokens.weight"  # (checked against the embedding once everything is loaded)
    _, expected = _place(name, hf_name, full_arch, model, params)
    if not floating:  # quantized or corrupt: a cast would silently change the values
        raise GraphbenchError(f"checkpoint weight {hf_name} has dtype {dtype}, not a floating-point type")
    if shape != expected:  # the full shape, before tensor parallelism takes this rank's part
        raise GraphbenchError(f"checkpoint weight {hf_name} has shape {shape}, expected {expected}")
    return name


def _load_one(model, full_arch, params, loaded, hf_name, tensor, tied_head) -> None:
    arch = model.arch
    name = _checked(model, full_arch, params, hf_name, tuple(tensor.shape), tensor.is_floating_point(), tensor.dtype)
    if name is None:
        return
    target_name = _place(name, hf_name, full_arch, model, params)[0]
    tensor = shard_checkpoint_tensor(hf_name, tensor, full_arch, model.shard)
    if hf_name.removeprefix("model.") == "lm_head.weight" and arch.tie_word_embeddings:
        tied_head[:] = [tensor]
        return
    stacked = _stacked_target(name, arch)
    param = params[target_name]
    target = param if stacked is None else param.narrow(0, stacked[1], stacked[2])
    if tuple(target.shape) != tuple(tensor.shape):  # (a name parallel.py does not split, e.g. a fused qkv_proj)
        raise GraphbenchError(f"checkpoint weight {hf_name} cannot be split for tensor parallelism: this rank's "
                              f"part has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}")
    target.copy_(tensor.to(device=param.device, dtype=param.dtype))
    loaded.update(_pieces(name) if stacked is None else [name])


def _place(name, hf_name, full_arch, model, params) -> tuple[str, tuple[int, ...]]:
    """(the model parameter an HF weight fills, the weight's full TP=1 shape)."""
    stacked = _stacked_target(name, full_arch)
    target_name = stacked[0] if stacked else name
    param = params.get(target_name)
    if param is None:
        raise GraphbenchError(f"checkpoint weight {hf_name!r} has no place in a {model.arch.architecture} model")
    full = full_shape(target_name, param, full_arch, model.shard)
    return target_name, (full if stacked is None else (stacked[2],) + full[1:])


def check_start_inputs(config) -> None:
    """What a config's (EngineConfig's) start-up would load, checked before it: the checkpoint folder's
    headers (check_checkpoint), each LoRA adapter (read and checked as the engine does, then dropped) and,
    when it compiles, the compile cache's root (as compile_at_startup checks it)."""
    from graphbench import env
    from graphbench.config import CompileMode, load_arch
    from graphbench.config.arch import checkpoint_folder
    from graphbench.runner.compile.cache_trust import check_private_root

    if config.resolve().compilation.mode == CompileMode.COMPILE:
        check_private_root(env.cache_root())

    arch = load_arch(config.model.model)
    check_context(arch, config.scheduler.max_model_len or arch.max_position_embeddings)
    if config.parallel.tensor_parallel_size > 1:  # a model the ranks cannot split: before the start's progress line
        from graphbench.runner.parallel import Shard, local_arch

        local_arch(arch, Shard(0, config.parallel.tensor_parallel_size))
    folder = checkpoint_folder(config.model.model)
    if config.model.load_format != "dummy" and folder is not None:
        check_checkpoint(arch, folder, config.model.kernels)
    if config.lora.enabled:
        from graphbench.runner.lora.adapters import load_adapter

        for name, source in config.lora.adapters():
            load_adapter(name, source, arch, config.lora.max_lora_rank, 0)
