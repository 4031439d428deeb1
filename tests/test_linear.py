"""MXFP4Linear and formats.prepare_weight: the reference's weight bytes, the reference's recipe
within the task's tolerance, the bias, leading dimensions, and one-line refusals."""

import pytest
import torch

from mxfp4_mm import launchers  # noqa: F401  (registers the op)
from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import prepared
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.submission import custom_kernel


def _linear(n, k, bias, device, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(k, n, bias=bias, dtype=torch.bfloat16, device=device)


@pytest.mark.parametrize("n, k", [(96, 512), (48, 192), (256, 64)])
def test_prepare_weight_gives_generate_inputs_bytes(n, k, device):
    _, b, _, b_shuffle, b_scale_sh = reference.generate_input(4, n, k, seed=7, device=device)
    got_shuffle, got_scales = formats.prepare_weight(b)
    assert got_shuffle.dtype == got_scales.dtype == torch.uint8
    assert torch.equal(got_shuffle, b_shuffle.view(torch.uint8))
    want_scales = b_scale_sh.view(torch.uint8)
    if reference.aiter is not None:      # aiter leaves the scale padding uninitialized
        rows, cols = n, k // formats.MX_BLOCK
        got_scales = formats.e8m0_unshuffle(got_scales, rows, cols)
        want_scales = formats.e8m0_unshuffle(want_scales, rows, cols)
    assert torch.equal(got_scales, want_scales)


@pytest.mark.parametrize("weight, message", [
    (torch.zeros(32, 96, dtype=torch.bfloat16), "K % 64 == 0"),
    (torch.zeros(40, 128, dtype=torch.bfloat16), "N % 16 == 0"),
    (torch.zeros(32, 128), "bfloat16"),
])
def test_prepare_weight_refuses_in_one_line(weight, message):
    with pytest.raises((TypeError, ValueError), match=message) as error:
        formats.prepare_weight(weight)
    assert "\n" not in str(error.value)


def test_from_linear_follows_the_reference_recipe_with_the_bias(device):
    linear = _linear(64, 256, True, device)
    layer = MXFP4Linear.from_linear(linear)
    x = torch.randn(5, 256, dtype=torch.bfloat16, device=device)
    expected = reference.reference_output(x, *formats.quantize_mxfp4(linear.weight.detach()))
    ok, message = reference.compare(layer(x), expected + linear.bias.detach())
    assert ok, message


def test_the_layer_is_the_op_plus_the_bias_over_any_leading_dims(device):
    linear = _linear(64, 256, True, device, seed=1)
    layer = MXFP4Linear.from_linear(linear)
    x = torch.randn(2, 3, 256, dtype=torch.bfloat16, device=device)
    y = layer(x)
    flat = torch.ops.mxfp4_mm.gemm(x.reshape(6, 256), *formats.prepare_weight(linear.weight))
    assert y.shape == (2, 3, 64) and y.dtype == torch.bfloat16
    assert torch.equal(y.reshape(6, 64), flat + linear.bias.detach())
    assert layer(x[:0]).shape == (0, 3, 64)


def test_an_fp32_layer_gives_the_ops_fp32_sums_plus_the_bias_in_fp32(device):
    """out_dtype float32 (a row-parallel shard's): the op's fp32 output, the bias added in fp32,
    on whichever op the layer takes on the device."""
    linear = _linear(64, 256, True, device, seed=2)
    layer = MXFP4Linear.from_linear(linear)
    x = torch.randn(2, 3, 256, dtype=torch.bfloat16, device=device)
    layer.out_dtype = torch.float32
    y = layer(x)
    if layer.hopper_weight is not None:      # the prepared path's op, up to its M
        flat = prepared.gemm_prepared(x.reshape(6, 256), layer.hopper_weight, torch.float32)
    else:
        flat = torch.ops.mxfp4_mm.gemm(x.reshape(6, 256), *formats.prepare_weight(linear.weight),
                                       torch.float32)
    assert y.shape == (2, 3, 64) and y.dtype == torch.float32
    assert torch.equal(y.reshape(6, 64), flat + linear.bias.detach().float())
    layer.out_dtype = torch.float16
    with pytest.raises(ValueError, match="expected out_dtype torch.bfloat16 or torch.float32, "
                                         "got torch.float16$"):
        layer(x)


def test_from_mxfp4_gives_custom_kernels_bytes(device):
    data = reference.generate_input(7, 96, 512, seed=9, device=device)
    codes, scales = formats.quantize_mxfp4(data[1])
    layer = MXFP4Linear.from_mxfp4(codes, scales)
    assert layer.bias is None and (layer.in_features, layer.out_features) == (512, 96)
    held = (("hopper_values", "hopper_scales") if prepared.serves(device)
            else ("b_shuffle", "b_scale_sh"))
    assert set(dict(layer.named_buffers())) == set(held)
    assert torch.equal(layer(data[0]), custom_kernel(data))


def test_the_constructor_takes_the_ops_operands(device):
    data = reference.generate_input(3, 64, 256, seed=10, device=device)
    layer = MXFP4Linear(data[3], data[4])
    assert torch.equal(layer(data[0]), custom_kernel(data))


@pytest.mark.parametrize("make, message", [
    (lambda: MXFP4Linear.from_linear(torch.nn.Linear(100, 32, dtype=torch.bfloat16)),
     "K % 64 == 0 .*got N=32, K=100"),
    (lambda: MXFP4Linear.from_linear(torch.nn.Linear(128, 32)),
     "expected a bfloat16 weight, got torch.float32"),
    (lambda: MXFP4Linear.from_linear(torch.nn.Linear(128, 40, dtype=torch.bfloat16)),
     "N % 16 == 0"),
    (lambda: MXFP4Linear.from_linear(torch.nn.Conv2d(3, 16, 3, dtype=torch.bfloat16)),
     "expected a torch.nn.Linear, got torch.nn.modules.conv.Conv2d"),
    (lambda: MXFP4Linear.from_mxfp4(torch.zeros(32, 64, dtype=torch.uint8),
                                    torch.zeros(32, 2, dtype=torch.uint8)),
     r"expected scales of shape \(32, 4\)"),
    (lambda: MXFP4Linear(torch.zeros(32, 64, dtype=torch.uint8),
                         torch.zeros(256, 4, dtype=torch.uint8)),
     "B_scale_sh: expected shape"),
    (lambda: MXFP4Linear(*formats.prepare_weight(torch.zeros(32, 128, dtype=torch.bfloat16)),
                         bias=torch.zeros(31)), r"expected a bias of shape \(32,\), got \(31,\)"),
    (lambda: MXFP4Linear(*formats.prepare_weight(torch.zeros(32, 128, dtype=torch.bfloat16)),
                         bias=[0.0]), r"expected a bias of shape \(32,\), got \[0.0\]"),
    (lambda: MXFP4Linear.from_linear(torch.nn.Linear(128, 32, dtype=torch.bfloat16))(
        torch.zeros(2, 128)), "expected a bfloat16 input, got torch.float32"),
    (lambda: MXFP4Linear.from_linear(torch.nn.Linear(128, 32, dtype=torch.bfloat16))(
        torch.zeros(2, 64, dtype=torch.bfloat16)), "expected an input of last dim 128"),
])
def test_the_layer_refuses_in_one_line(make, message):
    with pytest.raises((TypeError, ValueError), match=message) as error:
        make()
    assert "\n" not in str(error.value)


def test_a_compiled_layer_gives_the_eager_bytes(device):
    layer = MXFP4Linear.from_linear(_linear(64, 256, True, device, seed=2))
    x = torch.randn(4, 256, dtype=torch.bfloat16, device=device)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(x), layer(x))
