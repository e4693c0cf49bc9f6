"""A workload's prompts, by its prompt kind: random token ids, a random span repeated, or windows of real
text (`text`: the Python standard library's own sources and docstrings, read offline and tokenized with the
checkpoint's tokenizer; real code and prose, with the repeated spans prompt-lookup drafting feeds on).
The engine's driver and the transformers peers draw the same prompts from the same seeds."""

from __future__ import annotations

import functools
import random
import sysconfig
from pathlib import Path

from graphbench.bench.peer_models import random_prompts
from graphbench.bench.workloads import REPEATED_SPAN, RequestSpec, Workload
from graphbench.errors import GraphbenchError

# The corpus: these modules' sources, in this order (present in every CPython 3.9+); ~0.5 M tokens.
CORPUS_MODULES = ("textwrap.py", "argparse.py", "dataclasses.py", "functools.py", "inspect.py", "pathlib.py",
                  "typing.py", "json/__init__.py", "json/decoder.py", "collections/__init__.py", "enum.py",
                  "contextlib.py", "difflib.py", "statistics.py", "fractions.py", "calendar.py")


@functools.lru_cache(maxsize=4)
def corpus_tokens(model: str) -> tuple[int, ...]:
    """The corpus as one token stream of the checkpoint's tokenizer (cached per model for the process)."""
    from graphbench.checkpoints.text import load_text

    text = load_text(model)
    root = Path(sysconfig.get_paths()["stdlib"])
    sources = [(root / name).read_text(encoding="utf-8") for name in CORPUS_MODULES if (root / name).is_file()]
    if not sources:
        raise GraphbenchError(f"prompt kind text: no standard-library sources under {root} to draw prompts from")
    return tuple(text.tokenizer("\n\n".join(sources), add_special_tokens=False)["input_ids"])


def prompt_for(spec: RequestSpec, vocab_size: int, seed: int, kind: str = "random", model: str = "") -> list[int]:
    if kind == "repeated":  # a random span repeated to the prompt's length
        span = random_prompts(1, min(REPEATED_SPAN, spec.prompt_len), vocab_size, seed)[0]
        return (span * -(-spec.prompt_len // len(span)))[: spec.prompt_len]
    if kind == "text":  # a window of the corpus at a seeded offset
        stream = corpus_tokens(model)
        if len(stream) <= spec.prompt_len:
            raise GraphbenchError(f"prompt kind text: the corpus has {len(stream)} tokens, fewer than a "
                                  f"{spec.prompt_len}-token prompt")
        start = random.Random(seed).randrange(len(stream) - spec.prompt_len)
        return list(stream[start: start + spec.prompt_len])
    return random_prompts(1, spec.prompt_len, vocab_size, seed)[0]


def workload_prompts(workload: Workload, vocab_size: int, seed_offset: int, model: str = "") -> list[list[int]]:
    """Every request's prompt, seeded by the workload, the repeat (seed_offset) and the request's index."""
    return [prompt_for(s, vocab_size, workload.seed * 100003 + seed_offset * 7919 + i, workload.prompt_kind, model)
            for i, s in enumerate(workload.requests())]
