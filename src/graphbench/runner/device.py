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


def pay_cublas_handle(device: torch.device, dtype: torch.dtype, size: int) -> None:
    """One cuBLAS matmul ([64, size] x [size, size]) on the current stream: cuBLAS's handle, code and this
    stream's workspace (~100 MiB on an H100), which any CUDA engine pays at its first cuBLAS call. A start
    pays it before its KV cache is sized: a warm start without graphs ran no cuBLAS call and paid it at its
    first prefill, out of memory its KV cache had been given (benchmarks/RESULTS.md, 2026-12-07)."""
    x = torch.ones(64, size, device=device, dtype=dtype)
    w = torch.ones(size, size, device=device, dtype=dtype)
    torch.nn.functional.linear(x, w)
    torch.cuda.synchronize(device)
    del x, w
    torch.cuda.empty_cache()
