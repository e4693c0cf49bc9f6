"""A tensor-parallel worker rank's process (started by tp_workers.WorkerGroup): build the engine from
the driver's config, then mirror the driver's calls until told to stop.

    python -m graphbench.runner.tp_worker_main CONFIG.json   # with the torchrun environment set
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def run_worker(config_path: str) -> None:
    """A worker rank: build the engine, then mirror the driver's calls until told to stop."""
    from graphbench.config.engine_config import config_from_dict
    from graphbench.runner.engine import Engine
    from graphbench.runner.parallel import broadcast_object, close_tensor_parallel
    from graphbench.runner.request import SamplingParams

    config = config_from_dict(json.loads(Path(config_path).read_text()), source=config_path)
    engine = Engine(config)
    while True:
        command, *args = broadcast_object()
        if command == "shutdown":
            break
        if command == "add":
            prompt, sampling = args
            engine.add_request(prompt, SamplingParams(**sampling))
        elif command == "step":
            engine.step()
        elif command == "drain":
            engine.drain()
        elif command == "prompt_logits":
            engine.prompt_logits(*args)
    close_tensor_parallel()


if __name__ == "__main__":
    run_worker(sys.argv[1])
