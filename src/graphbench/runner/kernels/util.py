"""What the kernels' launch code needs besides Triton: the interpreter check and launch-size arithmetic."""

from __future__ import annotations

from graphbench import env


# Added to a sampled id whose row of logits held a NaN, in the copy the host reads (the device keeps the
# valid id, which the next step may take as its input): the host then raises instead of emitting a token.
NAN_MARK = 1 << 40
PACKET_HEADER = 4  # int32s before a step-input packet's values: [R, BU, V, unused] (kernels/step_inputs.py)


def triton_interpreting() -> bool:
    """TRITON_INTERPRET is on: Triton kernels run on the CPU (read when asked: tests switch it per process)."""
    return env.flag("TRITON_INTERPRET")


# Launch-size arithmetic in plain Python: triton.next_power_of_2 and triton.cdiv are ConstexprFunction
# objects whose calls cost ~5 us each on the host (Triton 3.6), several per launch of an eager step.
def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for positive b."""
    return -(-a // b)


def tile_fits(k: int, block_k: int) -> bool:
    """A one-row kernel's K tile: a power of two dividing K, or the whole row (named by the next power of two
    >= K; the GEMVs load it in K's power-of-two pieces, the folded add-norm as one tile masked past K)."""
    return block_k >= 1 and block_k & (block_k - 1) == 0 and (k % block_k == 0 or block_k == next_power_of_2(k))
