"""Machine and version facts recorded in every result."""

from __future__ import annotations

import datetime as dt
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from graphbench import __version__
from graphbench import env as environ
from graphbench.env import hatches_set


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The commit of the graphbench checkout, when it is one."""
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def environment(device_type: str | None = None) -> dict[str, Any]:
    """graphbench/torch/triton/transformers/CUDA versions, GPU name, index and driver, host, git commit."""
    import torch

    env: dict[str, Any] = {
        "graphbench": __version__, "torch": torch.__version__, "triton": _version("triton"),
        "transformers": _version("transformers"), "python": platform.python_version(),
        "host": socket.gethostname(), "platform": platform.platform(), "git_commit": git_commit(),
        "cuda": torch.version.cuda, "device": device_type or ("cuda" if torch.cuda.is_available() else "cpu"),
        "gpu": None, "gpu_driver": None, "switches": hatches_set(),
    }
    if env["device"] == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        # the host's GPU ids the point ran on (a sweep's executor sets CUDA_VISIBLE_DEVICES; Ray does too)
        env["gpu_index"] = environ.visible_devices() or str(torch.cuda.current_device())
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            env["gpu_driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, IndexError):
            pass
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env


def machine_name(env: dict[str, Any]) -> str:
    """The results sub-folder: GPU name (or cpu) and host."""
    what = env.get("gpu") or f"cpu-{env.get('cpu') or 'x86'}"
    return f"{what}-{env.get('host', 'host')}".replace(" ", "-")
