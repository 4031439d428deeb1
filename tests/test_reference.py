"""The runner stand-in (reference.py): generated inputs, the reference GEMM and the checker.

The checks here are written against the documented formats, not against kernels.formats
where that would make a test circular: the MXFP4 quantizer, the dequantizer and the two
shuffle layouts are re-derived in the test from their definitions.
"""

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats

FP4 = torch.float4_e2m1fn_x2
E8M0 = torch.float8_e8m0fnu
E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_MIDPOINTS = (E2M1_GRID[:-1] + E2M1_GRID[1:]) / 2


def u8(t):
    """The bytes of any tensor, so that fp4 / e8m0 tensors can be compared bitwise."""
    return t.contiguous().view(torch.uint8)


def pad(x, multiple):
    return -(-x // multiple) * multiple


# ---------------------------------------------------------------------------------------
# An independent MXFP4 model: aiter's _mxfp4_quant_op written with plain float math.
# ---------------------------------------------------------------------------------------

def own_quantize(x):
    """[rows, K] (K % 32 == 0, finite) -> (codes uint8 [rows, K], scale bytes uint8 [rows, K/32])."""
    rows, k = x.shape
    blocks = x.float().reshape(rows, k // 32, 32)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    # aiter rounds amax up at mantissa 1.75 (add 2**21 to the bits, drop the mantissa).
    amax = ((amax.view(torch.int32) + 0x200000) & -0x800000).view(torch.float32)
    unbiased = (torch.floor(torch.log2(amax)) - 2).clamp(-127, 127)
    q = blocks * torch.exp2(-unbiased)
    magnitude = q.abs()
    # Round to the nearest E2M1 magnitude, ties to the even code, saturating at 6.
    down = (magnitude[..., None] > E2M1_MIDPOINTS).sum(-1)   # a tie rounds down
    up = (magnitude[..., None] >= E2M1_MIDPOINTS).sum(-1)    # a tie rounds up
    index = torch.where(down % 2 == 0, down, up)
    codes = index | (torch.signbit(q).long() << 3)
    return codes.reshape(rows, k).to(torch.uint8), (unbiased + 127).reshape(rows, -1).to(torch.uint8)


def own_dequantize(codes, scale_bytes):
    """(codes uint8 [rows, K], scale bytes uint8 [rows, K/32]) -> fp32 [rows, K]."""
    lut = torch.cat((E2M1_GRID, -E2M1_GRID))
    factors = torch.exp2(scale_bytes.float() - 127)
    return lut[codes.long()] * factors.repeat_interleave(32, dim=1)


def own_unpack(packed):
    """[rows, K/2] bytes -> [rows, K] codes, element 2i in the low nibble."""
    b = u8(packed)
    return torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)


def own_shuffle_weight(codes):
    """out_flat[n0*16*Kb + k0*512 + k1*256 + n1*16 + k2] = W[16*n0 + n1, 32*k0 + 16*k1 + k2]."""
    n, kb = codes.shape
    n0, n1, k0, k1, k2 = torch.meshgrid(torch.arange(n // 16), torch.arange(16),
                                        torch.arange(kb // 32), torch.arange(2),
                                        torch.arange(16), indexing="ij")
    out = torch.empty(n * kb, dtype=torch.uint8)
    out[n0 * 16 * kb + k0 * 512 + k1 * 256 + n1 * 16 + k2] = u8(codes)[16 * n0 + n1,
                                                                      32 * k0 + 16 * k1 + k2]
    return out.view(n, kb)


def own_scale_positions(sm, sn):
    """Flat offset in e8m0_shuffle's output of each logical [r, c] of the padded matrix."""
    r, c = torch.meshgrid(torch.arange(sm), torch.arange(sn), indexing="ij")
    r0, r1, r2 = r // 32, (r // 16) % 2, r % 16
    c0, c1, c2 = c // 8, (c // 4) % 2, c % 4
    return r0 * 32 * sn + c0 * 256 + c2 * 64 + r2 * 4 + c1 * 2 + r1


# ---------------------------------------------------------------------------------------
# generate_input
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, n, k", [(1, 64, 64), (4, 80, 320), (33, 256, 512), (5, 272, 576)])
def test_generate_input_shapes_and_dtypes(device, m, n, k):
    A, B, B_q, B_shuffle, B_scale_sh = reference.generate_input(m, n, k, seed=1, device=device)
    assert (A.dtype, tuple(A.shape)) == (torch.bfloat16, (m, k))
    assert (B.dtype, tuple(B.shape)) == (torch.bfloat16, (n, k))
    assert (B_q.dtype, tuple(B_q.shape)) == (FP4, (n, k // 2))
    assert (B_shuffle.dtype, tuple(B_shuffle.shape)) == (FP4, (n, k // 2))
    assert (B_scale_sh.dtype, tuple(B_scale_sh.shape)) == (E8M0, (pad(n, 256), pad(k // 32, 8)))
    for t in (A, B, B_q, B_shuffle, B_scale_sh):
        assert t.device.type == torch.device(device).type
        assert t.is_contiguous()


def test_generate_input_is_deterministic_for_a_seed(device):
    first = reference.generate_input(8, 64, 128, seed=7, device=device)
    again = reference.generate_input(8, 64, 128, seed=7, device=device)
    other = reference.generate_input(8, 64, 128, seed=8, device=device)
    for x, y in zip(first, again):
        assert torch.equal(u8(x), u8(y))
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[1], other[1])
    assert not torch.equal(u8(first[3]), u8(other[3]))


@pytest.mark.parametrize("k", [32, 96, 100, 1000])
def test_generate_input_rejects_k_not_multiple_of_64(device, k):
    with pytest.raises(ValueError):
        reference.generate_input(4, 64, k, seed=0, device=device)


@pytest.mark.parametrize("n, k", [(64, 256), (80, 320), (272, 576)])
def test_b_q_is_the_mxfp4_quantization_of_b(device, n, k):
    _, B, B_q, _, _ = reference.generate_input(2, n, k, seed=3, device=device)
    codes, _ = own_quantize(B.cpu())
    assert torch.equal(own_unpack(B_q.cpu()), codes)


@pytest.mark.parametrize("n, k", [(64, 256), (80, 320), (272, 576)])
def test_b_shuffle_is_shuffle_weight_of_b_q(device, n, k):
    _, _, B_q, B_shuffle, _ = reference.generate_input(2, n, k, seed=4, device=device)
    assert torch.equal(u8(B_shuffle), u8(formats.shuffle_weight(B_q)))
    assert torch.equal(u8(B_shuffle).cpu(), own_shuffle_weight(B_q.cpu()))


@pytest.mark.parametrize("n, k", [(64, 256), (80, 320), (272, 576)])
def test_b_scale_sh_holds_the_scales_of_b(device, n, k):
    _, B, _, _, B_scale_sh = reference.generate_input(2, n, k, seed=5, device=device)
    _, want = formats.quantize_mxfp4(B)
    got = formats.e8m0_unshuffle(B_scale_sh, n, k // 32)
    assert torch.equal(u8(got), want)
    _, own = own_quantize(B.cpu())
    assert torch.equal(u8(got).cpu(), own)


@pytest.mark.parametrize("n, k", [(80, 320), (272, 576), (256, 512)])
def test_b_scale_sh_layout_and_padding(device, n, k):
    _, B, _, _, B_scale_sh = reference.generate_input(2, n, k, seed=6, device=device)
    sm, sn = B_scale_sh.shape
    _, scales = own_quantize(B.cpu())
    logical = torch.full((sm, sn), 0xFF, dtype=torch.uint8)
    logical[:n, :k // 32] = scales
    flat = torch.empty(sm * sn, dtype=torch.uint8)
    flat[own_scale_positions(sm, sn)] = logical
    assert torch.equal(u8(B_scale_sh).cpu().flatten(), flat)
    # Every byte outside the logical [n, k/32] block is the 0xFF padding.
    padded = formats.e8m0_unshuffle(B_scale_sh, sm, sn).view(torch.uint8).cpu()
    assert bool((padded[n:, :] == 0xFF).all()) and bool((padded[:, k // 32:] == 0xFF).all())
    assert int((u8(B_scale_sh) == 0xFF).sum()) >= sm * sn - n * (k // 32)


# ---------------------------------------------------------------------------------------
# ref_kernel
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, n, k", [(8, 64, 256), (3, 80, 320)])
def test_ref_kernel_matches_an_independent_computation(device, m, n, k):
    data = reference.generate_input(m, n, k, seed=11, device=device)
    A, B = data[0].cpu(), data[1].cpu()
    a = own_dequantize(*own_quantize(A))
    b = own_dequantize(*own_quantize(B))
    want = (a @ b.T).to(torch.bfloat16)
    got = reference.ref_kernel(data)
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (m, n)
    assert torch.equal(got.cpu(), want)


def test_ref_kernel_weight_matches_b_shuffle_and_b_scale_sh(device):
    """The weight the reference multiplies by is the one the kernel inputs encode."""
    m, n, k = 4, 80, 320
    A, B, B_q, B_shuffle, B_scale_sh = reference.generate_input(m, n, k, seed=12, device=device)
    codes = own_unpack(formats.unshuffle_weight(B_shuffle.cpu()))
    scales = u8(formats.e8m0_unshuffle(B_scale_sh.cpu(), n, k // 32))
    b_from_kernel_inputs = own_dequantize(codes, scales)
    assert torch.equal(b_from_kernel_inputs, own_dequantize(*own_quantize(B.cpu())))


# ---------------------------------------------------------------------------------------
# compare / check_implementation
# ---------------------------------------------------------------------------------------

def ones(shape=(4, 8), dtype=torch.bfloat16):
    return torch.ones(shape, dtype=dtype)


def test_check_implementation_passes_on_the_reference_output(device):
    data = reference.generate_input(16, 128, 512, seed=2, device=device)
    ok, message = reference.check_implementation(data, reference.ref_kernel(data))
    assert ok and message == ""


def test_check_implementation_fails_on_one_wrong_element(device):
    data = reference.generate_input(16, 128, 512, seed=2, device=device)
    out = reference.ref_kernel(data).clone()
    out[3, 5] += 1.0 + 2 * out[3, 5].abs()
    ok, message = reference.check_implementation(data, out)
    assert not ok
    assert message.startswith("1 of 2048 elements mismatch") and "[3, 5]" in message


def test_compare_reports_count_and_worst_element():
    expected = ones()
    output = expected.clone()
    output[2, 3] = 1.1
    ok, message = reference.compare(output, expected)
    assert not ok
    assert "1 of 32 elements mismatch" in message
    assert "[2, 3]: got 1.10156, expected 1" in message


def test_compare_lists_the_worst_element_first():
    expected = ones()
    output = expected.clone()
    output[0, 1] = 1.1
    output[3, 7] = 1.5
    ok, message = reference.compare(output, expected)
    assert not ok
    assert "2 of 32 elements mismatch" in message
    worst = message.split("worst: ")[1]
    assert worst.startswith("[3, 7]: got 1.5") and "[0, 1]" in worst


def test_the_tolerances_are_the_runners():
    assert reference.ATOL == 1e-2 and reference.RTOL == 1e-2


# limit = 1e-2 + 1e-2 * |expected|, written out: the runner's tolerance (task.md).
@pytest.mark.parametrize("scale, limit", [(1.0, 0.02), (-1.0, 0.02), (100.0, 1.01), (0.0, 0.01)])
def test_compare_tolerance_is_atol_plus_rtol_times_expected(scale, limit):
    expected = torch.full((2, 4), scale, dtype=torch.float32)
    assert reference.compare(expected + 0.99 * limit, expected)[0]
    assert reference.compare(expected - 0.99 * limit, expected)[0]
    assert not reference.compare(expected + 1.01 * limit, expected)[0]
    assert not reference.compare(expected - 1.01 * limit, expected)[0]


def test_check_implementation_uses_the_runners_tolerance(device):
    """An error of 0.9x the runner's limit passes the check, 1.1x fails it."""
    data = reference.generate_input(4, 64, 256, seed=9, device=device)
    want = reference.ref_kernel(data).float()
    limit = 1e-2 + 1e-2 * want.abs()
    assert reference.check_implementation(data, want + 0.9 * limit)[0]
    assert not reference.check_implementation(data, want + 1.1 * limit)[0]


def test_compare_nan_where_finite_expected_fails():
    output = ones()
    output[1, 1] = float("nan")
    ok, message = reference.compare(output, ones())
    assert not ok and "1 of 32" in message and "[1, 1]: got nan" in message


def test_compare_finite_where_nan_expected_fails():
    expected = ones()
    expected[1, 1] = float("nan")
    assert not reference.compare(ones(), expected)[0]


def test_compare_nan_where_nan_expected_passes():
    expected = ones()
    expected[0, 2] = float("nan")
    assert reference.compare(expected.clone(), expected) == (True, "")


# Where +-inf is expected only the same infinity passes: the tolerance atol + rtol*|inf|
# would otherwise accept anything that is not NaN.
@pytest.mark.parametrize("got, want, ok", [
    (float("inf"), float("inf"), True),
    (float("-inf"), float("-inf"), True),
    (float("inf"), 1.0, False),
    (float("-inf"), -1.0, False),
    (float("nan"), float("inf"), False),
    (float("inf"), float("-inf"), False),
    (float("-inf"), float("inf"), False),
    (1.0, float("inf"), False),
    (3.0e38, float("inf"), False),
    (0.0, float("-inf"), False),
])
def test_compare_infinities(got, want, ok):
    output, expected = ones(dtype=torch.float32), ones(dtype=torch.float32)
    output[2, 2], expected[2, 2] = got, want
    assert reference.compare(output, expected)[0] is ok


@pytest.mark.parametrize("shape", [(4, 7), (3, 8), (8, 4), (32,)])
def test_compare_shape_mismatch_fails(shape):
    ok, message = reference.compare(torch.ones(shape, dtype=torch.bfloat16), ones())
    assert not ok and "shape mismatch" in message
