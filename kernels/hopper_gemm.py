"""Fused MXFP4 GEMM for GPUs without FP4 MMA (NVIDIA Hopper): C = quantize(A) @ dequant(B)^T
with both operands dequantized to bf16 in registers and multiplied by tl.dot (bf16 x bf16 ->
fp32), where tl.dot_scaled would emulate the same through layout conversions of its own.

Inputs, all row-major:
  a        bf16  [M, K] (any strides)            quantized to MXFP4 in registers
                                                 (kernels.quantize, bit-exact with the
                                                 reference), or with A_PREQUANTIZED the codes
                                                 uint8 [M, K/2] (unit column stride) and
  a_scales uint8 [M, K/32]                       their E8M0 scales
  b        uint8 [N/16, (K/2)*16]                B_shuffle viewed 2-D (layouts.cdna4.weight_view)
  b_scales uint8 [pad(N,256)/32, pad(K/32,8)*32]  B_scale_sh viewed 2-D (scales_view)
Outputs: c bf16 or fp32 [M, N]; with SPLIT_K > 1 the fp32 partials and the split-K counters of
kernels.splitk_reduce.store_output_tile (the protocol of kernels.preshuffle_gemm).

Both operands are read as given: B's codes and scales are the runner's aiter layouts, unshuffled
in registers per tile. A quantized A is dequantized exactly (an E2M1 value times a power of two
is a bf16), so the product is the reference's up to the fp32 accumulation order; B's dequantized
values are exact too, unless a scale pushes them out of bf16's range (as out of fp32's). On a
GPU each code byte becomes one bf16x2 word through BF16_PAIRS_ASM (PTX; mul.rn.bf16x2 needs
sm_90), which is why launchers.configs serves this path on sm_90 only.

SWAP_AB computes each tile transposed, C^T = B @ A^T: BLOCK_N then fills the MMA's M dimension
(64 rows a warpgroup on Hopper) and the few rows of A its N, so that a decode GEMM (M of 1 to 64)
is not padded to 64 rows of A. A_ROWS: the rows of A each program loads and quantizes (a
power of two, BLOCK_M or fewer where M is smaller), repeated to BLOCK_M rows for the MMA.
Grid: (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),). Rows past M or N wrap onto valid rows
(their results are masked at the store); a ragged last K tile (EVEN_K False) is masked, its B
scales replaced by 1.0. Requirements: BLOCK_N a multiple of 32 dividing 256, BLOCK_K a power of
two >= 256, BLOCK_M >= 16, SPLIT_K_SIZE a multiple of BLOCK_K, K % 64 == 0, N % 16 == 0.
"""

import triton
import triton.language as tl

from .layouts.cdna4 import (load_scale_tile, load_weight_tile, next_k_tile,
                            unshuffle_scale_tile, unshuffle_weight_tile)
from .quantize import INTERPRETED, quantize_tile_mxfp4
from .splitk_reduce import store_output_tile
from .tiles import (load_a_scale_tile, load_a_tile, loaded_a_rows, next_a_tile,
                    operand_arguments, program_tile, repeated_rows)


@triton.jit
def _e2m1_to_f32(code):
    """E2M1 code (uint32, 0..15) -> its fp32 value: 0 and 0.5 (no exponent) as code * 0.5's
    bits, the others by rebiasing the exponent from 1 to 127; the sign into bit 31."""
    magnitude = code & 7
    bits = tl.where(magnitude < 2, magnitude * 0x3F000000, (magnitude << 22) + 0x3F000000)
    return (bits | ((code & 8) << 28)).to(tl.float32, bitcast=True)


@triton.jit
def _e8m0_to_bf16_bits(scale):
    """E8M0 byte -> the bf16 bits of 2**(byte - 127), uint32: 0 is 2**-127 (a bf16 denormal),
    255 NaN (formats.e8m0_to_f32)."""
    scale = scale.to(tl.uint32)
    return tl.where(scale == 0, 0x0040, tl.where(scale == 255, 0x7FC0, scale << 7))


def _bf16_pairs_asm() -> str:
    """PTX: four code bytes (one register, $4) -> four words, word j the bf16 pair of byte j
    (its low nibble in the low half) times its scale pair ($5 + j). With y = byte | byte << 12,
    y << 6 holds both nibbles' three magnitude bits where a bf16's low exponent bits and top
    mantissa bit are, y the low nibble's sign at bit 15 and y << 12 the high one's at bit 31:
    the pair is value * 2**-126 exactly (0.5 lands on a bf16 denormal, which bf16x2
    arithmetic keeps). One multiply by 2**126 and one by the scale give the value, both exact
    in bf16's range."""
    lines = ["{", ".reg .b32 x, y, z, t, u;", "mov.b32 u, 0x7E807E80;"]
    for byte in range(4):
        lines += [f"bfe.u32 x, $4, {8 * byte}, 8;", "mul.lo.u32 y, x, 0x1001;",
                  "shl.b32 z, y, 6;", "and.b32 z, z, 0x01C001C0;",
                  "and.b32 t, y, 0x8000;", "or.b32 z, z, t;",
                  "shl.b32 t, y, 12;", "and.b32 t, t, 0x80000000;", "or.b32 z, z, t;",
                  "mul.rn.bf16x2 z, z, u;", f"mul.rn.bf16x2 ${byte}, z, ${5 + byte};"]
    return "\n".join(lines + ["}"])


BF16_PAIRS_ASM = tl.constexpr(_bf16_pairs_asm())


@triton.jit
def dequantize_tile(codes, scales, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """codes uint8 [ROWS, BLOCK_K/2] (element 2i in the low nibble), scales uint8
    [ROWS, BLOCK_K/32] -> bf16 [ROWS, BLOCK_K] (formats.dequantize_mxfp4 in bf16). On a GPU
    two elements a 32-bit word (BF16_PAIRS_ASM), under the interpreter the same values in
    fp32, each a bf16 value already (its tl.dot multiplies bf16 operands as their raw 16-bit
    integers, and its conversion to bf16 flushes the fp32 denormals of scale bytes 0 and 1)."""
    if INTERPRETED:
        codes = codes.to(tl.uint32)
        values = tl.join(_e2m1_to_f32(codes & 0xF), _e2m1_to_f32(codes >> 4))
        scale_bits = _e8m0_to_bf16_bits(scales) << 16
        values = values.reshape(ROWS, BLOCK_K // 32, 32) * scale_bits.to(
            tl.float32, bitcast=True)[:, :, None]
        return values.reshape(ROWS, BLOCK_K)
    else:
        scale_pairs = _e8m0_to_bf16_bits(scales) * 0x10001
        scale_pairs = tl.broadcast_to(scale_pairs[:, :, None], (ROWS, BLOCK_K // 32, 16))
        words = tl.inline_asm_elementwise(
            BF16_PAIRS_ASM, "=r,=r,=r,=r,r,r,r,r,r",
            [codes, scale_pairs.reshape(ROWS, BLOCK_K // 2)], dtype=tl.uint32, is_pure=True,
            pack=4)
        low = (words & 0xFFFF).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        high = (words >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        return tl.join(low, high).reshape(ROWS, BLOCK_K)


@triton.jit
def hopper_gemm_kernel(
    a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, c_ptr, partials_ptr, counters_ptr,
    M, N, K,
    stride_am, stride_ak, stride_asm,
    stride_bn, stride_bsn,
    stride_cm, stride_ps, stride_pm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, A_ROWS: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, SPLIT_K_SIZE: tl.constexpr,
    REDUCE_IN_GEMM: tl.constexpr, EVEN_K: tl.constexpr, CACHE_MODIFIER: tl.constexpr,
    STORE_MODIFIER: tl.constexpr, A_PREQUANTIZED: tl.constexpr, SWAP_AB: tl.constexpr,
    THREADS: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n, pid_k, k_start, a_ptrs, as_ptrs, b_ptrs, bs_ptrs, scale_groups = program_tile(
        pid, a_ptr, a_scales_ptr, b_ptr, b_scales_ptr, M, N, stride_am, stride_ak, stride_asm,
        stride_bn, stride_bsn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, SPLIT_K_SIZE, A_ROWS,
        A_PREQUANTIZED)

    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_iter in range(SPLIT_K_SIZE // BLOCK_K):
        k0 = k_start + k_iter * BLOCK_K
        b = load_weight_tile(b_ptrs, k0, K, EVEN_K, CACHE_MODIFIER, BLOCK_K)
        bs = load_scale_tile(bs_ptrs, scale_groups, k0, K, EVEN_K, CACHE_MODIFIER)
        a = load_a_tile(a_ptrs, k0, K, EVEN_K, BLOCK_K, A_PREQUANTIZED)
        if A_PREQUANTIZED:
            a_scales = load_a_scale_tile(as_ptrs, k0, K, EVEN_K, BLOCK_K)
        else:
            a, a_scales = quantize_tile_mxfp4(a, A_ROWS, BLOCK_K, "software", False, THREADS)
        a = dequantize_tile(a, a_scales, A_ROWS, BLOCK_K)
        if A_ROWS < BLOCK_M:
            a = repeated_rows(a, BLOCK_M // A_ROWS)
        b = dequantize_tile(unshuffle_weight_tile(b, BLOCK_N, BLOCK_K),
                            unshuffle_scale_tile(bs, BLOCK_N, BLOCK_K), BLOCK_N, BLOCK_K)
        if SWAP_AB:
            acc = tl.dot(b, a.trans(1, 0), acc)
        else:
            acc = tl.dot(a, b.trans(1, 0), acc)
        a_ptrs, as_ptrs = next_a_tile(a_ptrs, as_ptrs, stride_ak, BLOCK_K, A_PREQUANTIZED)
        b_ptrs, bs_ptrs = next_k_tile(b_ptrs, bs_ptrs, BLOCK_K)

    if SWAP_AB:
        acc = acc.trans(1, 0)
    store_output_tile(acc, c_ptr, partials_ptr, counters_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N,
                      M, N, stride_cm, stride_ps, stride_pm, pid_k, pid // SPLIT_K,
                      BLOCK_M, BLOCK_N, SPLIT_K, REDUCE_IN_GEMM, "acq_rel", STORE_MODIFIER)


def hopper_arguments(a, b, b_scales, c, partials, counters, m, n, k, *, block_m, block_n,
                     block_k, group_m, splits, split_size, reduce_in_gemm, cache_modifier,
                     store_modifier=None, a_scales=None, swap_ab=False, threads=128):
    """Every argument of hopper_gemm_kernel in signature order, constexprs included; the
    tensors as preshuffle_gemm.gemm_arguments takes them (tiles.operand_arguments)."""
    return operand_arguments(a, b, b_scales, c, partials, counters, m, n, k, a_scales) + (
        block_m, block_n, block_k, loaded_a_rows(m, block_m), group_m, splits, split_size,
        reduce_in_gemm, k % split_size == 0, cache_modifier, store_modifier,
        a_scales is not None, swap_ab, threads)
