"""Device and dtype resolution, device facts (name, capability, memory)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from graphbench.errors import GraphbenchError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def triton_interpreting() -> bool:
    """TRITON_INTERPRET is on: Triton kernels run on the CPU (read when asked: tests switch it per process)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# Launch-size arithmetic in plain Python: triton.next_power_of_2 and triton.cdiv are ConstexprFunction
# objects whose calls cost ~5 us each on the host (Triton 3.6), several per launch of an eager step.
def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for positive b."""
    return -(-a // b)


def resolve_device(name: str) -> torch.device:
    """'auto' is CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise GraphbenchError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """'auto' is bfloat16 on CUDA and float32 on the CPU."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
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
