"""launchers.proof's own strictness and inputs, decided by what each decision changes.

Decisions of launchers.proof:
- the tolerance: an element passes within ATOL + RTOL * |expected| (both 1e-2, the runner's),
  checked just inside and just outside at expected 0, 1 and 100, and for negative values, and
  through prove: an output 1.5 or 1.9 tolerances off fails, half a tolerance passes;
- non-finite values: NaN passes only where NaN is expected; +-inf only where the same inf is;
  a shape mismatch fails before any element is compared;
- what a failure says: how many elements, the worst first, at most _WORST_SHOWN of them;
- the reference: dequant(quantize(A)) @ dequant(B)^T in fp32, rounded to bf16 once;
- the inputs: a fixed seed (the same cases every time, another seed others), each group of row
  kinds cycled over M rows, B codes never 0, B scales 2**-5..2**-2 except K block 0 at 2**0 or
  2**1, one inf per inf row in column _INF_COLUMN, whose exact product with every weight row
  overflows fp32, A in the caller's strides on the caller's device;
- what runs: the standard launch of every case against the reference, the direct launch (only
  when there is one) byte for byte against it, and the first case alone `repeats` more times,
  with the launch that serves.
"""

import pytest
import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import proof


def check(got, want):
    return proof.compare(torch.tensor([got]), torch.tensor([want]))[0]


@pytest.mark.parametrize("want, slack", [(0.0, 0.01), (1.0, 0.02), (100.0, 1.01), (-3.0, 0.04)])
def test_the_tolerance_is_atol_plus_rtol_times_the_expected_value(want, slack):
    assert check(want + slack * 0.99, want) and check(want - slack * 0.99, want)
    assert not check(want + slack * 1.01, want) and not check(want - slack * 1.01, want)


@pytest.mark.parametrize("got, want, ok", [
    (float("nan"), float("nan"), True), (float("nan"), 1.0, False), (1.0, float("nan"), False),
    (float("inf"), float("inf"), True), (-float("inf"), -float("inf"), True),
    (-float("inf"), float("inf"), False), (1e30, float("inf"), False),
    (float("inf"), 1e30, False), (float("nan"), float("inf"), False)])
def test_non_finite_values_pass_only_where_the_same_is_expected(got, want, ok):
    assert check(got, want) is ok


def test_a_shape_mismatch_fails_and_says_both_shapes():
    ok, message = proof.compare(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not ok and "expected (3, 2), got (2, 3)" in message


def test_the_message_counts_the_bad_elements_and_shows_the_worst_first():
    want = torch.zeros(4, 8)
    got = want.clone()
    got[0, 1], got[2, 3], got[3, 7] = 0.5, 4.0, float("nan")
    for i in range(5):
        got[1, i] = 0.1 + i / 100
    ok, message = proof.compare(got, want)
    assert not ok and message.startswith("8 of 32 elements mismatch")
    shown = message.split("worst: ")[1].split("; ")
    assert len(shown) == 5
    assert shown[0].startswith("[3, 7]: got nan") and shown[1].startswith("[2, 3]: got 4")
    assert shown[2].startswith("[0, 1]: got 0.5")
    assert proof.compare(got[:1, :2], want[:1, :2])[1].count("got") == 1


def test_the_reference_rounds_the_fp32_sum_to_bf16_once():
    a = torch.tensor([[1.0] * 32 + [0.0] * 32]).to(torch.bfloat16)
    b_codes = formats.pack_nibbles(torch.full((1, 64), 2, dtype=torch.uint8))   # 1.0 each
    b_scales = torch.tensor([[127, 127]], dtype=torch.uint8)
    out = proof.reference_output(a, b_codes, b_scales)
    assert out.dtype == torch.bfloat16 and out.item() == 32.0


def same(tensor):
    """Bits to compare (NaN == NaN)."""
    return tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor


def test_the_cases_are_fixed_by_the_seed():
    first = proof.proof_cases(4, 32, 256, (256, 1), "cpu")
    again = proof.proof_cases(4, 32, 256, (256, 1), "cpu", seed=0)
    other = proof.proof_cases(4, 32, 256, (256, 1), "cpu", seed=1)
    assert all(torch.equal(same(x), same(y)) for one, two in zip(first, again)
               for x, y in zip(one, two))
    assert not torch.equal(first[0][1], other[0][1])


def test_the_weights_have_no_zero_code_and_small_scales_but_in_block_0():
    (_, b_shuffle, b_scale_sh, b_codes, b_scales), *_ = proof.proof_cases(2, 64, 512, (512, 1),
                                                                          "cpu")
    codes = formats.unpack_nibbles(b_codes)
    assert int(codes.min()) >= 1 and int(codes.max()) <= 15 and not bool((codes == 8).any())
    assert set(b_scales[:, 0].unique().tolist()) == {127, 128}
    assert set(b_scales[:, 1:].unique().tolist()) == {122, 123, 124, 125}
    assert torch.equal(b_shuffle, formats.shuffle_weight(b_codes))
    assert torch.equal(b_scale_sh, formats.e8m0_shuffle(b_scales, pad_value=0xFF))


def test_each_inf_row_holds_one_inf_in_its_column():
    cases = proof.proof_cases(len(proof.SPECIAL_KINDS), 32, 256, (256, 1), "cpu")
    a = cases[-1][0].float()
    inf_row = a[proof.SPECIAL_KINDS.index("inf")]
    assert torch.isinf(inf_row).sum() == 1 and torch.isinf(inf_row[proof._INF_COLUMN])
    nan_row = a[proof.SPECIAL_KINDS.index("nan")]
    assert torch.isnan(nan_row).any() and not torch.isinf(nan_row).any()
    zeros = a[proof.SPECIAL_KINDS.index("signed_zeros")]
    assert (zeros == 0).all() and torch.signbit(zeros).any() and (~torch.signbit(zeros)).any()


def test_the_cases_take_the_callers_strides_and_device():
    cases = proof.proof_cases(4, 32, 256, (1, 4), "meta")
    assert all(case[0].stride() == (1, 4) and case[0].device.type == "meta" for case in cases)
    assert all(t.device.type == "meta" for case in cases for t in case)


class Recorder:
    """Serves the reference output and records the `direct` of each call."""

    def __init__(self):
        self.calls = []

    def __call__(self, a, b_shuffle, b_scale_sh, direct):
        self.calls.append((a.data_ptr(), direct))
        m, k = a.shape
        codes = formats.unshuffle_weight(b_shuffle)
        scales = formats.e8m0_unshuffle(b_scale_sh, codes.shape[0], k // 32)
        return proof.reference_output(a, codes, scales)


@pytest.mark.parametrize("has_direct", [False, True])
def test_what_runs_for_each_case(has_direct):
    cases = proof.proof_cases(4, 32, 256, (256, 1), "cpu")
    run = Recorder()
    proof.prove(run, cases, has_direct, repeats=3)
    first, second = (case[0].data_ptr() for case in cases)
    per_case = [(False,), (False, True)][has_direct]
    want = [(first, d) for d in per_case] + [(first, has_direct)] * 3 + \
        [(second, d) for d in per_case]
    assert run.calls == want


def test_a_wrong_standard_launch_fails_even_when_the_direct_one_is_right():
    cases = proof.proof_cases(4, 32, 256, (256, 1), "cpu")
    right = Recorder()

    def run(a, b_shuffle, b_scale_sh, direct):
        out = right(a, b_shuffle, b_scale_sh, direct)
        return out if direct else out * 1.05
    with pytest.raises(proof.ProofFailure, match="wrong output on proof case 1 of 2"):
        proof.prove(run, cases, has_direct=True)


def test_the_inf_column_overflows_fp32_against_every_weight_row():
    """The inf of an inf row quantizes to 6 * 2**127; times the weight in its column (code
    times block scale) the exact product must exceed fp32's largest value for every output
    column, so that it is inf whatever order a backend scales and sums in (the reference
    dequantizes A first, which gives inf alone: it cannot tell)."""
    a, _, _, b_codes, b_scales = proof.proof_cases(len(proof.SPECIAL_KINDS), 64, 512, (512, 1),
                                                   "cpu")[-1]
    row, column = proof.SPECIAL_KINDS.index("inf"), proof._INF_COLUMN

    def exact(codes, scales):
        block_scale = scales[:, column // formats.MX_BLOCK].double() - 127
        return formats.e2m1_to_f32(codes)[:, column].double() * 2.0 ** block_scale
    a_value = exact(*formats.quantize_mxfp4(a[row:row + 1]))
    assert torch.isinf(a[row, column]) and a_value.abs().item() == 6 * 2.0 ** 127
    assert ((a_value * exact(b_codes, b_scales)).abs() > torch.finfo(torch.float32).max).all()


@pytest.mark.parametrize("times, fails", [(0.5, False), (1.5, True), (1.9, True)])
def test_an_output_off_by_one_to_two_tolerances_fails_its_proof(times, fails):
    """Every finite element moved away from the reference by `times` the runner's tolerance
    (ATOL + RTOL * |expected|), rounded to bf16."""
    cases = proof.proof_cases(4, 32, 256, (256, 1), "cpu")
    right = Recorder()

    def run(a, b_shuffle, b_scale_sh, direct):
        out = right(a, b_shuffle, b_scale_sh, direct).float()
        moved = out + times * (proof.ATOL + proof.RTOL * out.abs())
        return torch.where(torch.isfinite(out), moved, out).to(torch.bfloat16)
    if fails:
        with pytest.raises(proof.ProofFailure, match="wrong output on proof case 1 of 2"):
            proof.prove(run, cases, has_direct=False)
    else:
        proof.prove(run, cases, has_direct=False)
