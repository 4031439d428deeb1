"""An A block of 32 NaNs: what the quantizer, the local reference, the order of the runner's
GEMM and our kernel give for its row (docs/formats.md, "A block that is all NaN").

The quantizer (aiter's, and kernels.formats) gives such a block scale byte 254 (2^127) and
codes 2 or 3 (1.0 or 1.5, the NaN's sign): values of about 2^127. What a row then gets depends
on where the scales are applied:
- per block, after the block's code products (the gfx950 scaled MFMA that aiter's gemm_a4w4
  and our tl.dot_scaled use there): no NaN; each column is ±inf or a huge finite value;
- per element, before the products (the local reference's fp32 matmul; tl.dot_scaled's
  emulation in the interpreter): products of about 2^127 overflow one by one.
  The reference's fp32 matmul sums them into ±inf (no NaN on the CPU); the emulation's dot
  meets +inf and -inf products inside a block and gives NaN.
Every other row agrees within the runner's tolerance.
"""

import math

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import current_target, interpreting
from mxfp4_mm.submission import custom_kernel

M, N, K = 16, 256, 512
NAN_ROW, NAN_BLOCK = 5, 2


@pytest.fixture(scope="module")
def case(device):
    data = reference.generate_input(M, N, K, seed=5, device=device)
    a = data[0].clone()
    a[NAN_ROW, NAN_BLOCK * 32:(NAN_BLOCK + 1) * 32] = math.nan
    data = (a,) + data[1:]
    return data, custom_kernel(data).float().cpu(), reference.ref_kernel(data).float().cpu()


@pytest.fixture(scope="module")
def device():        # conftest's choice, at module scope for `case`
    return "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"


def scales_after_block_products(a, b):
    """The scaled MFMA's order: per 32-block the exact dot of the element values, then times
    both block scales (fp32), then the fp32 sum over blocks; bf16 at the end."""
    a_codes, a_scales = formats.quantize_mxfp4(a.float().cpu())
    b_codes, b_scales = formats.quantize_mxfp4(b.float().cpu())
    blocks = a.shape[1] // formats.MX_BLOCK
    a_elements = formats.e2m1_to_f32(a_codes).view(a.shape[0], blocks, formats.MX_BLOCK)
    b_elements = formats.e2m1_to_f32(b_codes).view(b.shape[0], blocks, formats.MX_BLOCK)
    dots = torch.einsum("mbk,nbk->mnb", a_elements.double(), b_elements.double())
    scale = (formats.e8m0_to_f32(a_scales[:, :blocks].contiguous())[:, None, :].double()
             * formats.e8m0_to_f32(b_scales[:, :blocks].contiguous())[None, :, :].double())
    return (dots * scale).float().sum(-1).to(torch.bfloat16).float()


def counts(row):
    return {"nan": int(row.isnan().sum()), "inf": int(row.isinf().sum()),
            "finite": int(row.isfinite().sum())}


def test_the_quantizer_gives_scale_254_and_codes_2_or_3(case):
    data, _, _ = case
    codes, scales = formats.quantize_mxfp4(data[0].float().cpu())
    assert int(scales[NAN_ROW, NAN_BLOCK]) == 254
    block = formats.unpack_nibbles(codes)[NAN_ROW, NAN_BLOCK * 32:(NAN_BLOCK + 1) * 32]
    assert set(block.tolist()) <= {2, 3, 10, 11}       # 1.0 or 1.5, with the NaN's sign


def test_every_other_row_agrees_with_the_reference(case):
    _, out, want = case
    others = [r for r in range(M) if r != NAN_ROW]
    ok, message = reference.compare(out[others].bfloat16(), want[others].bfloat16())
    assert ok, message


def test_the_local_reference_row_is_all_infinite(case, device):
    if device != "cpu" or reference.aiter is not None:
        pytest.skip("measured with torch's fp32 matmul on the CPU; a GPU BLAS (or aiter's "
                    "gemm_a4w4) sums in another order")
    _, _, want = case
    assert counts(want[NAN_ROW]) == {"nan": 0, "inf": N, "finite": 0}


def test_scales_after_the_block_products_give_no_nan(case):
    data, _, want = case
    model = scales_after_block_products(data[0], data[1])
    row = counts(model[NAN_ROW])
    assert row["nan"] == 0 and row["finite"] > 0 and row["inf"] > 0
    others = [r for r in range(M) if r != NAN_ROW]
    ok, message = reference.compare(model[others].bfloat16(), want[others].bfloat16())
    assert ok, message


@pytest.mark.interpreter
def test_the_interpreters_kernel_row_is_nan_or_infinite(case):
    """The emulation dequantizes before multiplying: +inf and -inf products meet."""
    _, out, _ = case
    row = counts(out[NAN_ROW])
    assert row["nan"] > 0 and row["finite"] == 0


def test_the_scaled_mfmas_kernel_row_has_no_nan(case, device):
    """The native scaled MFMA applies the scales after each block's products: no NaN. Not yet
    run on an AMD GPU; this is the prediction the first run will test."""
    if current_target(device)[0] != "hip":
        pytest.skip("needs an AMD GPU (gfx950's scaled MFMA)")
    _, out, _ = case
    assert counts(out[NAN_ROW])["nan"] == 0
