"""The in-register quantizer (kernels.quantize) is bit-exact with kernels.formats."""

import pytest
import torch

from kernels import formats
from kernels.quantize import quantize_kernel

# Block contexts: the value under test sits in blocks whose other elements set these amax
# values (0: the value alone), so that every bf16 pattern is quantized at several scales.
CONTEXTS = (0.0, 1.0, 1.75, 6.0, 2.0 ** -126, 2.0 ** -133, 1.5 * 2.0 ** 100, 3.3e38,
            float("inf"), float("nan"))


def run_kernel(x, block_m):
    rows, k = x.shape
    codes = torch.empty(rows, k // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(rows, k // 32, dtype=torch.uint8, device=x.device)
    quantize_kernel[(rows // block_m, 1)](x, codes, scales, rows, k, k, BLOCK_M=block_m,
                                          BLOCK_K=k)
    return codes, scales


def all_bf16_patterns():
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def test_every_bf16_pattern_in_every_context(device):
    values = all_bf16_patterns()
    blocks = torch.zeros(len(CONTEXTS), values.numel(), 32, dtype=torch.bfloat16)
    blocks[:, :, 0] = values            # low nibble of byte 0
    blocks[:, :, 1] = -values           # high nibble, opposite sign
    blocks[:, :, 2] = torch.tensor(CONTEXTS, dtype=torch.bfloat16)[:, None]
    blocks[:, :, 7] = 0.37 * blocks[:, :, 2]
    x = blocks.view(-1, 32).to(device)
    codes, scales = run_kernel(x, block_m=4096)
    want_codes, want_scales = formats.quantize_mxfp4(x.cpu())
    assert torch.equal(scales.cpu(), want_scales)
    assert torch.equal(codes.cpu(), want_codes)


def test_nan_blocks(device):
    x = torch.zeros(16, 64)
    x[0, :32] = float("nan")                 # all NaN: amax counts as +inf, byte 254
    x[1, :32], x[1, 5] = float("nan"), 3.0   # NaN ignored: amax 3, u = -1
    x[2, 3] = -float("nan")
    codes, scales = run_kernel(x.to(device), block_m=16)
    want_codes, want_scales = formats.quantize_mxfp4(x)
    assert want_scales[0, 0] == 254 and want_scales[1, 0] == 126
    assert torch.equal(scales.cpu(), want_scales)
    assert torch.equal(codes.cpu(), want_codes)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e4, 1e-38])
def test_random_rows_several_blocks(device, scale):
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(64, 512, generator=gen) * scale).to(torch.bfloat16).to(device)
    codes, scales = run_kernel(x, block_m=16)
    want_codes, want_scales = formats.quantize_mxfp4(x.cpu())
    assert torch.equal(scales.cpu(), want_scales)
    assert torch.equal(codes.cpu(), want_codes)


def test_kernel_and_torch_disagree_with_a_wrong_expectation(device):
    """Guard against a comparison that cannot fail: a one-ulp change moves a tie's code."""
    x = torch.zeros(16, 32, dtype=torch.float32)
    x[:, 0], x[:, 1] = 4.0, 1.25          # u = 0, so 1.25 is a tie that rounds down to 1.0
    codes, _ = run_kernel(x.to(device), block_m=16)
    assert int(codes[0, 0]) == (6 | 2 << 4)
    x[:, 1] = torch.nextafter(torch.tensor(1.25), torch.tensor(2.0))
    codes, _ = run_kernel(x.to(device), block_m=16)
    assert int(codes[0, 0]) == (6 | 3 << 4)
