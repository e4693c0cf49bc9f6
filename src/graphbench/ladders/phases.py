"""Two ladders, one per phase: uniform decode steps pad to the decode ladder (requests x (1 + k) tokens),
mixed and prefill steps to a ladder of their own in tokens, as SGLang (>= 0.5.18: `--cuda-graph-bs-decode`,
`--cuda-graph-bs-prefill`) and TensorRT-LLM (`cuda_graph_config.batch_sizes`, `prefill_capture_num_tokens`)
configure them. vLLM has one ladder for both (vllm-project/vllm#32946 prepares separate sizes): the shared
layout, graphbench's default, so that results stay comparable with vLLM's.

compilation.mixed_capture_sizes picks the layout: None (shared: the one ladder serves both phases),
"tokens" (SGLang's default token ladder up to the step's token budget), a list of token counts, or []
(mixed steps run eager). Which recordings each layout makes is the dispatcher's (runner/dispatcher.py);
graphs.num_graphs counts them. Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphbench.config.parts import MIXED_LAYOUT_NAMES
from graphbench.errors import GraphbenchError

# SGLang's default prefill/mixed ladder in tokens: (first, last, step) spans (its server arguments, 0.5.18+)
TOKEN_LADDER_SPANS = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256))


def token_ladder(max_tokens: int) -> tuple[int, ...]:
    """SGLang's default mixed/prefill ladder up to max_tokens (the step's token budget), in tokens."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise GraphbenchError(f"the token ladder's top must be a positive integer, got {max_tokens!r}")
    return tuple(s for first, last, step in TOKEN_LADDER_SPANS for s in range(first, last + 1, step) if s <= max_tokens)


@dataclass(frozen=True, slots=True)
class MixedLadder:
    """The mixed/prefill ladder a config resolves to: None sizes when the decode ladder is shared."""

    sizes: tuple[int, ...] | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def layout(self) -> str:
        return "shared" if self.sizes is None else "split"


def resolve_mixed_ladder(spec: list[int] | str | None, max_num_batched_tokens: int) -> MixedLadder:
    """compilation.mixed_capture_sizes -> the mixed ladder: None or "shared" (vLLM's one ladder), "tokens"
    (SGLang's default up to the budget), "none" or [] (mixed steps eager), or a list of token counts
    (de-duplicated, sorted, those above the budget dropped with a warning)."""
    if spec is None or spec == "shared":
        return MixedLadder(None)
    if spec == "tokens":
        return MixedLadder(token_ladder(max_num_batched_tokens))
    if spec == "none":
        return MixedLadder(())
    if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
        raise GraphbenchError(f"mixed_capture_sizes must be a list of token counts or one of "
                              f"{', '.join(MIXED_LAYOUT_NAMES)}; got {spec!r}")
    for s in spec:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise GraphbenchError(f"mixed_capture_sizes must be positive integers, got {s!r}")
    sizes = sorted(set(spec))
    over = [s for s in sizes if s > max_num_batched_tokens]
    warnings = (f"mixed capture sizes above max_num_batched_tokens {max_num_batched_tokens} dropped: "
                f"{', '.join(map(str, over))}",) if over else ()
    return MixedLadder(tuple(s for s in sizes if s <= max_num_batched_tokens), warnings)


def decode_ladder(sizes: tuple[int, ...] | list[int], max_num_seqs: int, decode_query_len: int = 1) -> tuple[int, ...]:
    """The rungs a uniform decode step can use: multiples of 1 + k up to max_num_seqs x (1 + k) tokens.
    (In the split layout the default ladder's rungs above that serve no step: mixed steps have theirs.)"""
    top = max_num_seqs * decode_query_len
    return tuple(s for s in sorted(sizes) if decode_query_len <= s <= top and s % decode_query_len == 0)


def parse_mixed_option(text: str) -> list[int] | str:
    """A command line's --mixed-ladder: shared, tokens, none, or comma-separated token counts."""
    text = text.strip()
    if text in MIXED_LAYOUT_NAMES:
        return text
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
        if not sizes:  # ("" had read as none: no ladder, every mixed step eager)
            raise ValueError(text)
        return sizes
    except ValueError:
        raise GraphbenchError(f"--mixed-ladder takes {', '.join(MIXED_LAYOUT_NAMES)} or token counts like "
                              f"4,8,16,32; got {text!r}") from None


@dataclass(frozen=True, slots=True)
class PhaseLadders:
    """The split layout beside the shared one: what `graphbench ladder --mixed-ladder` shows."""

    decode: tuple[int, ...]  # tokens of uniform decode steps (requests x (1 + k))
    mixed: tuple[int, ...]  # tokens of mixed / prefill steps
    shared: tuple[int, ...]  # the one ladder it replaces
    graphs_split: dict[str, int]
    graphs_shared: dict[str, int]

    def to_dict(self) -> dict:
        return {"decode": list(self.decode), "mixed": list(self.mixed), "shared": list(self.shared),
                "graphs_per_mode": {"split": self.graphs_split, "shared": self.graphs_shared}}


def phase_ladders(shared: tuple[int, ...], mixed: tuple[int, ...], max_num_seqs: int,
                  decode_query_len: int = 1) -> PhaseLadders:
    """The decode ladder the split layout keeps of `shared` (the default ladder, or a user's) beside the
    mixed ladder, and the graphs each layout records per cudagraph mode."""
    from graphbench.ladders.graphs import graphs_per_mode

    decode = decode_ladder(shared, max_num_seqs, decode_query_len)
    split = graphs_per_mode(decode, max_num_seqs, decode_query_len, mixed)
    one = graphs_per_mode(shared, max_num_seqs, decode_query_len)
    return PhaseLadders(decode, tuple(mixed), tuple(shared), {m.value: n for m, n in split.items()},
                        {m.value: n for m, n in one.items()})
