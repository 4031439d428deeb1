"""In-register MXFP4 quantization of a tile, bit-exact with kernels.formats.quantize_mxfp4.

`quantize_tile_mxfp4(x[BLOCK_M, BLOCK_K], HW_CVT) -> (codes uint8 [BLOCK_M, BLOCK_K/2],
scales uint8 [BLOCK_M, BLOCK_K/32])`: per row, each run of 32 elements along K is one MX
block. The scale byte is computed with integer exponent math (no float->uint8 cast, which
saturates negatives on NVIDIA) and scales the block by an exact power of two. The codes come
from one of two quantizers, chosen by the constexpr HW_CVT:
  - software (every backend): the round-to-nearest-even bit recipe of aiter's _mxfp4_quant_op;
  - hardware (gfx950 only): `v_cvt_scalef32_pk_fp4_f32` with scale 1.0 on the pre-scaled
    values, after `_condition_for_cvt` has replaced every input whose conversion the ISA
    does not document (NaN, +-inf, -0, denormals) by one that gives the same GEMM result.
`quantize_kernel` runs the quantizer on a plain [rows, K] tensor (`quantize_rows` is its host
wrapper: the separate quantization step of the unfused baseline in tools.bench);
`condition_test_kernel` runs the conditioning alone (the interpreter cannot run inline asm).
"""

import torch
import triton
import triton.language as tl

CVT_FP4_ASM = tl.constexpr("v_cvt_scalef32_pk_fp4_f32 $0, $1, $2, $3")


@triton.jit
def _block_scale(amax):
    """fp32 amax >= 0 -> (scale byte int32, fp32 multiplier): the "even" rule, see formats.py."""
    rounded = (amax.to(tl.int32, bitcast=True) + 0x200000) & -0x800000
    exponent = (rounded >> 23) & 0xFF
    u = tl.where(exponent == 255, 127, tl.minimum(tl.maximum(exponent - 129, -127), 127))
    multiplier_bits = tl.where(u == 127, 0x00400000, (127 - u) << 23)
    return u + 127, multiplier_bits.to(tl.float32, bitcast=True)


@triton.jit
def _e2m1_codes(q):
    """fp32 -> E2M1 code in the low 4 bits of a uint32 (RNE, saturating at 6, sign kept)."""
    bits = q.to(tl.uint32, bitcast=True)
    sign = bits & 0x80000000
    magnitude_bits = bits ^ sign
    magnitude = magnitude_bits.to(tl.float32, bitcast=True)
    # Adding 2**22 (fp32 ulp 0.5) rounds |q| < 1 to 0, 0.5 or 1.0 with the FPU's RNE.
    denormal_code = (magnitude + 4194304.0).to(tl.uint32, bitcast=True) - (149 << 23)
    # Rebias the exponent from 127 to 1, add half an ulp of the kept mantissa bit minus one,
    # plus that bit itself so that ties go to even.
    normal_code = (magnitude_bits + 0xC11FFFFF + ((magnitude_bits >> 22) & 1)) >> 22
    code = tl.where(magnitude >= 6.0, 7, tl.where(magnitude < 1.0, denormal_code, normal_code))
    return (code & 0xF) | (sign >> 28)


@triton.jit
def _condition_for_cvt(q):
    """Pre-scaled q -> a value in [-6, -0.25) U {+0} U (0.25, 6] with the software code's value.

    NaN becomes +-1.5 or +-2.0 (the codes 3 or 4 that the bit recipe gives a quiet NaN, picked
    by mantissa bit 21); +-inf clamps to +-6 (code 7); |q| <= 0.25, -0 and denormals included,
    becomes +0: code 0 where the software path may give 8 (-0), which changes no product sum.
    """
    bits = q.to(tl.uint32, bitcast=True)
    nan_value = tl.where((bits & 0x200000) != 0, 2.0, 1.5)
    nan_value = tl.where((bits & 0x80000000) != 0, -nan_value, nan_value)
    q = tl.where(q != q, nan_value, q)
    q = tl.minimum(tl.maximum(q, -6.0), 6.0)
    return tl.where(tl.abs(q) <= 0.25, 0.0, q)


@triton.jit
def _cvt_pack_fp4(low, high):
    """Two conditioned fp32 tiles -> bytes low | high << 4, by the gfx950 conversion at scale 1.0."""
    packed = tl.inline_asm_elementwise(CVT_FP4_ASM, "=v,v,v,v",
                                       [low, high, tl.full(low.shape, 1.0, tl.float32)],
                                       dtype=tl.uint32, is_pure=True, pack=1)
    # The instruction writes one byte of its destination; the others are undefined here.
    return (packed & 0xFF).to(tl.uint8)


@triton.jit
def _prescaled_blocks(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """x [BLOCK_M, BLOCK_K] -> (q fp32 [BLOCK_M, BLOCK_K/32, 32], scale byte int32 [.., .., 1]).

    q is each block divided by its scale (an exact power of two), ready for rounding to E2M1.
    """
    NUM_BLOCKS: tl.constexpr = BLOCK_K // 32
    if x.dtype == tl.bfloat16:
        # A shift is the exact bf16 -> fp32 conversion; the Triton 3.9 interpreter's cast
        # mangles denormals, and the quantizer must be bit-exact everywhere.
        x = (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    else:
        x = x.to(tl.float32)
    x = x.reshape(BLOCK_M, NUM_BLOCKS, 32)
    # NaN is ignored in the block maximum unless the whole block is NaN (maxnum semantics, as
    # formats.nan_ignoring_amax), written out because the interpreter's max keeps NaN.
    magnitude = tl.abs(x)
    amax = tl.max(tl.where(magnitude == magnitude, magnitude, -1.0), axis=2, keep_dims=True)
    amax = tl.where(amax < 0.0, float("inf"), amax)
    scale, multiplier = _block_scale(amax)
    q = x * multiplier
    # A NaN keeps its own payload, quieted, as AMD's multiply does; NVIDIA's would not.
    x_bits = x.to(tl.uint32, bitcast=True)
    q = tl.where(x != x, (x_bits | 0x400000).to(tl.float32, bitcast=True), q)
    return q, scale


@triton.jit
def quantize_tile_mxfp4(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                        HW_CVT: tl.constexpr = False):
    q, scale = _prescaled_blocks(x, BLOCK_M, BLOCK_K)
    if HW_CVT:
        low, high = tl.split(_condition_for_cvt(q).reshape(BLOCK_M, BLOCK_K // 2, 2))
        packed = _cvt_pack_fp4(low, high)
    else:
        low, high = tl.split(_e2m1_codes(q).reshape(BLOCK_M, BLOCK_K // 2, 2))
        packed = (low | (high << 4)).to(tl.uint8)
    return packed, scale.reshape(BLOCK_M, BLOCK_K // 32).to(tl.uint8)


@triton.jit
def quantize_kernel(x_ptr, codes_ptr, scales_ptr, M, K, stride_xm,
                    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, HW_CVT: tl.constexpr = False):
    """x fp32/bf16 [M, K] (row stride stride_xm) -> codes uint8 [M, K/2], scales uint8 [M, K/32].

    M % BLOCK_M == 0 and K % BLOCK_K == 0; grid (M / BLOCK_M, K / BLOCK_K).
    """
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :])
    codes, scales = quantize_tile_mxfp4(x, BLOCK_M, BLOCK_K, HW_CVT)
    code_cols = tl.program_id(1) * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)
    scale_cols = tl.program_id(1) * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
    tl.store(codes_ptr + rows[:, None] * (K // 2) + code_cols[None, :], codes)
    tl.store(scales_ptr + rows[:, None] * (K // 32) + scale_cols[None, :], scales)


def _largest_power_of_two_dividing(x: int, at_most: int) -> int:
    block = at_most
    while x % block:
        block //= 2
    return block


def quantize_rows(x, hw_cvt: bool = False):
    """x bf16 [M, K] (K % 64 == 0, unit column stride) -> (codes uint8 [M, K/2], scales
    uint8 [M, K/32]), as kernels.formats.quantize_mxfp4. One standard Triton launch."""
    rows, k = x.shape
    block_m = _largest_power_of_two_dividing(rows, 16)
    block_k = _largest_power_of_two_dividing(k, 512)
    codes = torch.empty(rows, k // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(rows, k // 32, dtype=torch.uint8, device=x.device)
    quantize_kernel[(rows // block_m, k // block_k)](x, codes, scales, rows, k, x.stride(0),
                                                     BLOCK_M=block_m, BLOCK_K=block_k,
                                                     HW_CVT=hw_cvt)
    return codes, scales


@triton.jit
def condition_test_kernel(q_ptr, out_ptr, BLOCK: tl.constexpr):
    """out fp32 [n] = _condition_for_cvt(q fp32 [n]); n % BLOCK == 0, grid (n / BLOCK,)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, _condition_for_cvt(tl.load(q_ptr + offsets)))
