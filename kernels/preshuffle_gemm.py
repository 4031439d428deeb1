"""Fused MXFP4 GEMM on a preshuffled weight: C = quantize(A) @ dequant(B)^T.

Inputs, all row-major:
  a        bf16  [M, K]                          quantized to MXFP4 in registers, or with
                                                 A_PREQUANTIZED the codes uint8 [M, K/2]
                                                 (unit column stride) and
  a_scales uint8 [M, K/32]                       their E8M0 scales (the unfused baseline)
  b        uint8 [N/16, (K/2)*16]                shuffle_weight(B_q, (16, 16)) viewed 2-D
  b_scales uint8 [pad(N,256)/32, pad(K/32,8)*32]  e8m0_shuffle(B_scale) viewed 2-D
Outputs:
  c        bf16  [M, N]
  partials fp32  [SPLIT_K, M, N] (SPLIT_K > 1 only): the sums over the K ranges
           [s*SPLIT_K_SIZE, (s+1)*SPLIT_K_SIZE). They are added up into c in one order,
           kernels.splitk_reduce.sum_partials's (fp32, (((p0 + p1) + p2) + ...)), either by
           kernels.splitk_reduce (a second launch) or, with REDUCE_IN_GEMM, by the last
           program of each output tile to finish: each program bumps the tile's int32 counter
           in counters [tiles] (zero before the launch) once, and the one that sees
           SPLIT_K - 1 sums and resets it to zero for the next launch. SPLIT_K_SYNC says how
           the partials reach that program (see below): "acq_rel" (a release/acquire counter,
           what the PTX memory model asks for) or "write_through" (AMD: no cache writeback or
           invalidate).

The product is `tl.dot_scaled` on E2M1 codes and E8M0 scales (the native scaled MFMA on
gfx950; an emulation on NVIDIA), A quantized by kernels.quantize (QUANTIZER: the name of
its quantizer, kernels.quantize.QUANTIZERS).
SCALES_FIRST issues each K tile's B-scale load before its A and B loads, else after them.
Options (constexpr, off by default): NUM_XCDS > 1 remaps program ids so that consecutive
logical programs run on one XCD (the hardware deals workgroups to XCDs round-robin and each
XCD has its own L2); STORE_MODIFIER is the cache modifier of the C and partials stores
(e.g. ".wt").
A_ROWS: the rows of A each program loads and quantizes, BLOCK_M or, where M is smaller (one
row of tiles), the power of two at or above M: its codes and scales are then repeated to
BLOCK_M rows for the MFMA, so no program quantizes a row of A twice. A prequantized A on AMD
takes BLOCK_M rows (repeating loaded codes trips an assertion in Triton 3.6's AMD matmul
lowering; launchers.gemm passes A_ROWS).
WAVE_SPLIT_K > 1 splits each K tile into that many slices and stacks them, A's along M and
B's along N, into one product [WAVE_SPLIT_K * A_ROWS, WAVE_SPLIT_K * BLOCK_N] whose diagonal
blocks are the slices' sums: the waves that split the product's N split K, and the diagonal is
summed once after the K loop (across waves, through LDS). tl.dot_scaled takes no batch of
scaled products in Triton 3.6, so the off-diagonal blocks are computed too: with A_ROWS *
WAVE_SPLIT_K <= BLOCK_M they take the MFMA rows that repeated codes take otherwise, beyond
that they repeat MFMAs. A_ROWS * WAVE_SPLIT_K must be >= 16, BLOCK_K / WAVE_SPLIT_K >= 128,
and the program stores A_ROWS rows of C (a_rows).
Grid: (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),). No load leaves its tensor: rows past
M or N wrap onto valid rows (their results are masked at the store), and a ragged last K tile
(EVEN_K False) is masked, its B scales replaced by 1.0 so that padding garbage cannot reach
the sum. Requirements: BLOCK_N a multiple of 32 that divides 256, BLOCK_K a power of two >= 256,
SPLIT_K_SIZE a multiple of BLOCK_K, K % 64 == 0, N % 16 == 0.
"""

import torch
import triton
import triton.language as tl

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import quantize_tile_mxfp4
from mxfp4_mm.kernels.splitk_reduce import store_output_tile


@triton.jit
def _tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if GROUP_M == 1:
        return pid // num_pid_n, pid % num_pid_n
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (pid % pids_per_group) % group_rows, (pid % pids_per_group) // group_rows


@triton.jit
def _xcd_remapped(pid, programs, NUM_XCDS: tl.constexpr):
    """Hardware program id -> logical id such that each XCD runs a contiguous run of logical ids
    (aiter's remap_xcd): the hardware puts program p on XCD p % NUM_XCDS."""
    per_xcd = tl.cdiv(programs, NUM_XCDS)
    full_xcds = programs % NUM_XCDS
    full_xcds = tl.where(full_xcds == 0, NUM_XCDS, full_xcds)
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    return tl.where(xcd < full_xcds, xcd * per_xcd + local,
                    full_xcds * per_xcd + (xcd - full_xcds) * (per_xcd - 1) + local)


@triton.jit
def _repeated_rows(x, TIMES: tl.constexpr):
    """x [R, C] -> [TIMES * R, C], row i being x[i % R]."""
    rows: tl.constexpr = x.shape[0]
    columns: tl.constexpr = x.shape[1]
    return tl.broadcast_to(x[None, :, :], (TIMES, rows, columns)).reshape(TIMES * rows, columns)


@triton.jit
def _k_slices_as_rows(x, SLICES: tl.constexpr):
    """x [R, C] -> [SLICES * R, C / SLICES], row s * R + i being x[i, s * C/S : (s + 1) * C/S]."""
    rows: tl.constexpr = x.shape[0]
    columns: tl.constexpr = x.shape[1] // SLICES
    return x.reshape(rows, SLICES, columns).permute(1, 0, 2).reshape(SLICES * rows, columns)


@triton.jit
def _diagonal_block_sum(x, BLOCKS: tl.constexpr):
    """x [BLOCKS * R, BLOCKS * C] -> [R, C], the sum of its diagonal blocks."""
    rows: tl.constexpr = x.shape[0] // BLOCKS
    columns: tl.constexpr = x.shape[1] // BLOCKS
    x = x.reshape(BLOCKS, rows, BLOCKS, columns)
    block = tl.arange(0, BLOCKS)
    x = tl.where(block[:, None, None, None] == block[None, None, :, None], x, 0.0)
    return tl.sum(tl.sum(x, axis=2), axis=0)


@triton.jit
def _unshuffle_weight_tile(b, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN/16, (BK/2)*16] shuffled bytes -> [BN, BK/2], W[n, kb] (formats.shuffle_weight)."""
    b = b.reshape(BLOCK_N // 16, BLOCK_K // 64, 2, 16, 16).permute(0, 3, 1, 2, 4)
    return b.reshape(BLOCK_N, BLOCK_K // 2)


@triton.jit
def _unshuffle_scale_tile(s, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN/32, BK] shuffled bytes -> [BN, BK/32] (formats.e8m0_shuffle)."""
    s = s.reshape(BLOCK_N // 32, BLOCK_K // 256, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2)
    return s.reshape(BLOCK_N, BLOCK_K // 32)


@triton.jit
def preshuffle_gemm_kernel(
    a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, c_ptr, partials_ptr, counters_ptr,
    M, N, K,
    stride_am, stride_ak, stride_asm,
    stride_bn, stride_bsn,
    stride_cm, stride_ps, stride_pm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, SPLIT_K_SIZE: tl.constexpr,
    REDUCE_IN_GEMM: tl.constexpr, EVEN_K: tl.constexpr, CACHE_MODIFIER: tl.constexpr,
    QUANTIZER: tl.constexpr, QUANT_FAST_PATH: tl.constexpr, A_PREQUANTIZED: tl.constexpr,
    NUM_XCDS: tl.constexpr, STORE_MODIFIER: tl.constexpr,
    SPLIT_K_SYNC: tl.constexpr, THREADS: tl.constexpr, SCALES_FIRST: tl.constexpr,
    A_ROWS: tl.constexpr, WAVE_SPLIT_K: tl.constexpr,
):
    pid = tl.program_id(0)
    if NUM_XCDS > 1:
        pid = _xcd_remapped(pid, tl.num_programs(0), NUM_XCDS)
    pid_k = pid % SPLIT_K
    pid_m, pid_n = _tile_coordinates(pid // SPLIT_K, M, N, BLOCK_M, BLOCK_N, GROUP_M)

    rows_a = (pid_m * BLOCK_M + tl.arange(0, A_ROWS)) % M
    rows_b = (pid_n * (BLOCK_N // 16) + tl.arange(0, BLOCK_N // 16)) % (N // 16)
    rows_bs = (pid_n * (BLOCK_N // 32) + tl.arange(0, BLOCK_N // 32)) % tl.cdiv(N, 32)
    A_K_PER_ITEM: tl.constexpr = 2 if A_PREQUANTIZED else 1   # K elements per loaded A item
    cols_a = tl.arange(0, BLOCK_K // A_K_PER_ITEM)
    cols_as = tl.arange(0, BLOCK_K // 32)
    cols_b = tl.arange(0, (BLOCK_K // 2) * 16)
    cols_bs = tl.arange(0, BLOCK_K)
    # Logical scale column of each shuffled byte (8*c0 + 4*c1 + c2, see formats.e8m0_shuffle).
    groups_bs = 8 * (cols_bs // 256) + 4 * ((cols_bs // 2) % 2) + (cols_bs // 64) % 4

    k_start = pid_k * SPLIT_K_SIZE
    if A_PREQUANTIZED:
        a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start // 2 + cols_a)[None, :]
        as_ptrs = a_scales_ptr + rows_a[:, None] * stride_asm + (k_start // 32 + cols_as)[None, :]
    else:
        a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start + cols_a)[None, :] * stride_ak
    b_ptrs = b_ptr + rows_b[:, None] * stride_bn + (k_start * 8 + cols_b)[None, :]
    bs_ptrs = b_scales_ptr + rows_bs[:, None] * stride_bsn + (k_start + cols_bs)[None, :]

    C_ROWS: tl.constexpr = A_ROWS if WAVE_SPLIT_K > 1 else BLOCK_M   # rows of C stored
    acc = tl.zeros((WAVE_SPLIT_K * C_ROWS, WAVE_SPLIT_K * BLOCK_N), dtype=tl.float32)
    for k_iter in range(SPLIT_K_SIZE // BLOCK_K):
        k0 = k_start + k_iter * BLOCK_K
        if EVEN_K:
            if SCALES_FIRST:
                bs = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
            if not SCALES_FIRST:
                bs = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
        else:
            if SCALES_FIRST:
                bs = tl.load(bs_ptrs, mask=(k0 // 32 + groups_bs)[None, :] < K // 32, other=127,
                             cache_modifier=CACHE_MODIFIER)
            a = tl.load(a_ptrs, mask=(k0 // A_K_PER_ITEM + cols_a)[None, :] < K // A_K_PER_ITEM,
                        other=0)
            b = tl.load(b_ptrs, mask=(k0 * 8 + cols_b)[None, :] < K * 8, other=0,
                        cache_modifier=CACHE_MODIFIER)
            if not SCALES_FIRST:
                bs = tl.load(bs_ptrs, mask=(k0 // 32 + groups_bs)[None, :] < K // 32,
                             other=127, cache_modifier=CACHE_MODIFIER)
        if A_PREQUANTIZED:
            if EVEN_K:
                a_scales = tl.load(as_ptrs)
            else:
                a_scales = tl.load(as_ptrs, mask=(k0 // 32 + cols_as)[None, :] < K // 32,
                                   other=127)
        if not A_PREQUANTIZED:
            a, a_scales = quantize_tile_mxfp4(a, A_ROWS, BLOCK_K, QUANTIZER, QUANT_FAST_PATH,
                                               THREADS)
        b = _unshuffle_weight_tile(b, BLOCK_N, BLOCK_K)
        bs = _unshuffle_scale_tile(bs, BLOCK_N, BLOCK_K)
        if WAVE_SPLIT_K > 1:
            a = _k_slices_as_rows(a, WAVE_SPLIT_K)
            a_scales = _k_slices_as_rows(a_scales, WAVE_SPLIT_K)
            b = _k_slices_as_rows(b, WAVE_SPLIT_K)
            bs = _k_slices_as_rows(bs, WAVE_SPLIT_K)
        elif A_ROWS < BLOCK_M:
            a = _repeated_rows(a, BLOCK_M // A_ROWS)
            a_scales = _repeated_rows(a_scales, BLOCK_M // A_ROWS)
        acc = tl.dot_scaled(a, a_scales, "e2m1", b.trans(1, 0), bs, "e2m1", acc=acc)
        if A_PREQUANTIZED:
            a_ptrs += BLOCK_K // 2
            as_ptrs += BLOCK_K // 32
        else:
            a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * 8
        bs_ptrs += BLOCK_K

    if WAVE_SPLIT_K > 1:
        acc = _diagonal_block_sum(acc, WAVE_SPLIT_K)
    store_output_tile(acc, c_ptr, partials_ptr, counters_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N,
                      M, N, stride_cm, stride_ps, stride_pm, pid_k, pid // SPLIT_K,
                      C_ROWS, BLOCK_N, SPLIT_K, REDUCE_IN_GEMM, SPLIT_K_SYNC, STORE_MODIFIER)


SCALED_MFMA_ROWS, SCALED_MFMA_K = 16, 128   # the smallest scaled MFMA: 16x16x128

def weight_view(b_shuffle):
    """B_shuffle [N, K/2] (fp4x2 or uint8) -> the kernel's uint8 [N/16, (K/2)*16] view."""
    n, kb = b_shuffle.shape
    return b_shuffle.view(torch.uint8).view(n // formats.WEIGHT_TILE_N, kb * formats.WEIGHT_TILE_N)


def scales_view(b_scale_sh):
    """B_scale_sh [pad(N,256), pad(K/32,8)] -> the kernel's uint8 [rows/32, cols*32] view."""
    rows, cols = b_scale_sh.shape
    return b_scale_sh.view(torch.uint8).view(rows // formats.SCALE_TILE_ROWS,
                                                    cols * formats.SCALE_TILE_ROWS)


def a_rows(m: int, block_m: int, wave_split_k: int = 1) -> int:
    """The kernel's A_ROWS: block_m, or the power of two at or above m where that is fewer;
    with wave_split_k > 1 at least SCALED_MFMA_ROWS / wave_split_k, the rows its stacked
    product needs."""
    rows = min(block_m, triton.next_power_of_2(m))
    return rows if wave_split_k == 1 else max(rows, SCALED_MFMA_ROWS // wave_split_k)


def gemm_tiles(m: int, n: int, block_m: int, block_n: int) -> int:
    return formats.cdiv(m, block_m) * formats.cdiv(n, block_n)


def gemm_grid(m: int, n: int, block_m: int, block_n: int, splits: int) -> tuple:
    return (splits * gemm_tiles(m, n, block_m, block_n), 1, 1)


def gemm_arguments(a, b, b_scales, c, partials, counters, m, n, k, *, block_m,
                   block_n, block_k, group_m, splits, split_size, reduce_in_gemm, cache_modifier,
                   quantizer="software", quant_fast_path=True, a_scales=None, num_xcds=1,
                   store_modifier=None, splitk_sync="acq_rel", threads=1, scales_first=True,
                   rows=None, wave_split_k=1):
    """Every argument of preshuffle_gemm_kernel in signature order, constexprs included.

    a is bf16 [M, K], or with a_scales given the codes uint8 [M, K/2] of a quantized A. b and
    b_scales are the 2-D views of weight_view and scales_view; c is bf16 [M, N] with unit
    column stride. partials (fp32 [splits, M, N], contiguous) and counters (int32 [tiles],
    zero) are read only when splits > 1 (counters only with reduce_in_gemm); pass c where
    they are unused. splitk_sync: "acq_rel" or "write_through" (AMD), see the kernel's text;
    threads: the program's thread count (a power of two); rows: A_ROWS (default a_rows);
    wave_split_k: WAVE_SPLIT_K.
    """
    prequantized = a_scales is not None
    scales = a_scales if prequantized else a
    return (a, scales, b, b_scales, c, partials, counters, m, n, k,
            a.stride(0), a.stride(1), scales.stride(0), b.stride(0), b_scales.stride(0),
            c.stride(0), m * n, n,
            block_m, block_n, block_k, group_m, splits, split_size, reduce_in_gemm,
            k % split_size == 0, cache_modifier, quantizer, quant_fast_path, prequantized, num_xcds,
            store_modifier, splitk_sync, threads, scales_first,
            a_rows(m, block_m, wave_split_k) if rows is None else rows, wave_split_k)
