"""Split-K reduction: c bf16 [M, N] = sum over s of partials fp32 [SPLIT_K, M, N].

The sum has one order, sum_partials's: in fp32, partial 0, then partials 1 .. SPLIT_K - 1
added one at a time, (((p0 + p1) + p2) + ...). The reduce kernel here and the GEMM's last
program (kernels.preshuffle_gemm, REDUCE_IN_GEMM) both sum with it, so either gives the same
bytes. Grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)); loads and stores are masked to M and N.
"""

import triton
import triton.language as tl

from kernels import formats


@triton.jit
def sum_partials(partials_ptr, offsets, mask, stride_ps, SPLIT_K: tl.constexpr,
                 CACHE_MODIFIER: tl.constexpr):
    """The split-K sum in its one order (see the module's note)."""
    total = tl.load(partials_ptr + offsets, mask=mask, other=0.0, cache_modifier=CACHE_MODIFIER)
    for s in tl.static_range(1, SPLIT_K):
        total += tl.load(partials_ptr + s * stride_ps + offsets, mask=mask, other=0.0,
                         cache_modifier=CACHE_MODIFIER)
    return total


@triton.jit
def splitk_reduce_kernel(partials_ptr, c_ptr, M, N,
                         stride_ps, stride_pm, stride_cm,
                         SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offsets = rows[:, None].to(tl.int64) * stride_pm + cols[None, :]
    acc = sum_partials(partials_ptr, offsets, mask, stride_ps, SPLIT_K, "")
    tl.store(c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :],
             acc.to(c_ptr.dtype.element_ty), mask=mask)


def reduce_grid(m: int, n: int, block_m: int, block_n: int) -> tuple:
    return (formats.cdiv(m, block_m), formats.cdiv(n, block_n), 1)


def reduce_arguments(partials, c, m, n, *, block_m, block_n):
    """Every argument of splitk_reduce_kernel in signature order; both tensors have unit column stride."""
    return (partials, c, m, n, partials.stride(0), partials.stride(1), c.stride(0),
            partials.shape[0], block_m, block_n)
