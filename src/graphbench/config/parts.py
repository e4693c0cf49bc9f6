"""The config dataclasses, one per concern. Each validates itself and hashes what changes code.

Whenever a field is added that changes the generated code or a buffer size baked into it,
add it to that class's ``compute_hash`` factors (see docs/CONFIG.md for the list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphbench.config.hashing import hash_factors
from graphbench.config.modes import CompileMode, CUDAGraphMode
from graphbench.config.validate import (
    require_choice,
    require_int,
    require_int_list,
    require_at_most,
    require_positive,
)
from graphbench.errors import GraphbenchError

DTYPES = ("auto", "float32", "bfloat16", "float16")
LOAD_FORMATS = ("auto", "dummy", "safetensors")
DEVICES = ("auto", "cuda", "cpu")
ATTENTION_BACKENDS = ("auto", "reference", "triton")
PERFORMANCE_MODES = ("default", "interactivity")
STATIC_VARIANT_POLICIES = ("measure", "always")
KERNEL_SETS = ("graphbench", "torch")
DEFAULT_SPLITTING_OPS = ("graphbench::attention",)


@dataclass(slots=True)
class ModelConfig:
    """Which model, in which precision, on which device, with which attention backend."""

    model: str = "tiny-llama"  # built-in preset name or a checkpoint folder (HF layout)
    dtype: str = "auto"  # auto: bfloat16 on CUDA, float32 on the CPU
    load_format: str = "auto"  # auto: dummy weights for presets, safetensors for folders
    seed: int = 0
    device: str = "auto"
    attention_backend: str = "auto"  # auto: triton on CUDA, reference on the CPU
    # graphbench: projections and norms run graphbench's Triton kernels where they apply (the one-row GEMV,
    # the skinny GEMM, the fused add-norm); torch: every one as torch ops (cuBLAS; Inductor's fusions when
    # compiled), to see what the kernels buy or rule them out
    kernels: str = "graphbench"
    # whose timed kernel choices the projections run (GPU, -O1..-O3): "" those of this config's cold start (its
    # compile-cache entry); a name: those a search apart stored under that name on this GPU (a sweep round's own
    # search, bench/round_searches.py), so that each round samples the search as it samples the process
    kernel_search: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise GraphbenchError("model must be a preset name or a checkpoint folder")
        require_choice("dtype", self.dtype, DTYPES)
        require_choice("load format", self.load_format, LOAD_FORMATS)
        require_choice("device", self.device, DEVICES)
        require_choice("attention backend", self.attention_backend, ATTENTION_BACKENDS)
        require_choice("kernels", self.kernels, KERNEL_SETS)
        if not isinstance(self.kernel_search, str) or not re.fullmatch(r"[A-Za-z0-9._-]{0,64}", self.kernel_search):
            raise GraphbenchError(f"kernel_search must be a name of at most 64 letters, digits, '.', '_' or '-' "
                                  f"(or empty), got {self.kernel_search!r}")
        require_int("seed", self.seed)
        if not 0 <= self.seed < 2**63:
            raise GraphbenchError(f"seed must be in 0..2**63-1, got {self.seed}")

    def compute_hash(self) -> str:
        """Architecture, dtype and kernels change the code; the path, seed, load format and kernel search do not
        (a projection looks its kernel choice up when it runs; only -O3's compiled sizes are built by the choices
        installed at their compile, and a sweep gives those points no search of their own)."""
        from graphbench.config.arch import load_arch  # local: reads a file

        arch = load_arch(self.model)
        return hash_factors([arch.code_factors(), self.dtype, self.device, self.attention_backend, self.kernels])


# vLLM's server defaults for the token budget of a step: 8192 on a GPU of >= 70 GiB other than an A100
# (H100, H200, MI300X), 2048 elsewhere. With 8192 a 64-request prefill of 128-token prompts is one
# eager step instead of four; on an H200 at C = 64: the same tokens/s, TPOT p50 1.53 -> 1.33 ms,
# TTFT p50 12.6 -> 26.5 ms (benchmarks/RESULTS.md, 2026-11-30, 1676d77).
DEFAULT_TOKEN_BUDGET = 2048
LARGE_GPU_DEFAULT_TOKEN_BUDGET = 8192
LARGE_GPU_MIN_MEMORY = 70 << 30


def default_max_num_batched_tokens(device_name: str | None, total_memory: int | None) -> int:
    """The token budget of a step when none is set: vLLM's server default for this device."""
    if total_memory is not None and total_memory >= LARGE_GPU_MIN_MEMORY and "a100" not in (device_name or "").lower():
        return LARGE_GPU_DEFAULT_TOKEN_BUDGET
    return DEFAULT_TOKEN_BUDGET

MAX_STEP_TOKENS = 1 << 20  # tokens in one step (a flat batch): 1M is past any GPU's activations


@dataclass(slots=True)
class SchedulerConfig:
    """Batch limits: they size the engine's static buffers, so they are hashed."""

    max_num_seqs: int = 256
    # None: EngineConfig.resolve picks default_max_num_batched_tokens for the device
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    enable_chunked_prefill: bool = True
    # launch step N+1 before taking in step N's tokens (host work overlaps the device's); not hashed.
    # None: on for a GPU, off on the CPU, where a step computes as it is launched: nothing would overlap and
    # each step's tokens would be taken in a step late (TTFT one step high, the next token's gap near 0)
    async_scheduling: bool | None = None

    def __post_init__(self) -> None:
        if self.async_scheduling is not None and not isinstance(self.async_scheduling, bool):
            raise GraphbenchError(f"async_scheduling must be true or false, got {self.async_scheduling!r}")
        limits = {"max_num_seqs": 1 << 16, "max_num_batched_tokens": MAX_STEP_TOKENS, "max_model_len": 1 << 24}
        for name, limit in limits.items():
            require_int(name, getattr(self, name))
            require_positive(name, getattr(self, name))
            require_at_most(name, getattr(self, name), limit)

    def compute_hash(self) -> str:
        return hash_factors([self.max_num_seqs, self.max_num_batched_tokens])


KV_SIZING = ("before_capture", "after_capture")


@dataclass(slots=True)
class CacheConfig:
    """Paged KV cache: block size and how much memory it may take."""

    block_size: int = 16
    gpu_memory_utilization: float = 0.9  # fraction of device memory for weights + activations + KV
    num_blocks: int | None = None  # explicit block count; overrides the memory budget
    # before_capture: the cache takes its budget first and the CUDA graphs come out of what is left over
    # (vLLM's and SGLang's default order); after_capture: the graphs are recorded first and the cache takes
    # what they left, so the ladder's memory shows in the KV tokens (SGLang's post-capture sizing)
    kv_sizing: str = "before_capture"

    def __post_init__(self) -> None:
        require_int("block_size", self.block_size)
        require_choice("kv_sizing", self.kv_sizing, KV_SIZING)
        require_positive("block_size", self.block_size)
        require_at_most("block_size", self.block_size, 1024)
        if self.block_size & (self.block_size - 1):
            raise GraphbenchError(f"block_size must be a power of two, got {self.block_size}")
        if isinstance(self.gpu_memory_utilization, bool) or not isinstance(self.gpu_memory_utilization, (int, float)) \
                or not 0 < self.gpu_memory_utilization <= 1:
            raise GraphbenchError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}"
            )
        require_int("num_blocks", self.num_blocks)
        require_positive("num_blocks", self.num_blocks)
        require_at_most("num_blocks", self.num_blocks, 1 << 24)

    def compute_hash(self) -> str:
        return hash_factors([self.block_size])


SPECULATIVE_METHODS = ("ngram", "replay")


@dataclass(slots=True)
class SpeculativeConfig:
    """Speculative decoding with a drafter that needs no second model (runner/speculative/).

    ngram: prompt lookup, as vLLM's: the longest suffix of a request's tokens, between
    prompt_lookup_min and prompt_lookup_max tokens long, seen earlier in the same request proposes
    the k tokens that followed it. replay: the tokens an earlier greedy run of the same prompt made
    (a measurement tool: acceptance 100%, or replay_acceptance by corrupting each proposal with
    1 - replay_acceptance probability). Only k changes the generated code and the recordings.
    """

    num_speculative_tokens: int = 0
    method: str = "ngram"
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 4
    replay_acceptance: float = 1.0

    def __post_init__(self) -> None:
        require_int("num_speculative_tokens", self.num_speculative_tokens)
        if not 0 <= self.num_speculative_tokens <= 32:
            raise GraphbenchError(f"num_speculative_tokens must be in 0..32, got {self.num_speculative_tokens}")
        require_choice("speculative method", self.method, SPECULATIVE_METHODS)
        for name in ("prompt_lookup_min", "prompt_lookup_max"):
            require_int(name, getattr(self, name))
            if not 1 <= getattr(self, name) <= 64:
                raise GraphbenchError(f"{name} must be in 1..64, got {getattr(self, name)}")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise GraphbenchError(f"prompt_lookup_min {self.prompt_lookup_min} is above prompt_lookup_max "
                                  f"{self.prompt_lookup_max}")
        a = self.replay_acceptance
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:  # (NaN fails too)
            raise GraphbenchError(f"replay_acceptance must be a number in [0, 1], got {a!r}")

    @property
    def enabled(self) -> bool:
        return self.num_speculative_tokens > 0

    @property
    def decode_query_len(self) -> int:
        return 1 + self.num_speculative_tokens

    def compute_hash(self) -> str:
        return hash_factors([self.num_speculative_tokens])


@dataclass(slots=True)
class ParallelConfig:
    """Tensor parallelism (one process per device)."""

    tensor_parallel_size: int = 1
    # torch's intra-op threads on the CPU. 1: a 2-core host with other work on it held ~1,090 tok/s on
    # tiny-llama with one thread, and fell 10-30x (600 -> 20 tok/s) with one per core when another
    # process took a core (2026-12-04); the tiny models a CPU runs gain nothing from more.
    cpu_threads: int = 1

    def __post_init__(self) -> None:
        require_int("tensor_parallel_size", self.tensor_parallel_size)
        require_positive("tensor_parallel_size", self.tensor_parallel_size)
        require_at_most("tensor_parallel_size", self.tensor_parallel_size, 64)
        require_int("cpu_threads", self.cpu_threads)
        require_positive("cpu_threads", self.cpu_threads)
        require_at_most("cpu_threads", self.cpu_threads, 1024)

    def compute_hash(self) -> str:
        # (Inductor's CPU code is generated for a thread count)
        return hash_factors([self.tensor_parallel_size, self.cpu_threads])


DEFERRED_CAPTURE = ("first_use", "never")
MIXED_LAYOUT_NAMES = ("shared", "tokens", "none")  # mixed_capture_sizes by name (ladders/phases.py)


@dataclass(slots=True)
class CompilationConfig:
    """torch.compile and CUDA-graph settings. None means "unset": the -O preset fills it."""

    mode: CompileMode | None = None
    cudagraph_mode: CUDAGraphMode | None = None
    cudagraph_capture_sizes: list[int] | None = None
    max_cudagraph_capture_size: int | None = None
    # the mixed/prefill steps' own ladder in tokens (ladders/phases.py): None = vLLM's one ladder serves both
    # phases; "tokens" = SGLang's default token ladder up to the step budget; a list; [] or "none" = eager
    mixed_capture_sizes: list[int] | str | None = None
    # capture on demand: None records every key at start-up; a list only the keys of these token counts,
    # the others when a step first needs one (deferred_capture = first_use: that step waits for the
    # recording) or never (deferred_capture = never: such steps run eager)
    startup_capture_sizes: list[int] | str | None = None  # "all" is None (a sweep axis can name it)
    deferred_capture: str = "first_use"
    performance_mode: str = "default"
    compile_sizes: list[int] | str | None = None  # or "decode<=8" (the O3 preset)
    splitting_ops: list[str] | None = None  # None: split at attention; [] = no split
    max_autotune: bool = True  # autotune the GEMMs of the compile_sizes variants (Inductor max_autotune_gemm)
    # measure: a compile_sizes variant keeps graphbench's ops where its kernels run every projection, and
    # start-up times each size's step with and without its variants, keeping the faster (on an H200 -O3's
    # autotuned matmuls made llama-3.2-1b's batch-2/4/8 steps 10-18% slower than -O2's: benchmarks/RESULTS.md,
    # 2026-11-30, 8bb0ab8); always: every variant gets plain matmuls for Inductor and runs (vLLM's -O3)
    static_variants: str = "measure"

    def __post_init__(self) -> None:
        if self.mode is not None:
            self.mode = CompileMode.parse(self.mode)
        if self.cudagraph_mode is not None:
            self.cudagraph_mode = CUDAGraphMode.parse(self.cudagraph_mode)
        require_choice("performance mode", self.performance_mode, PERFORMANCE_MODES)
        require_choice("static_variants", self.static_variants, STATIC_VARIANT_POLICIES)
        require_int_list("cudagraph_capture_sizes", self.cudagraph_capture_sizes, MAX_STEP_TOKENS)
        if self.startup_capture_sizes == "all":
            self.startup_capture_sizes = None
        require_int_list("startup_capture_sizes", self.startup_capture_sizes, MAX_STEP_TOKENS)
        require_choice("deferred_capture", self.deferred_capture, DEFERRED_CAPTURE)
        if isinstance(self.mixed_capture_sizes, str):
            require_choice("mixed_capture_sizes", self.mixed_capture_sizes, MIXED_LAYOUT_NAMES)
        elif self.mixed_capture_sizes is not None:
            require_int_list("mixed_capture_sizes", self.mixed_capture_sizes, MAX_STEP_TOKENS)
            self.mixed_capture_sizes = list(self.mixed_capture_sizes)
        require_int("max_cudagraph_capture_size", self.max_cudagraph_capture_size)
        require_positive("max_cudagraph_capture_size", self.max_cudagraph_capture_size)
        require_at_most("max_cudagraph_capture_size", self.max_cudagraph_capture_size, MAX_STEP_TOKENS)
        if isinstance(self.compile_sizes, str):
            if self.compile_sizes != "decode<=8":
                raise GraphbenchError(
                    f"compile_sizes must be a list of sizes or 'decode<=8', got {self.compile_sizes!r}"
                )
        else:
            require_int_list("compile_sizes", self.compile_sizes, MAX_STEP_TOKENS)
        if self.splitting_ops is not None:
            if not isinstance(self.splitting_ops, (list, tuple)) or not all(  # (a bare name matches no op: no split)
                isinstance(op, str) and all(op.partition("::")[::2]) for op in self.splitting_ops):
                raise GraphbenchError(f"splitting_ops must be a list of op names like graphbench::attention ([] or "
                                      f"'none': no split), got {self.splitting_ops!r}")
            self.splitting_ops = list(self.splitting_ops)

    @property
    def effective_splitting_ops(self) -> list[str]:
        return list(DEFAULT_SPLITTING_OPS) if self.splitting_ops is None else list(self.splitting_ops)

    def splits_at_attention(self) -> bool:
        return any(op in self.effective_splitting_ops for op in DEFAULT_SPLITTING_OPS)

    def compute_hash(self) -> str:
        """Compilation on/off, where the graph is split, which sizes get their own code."""
        mode = self.mode.value if self.mode else None
        return hash_factors([mode, self.effective_splitting_ops, self.compile_sizes, self.max_autotune,
                             self.static_variants])


__all__ = [
    "ModelConfig",
    "SchedulerConfig",
    "CacheConfig",
    "SpeculativeConfig",
    "ParallelConfig",
    "CompilationConfig",
]
