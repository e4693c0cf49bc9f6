"""What a GPU benchmark script checks before it starts: a model it can build (a preset or a checkpoint folder) and
a CUDA device, each refused in one line naming the problem (exit 2), not as a traceback from every process it
would start (benchmarks/decode.py, roofline.py and lora.py check both; startup.py, graph_memory.py, tune_time.py,
speculative.py and profile_step.py the model)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator


def refuse(message: str) -> None:
    """Print `error: message` and exit 2, as graphbench's commands do."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """graphbench's own errors (a bad model, config or adapter) as one line and exit 2."""
    from graphbench.errors import GraphbenchError

    try:
        yield
    except GraphbenchError as exc:
        refuse(str(exc))


def check_model(model: str, load_format: str = "auto") -> None:
    """The model's shape and config resolve (its weights are read later, by the engine)."""
    from graphbench.config import load_arch, load_engine_config

    with one_line_errors():
        load_engine_config(overrides={"model.model": model, "model.load_format": load_format})
        load_arch(model)


def check_model_and_gpu(model: str, load_format: str, script: str) -> None:
    """check_model, and CUDA is here."""
    check_model(model, load_format)
    import torch

    if not torch.cuda.is_available():
        refuse(f"{script} times a CUDA GPU's decode step, and this machine has none "
               f"(torch {torch.__version__}, CUDA build: {'yes' if torch.version.cuda else 'no'})")


def context_for(model: str, wanted: int) -> int:
    """The scheduler's max_model_len a script asks for, capped to the model's positions (tiny-llama's 2048, a
    checkpoint's max_position_embeddings): a context above them is refused by the engine."""
    from graphbench.config import load_arch

    return min(wanted, load_arch(model).max_position_embeddings)
