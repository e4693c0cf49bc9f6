"""Which modules of a model a PEFT LoRA adapter wraps, as peft decides it (check_target_module_exists):
target_modules (names, a regular expression, "all-linear"), exclude_modules, layers_to_transform and
layers_pattern, with PEFT's defaults for fields a config leaves out (runner/lora/adapters.py loads the weights
of the modules selected here)."""

from __future__ import annotations

import re
from pathlib import Path

from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
          "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}
OTHERS = ("model.embed_tokens", "lm_head")  # modules PEFT can wrap whose LoRA graphbench does not compute
DEFAULT_TARGETS = ["q_proj", "v_proj"]  # PEFT's target_modules for llama, mistral and qwen2 when none is given


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_selection_types(where: str, config: dict) -> None:
    """The fields PEFT chooses the wrapped modules with, as the types it reads them as."""
    names, indices = "a name (regular expression) or a list of names", "a layer index or a list of them"
    fields = {"target_modules": (names, lambda v: isinstance(v, str) or _names(v)),
              "exclude_modules": (names, lambda v: isinstance(v, str) or _names(v)),
              "layers_pattern": (names, lambda v: isinstance(v, str) or _names(v)),
              "layers_to_transform": (indices, lambda v: _integer(v) or isinstance(v, list) and all(map(_integer, v)))}
    for field, (what, fits) in fields.items():
        if config.get(field) is not None and not fits(config[field]):
            raise GraphbenchError(f"{where}: {field} must be {what}, got {config[field]!r}")


def module_name(layer: int, target: str) -> str:
    """The module's name in the HF *ForCausalLM, which PEFT matches target_modules against."""
    return f"model.layers.{layer}.{PARENT[target]}.{target}"


def selected_modules(name: str, config: dict, config_file: Path, arch: ArchConfig) -> set[tuple[int, str]]:
    """The (layer, target) modules PEFT wraps; refuses target_modules naming a module this model lacks, or
    lm_head / embed_tokens (whose LoRA graphbench does not compute)."""
    where = f"LoRA adapter {name}: {config_file}"
    check_selection_types(where, config)
    targets = config.get("target_modules")
    if targets is None:
        targets = DEFAULT_TARGETS
    elif isinstance(targets, str) and targets.lower() == "all-linear":
        targets = list(TARGETS)  # PEFT: every linear layer but the output layer
    rule = {**config, "target_modules": targets}
    ours = {(layer, t): module_name(layer, t) for layer in range(arch.num_hidden_layers) for t in TARGETS}
    try:
        lacking = [t for t in ([] if isinstance(targets, str) else targets)
                   if not any(_listed([t], n) for n in [*ours.values(), *OTHERS])]
        if lacking:
            raise GraphbenchError(f"LoRA adapter {name}: target_modules {sorted(lacking)} in {config_file} are not "
                                  f"modules of this model (it has {', '.join(TARGETS)})")
        if others := [n for n in OTHERS if _selects(rule, n)]:
            raise GraphbenchError(f"{where}: target_modules wraps {', '.join(others)}, whose LoRA is not "
                                  f"supported (only {', '.join(TARGETS)})")
        return {key for key, module in ours.items() if _selects(rule, module)}
    except (re.error, OverflowError, RecursionError) as exc:
        raise GraphbenchError(f"{where}: target_modules, exclude_modules or layers_pattern is not a valid "
                              f"regular expression ({exc})") from None


def _listed(names: list[str], key: str) -> bool:
    return key in names or any(key.endswith(f".{n}") for n in names)


def _selects(config: dict, key: str) -> bool:
    """Whether PEFT wraps the module named key: peft's check_target_module_exists (modules_to_save, which it
    also reads, is refused before)."""
    exclude = config.get("exclude_modules")
    if exclude and (re.fullmatch(exclude, key) if isinstance(exclude, str) else _listed(exclude, key)):
        return False
    targets = config["target_modules"]
    if isinstance(targets, str):
        return re.fullmatch(targets, key) is not None
    if key in targets:
        return True  # named in full: PEFT does not apply layers_to_transform then
    if not _listed(targets, key):
        return False
    layers = config.get("layers_to_transform")
    if layers is None or layers == []:
        return True
    index = _layer_index(key, config.get("layers_pattern"))
    return index is not None and (index == layers if isinstance(layers, int) else index in layers)


def _layer_index(key: str, patterns) -> int | None:
    """The layer index in a module's name as PEFT finds it (the first numbered part, or the one after a
    layers_pattern; an empty pattern means any)."""
    if not patterns:
        match = re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", key)
        return int(match["idx"]) if match else None
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        if match := re.match(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.", key):
            return int(match["idx"])
    return None
