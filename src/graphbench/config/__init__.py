"""Configuration: one slotted dataclass per concern, -O presets, TOML loading, hashing."""

from graphbench.config.arch import ArchConfig, list_presets, load_arch
from graphbench.config.engine_config import EngineConfig, config_from_dict, load_engine_config
from graphbench.config.modes import CompileMode, CUDAGraphMode, OPTIMIZATION_PRESETS
from graphbench.config.parts import (
    CacheConfig,
    CompilationConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
)

__all__ = [
    "ArchConfig",
    "CacheConfig",
    "CompilationConfig",
    "CompileMode",
    "CUDAGraphMode",
    "EngineConfig",
    "ModelConfig",
    "OPTIMIZATION_PRESETS",
    "ParallelConfig",
    "SchedulerConfig",
    "SpeculativeConfig",
    "config_from_dict",
    "list_presets",
    "load_arch",
    "load_engine_config",
]
