"""Which batch sizes get a CUDA graph: the capture ladder (docs/MACHINERY.md §1.5, vLLM `_set_cudagraph_sizes`).

Pure Python, no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphbench.errors import GraphbenchError

DEFAULT_TOP = 512
BLACKWELL_TOP = 1024  # data-centre Blackwell (compute capability 10.x)
INTERACTIVITY_DENSE_TOP = 32
PERFORMANCE_MODES = ("default", "interactivity")


@dataclass(frozen=True, slots=True)
class Ladder:
    """A resolved capture ladder and what was done to build it."""

    sizes: tuple[int, ...]
    max_capture_size: int  # the top rung (0 when the ladder is empty)
    warnings: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.sizes)


def default_max_capture_size(
    max_num_seqs: int,
    *,
    decode_query_len: int = 1,
    max_num_batched_tokens: int | None = None,
    blackwell: bool = False,
) -> int:
    """min(max_num_seqs * decode_query_len * 2, 512 or 1024), capped by max_num_batched_tokens."""
    _require_positive("max_num_seqs", max_num_seqs)
    _require_positive("decode_query_len", decode_query_len)
    top = min(max_num_seqs * decode_query_len * 2, BLACKWELL_TOP if blackwell else DEFAULT_TOP)
    if max_num_batched_tokens is not None:
        _require_positive("max_num_batched_tokens", max_num_batched_tokens)
        top = min(top, max_num_batched_tokens)
    return top


def ladder_for_top(max_capture_size: int, *, performance_mode: str = "default") -> list[int]:
    """The default ladder up to max_capture_size: 1, 2, 4, then steps of 8 below 256, then 16."""
    if performance_mode not in PERFORMANCE_MODES:
        raise GraphbenchError(
            f"unknown performance mode {performance_mode!r}; choose from {', '.join(PERFORMANCE_MODES)}"
        )
    top = max_capture_size
    if performance_mode == "interactivity":
        sizes = list(range(1, min(top, INTERACTIVITY_DENSE_TOP) + 1))
    else:
        sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += [s for s in range(8, min(top + 1, 256), 8) if s not in sizes]
    sizes += list(range(256, top + 1, 16))
    return sizes


def capture_sizes(
    max_num_seqs: int,
    *,
    performance_mode: str = "default",
    num_speculative_tokens: int = 0,
    max_num_batched_tokens: int | None = None,
    blackwell: bool = False,
    user_sizes: list[int] | None = None,
    max_capture_size: int | None = None,
) -> Ladder:
    """Resolve the capture ladder exactly as docs/MACHINERY.md §1.5 describes.

    A user list is de-duplicated, sorted and filtered to <= max_num_batched_tokens (with a
    warning when it was truncated); its largest rung becomes the max capture size (a max_capture_size
    given with it must equal its largest size, as in vLLM). Otherwise the
    default top is used (or max_capture_size when given). With speculative decoding every size
    is rounded up to a multiple of 1 + num_speculative_tokens and sizes above the cap are dropped.
    """
    _require_positive("max_num_seqs", max_num_seqs)
    if isinstance(num_speculative_tokens, bool) or not isinstance(num_speculative_tokens, int):
        raise GraphbenchError(f"num_speculative_tokens must be an integer, got {num_speculative_tokens!r}")
    if not 0 <= num_speculative_tokens <= MAX_LADDER_VALUE:
        raise GraphbenchError(f"num_speculative_tokens must be in 0..{MAX_LADDER_VALUE}, got {num_speculative_tokens}")
    if performance_mode not in PERFORMANCE_MODES:
        raise GraphbenchError(
            f"unknown performance mode {performance_mode!r}; choose from {', '.join(PERFORMANCE_MODES)}"
        )
    decode_query_len = 1 + num_speculative_tokens
    warnings: list[str] = []
    if user_sizes is not None:
        if isinstance(user_sizes, (str, bytes)) or not hasattr(user_sizes, "__iter__"):
            raise GraphbenchError(f"capture sizes must be a list of positive integers, got {user_sizes!r}")
        ladder = _user_ladder(list(user_sizes), max_num_batched_tokens, decode_query_len, max_capture_size)
        notes = _unused_by_decode(ladder.sizes, max_num_seqs, decode_query_len, max_num_batched_tokens)
        return Ladder(ladder.sizes, ladder.max_capture_size, ladder.warnings + notes)
    top = default_max_capture_size(
        max_num_seqs,
        decode_query_len=decode_query_len,
        max_num_batched_tokens=max_num_batched_tokens,
        blackwell=blackwell,
    )
    if max_capture_size is not None:
        _require_positive("max_capture_size", max_capture_size)
        if max_num_batched_tokens is not None and max_capture_size > max_num_batched_tokens:
            warnings.append(
                f"max_capture_size {max_capture_size} capped to max_num_batched_tokens {max_num_batched_tokens}"
            )
            max_capture_size = max_num_batched_tokens
        top = max_capture_size
    sizes = ladder_for_top(top, performance_mode=performance_mode)
    if decode_query_len > 1:
        sizes = _round_to_multiple(sizes, decode_query_len, top)
        if not sizes:
            warnings.append(
                f"no capture size is a multiple of {decode_query_len} (1 + speculative tokens) within the "
                f"max capture size {top}; every batch runs eager"
            )
    return Ladder(tuple(sizes), max(sizes, default=0), tuple(warnings))


def _user_ladder(
    user_sizes: list[int],
    max_num_batched_tokens: int | None,
    decode_query_len: int,
    max_capture_size: int | None = None,
) -> Ladder:
    if not user_sizes:
        raise GraphbenchError("the capture size list is empty; give at least one size")
    for s in user_sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise GraphbenchError(f"capture sizes must be positive integers, got {s!r}")
    if max_capture_size is not None:
        # As vLLM: when both are given they must agree; the list's largest rung is the top.
        _require_positive("max_capture_size", max_capture_size)
        if max_capture_size != max(user_sizes):
            raise GraphbenchError(
                f"max_capture_size {max_capture_size} must equal the largest capture size "
                f"{max(user_sizes)} when both are given"
            )
    sizes = sorted(set(user_sizes))
    warnings: list[str] = []
    if len(sizes) < len(user_sizes):
        warnings.append(f"removed {len(user_sizes) - len(sizes)} duplicate capture size(s)")
    if max_num_batched_tokens is not None:
        _require_positive("max_num_batched_tokens", max_num_batched_tokens)
        dropped = [s for s in sizes if s > max_num_batched_tokens]
        if dropped:
            sizes = [s for s in sizes if s <= max_num_batched_tokens]
            if not sizes:
                raise GraphbenchError(
                    f"every capture size ({', '.join(map(str, dropped))}) is above "
                    f"max_num_batched_tokens {max_num_batched_tokens}; no graph could be captured"
                )
            warnings.append(
                f"dropped capture sizes above max_num_batched_tokens {max_num_batched_tokens}: "
                f"{', '.join(map(str, dropped))}"
            )
    if decode_query_len > 1:
        # Rounded sizes above the list's own top (already <= max_num_batched_tokens) are dropped.
        rounded = _round_to_multiple(sizes, decode_query_len, max(sizes))
        if rounded != sizes:
            warnings.append(f"capture sizes rounded up to multiples of {decode_query_len} (1 + speculative tokens)")
        sizes = rounded
        if not sizes:
            raise GraphbenchError(
                f"no capture size remains after rounding up to a multiple of {decode_query_len} "
                "(1 + speculative tokens) without exceeding the largest given size"
            )
    return Ladder(tuple(sizes), max(sizes), tuple(warnings))


def _unused_by_decode(
    sizes: tuple[int, ...], max_num_seqs: int, decode_query_len: int, max_num_batched_tokens: int | None
) -> tuple[str, ...]:
    """What a user list holds that the engine never uses for decode, or would drop with its default budget.

    A decode step carries at most max_num_seqs x decode_query_len tokens, so rungs above that serve
    mixed (prefill) steps only, and FULL_DECODE_ONLY records nothing for them (docs/MACHINERY.md §1.2). Without a
    token budget the engine resolves max(2048, max_num_seqs) (8192 on a GPU of >= 70 GiB other than an
    A100) and drops the rungs above it.
    """
    from graphbench.config.parts import DEFAULT_TOKEN_BUDGET, LARGE_GPU_DEFAULT_TOKEN_BUDGET

    decode_top = max_num_seqs * decode_query_len
    notes = []
    if above := [s for s in sizes if s > decode_top]:
        notes.append(
            f"no decode batch uses the capture sizes above max_num_seqs {max_num_seqs} x decode_query_len "
            f"{decode_query_len} = {decode_top} tokens: {_join(above)} (only mixed (prefill) batches can; "
            "FULL_DECODE_ONLY captures no graph for them)"
        )
    budget = max(DEFAULT_TOKEN_BUDGET, max_num_seqs)
    if max_num_batched_tokens is None and (over := [s for s in sizes if s > budget]):
        notes.append(
            f"an engine with the default max_num_batched_tokens {budget} drops the capture sizes above it: "
            f"{_join(over)} ({LARGE_GPU_DEFAULT_TOKEN_BUDGET} on a GPU of >= 70 GiB other than an A100; set "
            "max_num_batched_tokens for your engine's ladder)"
        )
    return tuple(notes)


def _join(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes))


def _round_to_multiple(sizes: list[int], multiple: int, cap: int | None) -> list[int]:
    """Round each size up to a multiple, drop those above cap, de-duplicate, keep order."""
    rounded = sorted({-(-s // multiple) * multiple for s in sizes})
    return [s for s in rounded if cap is None or s <= cap]


MAX_LADDER_VALUE = 1 << 20  # tokens or sequences in one step: no engine runs more (a ladder that tall is a list of 65k sizes)


def _require_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{name} must be a positive integer, got {value!r}")
    if value > MAX_LADDER_VALUE:
        raise GraphbenchError(f"{name} must be at most {MAX_LADDER_VALUE}, got {value}")
