"""Edge values of A through the whole custom_kernel path, against the reference.

Inputs are designed so that the reference's answer does not depend on the order of its sums:
the parametrized kinds give finite outputs only; in the inf/NaN test every overflowing row has
exactly one kind of overflowing product per output (one sign, never times a zero B), so its
inf/NaN pattern follows from the inputs by hand and is asserted element by element.
"""

import math

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.submission import custom_kernel

M, N, K = 16, 128, 512


def with_a(device, a, seed=5):
    data = reference.generate_input(M, N, K, seed, device=device)
    return (a.to(torch.bfloat16).to(device),) + data[1:]


def bf16_from_bits(bits):
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def edge_a(kind):
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    if kind == "zeros":
        a.zero_()
    elif kind == "one value of 1.5 * 2**120 per block":
        a.view(M, K // 32, 32)[:, :, 0] = 1.5 * 2.0 ** 120
    elif kind == "subnormals":
        a = (a.float() * 1e-39).to(torch.bfloat16)
    elif kind == "1e-30 to 1e30 in one row":
        a = (torch.logspace(-30, 30, K).repeat(M, 1) * torch.sign(a.float())).to(torch.bfloat16)
    elif kind == "rounding ties":
        ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 4.0])
        a = (ties.repeat(K // 8) * torch.sign(torch.randn(K, generator=gen))).repeat(M, 1)
    elif kind == "isolated NaNs":
        # Quiet NaNs of both signs and both values of mantissa bit 21 (codes 1.0 and 1.5),
        # one per block at most: amax ignores them, their codes are finite.
        a[3, 17] = math.nan
        a[5, 100] = bf16_from_bits(0xFFC0)        # -NaN
        a[6, 200] = bf16_from_bits(0x7FE0)        # NaN, mantissa bit 21 set
        a[6, 201 + 32] = bf16_from_bits(0xFFE1)   # -NaN, bit 21 and a low payload bit set
    return a


KINDS = ["zeros", "one value of 1.5 * 2**120 per block", "subnormals",
         "1e-30 to 1e30 in one row", "rounding ties", "isolated NaNs"]


@pytest.mark.parametrize("kind", KINDS)
def test_edge_values_match_the_reference(device, kind):
    data = with_a(device, edge_a(kind))
    want = reference.ref_kernel(data)
    assert bool(want.isfinite().all()), "the inputs were designed to give finite results"
    ok, message = reference.check_implementation(data, custom_kernel(data))
    assert ok, message


# ---------------------------------------------------------------------------------------
# Infinities and all-NaN blocks: the pattern, element by element
# ---------------------------------------------------------------------------------------

INF_ROW, INF_COL = 2, 40                 # +inf, alone in its block
NEG_INF_ROW, NEG_INF_COL = 7, 300        # -inf, alone in its block
INF_BLOCK_ROW, INF_BLOCK = 9, 2          # a block of 32 x +inf
NAN_BLOCK_ROW = 5                        # block 0 all NaN (positive quiet NaN: code 3, +1.5)
HUGE_ROW, HUGE_COL = 11, 200             # bf16 3e38: amax rounds up to 2**128, scale byte 254
B_LARGE = 4.0


def inputs_from(a, b, device):
    """The runner's input tuple for given A and B, built as reference.generate_input builds it."""
    codes, scales = formats.quantize_mxfp4(b)
    b_q = codes.view(torch.float4_e2m1fn_x2)
    b_scale_sh = formats.e8m0_shuffle(scales, pad_value=reference.SCALE_PAD_BYTE)
    return tuple(t.to(device) for t in (a, b, b_q, formats.shuffle_weight(b_q),
                                        b_scale_sh.view(torch.float8_e8m0fnu)))


def overflow_case():
    """(A, B, expected pattern) with pattern +1 / -1 where +inf / -inf, 0 where finite.

    Each overflowing A element has scale 2**127 and value 6.0 (1.5 for the NaNs, 2.0 for 3e38), so it gets
    about 2**127 or more after dequantization; B's element beside it is +-4 (never 0, which
    would make inf * 0 = NaN), so each product overflows with the sign of a times b, and no
    output has two overflowing products of opposite signs. The scaled MFMA's order (block sum
    of codes times both scales) overflows too: 6 * 4 * 2**127 > fp32 max.
    """
    gen = torch.Generator().manual_seed(23)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(N, K, generator=gen)
    signs = torch.where(torch.rand(N, 5, generator=gen) < 0.5, -1.0, 1.0)
    b[:, INF_COL] = B_LARGE * signs[:, 0]
    b[:, NEG_INF_COL] = B_LARGE * signs[:, 1]
    b[:, INF_BLOCK * 32:(INF_BLOCK + 1) * 32] = B_LARGE * signs[:, 2:3]   # one sign per row of B
    b[:, 0], b[:, 1:32] = B_LARGE * signs[:, 3], 0.0    # the NaN block meets one nonzero column
    b[:, HUGE_COL] = B_LARGE * signs[:, 4]
    a[INF_ROW, INF_COL] = math.inf
    a[NEG_INF_ROW, NEG_INF_COL] = -math.inf
    a[INF_BLOCK_ROW, INF_BLOCK * 32:(INF_BLOCK + 1) * 32] = math.inf
    a[NAN_BLOCK_ROW, :32] = math.nan
    a[HUGE_ROW, HUGE_COL] = 3e38
    pattern = torch.zeros(M, N)
    pattern[INF_ROW] = signs[:, 0]
    pattern[NEG_INF_ROW] = -signs[:, 1]
    pattern[INF_BLOCK_ROW] = signs[:, 2]
    pattern[NAN_BLOCK_ROW] = signs[:, 3]
    pattern[HUGE_ROW] = signs[:, 4]
    return a, b.to(torch.bfloat16), pattern


def pattern_of(out):
    out = out.float().cpu()
    assert not bool(out.isnan().any()), f"NaN at {out.isnan().nonzero()[:5].tolist()}"
    return torch.where(out == math.inf, 1.0, torch.where(out == -math.inf, -1.0, 0.0))


def test_overflowing_rows_have_the_designed_inf_pattern(device):
    a, b, pattern = overflow_case()
    assert 0 < int((pattern == 1).sum()) < 5 * N and 0 < int((pattern == -1).sum()) < 5 * N
    data = inputs_from(a, b, device)
    want = reference.ref_kernel(data)
    assert torch.equal(pattern_of(want), pattern)
    out = custom_kernel(data)
    assert torch.equal(pattern_of(out), pattern)
    ok, message = reference.check_implementation(data, out)    # the finite elements too
    assert ok, message


def test_the_overflow_case_hits_the_top_scale_byte():
    """Each designed overflow goes through scale byte 254 (2**127) with code 7, 15 (-6), 7, 3 (a quiet
    NaN: 1.5) and 4 (3e38 rounds to 2.0): the cases the pattern test is about."""
    a, _, _ = overflow_case()
    codes, scales = formats.quantize_mxfp4(a)
    codes = formats.unpack_nibbles(codes)
    for row, col, code in [(INF_ROW, INF_COL, 7), (NEG_INF_ROW, NEG_INF_COL, 15),
                           (INF_BLOCK_ROW, INF_BLOCK * 32, 7), (NAN_BLOCK_ROW, 0, 3),
                           (HUGE_ROW, HUGE_COL, 4)]:
        assert (int(scales[row, col // 32]), int(codes[row, col])) == (254, code), (row, col)


# ---------------------------------------------------------------------------------------
# Random shapes
# ---------------------------------------------------------------------------------------

def test_hypothesis_runs_derandomized():
    """conftest's profile: the same examples on every run, so a CI failure reproduces."""
    assert settings.default.derandomize and settings.default.database is None


WORK_PER_EXAMPLE = 4096     # m * n_tiles * k_tiles: bounds the interpreter time of an example


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 300), n_tiles=st.integers(1, 16), k_tiles=st.integers(1, 32),
       seed=st.integers(0, 2 ** 16))
def test_shapes_beyond_the_table(device, m, n_tiles, k_tiles, seed):
    """M in [1, 300], N a multiple of 64 up to 1024, K a multiple of 64 up to 2048, not all
    three large at once."""
    assume(m * n_tiles * k_tiles <= WORK_PER_EXAMPLE)
    data = reference.generate_input(m, 64 * n_tiles, 64 * k_tiles, seed, device=device)
    ok, message = reference.check_implementation(data, custom_kernel(data))
    assert ok, message
