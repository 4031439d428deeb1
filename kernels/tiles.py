"""What every GEMM kernel of the project sets up, whatever its product: the program's output
tile and K split, the rows of A it loads, the operand pointers (B's as kernels.layouts.cdna4
lays it out), A's loads, and the kernels' common leading arguments.

The GEMM kernels (kernels.preshuffle_gemm, kernels.hopper_gemm) share this signature head:
  a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, c_ptr, partials_ptr, counters_ptr, M, N, K,
  stride_am, stride_ak, stride_asm, stride_bn, stride_bsn, stride_cm, stride_ps, stride_pm
(operand_arguments) and the grid (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),) (gemm_grid).
A is bf16 [M, K] (any strides), or with A_PREQUANTIZED its MXFP4 codes uint8 [M, K/2] (unit
column stride) and E8M0 scales uint8 [M, K/32]. A program loads A_ROWS rows of A
(loaded_a_rows: fewer than BLOCK_M where M is smaller), from row pid_m * BLOCK_M on; rows
past M wrap onto valid rows.
"""

import triton
import triton.language as tl

from . import formats
from .layouts.cdna4 import (scale_columns, weight_tile_columns,
                            weight_tile_pointers, weight_tile_rows)


def loaded_a_rows(m: int, block_m: int) -> int:
    """The rows of A a program loads (A_ROWS): block_m, or the power of two at or above m where
    that is fewer, so that no program quantizes a row of A twice."""
    return min(block_m, triton.next_power_of_2(m))


def gemm_tiles(m: int, n: int, block_m: int, block_n: int) -> int:
    return formats.cdiv(m, block_m) * formats.cdiv(n, block_n)


def gemm_grid(m: int, n: int, block_m: int, block_n: int, splits: int) -> tuple:
    return (splits * gemm_tiles(m, n, block_m, block_n), 1, 1)


def operand_arguments(a, b, b_scales, c, partials, counters, m, n, k, a_scales=None) -> tuple:
    """The GEMM kernels' leading arguments, in signature order (the module's note). With
    a_scales None, A is bf16 and a stands in for a_scales_ptr (never read)."""
    scales = a if a_scales is None else a_scales
    return (a, scales, b, b_scales, c, partials, counters, m, n, k,
            a.stride(0), a.stride(1), scales.stride(0), b.stride(0), b_scales.stride(0),
            c.stride(0), m * n, n)


@triton.jit
def tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of logical program `pid`: row-major over the tiles, or with GROUP_M > 1
    column-major within groups of GROUP_M tile rows."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if GROUP_M == 1:
        return pid // num_pid_n, pid % num_pid_n
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (pid % pids_per_group) % group_rows, (pid % pids_per_group) // group_rows


@triton.jit
def program_tile(pid, a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, M, N, stride_am, stride_ak,
                 stride_asm, stride_bn, stride_bsn, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 SPLIT_K: tl.constexpr, SPLIT_K_SIZE: tl.constexpr, A_ROWS: tl.constexpr,
                 A_PREQUANTIZED: tl.constexpr):
    """What logical program `pid` computes: (pid_m, pid_n, pid_k, k_start, a_ptrs, as_ptrs,
    b_ptrs, bs_ptrs, scale_groups). Split pid_k of output tile (pid_m, pid_n) sums K from
    k_start; the pointers are its first K tile's: a_ptrs [A_ROWS, BLOCK_K] bf16 (as_ptrs is
    a_scales_ptr, unread), or with A_PREQUANTIZED a_ptrs [A_ROWS, BLOCK_K/2] codes and as_ptrs
    [A_ROWS, BLOCK_K/32] scales; b_ptrs and bs_ptrs as kernels.layouts.cdna4 lays B out, and
    scale_groups the logical scale column of each of a tile row's B-scale bytes (for
    cdna4.load_scale_tile)."""
    pid_k = pid % SPLIT_K
    pid_m, pid_n = tile_coordinates(pid // SPLIT_K, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows_a = (pid_m * BLOCK_M + tl.arange(0, A_ROWS)) % M
    rows_b, rows_bs = weight_tile_rows(pid_n, N, BLOCK_N)
    A_K_PER_ITEM: tl.constexpr = 2 if A_PREQUANTIZED else 1   # K elements per loaded A item
    cols_a = tl.arange(0, BLOCK_K // A_K_PER_ITEM)
    cols_as = tl.arange(0, BLOCK_K // 32)
    cols_b, cols_bs = weight_tile_columns(BLOCK_K)
    scale_groups = scale_columns(cols_bs, 0)
    k_start = pid_k * SPLIT_K_SIZE
    if A_PREQUANTIZED:
        a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start // 2 + cols_a)[None, :]
        as_ptrs = a_scales_ptr + rows_a[:, None] * stride_asm + (k_start // 32 + cols_as)[None, :]
    else:
        a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start + cols_a)[None, :] * stride_ak
        as_ptrs = a_scales_ptr
    b_ptrs, bs_ptrs = weight_tile_pointers(b_ptr, b_scales_ptr, rows_b, rows_bs, cols_b, cols_bs,
                                           k_start, stride_bn, stride_bsn)
    return pid_m, pid_n, pid_k, k_start, a_ptrs, as_ptrs, b_ptrs, bs_ptrs, scale_groups


@triton.jit
def load_a_tile(a_ptrs, k0, K, EVEN_K: tl.constexpr, BLOCK_K: tl.constexpr,
                A_PREQUANTIZED: tl.constexpr):
    """A's K tile at k0 (values, or codes with A_PREQUANTIZED); past K, with EVEN_K False, 0."""
    if EVEN_K:
        a = tl.load(a_ptrs)
    else:
        A_K_PER_ITEM: tl.constexpr = 2 if A_PREQUANTIZED else 1   # K elements per loaded item
        cols = tl.arange(0, BLOCK_K // A_K_PER_ITEM)
        a = tl.load(a_ptrs, mask=(k0 // A_K_PER_ITEM + cols)[None, :] < K // A_K_PER_ITEM,
                    other=0)
    return a


@triton.jit
def load_a_scale_tile(as_ptrs, k0, K, EVEN_K: tl.constexpr, BLOCK_K: tl.constexpr):
    """A prequantized A's scales of the K tile at k0; past K, with EVEN_K False, 127 (1.0)."""
    if EVEN_K:
        a_scales = tl.load(as_ptrs)
    else:
        cols = tl.arange(0, BLOCK_K // 32)
        a_scales = tl.load(as_ptrs, mask=(k0 // 32 + cols)[None, :] < K // 32, other=127)
    return a_scales


@triton.jit
def next_a_tile(a_ptrs, as_ptrs, stride_ak, BLOCK_K: tl.constexpr, A_PREQUANTIZED: tl.constexpr):
    """(a_ptrs, as_ptrs) moved on to the next K tile."""
    if A_PREQUANTIZED:
        a_ptrs += BLOCK_K // 2
        as_ptrs += BLOCK_K // 32
    else:
        a_ptrs += BLOCK_K * stride_ak
    return a_ptrs, as_ptrs


@triton.jit
def repeated_rows(x, TIMES: tl.constexpr):
    """x [R, C] -> [TIMES * R, C], row i being x[i % R]."""
    rows: tl.constexpr = x.shape[0]
    columns: tl.constexpr = x.shape[1]
    return tl.broadcast_to(x[None, :, :], (TIMES, rows, columns)).reshape(TIMES * rows, columns)
