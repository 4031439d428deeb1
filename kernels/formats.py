"""MXFP4 formats in pure torch: the one home of this math.

Used by the reference, the tests and the host side of the kernels. Every function is
bit-exact with the aiter piece it names (docs/formats.md says what each does).

Shapes, with K the number of logical fp4 elements along the reduction axis:
  codes   uint8 [rows, K/2]    two E2M1 codes per byte, element 2i in the low nibble
  scales  uint8 [rows, K/32]   E8M0 biased exponents, one per 32 elements
  weight_shuffled  uint8 [N, K/2]            shuffle_weight(codes)
  scales_shuffled  uint8 [pad(rows,256), pad(K/32,8)]   e8m0_shuffle(scales)
The two shuffles (aiter's layouts of the op's weight) and their inverses live in
kernels.layouts.cdna4; they are named here too, where README and the launchers take them.
"""

import torch

from .layouts.cdna4 import (SCALE_TILE_ROWS, WEIGHT_TILE_BYTES, WEIGHT_TILE_N,
                            e8m0_shuffle, e8m0_unshuffle, shuffle_weight,
                            shuffled_scales_shape, unshuffle_weight)

MX_BLOCK = 32
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
               -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# What prepare_weight (and reference.generate_input) write in e8m0_shuffle's padding: a NaN
# scale, so that a kernel which reads the padding gives NaN, not a plausible number.
SCALE_PAD_BYTE = 0xFF

_FP32_MANTISSA_ROUND = 0x200000      # adding it carries into the exponent when 1.f >= 1.75
_FP32_EXPONENT_MASK = -0x800000      # 0xFF800000 as an int32
_E2M1_DENORMAL_MAGIC = 149 << 23     # bits of 2**22: its fp32 ulp is 0.5
_E2M1_NORMAL_REBIAS = 0xC11FFFFF     # ((1 - 127) << 23) + (1 << 21) - 1
_U32 = 0xFFFFFFFF


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pad_to(x: int, multiple: int) -> int:
    return cdiv(x, multiple) * multiple


def scales_padded_shape(rows: int, k: int) -> tuple:
    """Shape of e8m0_shuffle's output for `rows` rows of a K-wide operand."""
    return shuffled_scales_shape(rows, cdiv(k, MX_BLOCK))


def scale_byte_and_multiplier(amax: torch.Tensor):
    """The "even" block scale of aiter's _mxfp4_quant_op, from the bits of fp32 amax >= 0.

    Returns (byte uint8, multiplier fp32) with x * multiplier the scaled block. The exponent
    u = clamp(E(amax rounded at 1.75) - 2, -127, 127); an amax whose rounding reaches the
    top exponent (inf, or >= 1.75 * 2**127) gives u = 127, as log2 -> inf does in aiter.
    """
    rounded = (amax.contiguous().view(torch.int32) + _FP32_MANTISSA_ROUND) & _FP32_EXPONENT_MASK
    exponent = (rounded >> 23) & 0xFF
    u = torch.where(exponent == 255, 127, (exponent - 129).clamp(-127, 127))
    byte = (u + 127).to(torch.uint8)
    multiplier_bits = torch.where(u == 127, 0x00400000, (127 - u) << 23).to(torch.int32)
    return byte, multiplier_bits.view(torch.float32)


def nan_ignoring_amax(blocks: torch.Tensor) -> torch.Tensor:
    """max |x| over the last axis with Triton's maxnum semantics: NaN is ignored, unless the
    whole block is NaN, which then gives +inf here (the same scale byte, 254, as NaN would)."""
    magnitude = blocks.abs()
    amax = torch.where(torch.isnan(magnitude), -1.0, magnitude).amax(dim=-1, keepdim=True)
    return torch.where(amax < 0, float("inf"), amax)


def e2m1_codes(q: torch.Tensor) -> torch.Tensor:
    """fp32 -> E2M1 code (uint8 0..15): round to nearest even, saturate at 6, sign kept."""
    bits = q.contiguous().view(torch.int32).to(torch.int64) & _U32
    sign = bits & 0x80000000
    magnitude_bits = bits ^ sign
    magnitude = magnitude_bits.to(torch.int32).view(torch.float32)
    saturated = magnitude >= 6.0
    denormal = ~saturated & (magnitude < 1.0)
    denormal_code = ((magnitude + float(2 ** 22)).view(torch.int32).to(torch.int64)
                     - _E2M1_DENORMAL_MAGIC) & 0xFF
    normal_code = (((magnitude_bits + _E2M1_NORMAL_REBIAS + ((magnitude_bits >> 22) & 1)) & _U32)
                   >> 22) & 0xFF
    code = torch.where(saturated, 7, torch.where(denormal, denormal_code, normal_code))
    return (code | (sign >> 28)).to(torch.uint8)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., 2n] codes -> [..., n] bytes, element 2i in the low nibble."""
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """[..., n] bytes -> [..., 2n] codes."""
    packed = packed.view(torch.uint8)
    return torch.stack((packed & 0xF, packed >> 4), dim=-1).flatten(-2)


def quantize_mxfp4(x: torch.Tensor):
    """aiter's Triton dynamic_mxfp4_quant, bit for bit: [rows, K] -> (codes, scales).

    codes uint8 [rows, K/2], scales uint8 [rows, cdiv(K, 32)]; K must be even. A K that is
    not a multiple of 32 is zero-padded, as aiter's masked load does. NaN is ignored in the
    block maximum (Triton's max) and its code is whatever the bit recipe gives (2 or 3).
    """
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"quantize_mxfp4 expects a 2-D tensor with an even last dim, got {tuple(x.shape)}")
    rows, k = x.shape
    blocks = cdiv(k, MX_BLOCK)
    xf = torch.zeros(rows, blocks * MX_BLOCK, dtype=torch.float32, device=x.device)
    xf[:, :k] = x.float()
    xf = xf.view(rows, blocks, MX_BLOCK)
    amax = nan_ignoring_amax(xf)
    byte, multiplier = scale_byte_and_multiplier(amax)
    codes = e2m1_codes(scaled_block(xf, multiplier)).view(rows, blocks * MX_BLOCK)[:, :k]
    return pack_nibbles(codes), byte.view(rows, blocks)


def scaled_block(x: torch.Tensor, multiplier: torch.Tensor) -> torch.Tensor:
    """x * multiplier in fp32, where a NaN keeps its own payload, quieted (as AMD's multiply
    does; the recipe's code for a NaN depends on those bits)."""
    quieted = (x.contiguous().view(torch.int32) | 0x400000).view(torch.float32)
    return torch.where(torch.isnan(x), quieted, x * multiplier)


def cvt_scalef32_pk_fp4_bf16_model(low: torch.Tensor, high: torch.Tensor,
                                   scale: torch.Tensor) -> torch.Tensor:
    """Model of gfx950 `v_cvt_scalef32_pk_fp4_bf16 vdst, src, scale` (task.md): the byte it
    writes, as uint8. src holds two bf16: `low` (bits 0-15) -> low nibble, `high` -> high.

    code = E2M1(x / 2**(exponent(scale) - 127)), round to nearest even, saturating at +-6,
    sign kept; only the exponent field of scale is used. Written from the definition (a
    nearest-value search in float64), not from the bit recipe. Raises ValueError on inputs
    whose result the ISA leaves open: NaN, +-inf, a scale exponent field of 0 or 255, and a
    nonzero bf16 denormal under a scale exponent field below 3. Above that (scale >= 2**-124)
    a denormal or -0 converts to a zero whether or not the instruction flushes denormals
    (|x / scale| < 2**-126 / 2**-124 = 0.25); its sign is the one unknown, so the model keeps
    it (-0, code 8) and the chip may give +0 (code 0) instead, which changes no product sum.
    """
    return _cvt_scalef32_pk_fp4_model("v_cvt_scalef32_pk_fp4_bf16", torch.bfloat16,
                                      low, high, scale)


def cvt_scalef32_pk_fp4_f32_model(src0: torch.Tensor, src1: torch.Tensor,
                                  scale: torch.Tensor) -> torch.Tensor:
    """Model of gfx950 `v_cvt_scalef32_pk_fp4_f32 vdst, src0, src1, scale` (task.md): the byte
    it writes, as uint8: src0 (fp32) -> low nibble, src1 (fp32) -> high nibble.

    The same definition and the same documented inputs as cvt_scalef32_pk_fp4_bf16_model,
    for fp32 sources: ValueError on NaN, +-inf, a scale exponent field of 0 or 255, and a
    nonzero fp32 denormal under a scale exponent field below 3 (at or above 3 it converts to
    a zero, its sign kept here, possibly +0 on the chip), and on sources that are not fp32.
    """
    return _cvt_scalef32_pk_fp4_model("v_cvt_scalef32_pk_fp4_f32", torch.float32,
                                      src0, src1, scale)


def _cvt_scalef32_pk_fp4_model(instruction: str, dtype, low, high, scale) -> torch.Tensor:
    if low.dtype != dtype or high.dtype != dtype:
        raise ValueError(f"{instruction} model: sources must be {dtype}, got {low.dtype} "
                         f"and {high.dtype}")
    exponent = (scale.contiguous().view(torch.int32) >> 23) & 0xFF
    if bool(((exponent == 0) | (exponent == 255)).any()):
        raise ValueError(f"{instruction} model: scale exponent field 0 or 255 is undocumented")
    return pack_nibbles(torch.stack((_model_e2m1(instruction, low, exponent),
                                     _model_e2m1(instruction, high, exponent)), dim=-1).flatten(-2))


def _model_e2m1(instruction: str, x: torch.Tensor, scale_exponent: torch.Tensor) -> torch.Tensor:
    denormal = (x != 0) & (x.abs() < torch.finfo(x.dtype).tiny)
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{instruction} model: NaN or inf input is undocumented")
    if bool((denormal & (scale_exponent < 3)).any()):
        raise ValueError(f"{instruction} model: a denormal under a scale below "
                         "2**-124 is undocumented (flushing would change its code)")
    y = x.double() * torch.pow(2.0, 127 - scale_exponent.double())
    grid = torch.tensor(E2M1_VALUES[:8], dtype=torch.float64)
    distance = (y.abs().clamp(max=6.0)[..., None] - grid).abs()
    candidates = distance == distance.min(dim=-1, keepdim=True).values  # one, or two at a tie
    even = candidates & (torch.arange(8) % 2 == 0)
    code = torch.where(even.any(-1), even.int().argmax(-1), candidates.int().argmax(-1))
    return (code | torch.where(torch.signbit(x), 8, 0)).to(torch.uint8)


def e8m0_to_f32(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 byte -> fp32 2**(b - 127); byte 0 is 2**-127 (a denormal), 255 is NaN."""
    b = scales.view(torch.uint8).to(torch.int32)
    bits = torch.where(b == 0, 0x00400000, torch.where(b == 255, 0x7F800001, b << 23))
    return bits.to(torch.int32).view(torch.float32)


def e2m1_to_f32(packed: torch.Tensor) -> torch.Tensor:
    """[..., n] packed bytes -> fp32 [..., 2n]."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    return table[unpack_nibbles(packed).long()]


def dequantize_mxfp4(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(codes [rows, K/2], scales [rows, >= K/32]) -> fp32 [rows, K]."""
    values = e2m1_to_f32(codes)
    k = values.shape[-1]
    factors = e8m0_to_f32(scales[:, :cdiv(k, MX_BLOCK)].contiguous())
    return values * factors.repeat_interleave(MX_BLOCK, dim=1)[:, :k]


def weight_operands(codes: torch.Tensor, scales: torch.Tensor):
    """Plain MXFP4 (codes uint8 [N, K/2], scales uint8 [N, K/32]) -> (B_shuffle uint8 [N, K/2],
    B_scale_sh uint8 [pad(N,256), pad(K/32,8)]), the op's weight operands: shuffle_weight and
    e8m0_shuffle, its padding SCALE_PAD_BYTE."""
    return shuffle_weight(codes), e8m0_shuffle(scales, pad_value=SCALE_PAD_BYTE)


def prepare_weight(weight: torch.Tensor):
    """bf16 weight [N, K] (an nn.Linear's, rows = outputs) -> (B_shuffle uint8 [N, K/2],
    B_scale_sh uint8 [pad(N,256), pad(K/32,8)]), the op's weight operands.

    quantize_mxfp4, then weight_operands (padding SCALE_PAD_BYTE): bit for bit
    reference.generate_input's B_shuffle and B_scale_sh (which are the same bytes viewed as
    float4_e2m1fn_x2 and float8_e8m0fnu where torch has them). N % 16 == 0, K % 64 == 0.
    """
    if weight.dtype != torch.bfloat16 or weight.dim() != 2:
        raise TypeError(f"prepare_weight: expected a 2-D bfloat16 weight [N, K], got "
                        f"{weight.dim()}-D {weight.dtype}")
    n, k = weight.shape
    if n % WEIGHT_TILE_N or k % (2 * WEIGHT_TILE_BYTES):
        raise ValueError(f"prepare_weight: expected N % {WEIGHT_TILE_N} == 0 and K % "
                         f"{2 * WEIGHT_TILE_BYTES} == 0 (the (16, 16) shuffle), got N={n}, K={k}")
    return weight_operands(*quantize_mxfp4(weight))
