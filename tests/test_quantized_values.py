"""kernels.quantized_values: A's MXFP4 values in bf16 in one launch are formats' quantization
dequantized, bit for bit (formats.quantize_mxfp4 then formats.dequantize_mxfp4, in bf16), for
every bf16 pattern in blocks of several scales, special blocks (NaN, inf, zeros), a strided A,
M past a tile and K whose tile is smaller than the largest."""

import pytest
import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantized_values import (VALUES_BLOCK_M, quantized_values_kernel,
                                               quantized_values_launch)

from test_dequant import same_values
from test_quantize_kernel import CONTEXTS, QUANTIZERS, all_bf16_patterns


def run_kernel(x, quantizer=("software", False), block_m=None):
    """The launch quantized_values_launch gives, or with block_m a tile of that many rows and
    all of K (fewer interpreted programs)."""
    name, fast_path = quantizer
    out = torch.full(x.shape, float("nan"), dtype=torch.bfloat16, device=x.device)
    grid, arguments = quantized_values_launch(x, out, name, fast_path, 256)
    if block_m is not None:
        rows, k = x.shape
        grid = (rows // block_m, 1, 1)
        arguments = arguments[:7] + (block_m, k) + arguments[9:]
    quantized_values_kernel[grid](*arguments)
    return out


def formats_values(x):
    return formats.dequantize_mxfp4(*formats.quantize_mxfp4(x.cpu()))


@pytest.mark.parametrize("quantizer", QUANTIZERS)
def test_every_bf16_pattern_in_every_context(device, quantizer):
    values = all_bf16_patterns()
    blocks = torch.zeros(len(CONTEXTS), values.numel(), 32, dtype=torch.bfloat16)
    blocks[:, :, 0] = values
    blocks[:, :, 1] = -values
    blocks[:, :, 2] = torch.tensor(CONTEXTS, dtype=torch.bfloat16)[:, None]
    blocks[:, :, 7] = 0.37 * blocks[:, :, 2]
    x = blocks.reshape(-1, 256)        # eight blocks a row
    got = run_kernel(x.to(device), quantizer, block_m=4096).cpu()   # 20 programs
    assert same_values(got, formats_values(x))


@pytest.mark.parametrize("pattern", [0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001])
def test_uniform_special_blocks(device, pattern):
    x = torch.ones(3, 64, dtype=torch.bfloat16)
    x[1, :32] = torch.tensor(pattern, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    assert same_values(run_kernel(x.to(device)).cpu(), formats_values(x))


@pytest.mark.parametrize("m, k", [(1, 64), (VALUES_BLOCK_M + 5, 320), (70, 512)])
def test_a_strided_a_past_a_tile_with_the_tile_that_divides_k(device, m, k):
    """K = 320 takes 64-column tiles; rows past M are not stored (out keeps its NaN there is
    none: every row is written exactly once); A is a column slice of a wider tensor."""
    wide = torch.randn(m, k + 64, generator=torch.Generator().manual_seed(m + k)) * 3
    x = wide.to(torch.bfloat16)[:, 32:32 + k]
    assert x.stride() == (k + 64, 1)
    got = run_kernel(x.to(device)).cpu()
    assert same_values(got, formats_values(x.contiguous()))


def test_a_quantizer_outside_the_list_is_refused_in_one_line():
    x = torch.ones(1, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="quantizer must be one of") as refused:
        quantized_values_launch(x, torch.empty_like(x), "exact", False, 256)
    assert "\n" not in str(refused.value)
