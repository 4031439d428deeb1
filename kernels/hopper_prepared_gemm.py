"""Fused MXFP4 GEMM on a weight in the Hopper layout (kernels.layouts.hopper), for GPUs without
FP4 MMA (NVIDIA Hopper): C = quantize(A) @ dequant(B)^T, the weight dequantized to bf16 in
registers as wgmma's register operand (the tile transposed, C^T = B @ A^T).

Inputs:
  a        bf16  [M, K] (any strides)     quantized to MXFP4 in registers per tile
                                          (kernels.quantize, bit-exact with the reference), or
                                          with A_DEQUANTIZED already quantized and dequantized
                                          (its MXFP4 values, exact in bf16), loaded as it is
  b        int16 [N/16, Kp/64, 256]       HopperWeight.values viewed as 16-bit halves
  b_scales uint8 [N/16, Kp/64, 32]        HopperWeight.scales (Kp: K padded to 256)
Outputs: c bf16 [M, N]; with SPLIT_K > 1 the fp32 partials and the split-K counters of
kernels.splitk_reduce.store_output_tile (the protocol of kernels.preshuffle_gemm).

A tile of B, BLOCK_N rows by BLOCK_K (256), is loaded as [R, 32] 16-bit halves, R = (kc, w,
g) = (BLOCK_K/64, BLOCK_N/16, 8): each thread's 16 bytes (4 words of 8 codes) are one load
and hold its values of wgmma's register fragment (layouts.hopper). Each word becomes four
bf16x2 pairs in PAIRS_ASM: a mask (and a shift, three for the last pair) puts a pair's bits
where value * 2**-126 has them, and one mul.rn.bf16x2 by the pair's folded scale 2**(s - 1)
(the 2**126 folded in) gives the value, exact. A weight with a finite scale byte above
layouts.hopper.FOLDED_SCALE_MAX_BYTE (WIDE_SCALES) takes the multiply by 2**126 and the scale
2**(s - 127) apart, as the byte-wise path does; a NaN scale (255) gives NaN either way.
Under the interpreter the same values come from fp32 arithmetic (its tl.dot multiplies bf16
operands as their raw integers).

Grid: (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),). Rows past M or N wrap onto valid rows
(masked at the store). Split s covers K tiles [s * SPLIT_K_SIZE, min((s + 1) * SPLIT_K_SIZE,
Kp)); A is masked past K (EVEN_K False). Requirements: BLOCK_K 256, BLOCK_N a multiple of 64
(BLOCK_N / 16 warps' worth of rows: num_warps = BLOCK_N / 16), BLOCK_M >= 16 a power of two,
SPLIT_K_SIZE a multiple of 256, K % 64 == 0, N % 16 == 0.
"""

import torch
import triton
import triton.language as tl

from mxfp4_mm.kernels.hopper_gemm import dequantize_tile
from mxfp4_mm.kernels.layouts import hopper as layout
from mxfp4_mm.kernels.preshuffle_gemm import _repeated_rows, _tile_coordinates, a_rows
from mxfp4_mm.kernels.quantize import INTERPRETED, quantize_tile_mxfp4
from mxfp4_mm.kernels.splitk_reduce import store_output_tile

BLOCK_K = tl.constexpr(layout.K_ALIGN)
NAN_SCALE = tl.constexpr(layout.NAN_SCALE)
BF16_BIAS = tl.constexpr(2.0 ** 126)
PAIR_MASK = tl.constexpr(layout.PAIR_MASK)
BF16_BIAS_PAIR = 0x7E807E80     # 2**126 in both halves


def _pairs_asm(wide: bool) -> str:
    """PTX: one word ($4) -> its four bf16x2 pairs ($0..$3), pairs 0 and 2 times the scale
    pair $5 (row g), pairs 1 and 3 times $6 (row g + 8); wide multiplies by 2**126 first."""
    mask = f"{layout.PAIR_MASK:#x}"
    pairs = [["and.b32 t, $4, " + mask + ";"],
             ["shl.b32 t, $4, 3;", "and.b32 t, t, " + mask + ";"],
             ["shl.b32 t, $4, 6;", "and.b32 t, t, " + mask + ";"],
             ["shl.b32 t, $4, 1;", "and.b32 t, t, 0x80008000;", "shr.b32 u, $4, 3;",
              "and.b32 u, u, 0x01800180;", "or.b32 t, t, u;", "shr.b32 u, $4, 7;",
              "and.b32 u, u, 0x00400040;", "or.b32 t, t, u;"]]
    lines = ["{", ".reg .b32 t, u, bias;", f"mov.b32 bias, {BF16_BIAS_PAIR:#x};"]
    for p, extract in enumerate(pairs):
        lines += extract
        if wide:
            lines.append("mul.rn.bf16x2 t, t, bias;")
        lines.append(f"mul.rn.bf16x2 ${p}, t, ${5 + p % 2};")
    return "\n".join(lines + ["}"])


PAIRS_ASM = tl.constexpr(_pairs_asm(False))
WIDE_PAIRS_ASM = tl.constexpr(_pairs_asm(True))


@triton.jit
def _scale_bits(s, WIDE_SCALES: tl.constexpr):
    """E8M0 bytes -> uint16 bf16 bits of the multiplier a pair takes: 2**(s - 1), the value's
    2**-126 folded in (s <= FOLDED_SCALE_MAX_BYTE), or with WIDE_SCALES 2**(s - 127) (0 a
    bf16 denormal, 255 NaN)."""
    s = s.to(tl.uint32)
    if WIDE_SCALES:
        bits = tl.where(s == 0, 0x0040, tl.where(s == NAN_SCALE, 0x7FC0, s << 7))
    else:
        bits = (s << 7) + 0x3F00
    return bits.to(tl.uint16)


@triton.jit
def _pair_standin(words, p: tl.constexpr):
    """Interpreter stand-in of PAIRS_ASM's extraction: pair p's bits (uint32)."""
    if p == 0:
        return words & PAIR_MASK
    elif p == 1:
        return (words << 3) & PAIR_MASK
    elif p == 2:
        return (words << 6) & PAIR_MASK
    else:
        return (((words << 1) & 0x80008000) | ((words >> 3) & 0x01800180)
                | ((words >> 7) & 0x00400040))


@triton.jit
def _standin_values(words, scale_g, scale_g8, p: tl.constexpr, WIDE_SCALES: tl.constexpr):
    """Pair p of every word as fp32 [R, 32] (halves in the order of the words' halves), the
    values PAIRS_ASM gives as bf16."""
    bits = _pair_standin(words, p)
    R: tl.constexpr = words.shape[0]
    halves = tl.join(bits & 0xFFFF, bits >> 16).reshape(R, 32)
    values = (halves << 16).to(tl.float32, bitcast=True)
    if WIDE_SCALES:
        values = values * BF16_BIAS
    scale = scale_g if p % 2 == 0 else scale_g8
    values = values * (scale.to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    return values.to(tl.bfloat16).to(tl.float32)


@triton.jit
def dequantize_weight_tile(halves, scales, BLOCK_N: tl.constexpr, WIDE_SCALES: tl.constexpr):
    """halves int16 [R, 32] (R = (BLOCK_K/64, BLOCK_N/16, 8), layouts.hopper's (kc, w, g)),
    scales uint8 [R, 4] (rh, group) -> the bf16 tile [BLOCK_N, BLOCK_K] (fp32 under the
    interpreter)."""
    R: tl.constexpr = halves.shape[0]
    KC: tl.constexpr = BLOCK_K // 64
    W: tl.constexpr = BLOCK_N // 16
    bits = _scale_bits(scales, WIDE_SCALES).reshape(R, 2, 2).permute(0, 2, 1)
    scale_g, scale_g8 = tl.split(bits)             # [R, 2 (group)]
    # a word's group is j // 2; the halves' column is (t, j, e) = (4, 2 (group), 2, 2)
    scale_g = tl.broadcast_to(scale_g[:, None, :, None, None], (R, 4, 2, 2, 2)).reshape(R, 32)
    scale_g8 = tl.broadcast_to(scale_g8[:, None, :, None, None], (R, 4, 2, 2, 2)).reshape(R, 32)
    if INTERPRETED:
        pairs = halves.to(tl.uint16).to(tl.uint32).reshape(R, 16, 2)
        low, high = tl.split(pairs)
        words = low | (high << 16)
        p0 = _standin_values(words, scale_g, scale_g8, 0, WIDE_SCALES)
        p1 = _standin_values(words, scale_g, scale_g8, 1, WIDE_SCALES)
        p2 = _standin_values(words, scale_g, scale_g8, 2, WIDE_SCALES)
        p3 = _standin_values(words, scale_g, scale_g8, 3, WIDE_SCALES)
    else:
        p0, p1, p2, p3 = tl.inline_asm_elementwise(
            WIDE_PAIRS_ASM if WIDE_SCALES else PAIRS_ASM, "=r,=r,=r,=r,r,r,r",
            [halves, scale_g, scale_g8], dtype=(tl.bfloat16,) * 4, is_pure=True, pack=2)
    values = tl.join(tl.join(p0, p1), tl.join(p2, p3))      # [R, 32, 2 (rh), 2 (kh)]
    values = values.reshape(KC, W, 8, 4, 4, 2, 2, 2)         # kc w g t j e rh kh
    values = values.permute(1, 6, 2, 0, 4, 7, 3, 5)         # w rh g | kc j kh t e
    return values.reshape(BLOCK_N, BLOCK_K)


@triton.jit
def hopper_prepared_gemm_kernel(
    a_ptr, b_ptr, b_scales_ptr, c_ptr, partials_ptr, counters_ptr,
    M, N, K, K_UNITS,
    stride_am, stride_ak,
    stride_cm, stride_ps, stride_pm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, A_ROWS: tl.constexpr,
    SPLIT_K: tl.constexpr, SPLIT_K_SIZE: tl.constexpr, REDUCE_IN_GEMM: tl.constexpr,
    EVEN_K: tl.constexpr, CACHE_MODIFIER: tl.constexpr, A_DEQUANTIZED: tl.constexpr,
    WIDE_SCALES: tl.constexpr, THREADS: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = pid % SPLIT_K
    pid_m, pid_n = _tile_coordinates(pid // SPLIT_K, M, N, BLOCK_M, BLOCK_N, 1)
    KC: tl.constexpr = BLOCK_K // 64
    W: tl.constexpr = BLOCK_N // 16
    R: tl.constexpr = KC * W * 8

    rows_a = (pid_m * BLOCK_M + tl.arange(0, A_ROWS)) % M
    cols_a = tl.arange(0, BLOCK_K)
    r = tl.arange(0, R)
    unit_w = (pid_n * W + (r // 8) % W) % (N // 16)
    unit = unit_w * K_UNITS + r // (8 * W)        # the (w, kc) unit of each loaded row
    b_ptrs = b_ptr + (unit * 256 + (r % 8) * 32)[:, None] + tl.arange(0, 32)[None, :]
    bs_ptrs = b_scales_ptr + (unit * 32 + (r % 8) * 4)[:, None] + tl.arange(0, 4)[None, :]

    k_start = pid_k * SPLIT_K_SIZE
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start + cols_a)[None, :] * stride_ak
    b_ptrs += (k_start // 64) * 256
    bs_ptrs += (k_start // 64) * 32
    k_tiles = tl.minimum(SPLIT_K_SIZE, K_UNITS * 64 - k_start) // BLOCK_K

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k_iter in range(k_tiles):
        b = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
        bs = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
        if EVEN_K:
            a = tl.load(a_ptrs)
        else:
            a = tl.load(a_ptrs, mask=(k_start + k_iter * BLOCK_K + cols_a)[None, :] < K, other=0)
        if A_DEQUANTIZED:
            if INTERPRETED:
                a = a.to(tl.float32)
        else:
            a, a_scales = quantize_tile_mxfp4(a, A_ROWS, BLOCK_K, "software", False, THREADS)
            a = dequantize_tile(a, a_scales, A_ROWS, BLOCK_K)
        if A_ROWS < BLOCK_M:
            a = _repeated_rows(a, BLOCK_M // A_ROWS)
        b = dequantize_weight_tile(b, bs, BLOCK_N, WIDE_SCALES)
        acc = tl.dot(b, a.trans(1, 0), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += KC * 256
        bs_ptrs += KC * 32

    store_output_tile(acc.trans(1, 0), c_ptr, partials_ptr, counters_ptr, pid_m * BLOCK_M,
                      pid_n * BLOCK_N, M, N, stride_cm, stride_ps, stride_pm, pid_k,
                      pid // SPLIT_K, BLOCK_M, BLOCK_N, SPLIT_K, REDUCE_IN_GEMM, "acq_rel",
                      None)


def weight_arguments(weight):
    """HopperWeight -> the kernel's (b, b_scales) views."""
    n16, units = weight.values.shape[:2]
    return (weight.values.view(n16, units, 512).view(torch.int16),
            weight.scales.view(n16, units, 32))


def prepared_arguments(a, weight, c, partials, counters, m, *, block_m, block_n, splits,
                       split_size, reduce_in_gemm, cache_modifier=None, a_dequantized=False,
                       threads=128):
    """Every argument of hopper_prepared_gemm_kernel in signature order, constexprs included:
    a bf16 [M, K] (with a_dequantized, A's quantized values, loaded BLOCK_M rows a tile
    straight into the MMA's shared operand), weight a
    layouts.hopper.HopperWeight, c bf16 [M, N]; partials and counters as
    kernels.preshuffle_gemm.gemm_arguments takes them."""
    b, b_scales = weight_arguments(weight)
    n, k = weight.n, weight.k
    return (a, b, b_scales, c, partials, counters, m, n, k, b.shape[1],
            a.stride(0), a.stride(1), c.stride(0), m * n, n,
            block_m, block_n, block_m if a_dequantized else a_rows(m, block_m), splits, split_size, reduce_in_gemm,
            k % split_size == 0, cache_modifier, a_dequantized, weight.wide_scales, threads)
