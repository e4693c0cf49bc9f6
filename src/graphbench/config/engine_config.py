"""EngineConfig: the per-concern configs together, -O presets, TOML files and CLI overrides."""

from __future__ import annotations

import copy
import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.config.hashing import hash_factors
from graphbench.config.modes import (
    DEFAULT_OPTIMIZATION_LEVEL,
    O3_MAX_COMPILE_SIZE,
    OPTIMIZATION_PRESETS,
    CompileMode,
)
from graphbench.config.parts import (
    CacheConfig,
    CompilationConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    default_max_num_batched_tokens,
)
from graphbench.config.lora import LoRAConfig
from graphbench.config.tomlio import read_toml
from graphbench.config.validate import closest, suggest
from graphbench.errors import GraphbenchError

SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "scheduler": SchedulerConfig,
    "cache": CacheConfig,
    "compilation": CompilationConfig,
    "speculative": SpeculativeConfig,
    "parallel": ParallelConfig,
    "lora": LoRAConfig,
}


@dataclass(slots=True)
class EngineConfig:
    """Everything the engine needs. `resolve()` applies the -O preset and builds the ladder."""

    optimization_level: int | None = None
    model: ModelConfig = field(default_factory=ModelConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    compilation: CompilationConfig = field(default_factory=CompilationConfig)
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    lora: LoRAConfig = field(default_factory=LoRAConfig)

    def __post_init__(self) -> None:
        level = self.optimization_level
        if level is not None and (not isinstance(level, int) or isinstance(level, bool) or level not in OPTIMIZATION_PRESETS):
            raise GraphbenchError(f"optimization level must be 0, 1, 2 or 3, got {level!r}")
        _check_token_budget(self.scheduler)

    @property
    def decode_query_len(self) -> int:
        return self.speculative.decode_query_len

    def resolve(self, *, blackwell: bool = False, device_name: str | None = None,
                device_memory: int | None = None, device_type: str = "cuda") -> "EngineConfig":
        """Return a copy with the -O preset applied to unset fields, the step's token budget set for the
        device (name and total memory in bytes; None: not a large GPU), asynchronous scheduling on for a GPU
        and off on the CPU unless set, and the capture ladder resolved."""
        from graphbench.ladders.phases import decode_ladder, resolve_mixed_ladder  # pure Python
        from graphbench.ladders.sizes import capture_sizes

        cfg = copy.deepcopy(self)
        if cfg.scheduler.max_num_batched_tokens is None:
            # at least one token per sequence: a decode step of max_num_seqs must fit
            cfg.scheduler.max_num_batched_tokens = max(default_max_num_batched_tokens(device_name, device_memory),
                                                       cfg.scheduler.max_num_seqs)
        if cfg.scheduler.async_scheduling is None:  # (SchedulerConfig says why not on the CPU)
            cfg.scheduler.async_scheduling = device_type == "cuda"
        level = DEFAULT_OPTIMIZATION_LEVEL if cfg.optimization_level is None else cfg.optimization_level
        cfg.optimization_level = level
        comp = cfg.compilation
        for name, value in OPTIMIZATION_PRESETS[level].items():
            if getattr(comp, name) is None:
                setattr(comp, name, copy.deepcopy(value))
        ladder = capture_sizes(
            cfg.scheduler.max_num_seqs,
            performance_mode=comp.performance_mode,
            num_speculative_tokens=cfg.speculative.num_speculative_tokens,
            max_num_batched_tokens=cfg.scheduler.max_num_batched_tokens,
            blackwell=blackwell,
            user_sizes=comp.cudagraph_capture_sizes,
            max_capture_size=comp.max_cudagraph_capture_size,
        )
        sizes = ladder.sizes
        mixed = resolve_mixed_ladder(comp.mixed_capture_sizes, cfg.scheduler.max_num_batched_tokens)
        if mixed.sizes is not None:  # the split layout: mixed steps have their own ladder
            if comp.cudagraph_capture_sizes is None:  # the default's rungs above a decode step serve none now
                sizes = decode_ladder(sizes, cfg.scheduler.max_num_seqs, cfg.decode_query_len)
            comp.mixed_capture_sizes = list(mixed.sizes)
        else:
            comp.mixed_capture_sizes = None
        comp.cudagraph_capture_sizes = list(sizes)
        comp.max_cudagraph_capture_size = max(sizes, default=0) or ladder.max_capture_size
        if comp.compile_sizes == "decode<=8":
            q = cfg.decode_query_len  # rungs are multiples of it under speculative decoding
            comp.compile_sizes = [s for s in ladder.sizes
                                  if s <= O3_MAX_COMPILE_SIZE and s % q == 0 and (s // q) & (s // q - 1) == 0]
        if comp.mode == CompileMode.NONE:
            comp.compile_sizes = []
        return cfg

    def compute_hash(self) -> str:
        """Hash of every factor that changes the compiled code (see docs/CONFIG.md)."""
        # (LoRA only when on: a config without adapters keeps the hash, and the cache entry, it had)
        return hash_factors([getattr(self, name).compute_hash() for name in SECTIONS
                             if name != "lora" or self.lora.enabled])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/TOML-able dict (enums as their names)."""
        return _plain(dataclasses.asdict(self))

    def summary(self) -> str:
        """One line for tables and logs."""
        comp = self.compilation
        mode = comp.cudagraph_mode.value if comp.cudagraph_mode else "?"
        return (
            f"{self.model.model} -O{self.optimization_level} {mode} "
            f"seqs={self.scheduler.max_num_seqs} ladder={len(comp.cudagraph_capture_sizes or [])}"
        )


def _check_token_budget(sched: SchedulerConfig) -> None:
    if sched.max_num_batched_tokens is not None and sched.max_num_batched_tokens < sched.max_num_seqs:
        raise GraphbenchError(
            f"max_num_batched_tokens ({sched.max_num_batched_tokens}) must be >= max_num_seqs "
            f"({sched.max_num_seqs})"
        )


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _unknown_top_level(key: str, value: Any, source: str) -> str:
    """The error for a top-level name that is no section: the closest section, or where a section's key was
    written at the top level (max_num_seqs outside [scheduler]), that key in its section."""
    kind = "section" if isinstance(value, dict) else "key"
    near = suggest(key, [*SECTIONS, "optimization_level"])
    if not near and kind == "key":
        owner = {f.name: name for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
        close = closest(key, owner)
        near = f" (did you mean {close!r} in [{owner[close]}]?)" if close else ""
    return f"{source}: unknown {kind} {key!r}{near}"


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> EngineConfig:
    """Build an EngineConfig from nested sections; unknown keys fail with the closest valid name."""
    unknown = [k for k in data if k not in SECTIONS and k != "optimization_level"]
    if unknown:
        raise GraphbenchError(_unknown_top_level(unknown[0], data[unknown[0]], source))
    parts: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        section = data.get(name, {})
        if not isinstance(section, dict):
            raise GraphbenchError(f"{source}: [{name}] must be a table, got {section!r}")
        valid = [f.name for f in dataclasses.fields(cls)]
        for key in section:
            if key not in valid:
                raise GraphbenchError(f"{source}: unknown key {name}.{key}{suggest(key, valid)}")
        try:
            parts[name] = cls(**section)
        except TypeError as exc:  # pragma: no cover - guarded by the key check above
            raise GraphbenchError(f"{source}: {exc}") from None
    return EngineConfig(optimization_level=data.get("optimization_level"), **parts)


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set data['section']['key'] = value from 'section.key' (or top-level 'optimization_level')."""
    if "." not in dotted:
        data[dotted] = value
        return
    section, key = dotted.split(".", 1)
    table = data.setdefault(section, {})
    if not isinstance(table, dict):
        raise GraphbenchError(f"config: [{section}] must be a table, got {table!r}")
    table[key] = value


def load_engine_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> EngineConfig:
    """Read a TOML config (optional) and apply CLI overrides given as {'section.key': value}.

    Overrides whose value is None are ignored (the flag was not given)."""
    data: dict[str, Any] = read_toml(path) if path is not None else {}
    source = str(path) if path is not None else "config"
    for dotted, value in (overrides or {}).items():
        if value is not None:
            set_dotted(data, dotted, value)
    return config_from_dict(data, source=source)
