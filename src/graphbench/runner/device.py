"""Device and dtype resolution, device facts (name, capability, memory)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graphbench.errors import GraphbenchError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """'auto' is CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise GraphbenchError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device, model: str | None = None) -> torch.dtype:
    """'auto': the checkpoint's 16-bit dtype on CUDA, else bfloat16; float32 on the CPU (config.arch.auto_dtype)."""
    if name == "auto":
        from graphbench.config.arch import auto_dtype

        return DTYPES[auto_dtype(model or "", device.type)]
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class DeviceInfo:
    type: str
    name: str
    capability: tuple[int, int] | None
    total_memory: int | None

    @property
    def is_blackwell_datacenter(self) -> bool:
        return self.capability is not None and self.capability[0] == 10


def device_info(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo("cuda", props.name, (props.major, props.minor), props.total_memory)
    import platform

    return DeviceInfo("cpu", platform.processor() or platform.machine(), None, None)


def free_memory(device: torch.device) -> int:
    """Free device memory in bytes (CUDA only)."""
    torch.cuda.synchronize(device)
    free, _total = torch.cuda.mem_get_info(device)
    return free
