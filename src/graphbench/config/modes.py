"""CUDA-graph modes (docs/MACHINERY.md §1.3) and optimisation levels (§1.8)."""

from __future__ import annotations

import enum

from graphbench.errors import GraphbenchError
from graphbench.config.validate import suggest


class CUDAGraphMode(str, enum.Enum):
    """What is recorded: per mode, the runtime mode of uniform-decode and of mixed batches."""

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"

    @classmethod
    def parse(cls, value: "str | CUDAGraphMode") -> "CUDAGraphMode":
        """Parse a mode name case-insensitively; raise GraphbenchError with a suggestion."""
        if isinstance(value, CUDAGraphMode):
            return value
        name = str(value).strip().upper().replace("-", "_")
        try:
            return cls(name)
        except ValueError:
            names = [m.value for m in cls]
            raise GraphbenchError(
                f"unknown cudagraph mode {value!r}{suggest(name, names)}; choose from {', '.join(names)}"
            ) from None

    def decode_mode(self) -> "CUDAGraphMode":
        """Runtime mode for uniform (pure-decode) batches: NONE, PIECEWISE or FULL."""
        return {
            CUDAGraphMode.NONE: CUDAGraphMode.NONE,
            CUDAGraphMode.PIECEWISE: CUDAGraphMode.PIECEWISE,
            CUDAGraphMode.FULL: CUDAGraphMode.FULL,
            CUDAGraphMode.FULL_DECODE_ONLY: CUDAGraphMode.FULL,
            CUDAGraphMode.FULL_AND_PIECEWISE: CUDAGraphMode.FULL,
        }[self]

    def mixed_mode(self) -> "CUDAGraphMode":
        """Runtime mode for mixed or prefill batches: NONE, PIECEWISE or FULL."""
        return {
            CUDAGraphMode.NONE: CUDAGraphMode.NONE,
            CUDAGraphMode.PIECEWISE: CUDAGraphMode.PIECEWISE,
            CUDAGraphMode.FULL: CUDAGraphMode.FULL,
            CUDAGraphMode.FULL_DECODE_ONLY: CUDAGraphMode.NONE,
            CUDAGraphMode.FULL_AND_PIECEWISE: CUDAGraphMode.PIECEWISE,
        }[self]

    def separate_routine(self) -> bool:
        """True when uniform decode and mixed batches use different recordings."""
        return self.decode_mode() != self.mixed_mode()

    def has_piecewise_graphs(self) -> bool:
        return CUDAGraphMode.PIECEWISE in (self.decode_mode(), self.mixed_mode())


class CompileMode(str, enum.Enum):
    """Whether the forward is compiled at startup."""

    NONE = "none"
    COMPILE = "compile"

    @classmethod
    def parse(cls, value: "str | CompileMode") -> "CompileMode":
        if isinstance(value, CompileMode):
            return value
        name = str(value).strip().lower()
        try:
            return cls(name)
        except ValueError:
            names = [m.value for m in cls]
            raise GraphbenchError(
                f"unknown compilation mode {value!r}{suggest(name, names)}; choose from {', '.join(names)}"
            ) from None


# -O presets (docs/MACHINERY.md §1.8). A preset only fills fields the user left unset.
# compile_sizes "decode<=8" means: the ladder's power-of-two decode rungs <= 8 (1, 2, 4, 8 on the
# default and interactivity ladders alike), compiled for their concrete shape with max-autotune
# (resolved once the ladder is known). Powers of two only: each variant autotunes its GEMMs (~40 s
# a size on an H200), and the interactivity ladder's 3, 5, 6, 7 would double -O3's start-up for
# sizes that the dynamic code serves; with the same variants, both ladders share one compile cache.
OPTIMIZATION_PRESETS: dict[int, dict[str, object]] = {
    0: {"mode": CompileMode.NONE, "cudagraph_mode": CUDAGraphMode.NONE, "compile_sizes": []},
    1: {"mode": CompileMode.COMPILE, "cudagraph_mode": CUDAGraphMode.PIECEWISE, "compile_sizes": []},
    2: {"mode": CompileMode.COMPILE, "cudagraph_mode": CUDAGraphMode.FULL_AND_PIECEWISE, "compile_sizes": []},
    3: {"mode": CompileMode.COMPILE, "cudagraph_mode": CUDAGraphMode.FULL_AND_PIECEWISE, "compile_sizes": "decode<=8"},
}
DEFAULT_OPTIMIZATION_LEVEL = 2
O3_MAX_COMPILE_SIZE = 8
