"""Fused MXFP4 GEMM on a weight in the Hopper layout (kernels.layouts.hopper), for GPUs without
FP4 MMA (NVIDIA Hopper): C = quantize(A) @ dequant(B)^T, the weight dequantized to bf16 in
registers as wgmma's register operand (the tile transposed, C^T = B @ A^T).

Inputs:
  a        bf16  [M, K] (any strides)     quantized to MXFP4 in registers per tile
                                          (kernels.quantize, bit-exact with the reference), or
                                          with A_DEQUANTIZED already quantized and dequantized
                                          (its MXFP4 values, exact in bf16), loaded as it is
  b        int32 [N/16, Kp/64, 128]       HopperWeight.values viewed as words
  b_scales int32 [N/16, Kp/64, 8]         HopperWeight.scales, a word a row (Kp: K padded to 256)
Outputs: c bf16 or fp32 [M, N]; with SPLIT_K > 1 the fp32 partials and the split-K counters of
kernels.splitk_reduce.store_output_tile (the protocol of kernels.preshuffle_gemm).

A tile of B, BLOCK_N rows by BLOCK_K (64, 128 or 256: whole units of the layout, which pads K
to 256), is loaded as [R, 16] 32-bit words, R = (kc, w, g) = (BLOCK_K/64, BLOCK_N/16, 8): each
thread's 16 bytes (4 words of 8 codes) are one load and hold its values of wgmma's register
fragment (layouts.hopper). Each word becomes four bf16x2 pairs in PTX (PAIRS_ASM_0/1, by the
word's K group, which picks its scales' half): a rotation and a mask (two of each for the last
pair) put a pair's bits where value * 2**-126 has them, and one mul.rn.bf16x2 by the pair's
folded scale 2**(s - 1) (the 2**126 folded in) gives the value, exact. A weight with a scale byte above
layouts.hopper.FOLDED_SCALE_MAX_BYTE, NaN included (WIDE_SCALES), takes the multiply by
2**126 and the scale 2**(s - 127) apart, as the byte-wise path does.
Under the interpreter the same values are built as bits (dequantize.mxfp4_bf16_bits: its fp32
multiplies and casts would flush the denormals of scale bytes 0 and 1) and given as fp32 (its
tl.dot multiplies bf16 operands as their raw integers).

Grid: (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),). Rows past M or N wrap onto valid rows
(masked at the store); consecutive programs walk GROUP_M tiles of M first. Split s covers
K [s * SPLIT_K_SIZE, min((s + 1) * SPLIT_K_SIZE, Kp)); A is masked past K (EVEN_K False).
Requirements: BLOCK_K 64, 128 or 256, BLOCK_N a multiple of 64 (BLOCK_N / 16 warps' worth of
rows: num_warps = BLOCK_N / 16), BLOCK_M >= 16 a power of two, SPLIT_K_SIZE a multiple of
BLOCK_K, K % 64 == 0, N % 16 == 0.
PREFETCH (for num_stages 1) loads B's and A's next tiles into registers while the current
ones are converted; otherwise Triton's pipeliner (num_stages > 1) stages the loads in shared
memory.
"""

import torch
import triton
import triton.language as tl

from .dequantize import mxfp4_bf16_bits
from .hopper_gemm import dequantize_tile
from .layouts import hopper as layout
from .quantize import INTERPRETED, quantize_tile_mxfp4
from .splitk_reduce import store_output_tile
from .tiles import loaded_a_rows, repeated_rows, tile_coordinates

NAN_SCALE = tl.constexpr(layout.NAN_SCALE)
# Consecutive programs take up to 8 M tiles of one N tile, so that B's tile is read from L2.
GROUP_M = tl.constexpr(8)
PAIR_MASK = tl.constexpr(layout.PAIR_MASK)
PAIR_ROTATIONS = tl.constexpr(layout.PAIR_ROTATIONS)
LAST_PAIR_PIECES = tl.constexpr(layout.LAST_PAIR_PIECES)
BF16_BIAS_PAIR = 0x7E807E80     # 2**126 in both halves


def _pairs_asm(wide: bool, group: int) -> str:
    """PTX: one word ($4) -> its four bf16x2 pairs ($0..$3), pairs 0 and 2 times row g's
    scale, pairs 1 and 3 times row g + 8's: half `group` of $5 and of $7 (each the bf16 scales
    of a row's two K groups; $6 and $8 are their copies, pack=2). Wide multiplies by 2**126
    first."""
    def piece(r, mask, out):
        rotate = [] if r == 0 else [f"shf.l.wrap.b32 {out}, $4, $4, {r};"]
        return rotate + [f"and.b32 {out}, {'$4' if r == 0 else out}, {mask:#x};"]
    (r0, mask0), (r1, mask1) = layout.LAST_PAIR_PIECES
    pairs = [piece(r, layout.PAIR_MASK, "t") for r in layout.PAIR_ROTATIONS]
    pairs.append(piece(r0, mask0, "t") + piece(r1, mask1, "u") + ["or.b32 t, t, u;"])
    half = ["lo", "hi"][group]
    lines = ["{", ".reg .b32 t, u, bias, s0, s1;", ".reg .b16 lo, hi;",
             f"mov.b32 bias, {BF16_BIAS_PAIR:#x};",
             "mov.b32 {lo, hi}, $5;", f"mov.b32 s0, {{{half}, {half}}};",
             "mov.b32 {lo, hi}, $7;", f"mov.b32 s1, {{{half}, {half}}};"]
    for p, extract in enumerate(pairs):
        lines += extract
        if wide:
            lines.append("mul.rn.bf16x2 t, t, bias;")
        lines.append(f"mul.rn.bf16x2 ${p}, t, s{p % 2};")
    return "\n".join(lines + ["}"])


PAIRS_ASM_0 = tl.constexpr(_pairs_asm(False, 0))
PAIRS_ASM_1 = tl.constexpr(_pairs_asm(False, 1))
WIDE_PAIRS_ASM_0 = tl.constexpr(_pairs_asm(True, 0))
WIDE_PAIRS_ASM_1 = tl.constexpr(_pairs_asm(True, 1))


@triton.jit
def _wide_scale_bits(s):
    """E8M0 byte (uint32) -> bf16 bits of 2**(s - 127): 0 a bf16 denormal, 255 NaN."""
    return tl.where(s == 0, 0x0040, tl.where(s == NAN_SCALE, 0x7FC0, s << 7))


@triton.jit
def _scale_pairs(scales, WIDE_SCALES: tl.constexpr):
    """A row's scale word (uint32 [R, 4], the same in each column t; bytes (rh, group) = (0, 0), (0, 1), (1, 0), (1, 1)) ->
    for rows g and g + 8 the bf16 bits of the multipliers of groups 0 (low half) and 1 (high
    half): 2**(s - 1), the values' 2**-126 folded in (s <= FOLDED_SCALE_MAX_BYTE), or with
    WIDE_SCALES 2**(s - 127)."""
    if WIDE_SCALES:
        row_g = _wide_scale_bits(scales & 0xFF) | (_wide_scale_bits((scales >> 8) & 0xFF) << 16)
        row_g8 = (_wide_scale_bits((scales >> 16) & 0xFF)
                  | (_wide_scale_bits(scales >> 24) << 16))
    else:
        row_g = ((scales & 0xFF) | ((scales << 8) & 0xFF0000)) * 128 + 0x3F003F00
        row_g8 = (((scales >> 16) & 0xFF) | ((scales >> 8) & 0xFF0000)) * 128 + 0x3F003F00
    return row_g, row_g8


@triton.jit
def _rotl(words, r: tl.constexpr):
    """uint32 words rotated left by r."""
    if r == 0:
        return words
    else:
        return (words << r) | (words >> (32 - r))


@triton.jit
def _pair_standin(words, p: tl.constexpr):
    """Interpreter stand-in of the asm's extraction: pair p's bits (uint32)."""
    if p == 3:
        return ((_rotl(words, LAST_PAIR_PIECES[0][0]) & LAST_PAIR_PIECES[0][1])
                | (_rotl(words, LAST_PAIR_PIECES[1][0]) & LAST_PAIR_PIECES[1][1]))
    else:
        return _rotl(words, PAIR_ROTATIONS[p]) & PAIR_MASK


@triton.jit
def _standin_values(words, scale, p: tl.constexpr, WIDE_SCALES: tl.constexpr):
    """Pair p of every word ([R, C]) times its scale's bf16 bits (uint32 [R, C]) as fp32
    [R, 2C] (each word's low half first): the values the asm gives in bf16, built as bits
    (dequantize.mxfp4_bf16_bits), since the interpreter's fp32 multiplies and casts flush the
    denormals of scale bytes 0 and 1."""
    bits = _pair_standin(words, p)
    R: tl.constexpr = words.shape[0]
    C: tl.constexpr = words.shape[1]
    halves = tl.join(bits & 0xFFFF, bits >> 16).reshape(R, 2 * C).to(tl.int32)
    # A half is its E2M1 value * 2**-126: the code's sign at bit 15, its magnitude at bits 6-8.
    code = ((halves >> 12) & 8) | ((halves >> 6) & 7)
    # The scale's bf16 exponent field: with WIDE_SCALES the E8M0 byte s itself (2**(s - 127);
    # byte 0's denormal and the NaN have fields 0 and 255), folded s + 126 (2**(s - 1)).
    scale_byte = (scale >> 7).to(tl.int32) - (0 if WIDE_SCALES else 126)
    scale_byte = tl.broadcast_to(scale_byte[:, :, None], (R, C, 2)).reshape(R, 2 * C)
    values = mxfp4_bf16_bits(code, scale_byte).to(tl.uint32) << 16
    return values.to(tl.float32, bitcast=True)


@triton.jit
def _group_pairs(words, row_g, row_g8, GROUP: tl.constexpr, WIDE_SCALES: tl.constexpr):
    """The words of K group GROUP (int32 [R, 8]) -> their four pairs, each [R, 16]: bf16
    (fp32 under the interpreter)."""
    R: tl.constexpr = words.shape[0]
    scale_g = tl.broadcast_to(row_g[:, :, None], (R, 4, 4)).reshape(R, 16)
    scale_g8 = tl.broadcast_to(row_g8[:, :, None], (R, 4, 4)).reshape(R, 16)
    if INTERPRETED:
        words = words.to(tl.uint32, bitcast=True)
        sg = (scale_g >> (16 * GROUP)) & 0xFFFF
        sg8 = (scale_g8 >> (16 * GROUP)) & 0xFFFF
        sg, sg8 = sg.reshape(R, 8, 2), sg8.reshape(R, 8, 2)
        sg, _ = tl.split(sg)
        sg8, _ = tl.split(sg8)
        return (_standin_values(words, sg, 0, WIDE_SCALES),
                _standin_values(words, sg8, 1, WIDE_SCALES),
                _standin_values(words, sg, 2, WIDE_SCALES),
                _standin_values(words, sg8, 3, WIDE_SCALES))
    else:
        if WIDE_SCALES:
            asm: tl.constexpr = WIDE_PAIRS_ASM_1 if GROUP == 1 else WIDE_PAIRS_ASM_0
        else:
            asm: tl.constexpr = PAIRS_ASM_1 if GROUP == 1 else PAIRS_ASM_0
        # The asm takes a word as two halves (pack=2 gives it bf16x2 outputs).
        halves = tl.join(words.to(tl.int16), (words >> 16).to(tl.int16)).reshape(R, 16)
        return tl.inline_asm_elementwise(asm, "=r,=r,=r,=r,r,r,r,r,r",
                                         [halves, scale_g, scale_g8], dtype=(tl.bfloat16,) * 4,
                                         is_pure=True, pack=2)


@triton.jit
def dequantize_weight_tile(words, scales, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           WIDE_SCALES: tl.constexpr):
    """words int32 [R, 16] (R = (BLOCK_K/64, BLOCK_N/16, 8), layouts.hopper's (kc, w, g);
    columns (t, group, j % 2)), scales uint32 [R, 4] (the row's scale word in each
    column t) -> the bf16 tile [BLOCK_N, BLOCK_K] (fp32 under the interpreter)."""
    R: tl.constexpr = words.shape[0]
    KC: tl.constexpr = BLOCK_K // 64
    W: tl.constexpr = BLOCK_N // 16
    row_g, row_g8 = _scale_pairs(scales, WIDE_SCALES)
    group0, group1 = tl.split(words.reshape(R, 4, 2, 2).permute(0, 1, 3, 2))
    a0, a1, a2, a3 = _group_pairs(group0.reshape(R, 8), row_g, row_g8, 0, WIDE_SCALES)
    b0, b1, b2, b3 = _group_pairs(group1.reshape(R, 8), row_g, row_g8, 1, WIDE_SCALES)
    values = tl.join(tl.join(tl.join(a0, b0), tl.join(a1, b1)),
                     tl.join(tl.join(a2, b2), tl.join(a3, b3)))   # [R, 16, grp, rh, kh]
    values = values.reshape(KC, W, 8, 4, 2, 2, 2, 2, 2)        # kc w g t jl e grp rh kh
    values = values.permute(1, 7, 2, 0, 6, 4, 8, 3, 5)         # w rh g | kc grp jl kh t e
    return values.reshape(BLOCK_N, BLOCK_K)


@triton.jit
def _load_a_tile(a_ptrs, k_offset, K, cols_a, EVEN_K: tl.constexpr):
    """A's tile at K offset k_offset (a_ptrs point there), zero past K unless EVEN_K."""
    if EVEN_K:
        return tl.load(a_ptrs)
    else:
        return tl.load(a_ptrs, mask=(k_offset + cols_a)[None, :] < K, other=0)


@triton.jit
def hopper_prepared_gemm_kernel(
    a_ptr, b_ptr, b_scales_ptr, c_ptr, partials_ptr, counters_ptr, M, N, K, K_UNITS,
    stride_am, stride_ak, stride_cm, stride_ps, stride_pm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, A_ROWS: tl.constexpr,
    SPLIT_K: tl.constexpr, SPLIT_K_SIZE: tl.constexpr, REDUCE_IN_GEMM: tl.constexpr, EVEN_K: tl.constexpr,
    CACHE_MODIFIER: tl.constexpr, A_DEQUANTIZED: tl.constexpr, WIDE_SCALES: tl.constexpr,
    THREADS: tl.constexpr, PREFETCH: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = pid % SPLIT_K
    pid_m, pid_n = tile_coordinates(pid // SPLIT_K, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    KC: tl.constexpr = BLOCK_K // 64
    W: tl.constexpr = BLOCK_N // 16
    R: tl.constexpr = KC * W * 8

    rows_a = (pid_m * BLOCK_M + tl.arange(0, A_ROWS)) % M
    cols_a = tl.arange(0, BLOCK_K)
    r = tl.arange(0, R)
    unit_w = (pid_n * W + (r // 8) % W) % (N // 16)
    unit = unit_w * K_UNITS + r // (8 * W)        # the (w, kc) unit of each loaded row
    b_ptrs = b_ptr + (unit * 128 + (r % 8) * 16)[:, None] + tl.arange(0, 16)[None, :]
    # The row's scale word in each column t (the 4 lanes that hold the row). (r * 9) % 8 is
    # r % 8 written so that Triton's axis analysis sees no contiguous rows: else a lane loads
    # four rows' words at once, and more of them move through shared memory to the lanes that
    # use them (a move Triton 3.6 makes either way: 388 against 350 SASS a K tile at M = 8).
    bs_ptrs = b_scales_ptr + (unit * 8 + (r * 9) % 8)[:, None] + 0 * tl.arange(0, 4)[None, :]

    k_start = pid_k * SPLIT_K_SIZE
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + (k_start + cols_a)[None, :] * stride_ak
    b_ptrs += (k_start // 64) * 128
    bs_ptrs += (k_start // 64) * 8
    k_tiles = tl.minimum(SPLIT_K_SIZE, K_UNITS * 64 - k_start) // BLOCK_K

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if PREFETCH:
        b_next = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
        bs_next = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
        a_next = _load_a_tile(a_ptrs, k_start, K, cols_a, EVEN_K)
    for k_iter in range(k_tiles):
        if PREFETCH:
            # The next tiles of B and A are loaded before this one is converted (the last
            # tile loads itself again): their latency hides behind a tile's work, with no
            # shared memory.
            b, bs, a = b_next, bs_next, a_next
            step = (k_iter + 1 < k_tiles).to(tl.int32)
            b_ptrs += step * (KC * 128)
            bs_ptrs += step * (KC * 8)
            a_ptrs += step * (BLOCK_K * stride_ak)
            b_next = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
            bs_next = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
            a_next = _load_a_tile(a_ptrs, k_start + (k_iter + step) * BLOCK_K, K, cols_a,
                                  EVEN_K)
        else:
            b = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
            bs = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
            b_ptrs += KC * 128
            bs_ptrs += KC * 8
            a = _load_a_tile(a_ptrs, k_start + k_iter * BLOCK_K, K, cols_a, EVEN_K)
            a_ptrs += BLOCK_K * stride_ak
        if A_DEQUANTIZED:
            if INTERPRETED:
                a = a.to(tl.float32)
        else:
            a, a_scales = quantize_tile_mxfp4(a, A_ROWS, BLOCK_K, "software", False, THREADS)
            a = dequantize_tile(a, a_scales, A_ROWS, BLOCK_K)
        if A_ROWS < BLOCK_M:
            a = repeated_rows(a, BLOCK_M // A_ROWS)
        b = dequantize_weight_tile(b, bs.to(tl.uint32, bitcast=True), BLOCK_N, BLOCK_K,
                                   WIDE_SCALES)
        acc = tl.dot(b, a.trans(1, 0), acc)

    store_output_tile(acc.trans(1, 0), c_ptr, partials_ptr, counters_ptr, pid_m * BLOCK_M,
                      pid_n * BLOCK_N, M, N, stride_cm, stride_ps, stride_pm, pid_k,
                      pid // SPLIT_K, BLOCK_M, BLOCK_N, SPLIT_K, REDUCE_IN_GEMM, "acq_rel",
                      None)


def weight_arguments(weight):
    """HopperWeight -> the kernel's (b, b_scales) views."""
    n16, units = weight.values.shape[:2]
    return (weight.values.view(n16, units, 512).view(torch.int32),
            weight.scales.view(n16, units, 32).view(torch.int32))


def prepared_arguments(a, weight, c, partials, counters, m, *, block_m, block_n, block_k,
                       splits, split_size, reduce_in_gemm, cache_modifier=None,
                       a_dequantized=False, threads=128, prefetch=True):
    """Every argument of hopper_prepared_gemm_kernel in signature order, constexprs included:
    a bf16 [M, K] (with a_dequantized, A's quantized values, loaded BLOCK_M rows a tile
    straight into the MMA's shared operand), weight a
    layouts.hopper.HopperWeight, c bf16 or fp32 [M, N]; partials and counters as
    kernels.preshuffle_gemm.gemm_arguments takes them."""
    b, b_scales = weight_arguments(weight)
    n, k = weight.n, weight.k
    return (a, b, b_scales, c, partials, counters, m, n, k, b.shape[1],
            a.stride(0), a.stride(1), c.stride(0), m * n, n,
            block_m, block_n, block_k, block_m if a_dequantized else loaded_a_rows(m, block_m), splits,
            split_size, reduce_in_gemm,
            k % split_size == 0, cache_modifier, a_dequantized, weight.wide_scales, threads,
            prefetch)
