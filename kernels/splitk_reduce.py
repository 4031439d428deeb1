"""Split-K reduction: c [M, N] (bf16 or fp32) = sum over s of partials fp32 [SPLIT_K, M, N].

The sum has one order, sum_partials's: in fp32, partial 0, then partials 1 .. SPLIT_K - 1
added one at a time, (((p0 + p1) + p2) + ...). The reduce kernel here and the GEMM's last
program (kernels.preshuffle_gemm, REDUCE_IN_GEMM) both sum with it, so either gives the same
bytes. Grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)); loads and stores are masked to M and N.
"""

import triton
import triton.language as tl

from . import formats


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
def _wait_for_own_stores(token):
    """s_waitcnt vmcnt(0): the wave's stores have completed (gfx950; returns token)."""
    return tl.inline_asm_elementwise("s_waitcnt vmcnt(0)", "=s,0", [token], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def store_output_tile(acc, c_ptr, partials_ptr, counters_ptr, first_row, first_col, M, N,
                      stride_cm, stride_ps, stride_pm, pid_k, tile,
                      ROWS: tl.constexpr, COLS: tl.constexpr, SPLIT_K: tl.constexpr,
                      REDUCE_IN_GEMM: tl.constexpr, SPLIT_K_SYNC: tl.constexpr,
                      STORE_MODIFIER: tl.constexpr):
    """A GEMM program's epilogue: acc fp32 [ROWS, COLS], the output tile at (first_row,
    first_col), stored into c (SPLIT_K 1), else as split pid_k's partial of the tile `tile`,
    the last of its splits to finish summing them into c with REDUCE_IN_GEMM (see
    kernels.preshuffle_gemm for the counter protocol and SPLIT_K_SYNC)."""
    rows_c = first_row + tl.arange(0, ROWS)
    cols_c = first_col + tl.arange(0, COLS)
    mask_c = (rows_c[:, None] < M) & (cols_c[None, :] < N)
    c_ptrs = c_ptr + rows_c[:, None].to(tl.int64) * stride_cm + cols_c[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_c,
                 cache_modifier=STORE_MODIFIER)
    else:
        p_offsets = rows_c[:, None].to(tl.int64) * stride_pm + cols_c[None, :]
        WRITE_THROUGH: tl.constexpr = REDUCE_IN_GEMM and SPLIT_K_SYNC == "write_through"
        tl.store(partials_ptr + pid_k * stride_ps + p_offsets, acc, mask=mask_c,
                 cache_modifier=".wt" if WRITE_THROUGH else STORE_MODIFIER)
        if REDUCE_IN_GEMM:
            if WRITE_THROUGH:
                # AMD, where a release fence writes back the whole L2 of the XCD and an acquire
                # invalidates it. Instead each partial store is written through (sc0 sc1) and
                # each wave waits for its own (the barrier waits for none), so all of them are
                # where every XCD reads before the one counter atomic; the last program loads
                # the partials with sc0 sc1, past any stale line of its own L2.
                _wait_for_own_stores(tile)
                tl.debug_barrier()
                arrived = tl.atomic_add(counters_ptr + tile, 1, sem="relaxed", scope="gpu")
            else:
                # Every thread's partial store comes before the counter's release.
                tl.debug_barrier()
                arrived = tl.atomic_add(counters_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if arrived == SPLIT_K - 1:
                total = sum_partials(partials_ptr, p_offsets, mask_c, stride_ps, SPLIT_K,
                                     ".cv" if WRITE_THROUGH else ".cg")
                tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=mask_c,
                         cache_modifier=STORE_MODIFIER)
                # Relaxed: no program of this launch reads the counter again, and the next
                # launch on the queue starts after this one ends, which orders the reset.
                tl.atomic_xchg(counters_ptr + tile, 0, sem="relaxed")


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
