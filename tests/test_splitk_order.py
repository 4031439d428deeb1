"""The split-K sum has one order (kernels.splitk_reduce.sum_partials: fp32, (((p0 + p1) + p2)
+ ...)): the reduce kernel ("kernel") and the GEMM's last program ("last_program") give the
same bytes, that order's, on inputs whose sum depends on the order."""

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.gemm import GemmLauncher

M, N, BLOCK_K = 16, 32, 256
HUGE = 2.0 ** 30          # 1.0 next to it is lost to fp32 rounding
REDUCES = ("kernel", "last_program")


def split_values(splits: int) -> list:
    """The partial of each split, the same for every output: 1.0, 2**30, -2**30, then 1.0s."""
    return ([1.0, HUGE, -HUGE] + [1.0] * splits)[:splits]


def fp32_sum(values) -> float:
    total = torch.tensor(values[0], dtype=torch.float32)
    for value in values[1:]:
        total = total + torch.tensor(value, dtype=torch.float32)
    return float(total)


def order_sensitive_inputs(splits: int, device):
    """A all ones; row n of B holds split s's value at one column of split s, zeros elsewhere,
    so that each split's partial is exactly its value (powers of two quantize exactly)."""
    k = splits * BLOCK_K
    a = torch.ones(M, k, dtype=torch.bfloat16)
    b = torch.zeros(N, k)
    for s, value in enumerate(split_values(splits)):
        b[:, s * BLOCK_K + 7] = value
    codes, scales = formats.quantize_mxfp4(b.to(torch.bfloat16))
    b_shuffle = formats.shuffle_weight(codes.view(torch.float4_e2m1fn_x2))
    b_scale_sh = formats.e8m0_shuffle(scales, pad_value=reference.SCALE_PAD_BYTE)
    return a.to(device), b_shuffle.to(device), b_scale_sh.view(torch.float8_e8m0fnu).to(device)


def reduced(config: GemmConfig, device, m, n, k, a, b_shuffle, b_scale_sh):
    backend = "interpreter" if device == "cpu" else "cuda"
    launcher = GemmLauncher(config, backend, m, n, k, (k, 1), device)
    assert launcher.splits == config.split_k
    return launcher(a, b_shuffle, b_scale_sh)


@pytest.mark.parametrize("splits", [2, 7, 14])
def test_both_reduces_give_the_documented_orders_bytes(splits, device):
    values = split_values(splits)
    expected = torch.full((M, N), fp32_sum(values)).to(torch.bfloat16)
    if splits > 2:   # the inputs tell orders apart: summed from the last split, they give another
        assert fp32_sum(values) != fp32_sum(values[::-1])
    inputs = order_sensitive_inputs(splits, device)
    for reduce in REDUCES:
        config = GemmConfig(M, N, BLOCK_K, split_k=splits, split_k_reduce=reduce)
        out = reduced(config, device, M, N, splits * BLOCK_K, *inputs).cpu()
        assert torch.equal(out.view(torch.int16), expected.view(torch.int16)), (reduce, out[0, :4])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled kernels need a GPU")
@pytest.mark.parametrize("splits", [2, 7, 14])
def test_compiled_reduces_give_the_same_bytes_on_a_table_shape(splits):
    """Random inputs of a split table shape (16, 2112, 7168): the two reduces, compiled, agree
    to the byte."""
    m, n, k = 16, 2112, 7168
    a, _, _, b_shuffle, b_scale_sh = reference.generate_input(m, n, k, seed=3, device="cuda")
    outs = [reduced(GemmConfig(16, 128, 512, split_k=splits, split_k_reduce=reduce), "cuda",
                    m, n, k, a, b_shuffle, b_scale_sh) for reduce in REDUCES]
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
