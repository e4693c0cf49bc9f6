"""Tensor-parallel ranks 1..tp-1 as worker processes that mirror the driver's engine (rank 0).

The driver (the process that built the Engine) starts the workers with the torchrun environment
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and before each engine call broadcasts it
(add a request, step, prompt logits, drain, shut down). Every rank then runs the same scheduler on
the same inputs, and sampling sees the same all-gathered logits, so the ranks stay in lockstep.

Started under torchrun instead, every rank runs the user's program itself and nothing is broadcast.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from graphbench import env
from graphbench.errors import GraphbenchError

WORKER_FLAG = env.TP_WORKER
# NVLink multicast stays off in every process graphbench starts (shared machines).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerGroup:
    """Ranks 1..tp-1 of a driver's engine; send() mirrors a call on all of them."""

    def __init__(self, config_dict: dict, tp_size: int):
        port = str(_free_port())
        common = dict(NO_MULTICAST, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(tp_size))
        mine = dict(common, RANK="0", LOCAL_RANK="0")  # this process is rank 0 (until close())
        self._saved_env = {k: os.environ.get(k) for k in mine}
        os.environ.update(mine)
        fd, path = tempfile.mkstemp(prefix="graphbench-tp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(config_dict, f)
        self.config_path = Path(path)
        self.processes = []
        for rank in range(1, tp_size):
            child_env = dict(os.environ, **common, RANK=str(rank), LOCAL_RANK=str(rank), **{WORKER_FLAG: "1"})
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "graphbench.runner.tp_worker_main", str(self.config_path)],
                env=child_env, stdout=subprocess.DEVNULL))
        self.closed = False

    def send(self, *command) -> None:
        from graphbench.runner.parallel import broadcast_object

        dead = [p.args for p in self.processes if p.poll() not in (None, 0)]
        if dead:
            raise GraphbenchError("a tensor-parallel worker exited early (see its error output above)")
        broadcast_object(command)

    def close(self) -> None:
        """Shut the workers down (they leave the process group) and wait for them."""
        if self.closed:
            return
        self.closed = True
        try:
            self.send("shutdown")
        except Exception:  # noqa: BLE001  (workers already gone: nothing to tell them)
            pass
        for p in self.processes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        self.config_path.unlink(missing_ok=True)
        for key, value in self._saved_env.items():  # a later engine of this process starts its own group
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
