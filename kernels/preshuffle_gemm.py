"""Fused MXFP4 GEMM on a preshuffled weight: C = quantize(A) @ dequant(B)^T.

Inputs, all row-major:
  a        bf16  [M, K]                          quantized to MXFP4 in registers, or with
                                                 A_PREQUANTIZED the codes uint8 [M, K/2]
                                                 (unit column stride) and
  a_scales uint8 [M, K/32]                       their E8M0 scales (the unfused baseline)
  b        uint8 [N/16, (K/2)*16]                shuffle_weight(B_q, (16, 16)) viewed 2-D
  b_scales uint8 [pad(N,256)/32, pad(K/32,8)*32]  e8m0_shuffle(B_scale) viewed 2-D
                                                 (kernels.layouts.cdna4: weight_view, scales_view)
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

import triton
import triton.language as tl

from .layouts.cdna4 import (load_scale_tile, load_weight_tile, next_k_tile,
                            unshuffle_scale_tile, unshuffle_weight_tile)
from .quantize import quantize_tile_mxfp4
from .splitk_reduce import store_output_tile
from .tiles import (load_a_scale_tile, load_a_tile, loaded_a_rows, next_a_tile,
                    operand_arguments, program_tile, repeated_rows)


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
    pid_m, pid_n, pid_k, k_start, a_ptrs, as_ptrs, b_ptrs, bs_ptrs, scale_groups = program_tile(
        pid, a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, M, N, stride_am, stride_ak, stride_asm,
        stride_bn, stride_bsn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, SPLIT_K_SIZE, A_ROWS,
        A_PREQUANTIZED)

    C_ROWS: tl.constexpr = A_ROWS if WAVE_SPLIT_K > 1 else BLOCK_M   # rows of C stored
    acc = tl.zeros((WAVE_SPLIT_K * C_ROWS, WAVE_SPLIT_K * BLOCK_N), dtype=tl.float32)
    for k_iter in range(SPLIT_K_SIZE // BLOCK_K):
        k0 = k_start + k_iter * BLOCK_K
        if SCALES_FIRST:
            bs = load_scale_tile(bs_ptrs, scale_groups, k0, K, EVEN_K, CACHE_MODIFIER)
        a = load_a_tile(a_ptrs, k0, K, EVEN_K, BLOCK_K, A_PREQUANTIZED)
        b = load_weight_tile(b_ptrs, k0, K, EVEN_K, CACHE_MODIFIER, BLOCK_K)
        if not SCALES_FIRST:
            bs = load_scale_tile(bs_ptrs, scale_groups, k0, K, EVEN_K, CACHE_MODIFIER)
        if A_PREQUANTIZED:
            a_scales = load_a_scale_tile(as_ptrs, k0, K, EVEN_K, BLOCK_K)
        else:
            a, a_scales = quantize_tile_mxfp4(a, A_ROWS, BLOCK_K, QUANTIZER, QUANT_FAST_PATH,
                                               THREADS)
        b = unshuffle_weight_tile(b, BLOCK_N, BLOCK_K)
        bs = unshuffle_scale_tile(bs, BLOCK_N, BLOCK_K)
        if WAVE_SPLIT_K > 1:
            a = _k_slices_as_rows(a, WAVE_SPLIT_K)
            a_scales = _k_slices_as_rows(a_scales, WAVE_SPLIT_K)
            b = _k_slices_as_rows(b, WAVE_SPLIT_K)
            bs = _k_slices_as_rows(bs, WAVE_SPLIT_K)
        elif A_ROWS < BLOCK_M:
            a = repeated_rows(a, BLOCK_M // A_ROWS)
            a_scales = repeated_rows(a_scales, BLOCK_M // A_ROWS)
        acc = tl.dot_scaled(a, a_scales, "e2m1", b.trans(1, 0), bs, "e2m1", acc=acc)
        a_ptrs, as_ptrs = next_a_tile(a_ptrs, as_ptrs, stride_ak, BLOCK_K, A_PREQUANTIZED)
        b_ptrs, bs_ptrs = next_k_tile(b_ptrs, bs_ptrs, BLOCK_K)

    if WAVE_SPLIT_K > 1:
        acc = _diagonal_block_sum(acc, WAVE_SPLIT_K)
    store_output_tile(acc, c_ptr, partials_ptr, counters_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N,
                      M, N, stride_cm, stride_ps, stride_pm, pid_k, pid // SPLIT_K,
                      C_ROWS, BLOCK_N, SPLIT_K, REDUCE_IN_GEMM, SPLIT_K_SYNC, STORE_MODIFIER)


SCALED_MFMA_ROWS, SCALED_MFMA_K = 16, 128   # the smallest scaled MFMA: 16x16x128


def a_rows(m: int, block_m: int, wave_split_k: int = 1) -> int:
    """The kernel's A_ROWS: tiles.loaded_a_rows; with wave_split_k > 1 at least
    SCALED_MFMA_ROWS / wave_split_k, the rows its stacked product needs."""
    rows = loaded_a_rows(m, block_m)
    return rows if wave_split_k == 1 else max(rows, SCALED_MFMA_ROWS // wave_split_k)


def gemm_arguments(a, b, b_scales, c, partials, counters, m, n, k, *, block_m,
                   block_n, block_k, group_m, splits, split_size, reduce_in_gemm, cache_modifier,
                   quantizer="software", quant_fast_path=True, a_scales=None, num_xcds=1,
                   store_modifier=None, splitk_sync="acq_rel", threads=1, scales_first=True,
                   rows=None, wave_split_k=1):
    """Every argument of preshuffle_gemm_kernel in signature order, constexprs included.

    a is bf16 [M, K], or with a_scales given the codes uint8 [M, K/2] of a quantized A. b and
    b_scales are the 2-D views of kernels.layouts.cdna4.weight_view and scales_view; c is bf16
    or fp32 [M, N] with unit column stride. partials (fp32 [splits, M, N], contiguous) and
    counters (int32 [tiles], zero) are read only when splits > 1 (counters only with
    reduce_in_gemm); pass c where they are unused. splitk_sync: "acq_rel" or "write_through"
    (AMD), see the kernel's text; threads: the program's thread count (a power of two); rows:
    A_ROWS (default a_rows); wave_split_k: WAVE_SPLIT_K.
    """
    return operand_arguments(a, b, b_scales, c, partials, counters, m, n, k, a_scales) + (
        block_m, block_n, block_k, group_m, splits, split_size, reduce_in_gemm,
        k % split_size == 0, cache_modifier, quantizer, quant_fast_path, a_scales is not None,
        num_xcds, store_modifier, splitk_sync, threads, scales_first,
        a_rows(m, block_m, wave_split_k) if rows is None else rows, wave_split_k)
