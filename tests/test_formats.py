"""Tests of kernels/formats.py against hand-computed values and torchao.

Expected values follow aiter's rules as docs/formats.md writes them: the block scale, the
E2M1 table, the packing and the decode. They are written out by hand here, never computed by
the module under test. The shuffles are kernels.layouts.cdna4's (tests/test_layouts_cdna4.py).
"""

import math
import struct

import pytest
import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.layouts import cdna4
from mxfp4_mm.kernels.formats import (
    cdiv,
    dequantize_mxfp4,
    e2m1_codes,
    e2m1_to_f32,
    e8m0_to_f32,
    pad_to,
    quantize_mxfp4,
    scale_byte_and_multiplier,
    scales_padded_shape,
)

# E2M1 code -> value, written out from spec §1.3 / §2.3 (independent of formats.E2M1_VALUES).
E2M1_TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
POS_GRID = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


# ----------------------------------------------------------------------------- helpers

def f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def bits_of(t: torch.Tensor) -> list:
    return [b & 0xFFFFFFFF for b in t.float().contiguous().view(torch.int32).flatten().tolist()]


def next_up(v: float) -> float:
    t = torch.tensor(v, dtype=torch.float32)
    return torch.nextafter(t, torch.tensor(math.inf)).item()


def next_down(v: float) -> float:
    t = torch.tensor(v, dtype=torch.float32)
    return torch.nextafter(t, torch.tensor(-math.inf)).item()


def block(values, anchor=4.0, k=32):
    """One fp32 row of k elements: [anchor, values..., 0...]. anchor=4.0 fixes u = 0."""
    row = [anchor] + list(values)
    row += [0.0] * (k - len(row))
    return torch.tensor([row], dtype=torch.float32)


def codes_of(packed: torch.Tensor) -> list:
    """Unpack by hand: element 2i is the low nibble."""
    out = []
    for b in packed.view(torch.uint8).flatten().tolist():
        out += [b & 0xF, b >> 4]
    return out


def quant_codes(x: torch.Tensor):
    codes, scales = quantize_mxfp4(x)
    return codes_of(codes), scales.flatten().tolist()


# ----------------------------------------------------------------------------- cdiv / pad_to / shape

@pytest.mark.parametrize("a,b,expected", [(0, 5, 0), (1, 5, 1), (5, 5, 1), (6, 5, 2), (31, 32, 1),
                                          (32, 32, 1), (33, 32, 2), (1000, 7, 143)])
def test_cdiv(a, b, expected):
    assert cdiv(a, b) == expected


@pytest.mark.parametrize("x,m,expected", [(0, 8, 0), (1, 8, 8), (8, 8, 8), (9, 8, 16),
                                          (255, 256, 256), (256, 256, 256), (257, 256, 512)])
def test_pad_to(x, m, expected):
    assert pad_to(x, m) == expected


@pytest.mark.parametrize("rows,k,expected", [(1, 32, (256, 8)), (40, 384, (256, 16)),
                                             (256, 256, (256, 8)), (257, 33, (512, 8)),
                                             (300, 8192, (512, 256)), (512, 264, (512, 16))])
def test_scales_padded_shape(rows, k, expected):
    assert scales_padded_shape(rows, k) == expected


# ----------------------------------------------------------------------------- e2m1_codes (no scale)

# (magnitude, code) at every RNE tie of spec §1.3, with the codes written out by hand.
TIES = [(0.25, 0), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6)]
# The code just above and just below each tie.
ABOVE = {0.25: 1, 0.75: 2, 1.25: 3, 1.75: 4, 2.5: 5, 3.5: 6, 5.0: 7}
BELOW = {0.25: 0, 0.75: 1, 1.25: 2, 1.75: 3, 2.5: 4, 3.5: 5, 5.0: 6}


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("tie,code", TIES)
def test_e2m1_codes_ties_above_below(tie, code, sign):
    q = torch.tensor([sign * tie, sign * next_up(tie), sign * next_down(tie)], dtype=torch.float32)
    s = 8 if sign < 0 else 0
    assert e2m1_codes(q).tolist() == [code | s, ABOVE[tie] | s, BELOW[tie] | s]


def test_e2m1_codes_exact_grid_values():
    q = torch.tensor(E2M1_TABLE, dtype=torch.float32)
    assert e2m1_codes(q).tolist() == list(range(16))


def test_e2m1_codes_saturation_and_inf():
    q = torch.tensor([5.5, 6.0, 6.5, 7.0, 1e30, math.inf, -6.5, -math.inf], dtype=torch.float32)
    assert e2m1_codes(q).tolist() == [7, 7, 7, 7, 7, 7, 15, 15]


def test_e2m1_codes_tiny_and_denormal():
    q = torch.tensor([f32_from_bits(1), 1e-30, -1e-30, f32_from_bits(0x80000001), 0.1, -0.1],
                     dtype=torch.float32)
    assert e2m1_codes(q).tolist() == [0, 0, 8, 8, 0, 8]


def _rne_reference_codes(a: torch.Tensor) -> torch.Tensor:
    """Direct RNE to the positive E2M1 grid in float64 (ties to the even code), saturating."""
    grid = torch.tensor(POS_GRID, dtype=torch.float64)
    a = a.double()
    hi = torch.searchsorted(grid, a).clamp(max=7)           # first grid point >= a
    lo = (hi - 1).clamp(min=0)
    exact = grid[hi] == a
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(exact, hi, torch.where(pick_hi, hi, lo))
    return torch.where(a > 6.0, 7, code)


def test_e2m1_codes_match_direct_rne_on_dense_range():
    gen = torch.Generator().manual_seed(1)
    a = torch.cat([torch.rand(200_000, generator=gen) * 8.0,
                   torch.linspace(0.0, 7.0, 7 * 64 + 1)])   # includes every tie exactly
    a = a.float()
    assert torch.equal(e2m1_codes(a).long(), _rne_reference_codes(a))
    assert torch.equal(e2m1_codes(-a).long(), _rne_reference_codes(a) | 8)


# ----------------------------------------------------------------------------- quantize: element codes

@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("tie,code", TIES)
def test_quantize_ties_with_unit_scale(tie, code, sign):
    s = 8 if sign < 0 else 0
    x = block([sign * tie, sign * next_up(tie), sign * next_down(tie)])
    codes, scales = quant_codes(x)
    assert scales == [127]
    assert codes[:4] == [6, code | s, ABOVE[tie] | s, BELOW[tie] | s]
    assert codes[4:] == [0] * 28


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("tie,code", TIES)
def test_quantize_ties_through_nontrivial_scale(tie, code, sign):
    # amax = 4 * 2**-10 -> u = -10, byte 117; x = tie * 2**-10 scales back to the tie exactly.
    f = 2.0 ** -10
    s = 8 if sign < 0 else 0
    x = block([sign * tie * f, sign * next_up(tie) * f, sign * next_down(tie) * f], anchor=4.0 * f)
    codes, scales = quant_codes(x)
    assert scales == [117]
    assert codes[:4] == [6, code | s, ABOVE[tie] | s, BELOW[tie] | s]


def test_quantize_ties_bf16_input():
    vals = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0]
    x = block(vals).to(torch.bfloat16)
    codes, scales = quant_codes(x)
    assert scales == [127]
    assert codes[:15] == [6, 0, 2, 2, 4, 4, 6, 6, 8, 10, 10, 12, 12, 14, 14]


def test_quantize_grid_values_unit_scale():
    x = block([0.5, 1.0, 1.5, 2.0, 3.0, 6.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
    codes, scales = quant_codes(x)
    assert scales == [127]
    assert codes[:14] == [6, 1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 14, 15]


@pytest.mark.parametrize("v", [5.0 + 2 ** -20, 5.5, 5.999, 6.0, 6.25])
def test_quantize_saturation_between_5_and_7_stays_unit_scale(v):
    codes, scales = quant_codes(block([v, -v]))
    assert scales == [127]
    assert codes[:3] == [6, 7, 15]


def test_quantize_amax_6_5_clips_to_6():
    codes, scales = quant_codes(block([], anchor=6.5))
    assert scales == [127]
    assert codes[0] == 7


def test_quantize_amax_just_below_7_still_unit_scale():
    codes, scales = quant_codes(block([], anchor=next_down(7.0)))
    assert scales == [127]
    assert codes[0] == 7


def test_quantize_amax_7_gives_u1():
    # u = 1: 7 -> 3.5 (tie, up to 4: code 6); 1.0 -> 0.5 (code 1); -2.5 -> -1.25 (tie, down: 10)
    codes, scales = quant_codes(block([1.0, -2.5], anchor=7.0))
    assert scales == [128]
    assert codes[:3] == [6, 1, 10]


# ----------------------------------------------------------------------------- quantize: zeros and signs

def test_quantize_all_zero_block():
    codes, scales = quantize_mxfp4(torch.zeros(3, 64))
    assert scales.tolist() == [[0, 0]] * 3
    assert codes.tolist() == [[0] * 32] * 3


def test_quantize_negative_zero_gives_code_8():
    x = torch.full((1, 32), -0.0)
    codes, scales = quant_codes(x)
    assert scales == [0]
    assert codes == [8] * 32


def test_quantize_negative_zero_in_nonzero_block():
    codes, scales = quant_codes(block([-0.0, 0.0]))
    assert scales == [127]
    assert codes[:3] == [6, 8, 0]


def test_quantize_negative_values_rounding_to_zero_keep_sign():
    codes, scales = quant_codes(block([-0.1, -0.25, -1e-30, 0.1, 0.25]))
    assert scales == [127]
    assert codes[:6] == [6, 8, 8, 8, 0, 0]


# ----------------------------------------------------------------------------- quantize: scale extremes

def test_quantize_denormal_amax_gives_byte_0():
    # 1e-40 is an fp32 denormal; u clamps to -127, multiplier 2**127 -> 1e-40*2**127 ~ 0.017 -> 0.
    x = block([-1e-40], anchor=1e-40)
    codes, scales = quant_codes(x)
    assert scales == [0]
    assert codes[:2] == [0, 8]


def test_quantize_smallest_normal_amax_clamps_to_byte_0():
    # amax = 2**-126: E = -126 -> u = -128, clamped to -127; scaled amax = 2**-126 * 2**127 = 2.
    codes, scales = quant_codes(block([], anchor=2.0 ** -126))
    assert scales == [0]
    assert codes[0] == 4


def test_quantize_amax_2_pow_minus_125_is_last_clamped_power():
    # 2**-125 -> u = -127 exactly (byte 0), scaled value 4 -> code 6.
    # 2**-124 -> u = -126 (byte 1), scaled value 4 -> code 6.
    x = torch.cat([block([], anchor=2.0 ** -125), block([], anchor=2.0 ** -124)])
    codes, scales = quantize_mxfp4(x)
    assert scales.flatten().tolist() == [0, 1]
    assert codes[:, 0].tolist() == [6, 6]


def test_quantize_amax_1e38():
    # 1e38 = 1.1755 * 2**126 -> u = 124, byte 251; 1e38 * 2**-124 = 4.70 -> code 6.
    codes, scales = quant_codes(block([-1e38], anchor=1e38))
    assert scales == [251]
    assert codes[:2] == [6, 14]


def test_quantize_amax_1_5_pow_127():
    # 1.5 * 2**127 -> u = 125, byte 252; scaled 1.5 * 4 = 6 -> code 7.
    codes, scales = quant_codes(block([], anchor=1.5 * 2.0 ** 127))
    assert scales == [252]
    assert codes[0] == 7


@pytest.mark.parametrize("amax", [1.75 * 2.0 ** 127, 3.4028234663852886e38])
def test_quantize_amax_rounding_to_top_exponent_gives_byte_254(amax):
    # ar becomes +inf, log2 -> inf, u clamps to 127 (byte 254), multiplier 2**-127:
    # amax * 2**-127 is 1.75 (tie, up to 2: code 4) for 1.75*2**127 and ~2 (code 4) for fp32 max.
    codes, scales = quant_codes(block([1.0], anchor=amax))
    assert scales == [254]
    assert codes[0] == 4
    assert codes[1] == 0


def test_quantize_inf_amax():
    # inf -> byte 254; inf * 2**-127 saturates to code 7; finite 1.0 * 2**-127 -> 0; -inf -> 15.
    codes, scales = quant_codes(block([1.0, -math.inf, -2.0], anchor=math.inf))
    assert scales == [254]
    assert codes[:4] == [7, 0, 15, 8]


def test_scale_byte_is_never_255():
    amax = torch.tensor([0.0, 1e-45, 1.0, 3.4028234663852886e38, math.inf]).view(-1, 1)
    byte, _ = scale_byte_and_multiplier(amax)
    assert byte.flatten().tolist() == [0, 0, 125, 254, 254]


@pytest.mark.parametrize("amax,byte,mult_bits", [
    (0.0, 0, 254 << 23),               # u = -127: multiplier 2**127
    (1.0, 125, 129 << 23),             # u = -2: multiplier 4
    (4.0, 127, 127 << 23),             # u = 0: multiplier 1
    (7.0, 128, 126 << 23),             # u = 1: multiplier 0.5
    (math.inf, 254, 0x00400000),       # u = 127: multiplier 2**-127 (a denormal)
])
def test_scale_byte_and_multiplier_values(amax, byte, mult_bits):
    b, m = scale_byte_and_multiplier(torch.tensor([[amax]], dtype=torch.float32))
    assert b.dtype == torch.uint8 and m.dtype == torch.float32
    assert b.item() == byte
    assert bits_of(m) == [mult_bits]


@pytest.mark.parametrize("e", [-120, -100, -10, -1, 0, 1, 2, 5, 20, 100, 120])
def test_scale_threshold_1_75(e):
    # amax = 1.5*2**e -> u = e-2 (scaled 6, code 7); amax = 1.75*2**e -> u = e-1 (scaled 3.5,
    # code 6); amax = nextafter(1.75, 0)*2**e -> u = e-2 (scaled just under 7, code 7).
    p = 2.0 ** e
    x = torch.cat([block([], anchor=1.5 * p), block([], anchor=1.75 * p),
                   block([], anchor=next_down(1.75) * p)])
    codes, scales = quantize_mxfp4(x)
    assert scales.flatten().tolist() == [e - 2 + 127, e - 1 + 127, e - 2 + 127]
    assert codes[:, 0].tolist() == [7, 6, 7]


# ----------------------------------------------------------------------------- quantize: NaN

def test_quantize_nan_ignored_in_block_max():
    nan = f32_from_bits(0x7FC00000)
    codes, scales = quant_codes(block([nan, 1.0, 0.5]))
    assert scales == [127]                 # amax is 4.0, not NaN
    assert codes[:4] == [6, 3, 2, 1]       # canonical NaN -> code 3


def test_quantize_negative_nan_code_11():
    x = block([0.0, 0.0])
    x.view(torch.int32)[0, 1] = struct.unpack("<i", struct.pack("<I", 0xFFC00000))[0]
    codes, scales = quant_codes(x)
    assert scales == [127]
    assert codes[:3] == [6, 11, 0]


def test_quantize_nan_in_scaled_block_still_code_3():
    # NaN * multiplier is still the canonical NaN; with amax 7 (u=1), code stays 3.
    codes, scales = quant_codes(block([math.nan], anchor=7.0))
    assert scales == [128]
    assert codes[:2] == [6, 3]


def test_quantize_all_nan_block_scale():
    # Spec §1.2: Triton's maxnum ignores NaN unless every element is NaN; then ar = +inf, u = 127.
    _, scales = quant_codes(torch.full((1, 32), math.nan))
    assert scales == [254]


def test_quantize_all_nan_block_codes():
    codes, _ = quant_codes(torch.full((1, 32), math.nan))
    assert codes == [3] * 32


# ----------------------------------------------------------------------------- quantize: packing and shape

def test_quantize_nibble_order():
    # x[j] = value of code j % 16 (amax 6 -> u = 0): byte i = code(2i) | code(2i+1) << 4.
    x = torch.tensor([E2M1_TABLE * 2], dtype=torch.float32)
    codes, scales = quantize_mxfp4(x)
    assert scales.tolist() == [[127]]
    assert codes.tolist() == [[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE] * 2]


def test_quantize_nibble_order_two_elements():
    codes, _ = quantize_mxfp4(block([-0.5, 6.0, 1.0]))   # codes 6, 9, 7, 2
    assert codes[0, :2].tolist() == [0x96, 0x27]


def test_quantize_output_dtypes_and_shapes():
    codes, scales = quantize_mxfp4(torch.randn(5, 256))
    assert codes.dtype == torch.uint8 and scales.dtype == torch.uint8
    assert codes.shape == (5, 128) and scales.shape == (5, 8)


def test_quantize_k_not_multiple_of_32_pads_with_zeros():
    # K = 48: block 0 holds 32 elements, block 1 holds 16 real elements + 16 zeros of padding.
    row = [4.0] + [1.0] * 31 + [0.5] * 15 + [-0.25]
    codes, scales = quantize_mxfp4(torch.tensor([row]))
    assert codes.shape == (1, 24) and scales.shape == (1, 2)
    # block 1: amax 0.5 -> u = -3 (byte 124), 0.5*8 = 4 -> code 6, -0.25*8 = -2 -> code 12.
    assert scales.tolist() == [[127, 124]]
    assert codes_of(codes) == [6] + [2] * 31 + [6] * 15 + [12]


def test_quantize_k_not_multiple_of_32_small_values():
    # K = 4 (one partial block): the padding zeros must not raise amax.
    codes, scales = quantize_mxfp4(torch.tensor([[1e-3, -1e-3, 0.0, 5e-4]]))
    # 1e-3 = 1.024 * 2**-10 -> u = -12 (byte 115); 1e-3 * 2**12 = 4.096 -> 6; 5e-4 -> 2.048 -> 4
    assert scales.tolist() == [[115]]
    assert codes.tolist() == [[0xE6, 0x40]]


@pytest.mark.parametrize("shape", [(4, 31), (4,), (2, 2, 32)])
def test_quantize_rejects_bad_shapes(shape):
    with pytest.raises(ValueError):
        quantize_mxfp4(torch.zeros(shape))


# ----------------------------------------------------------------------------- quantize vs torchao

def _torchao_mx(x: torch.Tensor):
    """torchao, the one outside oracle of the formats (the [test] extra installs it; the tests
    that need it skip where it is missing)."""
    torchao_mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor",
                                     reason="needs torchao, the formats' outside oracle")
    scale, data = torchao_mx.to_mx(x, torch.float4_e2m1fn_x2, 32,
                                   torchao_mx.ScaleCalculationMode.EVEN)
    rows = x.shape[0]
    return scale.view(torch.uint8).view(rows, -1), data.view(torch.uint8).view(rows, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("magnitude", [1.0, 1e-3, 1e4])
@pytest.mark.parametrize("shape", [(1, 32), (7, 64), (64, 512), (33, 1024)])
def test_quantize_matches_torchao(shape, magnitude, dtype):
    gen = torch.Generator().manual_seed(hash((shape, magnitude)) & 0xFFFF)
    x = (magnitude * torch.randn(shape, generator=gen)).to(dtype)
    ref_scale, ref_data = _torchao_mx(x)
    codes, scales = quantize_mxfp4(x)
    assert torch.equal(scales, ref_scale)
    assert torch.equal(codes, ref_data)


def test_quantize_matches_torchao_on_ties_grid():
    # Every tie and grid value at many scales, in every position of the block.
    base = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 6.0,
                         -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, -0.0, 0.0])
    rows = []
    for e in range(-60, 61, 3):
        for shift in range(0, 32, 5):
            r = torch.zeros(32)
            r[:base.numel()] = base
            r = torch.roll(r, shift) * 2.0 ** e
            r[(shift + 25) % 32] = 4.0 * 2.0 ** e    # fix the scale at u = e
            rows.append(r)
    x = torch.stack(rows)
    ref_scale, ref_data = _torchao_mx(x)
    codes, scales = quantize_mxfp4(x)
    assert torch.equal(scales, ref_scale)
    assert torch.equal(codes, ref_data)


# ----------------------------------------------------------------------------- decode helpers

def test_e8m0_to_f32_special_bytes():
    out = e8m0_to_f32(torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8))
    assert out.dtype == torch.float32
    b = bits_of(out)
    assert b[0] == 0x00400000                      # 2**-127, a denormal, not 0
    assert out[0].item() == 2.0 ** -127
    assert out[1].item() == 2.0 ** -126
    assert out[2].item() == 0.5
    assert out[3].item() == 1.0
    assert out[4].item() == 2.0
    assert out[5].item() == 2.0 ** 127
    assert math.isnan(out[6].item())


def test_e8m0_to_f32_all_bytes():
    out = e8m0_to_f32(torch.arange(256, dtype=torch.int32).to(torch.uint8)).tolist()
    assert out[0] == 2.0 ** -127
    for b in range(1, 255):
        assert out[b] == 2.0 ** (b - 127)
    assert math.isnan(out[255])


def test_e8m0_to_f32_accepts_e8m0_dtype_and_keeps_shape():
    s = torch.tensor([[127, 130], [0, 255]], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    out = e8m0_to_f32(s)
    assert out.shape == (2, 2)
    assert out[0].tolist() == [1.0, 8.0]
    assert out[1, 0].item() == 2.0 ** -127 and math.isnan(out[1, 1].item())


def test_e2m1_to_f32_table_all_bytes():
    packed = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    out = e2m1_to_f32(packed)
    assert out.shape == (512,) and out.dtype == torch.float32
    vals = out.tolist()
    for b in range(256):
        assert vals[2 * b] == E2M1_TABLE[b & 0xF]
        assert vals[2 * b + 1] == E2M1_TABLE[b >> 4]
    signs = torch.signbit(out).tolist()
    for b in range(256):
        assert signs[2 * b] == ((b & 0xF) >= 8)
        assert signs[2 * b + 1] == ((b >> 4) >= 8)


def test_e2m1_to_f32_accepts_fp4x2_dtype():
    packed = torch.tensor([[0x7F, 0x21]], dtype=torch.uint8)
    out = e2m1_to_f32(packed.view(torch.float4_e2m1fn_x2))
    assert out.tolist() == [[-6.0, 6.0, 0.5, 1.0]]


def test_dequantize_hand_example():
    codes = torch.tensor([[0x62] + [0] * 15 + [0x79] + [0] * 15], dtype=torch.uint8)
    scales = torch.tensor([[128, 120]], dtype=torch.uint8)
    out = dequantize_mxfp4(codes, scales)
    assert out.shape == (1, 64)
    expected = [2.0, 8.0] + [0.0] * 30 + [-0.5 * 2 ** -7, 6.0 * 2 ** -7] + [0.0] * 30
    assert out.tolist() == [expected]


def test_dequantize_uses_only_leading_scale_columns():
    # Scales padded to 8 columns (as e8m0_shuffle would) with NaN bytes beyond K/32.
    codes = torch.full((2, 16), 0x22, dtype=torch.uint8)        # 32 elements of 1.0
    scales = torch.full((2, 8), 255, dtype=torch.uint8)
    scales[:, 0] = torch.tensor([127, 131], dtype=torch.uint8)
    out = dequantize_mxfp4(codes, scales)
    assert out.shape == (2, 32)
    assert out[0].tolist() == [1.0] * 32 and out[1].tolist() == [16.0] * 32


def test_dequantize_partial_block():
    codes = torch.tensor([[0x21, 0x43, 0x65]], dtype=torch.uint8)   # K = 6
    out = dequantize_mxfp4(codes, torch.tensor([[126]], dtype=torch.uint8))
    assert out.tolist() == [[0.25, 0.5, 0.75, 1.0, 1.5, 2.0]]


@pytest.mark.parametrize("magnitude", [1.0, 1e-3, 1e4])
def test_round_trip_on_grid_and_within_half_step(magnitude):
    gen = torch.Generator().manual_seed(7)
    x = magnitude * torch.randn(16, 256, generator=gen)
    codes, scales = quantize_mxfp4(x)
    deq = dequantize_mxfp4(codes, scales).double()
    factor = torch.tensor([[2.0 ** (b - 127) for b in row] for row in scales.tolist()],
                          dtype=torch.float64).repeat_interleave(32, dim=1)
    q = deq / factor                     # back to the E2M1 domain
    a = x.double() / factor              # the scaled input
    grid = torch.tensor(POS_GRID, dtype=torch.float64)
    # on the representable grid
    assert torch.isin(q.abs(), grid).all()
    # sign kept
    assert (torch.signbit(q) == torch.signbit(x)).all()
    # nearest grid point: |a - q| equals the distance to the nearest grid value (a <= 6),
    # which is at most half a step; saturated values go to 6.
    dist = (a.abs().unsqueeze(-1) - grid).abs().amin(-1)
    err = (a.abs() - q.abs()).abs()
    inside = a.abs() <= 6.0
    assert torch.equal(err[inside], dist[inside])
    step_half = torch.where(a.abs() <= 2, 0.25, torch.where(a.abs() <= 4, 0.5, 1.0))
    assert (err[inside] <= step_half[inside]).all()
    assert (q.abs()[~inside] == 6.0).all()
    # scaled block max lands in [3.5, 7): 1.f >= 1.75 rounds the scale up (spec §1.2 says
    # [4, 7), but amax = 1.75 * 2**E gives u = E - 1 and a scaled max of 3.5)
    amax = a.abs().view(16, 8, 32).amax(-1)
    assert ((amax >= 3.5) & (amax < 7.0)).all()
    assert (amax < 4.0).any()


def test_module_constants():
    assert formats.MX_BLOCK == 32
    assert list(formats.E2M1_VALUES) == E2M1_TABLE


def test_the_layouts_host_functions_are_named_here_too():
    # README and the launchers take them from formats; their home is kernels.layouts.cdna4.
    for name in ("shuffle_weight", "unshuffle_weight", "e8m0_shuffle", "e8m0_unshuffle",
                 "WEIGHT_TILE_N", "WEIGHT_TILE_BYTES", "SCALE_TILE_ROWS"):
        assert getattr(formats, name) is getattr(cdna4, name), name
