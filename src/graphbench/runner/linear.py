"""Linear layers on graphbench's kernels where they beat cuBLAS in the recorded step: the Triton GEMV at one
row, the skinny GEMM at 2..64 rows, each with blocks chosen per shape and row class by timing them against
cuBLAS at start-up (runner/kernel_choice.py, kernel_timing.py). config.model.kernels = torch runs none of
these (model.LAYER_OPS).

`add_rmsnorm_linear` puts the residual add + RMSNorm in front of a projection (qkv): one Triton launch
(runner/kernels/add_rmsnorm.py), then the projection, or at one row, where start-up's timing chose it, both in
one launch (runner/kernels/norm_gemv.py). `add_rmsnorm_gate_up` does the same for the MLP's
gate/up projection and returns silu(gate) * up, computed in the projection's epilogue where the chosen
kernel is a gated one, otherwise by one silu-mul launch after it.

Inside torch.compile every linear is traced as the `graphbench::linear` custom op, which picks its
kernel when it runs (and so when each size is recorded in a CUDA graph); a variant compiled for a
fixed multi-row size (compile_sizes) gets plain matmuls back before Inductor sees it, so that they are
fused around and autotuned, where one of its projections would run cuBLAS at that size (runs_own_kernel).
Eager code calls the implementation directly (no custom-op overhead).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from graphbench.runner import kernel_choice
from graphbench.runner.kernel_choice import KernelChoice
from graphbench.runner.kernels.util import triton_interpreting
from graphbench.runner.op_registry import register_op

OP_NAME = "graphbench::linear"
GATE_UP_OP_NAME = "graphbench::add_rmsnorm_gate_up"
ADD_NORM_OP_NAME = "graphbench::add_rmsnorm_linear"


@functools.cache
def _kernels():
    """The Triton kernel modules, imported once, on first use (the CPU path never needs Triton)."""
    from graphbench.runner.kernels import add_rmsnorm, norm_gemv
    from graphbench.runner.kernels import gemv as gemv_kernels  # (gemv here is this module's function)

    return gemv_kernels, add_rmsnorm, norm_gemv


def chosen_kernel(op: str, x: torch.Tensor, weight: torch.Tensor) -> KernelChoice | None:
    """The kernel of graphbench's that runs op ("linear" or "gate_up") on x [T, K] with weight [N, K], or
    None: cuBLAS (what was chosen, more than 64 rows, or inputs the kernels do not take)."""
    if x.dim() != 2 or not on_triton_device(x) or x.dtype != weight.dtype or weight.stride(-1) != 1:
        return None
    n, k = weight.shape
    choice = kernel_choice.choice_for(op, n, k, x.shape[0], x.is_cuda)  # (no per-call work beyond a lookup)
    if choice.kernel == "torch" or x.shape[1] != k:
        return None
    if choice.kernel in ("gemv", "gated_gemv"):
        return choice if x.shape[0] == 1 and x.is_contiguous() else None
    return choice if _skinny().skinny_applies(x, weight) else None


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, blocks: tuple[int, int, int]) -> torch.Tensor:
    """x[1, K] @ weight[N, K].T (+ bias[N]) -> [1, N], in x's dtype, accumulated in float32."""
    out = torch.empty((1, weight.shape[0]), dtype=x.dtype, device=x.device)
    _kernels()[0].launch_gemv(x, weight, bias, out, *blocks, interpret=triton_interpreting())
    return out


def gated_gemv(x: torch.Tensor, weight: torch.Tensor, blocks: tuple[int, int, int]) -> torch.Tensor:
    """x[1, K], weight = [gate; up] [2I, K] -> silu(x @ gate.T) * (x @ up.T) [1, I], one launch (blocks:
    BLOCK_N columns a program, each a gate row and its up row)."""
    out = torch.empty((1, weight.shape[0] // 2), dtype=x.dtype, device=x.device)
    _kernels()[0].launch_gated_gemv(x, weight, out, *blocks, interpret=triton_interpreting())
    return out


def runs_own_kernel(rows: int, weight: torch.Tensor, op: str = "linear") -> bool:
    """Whether op ("linear" or "gate_up") over `rows` rows on this weight runs one of graphbench's kernels,
    not cuBLAS (for a fixed-size variant: compile/pieces.py gives Inductor the matmuls only where cuBLAS
    would run)."""
    return chosen_kernel(op, weight.new_empty((rows, weight.shape[1])), weight) is not None


def linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear, through the kernel chosen for the shape and row count (chosen_kernel)."""
    return _run_linear(chosen_kernel("linear", x, weight), x, weight, bias)


def _run_linear(choice: KernelChoice | None, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight.T (+ bias) on the chosen kernel (None: cuBLAS)."""
    if choice is None:
        return F.linear(x, weight, bias)
    if choice.kernel == "gemv":
        return gemv(x, weight, bias, choice.blocks)
    return _skinny().skinny_gemm(x, weight, bias, choice.blocks)


@functools.cache
def _skinny():
    from graphbench.runner.kernels import skinny_gemm

    return skinny_gemm


def _linear_fake(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))


# the dynamic-shape graph's linear: the row count is only known when it runs, so the op picks then
linear_op = register_op(OP_NAME, linear_impl, _linear_fake)


def pick_implementation(impl, op):
    """Eager code calls the implementation (no custom-op overhead); a traced graph gets the op, which
    picks its kernel when it runs. No branching on the row count here: under Dynamo a symbolic count
    passes isinstance(rows, int) and `rows != 1` is assumed true, so the op would never be traced.
    Variants compiled for a fixed multi-row size get plain ops back from compile/pieces.linears_as_matmuls."""
    return op if torch.compiler.is_compiling() else impl


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x[T, K] -> [T, N]. Which kernel runs depends on T: see the module docstring."""
    return pick_implementation(linear_impl, linear_op)(x, weight, bias)


def add_rmsnorm_gate_up_impl(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                             weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; gate_up = rmsnorm(h) * norm_weight @ weight.T ([T, 2I] = [gate | up]);
    -> (silu(gate) * up [T, I], h). On the GPU: one add-norm launch, then the projection with the
    activation in its epilogue (a gated kernel chosen), or the projection and one silu-mul launch."""
    if not add_norm_kernel_applies(x, residual, norm_weight):
        return add_rmsnorm_gate_up_matmul(x, residual, norm_weight, eps, weight)
    if (fused := _fused_norm_choice("gate_up", x, weight)) is not None:
        return norm_gemv(x, residual, norm_weight, eps, weight, None, fused.blocks, gated=True)
    normed, h = add_rmsnorm_rows(x, residual, norm_weight, eps)
    choice = chosen_kernel("gate_up", normed, weight)
    if choice is not None and choice.kernel == "gated_gemv":
        return gated_gemv(normed, weight, choice.blocks), h
    if choice is not None and choice.kernel == "gated_skinny":
        return _skinny().skinny_gate_up(normed, weight, choice.blocks), h
    gate_up = _run_linear(choice, normed, weight, None)  # the skinny GEMM or cuBLAS, then the activation
    hidden = torch.empty((gate_up.shape[0], weight.shape[0] // 2), dtype=x.dtype, device=x.device)
    _kernels()[0].launch_silu_mul(gate_up, hidden)
    return hidden, h


def add_rmsnorm_gate_up_matmul(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                               weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as plain torch ops: what the CPU runs, and what a variant compiled for a fixed multi-row
    size is given, so that Inductor fuses the norm and the activation and autotunes the matmul
    (compile/pieces.linears_as_matmuls)."""
    gate_up, h = add_rmsnorm_matmul(x, residual, norm_weight, eps, weight, None)
    inter = weight.shape[0] // 2
    return F.silu(gate_up[..., :inter]) * gate_up[..., inter:], h


def _add_rmsnorm_gate_up_fake(x, residual, norm_weight, eps, weight):
    return x.new_empty((x.shape[0], weight.shape[0] // 2)), torch.empty_like(x)


add_rmsnorm_gate_up_op = register_op(GATE_UP_OP_NAME, add_rmsnorm_gate_up_impl, _add_rmsnorm_gate_up_fake)


def add_rmsnorm_gate_up(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [T, H] -> (silu(gate) * up [T, I], new residual [T, H]), chosen as `linear` is."""
    return pick_implementation(add_rmsnorm_gate_up_impl, add_rmsnorm_gate_up_op)(x, residual, norm_weight, eps, weight)


def add_rmsnorm_linear_impl(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                            weight: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; (linear(rmsnorm(h) * norm_weight, weight, bias), h): the residual add and the
    norm in front of a projection. On the GPU: one add-norm launch, then the projection (linear_impl's)."""
    if not add_norm_kernel_applies(x, residual, norm_weight):
        return add_rmsnorm_matmul(x, residual, norm_weight, eps, weight, bias)
    if (fused := _fused_norm_choice("linear", x, weight)) is not None:
        return norm_gemv(x, residual, norm_weight, eps, weight, bias, fused.blocks, gated=False)
    normed, h = add_rmsnorm_rows(x, residual, norm_weight, eps)
    return linear_impl(normed, weight, bias), h


def _fused_norm_choice(op: str, x: torch.Tensor, weight: torch.Tensor) -> KernelChoice | None:
    """The one-launch add-norm + GEMV where it was chosen for this shape (one row; kernels/norm_gemv.py), or None."""
    n, k = weight.shape
    if x.shape[0] != 1 or x.shape[1] != k or x.dtype != weight.dtype or weight.stride(-1) != 1:
        return None
    choice = kernel_choice.choice_for(kernel_choice.NORM_OPS[op], n, k, 1, x.is_cuda)
    return None if choice.kernel == "unfused" else choice


def norm_gemv(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
              bias: torch.Tensor | None, blocks: tuple[int, int, int], gated: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [1, K] -> (rmsnorm(x + residual) * norm_weight projected (gated: silu(gate) * up), x + residual)."""
    out = torch.empty((1, weight.shape[0] // 2 if gated else weight.shape[0]), dtype=x.dtype, device=x.device)
    h = torch.empty_like(x)
    _kernels()[2].launch_norm_gemv(x, residual, norm_weight, eps, weight, bias, out, h, *blocks, gated=gated,
                                   interpret=triton_interpreting())
    return out, h


def add_norm_kernel_applies(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor) -> bool:
    """The Triton add-norm kernel runs: on its device, x and residual [T, K] contiguous, a norm weight of x's dtype."""
    return (x.shape == residual.shape and x.dim() == 2 and x.is_contiguous() and residual.is_contiguous()
            and norm_weight.dtype == x.dtype and on_triton_device(x))


def add_rmsnorm_rows(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(rmsnorm(x + residual) * norm_weight, x + residual) in one Triton launch."""
    normed, h = torch.empty_like(x), torch.empty_like(x)
    _kernels()[1].launch_add_rmsnorm(x, residual, norm_weight, eps, normed, h)
    return normed, h


def add_rmsnorm_matmul(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       weight: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as plain torch ops (the model's RMSNorm), for the CPU and for fixed multi-row variants."""
    normed, h = add_rmsnorm_torch(x, residual, norm_weight, eps)
    return F.linear(normed, weight, bias), h


def add_rmsnorm_torch(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                      eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(rmsnorm(x + residual) * norm_weight, x + residual) as torch ops."""
    h = x + residual
    return rms_norm(h, norm_weight, eps), h


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Llama computes it: in float32, rounded to x's dtype, then scaled by the weight."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _add_rmsnorm_linear_fake(x, residual, norm_weight, eps, weight, bias):
    return x.new_empty((x.shape[0], weight.shape[0])), torch.empty_like(x)


add_rmsnorm_linear_op = register_op(ADD_NORM_OP_NAME, add_rmsnorm_linear_impl, _add_rmsnorm_linear_fake)


def add_rmsnorm_linear(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       weight: torch.Tensor, bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [T, K] -> (projection [T, N], new residual [T, K]), chosen as `linear` is."""
    return pick_implementation(add_rmsnorm_linear_impl, add_rmsnorm_linear_op)(x, residual, norm_weight, eps, weight, bias)


def on_triton_device(x: torch.Tensor) -> bool:
    """Our Triton kernels may run on x: on the GPU, or anywhere under the Triton interpreter."""
    return x.is_cuda or triton_interpreting()
