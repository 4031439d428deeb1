"""The in-register quantizer (kernels.quantize) is bit-exact with kernels.formats, on both paths,
with and without the fast path and with each quantizer (the hardware one runs the Triton model
of the gfx950 instruction here)."""

import pytest
import torch
import triton
import triton.language as tl

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import (_cvt_f32_model, _cvt_model, _largest_outside,
                                       fast_path_blocks, quantize_kernel, quantize_rows)
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.gemm import GemmLauncher

# Block contexts: the value under test sits in blocks whose other elements set these amax
# values (0: the value alone), so that every bf16 pattern is quantized at several scales.
CONTEXTS = (0.0, 1.0, 1.75, 6.0, 2.0 ** -126, 2.0 ** -133, 1.5 * 2.0 ** 100, 3.3e38,
            float("inf"), float("nan"))
# The hardware quantizer runs here only as the interpreter's model of the instruction.
# (QUANTIZER, FAST_PATH): the software recipe with and without the uniform fast path (NVIDIA's
# GEMM has none), and the hardware quantizers (both forms), which always have it.
# On a GPU machine the hardware forms run in the interpreter too (conftest's `interpreter`
# mark): the asm runs on gfx950 only.
QUANTIZERS = [pytest.param(("software", True), id="software"),
              pytest.param(("software", False), id="software-without-fast-path"),
              pytest.param(("hardware", True), id="hardware", marks=pytest.mark.interpreter),
              pytest.param(("hardware-f32", True), id="hardware-f32",
                           marks=pytest.mark.interpreter)]
interpreter_only = pytest.mark.interpreter     # the model is the interpreter's


def run_kernel(x, block_m, quantizer):
    name, fast_path = quantizer
    rows, k = x.shape
    codes = torch.empty(rows, k // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(rows, k // 32, dtype=torch.uint8, device=x.device)
    quantize_kernel[(rows // block_m, 1)](x, codes, scales, rows, k, k, 1, BLOCK_M=block_m,
                                          BLOCK_K=k, QUANTIZER=name, FAST_PATH=fast_path)
    return codes, scales


def assert_like_formats(x, block_m, quantizer):
    codes, scales = run_kernel(x, block_m, quantizer)
    want_codes, want_scales = formats.quantize_mxfp4(x.cpu())
    assert torch.equal(scales.cpu(), want_scales)
    assert torch.equal(codes.cpu(), want_codes)


def all_bf16_patterns():
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def pad_rows(x, block_m, filler):
    pad = -x.shape[0] % block_m
    return torch.cat([x, torch.full((pad, x.shape[1]), filler, dtype=x.dtype)])


@pytest.mark.parametrize("quantizer", QUANTIZERS)
def test_every_bf16_pattern_in_every_context(device, quantizer):
    """Blocks grouped by path: tiles of fast blocks only (filled up with ones) and tiles of
    the rest (filled up with zeros), so that both paths see every pattern they can get."""
    values = all_bf16_patterns()
    blocks = torch.zeros(len(CONTEXTS), values.numel(), 32, dtype=torch.bfloat16)
    blocks[:, :, 0] = values            # low nibble of byte 0
    blocks[:, :, 1] = -values           # high nibble, opposite sign
    blocks[:, :, 2] = torch.tensor(CONTEXTS, dtype=torch.bfloat16)[:, None]
    blocks[:, :, 7] = 0.37 * blocks[:, :, 2]
    rows = blocks.view(-1, 32)
    fast = fast_path_blocks(rows)[:, 0]
    assert 0.3 < float(fast.float().mean()) < 0.9
    for group, filler in ((rows[fast], 1.0), (rows[~fast], 0.0)):
        assert_like_formats(pad_rows(group, 4096, filler).to(device), 4096, quantizer)


@pytest.mark.parametrize("quantizer", QUANTIZERS)
@pytest.mark.parametrize("pattern, scale, code_byte", [
    (0x7FC0, 254, 0x33),     # all quiet NaN: amax counts as +inf; the recipe's NaN code 3
    (0xFFC0, 254, 0xBB),     # negative NaN: code 3 with the sign
    (0x7F80, 254, 0x77),     # all +inf: u = 127, inf saturates to 6
    (0xFF80, 254, 0xFF),     # all -inf: -6
    (0x0000, 0, 0x00),       # all +0: byte 0 (u = -127), code 0
    (0x8000, 0, 0x88),       # all -0: code 8
])
def test_uniform_special_bf16_blocks(device, quantizer, pattern, scale, code_byte):
    x = torch.ones(16, 64, dtype=torch.bfloat16)
    x[3, :32] = torch.tensor(pattern, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    codes, scales = run_kernel(x.to(device), 16, quantizer)
    assert int(scales[3, 0]) == scale and bool((codes[3, :16] == code_byte).all())
    assert int(scales[3, 1]) == 125 and bool((codes[3, 16:] == 0x66).all())   # ones: u = -2, q = 4
    assert_like_formats(x.to(device), 16, quantizer)


@pytest.mark.parametrize("quantizer", QUANTIZERS)
def test_nan_blocks(device, quantizer):
    x = torch.zeros(16, 64)
    x[0, :32] = float("nan")                 # all NaN: amax counts as +inf, byte 254
    x[1, :32], x[1, 5] = float("nan"), 3.0   # NaN ignored: amax 3, u = -1
    x[2, 3] = -float("nan")
    for dtype in (torch.float32, torch.bfloat16):
        codes, scales = run_kernel(x.to(dtype).to(device), 16, quantizer)
        want_codes, want_scales = formats.quantize_mxfp4(x.to(dtype))
        assert int(scales[0, 0]) == 254 and int(scales[1, 0]) == 126
        assert torch.equal(scales.cpu(), want_scales)
        assert torch.equal(codes.cpu(), want_codes)


@pytest.mark.parametrize("quantizer", QUANTIZERS)
@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e4, 1e-38, 1e36])
def test_random_rows_several_blocks(device, quantizer, scale):
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(64, 512, generator=gen) * scale).to(torch.bfloat16).to(device)
    assert_like_formats(x, 16, quantizer)


@triton.jit
def _largest_outside_kernel(values_ptr, out_ptr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                            THREADS: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)[:, None]
    blocks = tl.arange(0, BLOCK_K // 32)[None, :]
    values = tl.load(values_ptr + rows * (BLOCK_K // 32) + blocks)
    tl.store(out_ptr, _largest_outside(values[:, :, None], BLOCK_M, BLOCK_K, THREADS, False))


@pytest.mark.parametrize("block_m, block_k, threads", [
    (16, 512, 256), (16, 1024, 256), (16, 256, 512), (32, 512, 512), (4, 512, 256),
    (16, 64, 256), (1, 512, 64), (16, 2048, 128)])
def test_the_fast_path_test_sees_every_block(device, block_m, block_k, threads):
    """The tile-wide maximum behind the fast-path test, split along the tile's layout, finds
    the largest block value wherever it sits (each position in turn)."""
    gen = torch.Generator().manual_seed(block_m * block_k + threads)
    for position in range(block_m * block_k // 32):
        values = torch.randint(0, 2 ** 31, (block_m * block_k // 32,), generator=gen,
                               dtype=torch.int64)
        values[position] = 2 ** 32 - 1 - position
        values = values.to(torch.uint32).to(device)
        out = torch.zeros(1, dtype=torch.uint32, device=device)
        _largest_outside_kernel[(1,)](values, out, BLOCK_M=block_m, BLOCK_K=block_k,
                                      THREADS=threads)
        assert int(out.cpu().to(torch.int64)) == 2 ** 32 - 1 - position


@pytest.mark.parametrize("quantizer", QUANTIZERS)
def test_kernel_and_torch_disagree_with_a_wrong_expectation(device, quantizer):
    """Guard against a comparison that cannot fail: a one-ulp change moves a tie's code."""
    x = torch.zeros(16, 32, dtype=torch.bfloat16)
    x[:, 0], x[:, 1] = 4.0, 1.25          # u = 0, so 1.25 is a tie that rounds down to 1.0
    codes, _ = run_kernel(x.to(device), 16, quantizer)
    assert int(codes[0, 0]) == (6 | 2 << 4)
    x[:, 1] = 1.2578125                   # the next bf16 above the tie
    codes, _ = run_kernel(x.to(device), 16, quantizer)
    assert int(codes[0, 0]) == (6 | 3 << 4)


@triton.jit
def _cvt_model_kernel(sources_ptr, scale_ptr, out_ptr, BLOCK: tl.constexpr, FORM: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    scale = tl.load(scale_ptr + offsets)
    if FORM == "bf16":
        p0, p1, p2, p3 = (tl.load(sources_ptr + offsets * 4 + j).to(tl.uint32, bitcast=True)
                          for j in range(4))
        word = _cvt_model(p0, p1, p2, p3, scale)
    else:
        x0, x1, x2, x3, x4, x5, x6, x7 = (tl.load(sources_ptr + offsets * 8 + i) for i in range(8))
        word = _cvt_f32_model(x0, x1, x2, x3, x4, x5, x6, x7, scale)
    tl.store(out_ptr + offsets, word.to(tl.int32, bitcast=True))


FORMS = ("bf16", "f32")
TORCH_MODELS = {"bf16": formats.cvt_scalef32_pk_fp4_bf16_model,
                "f32": formats.cvt_scalef32_pk_fp4_f32_model}


def model_words(pairs_bf16, scale_byte, form):
    """bf16 [n, 4, 2] -> the Triton model's words for those pairs (byte j from pair j), scale
    2^(byte - 127), by the model of the instruction's bf16 or f32 form."""
    n = pairs_bf16.shape[0]
    if form == "bf16":
        bits = pairs_bf16.view(torch.int16).to(torch.int64) & 0xFFFF
        sources = (bits[..., 0] | (bits[..., 1] << 16)).to(torch.int32).flatten()
    else:
        sources = pairs_bf16.float().flatten()
    scale = torch.full((n,), scale_byte << 23, dtype=torch.int32).view(torch.float32)
    out = torch.empty(n, dtype=torch.int32)
    _cvt_model_kernel[(1,)](sources, scale, out, BLOCK=n, FORM=form)
    return out.to(torch.int64) & 0xFFFFFFFF


@pytest.mark.parametrize("form", FORMS)
@interpreter_only
def test_triton_model_of_the_instruction_matches_the_torch_model(form):
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(64, 4, 2, generator=gen) * 3).to(torch.bfloat16)
    x[0, 0] = torch.tensor([1.25, -2.5])              # ties
    x[1, 1] = torch.tensor([-0.0, 1e-40])             # signed zero, denormal: zero codes
    words = model_words(x, 127, form)
    scale = torch.full((64 * 4,), 127 << 23, dtype=torch.int32).view(torch.float32)
    sources = x if form == "bf16" else x.float()
    want = TORCH_MODELS[form](sources[..., 0].flatten(), sources[..., 1].flatten(), scale)
    got = torch.stack([(words >> (8 * j)) & 0xFF for j in range(4)], dim=-1).flatten()
    assert torch.equal(got.to(torch.uint8), want)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("value, byte", [(float("nan"), 127), (float("inf"), 127),
                                         (1e-40, 2), (1.0, 0)])
@interpreter_only
def test_triton_model_fails_loudly_on_undocumented_inputs(value, byte, form):
    x = torch.ones(16, 4, 2, dtype=torch.bfloat16)
    x[7, 2, 1] = value
    with pytest.raises(Exception, match="undocumented"):    # the interpreter wraps the error
        model_words(x, byte, form)


def test_an_unknown_quantizer_name_is_refused_in_one_line():
    x = torch.ones(16, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="quantizer must be one of hardware, .*'hw'"):
        quantize_rows(x, "hw")
    with pytest.raises(ValueError, match="quantizer must be one of"):
        GemmLauncher(GemmConfig(16, 32, 256), "interpreter", 16, 32, 256, (256, 1), "cpu",
                     quantizer=True)
