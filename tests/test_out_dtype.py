"""The ops' fp32 output (out_dtype=torch.float32, launchers.inputs.OUT_DTYPES): the GEMM's fp32
sums unrounded, what a row-parallel rank all-reduces (launchers.tensor_parallel).

On `device` (the interpreter on a CPU), for each path (the fused GEMM whole, with split-K
summed by a second launch and by the last program, the hopper path, the prepared path, the
dequant path): the fp32 output is within the task's tolerance of the reference, within fp32
rounding of the reference's unrounded sums and not bf16 values; where the path rounds once (all
but dequant, whose fp32 matmul may sum in another order than its bf16 one) the bf16 output is
the fp32 output rounded as the kernels round, bit for bit. The op: out_dtype None and
torch.bfloat16 give custom_kernel's bytes; a bad out_dtype is refused in one line; M = 0;
the fake's dtype; a compiled caller.
"""

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import current_target, dequant, interpreting, mxfp4_gemm, prepared
from mxfp4_mm.launchers.gemm import GemmLauncher
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GemmConfig
from mxfp4_mm.launchers.proof import compare
from mxfp4_mm.submission import custom_kernel

SHAPE = (20, 96, 1024)
PATHS = {
    "whole K": GemmConfig(16, 32, 256),
    "split-K, a reduce launch": GemmConfig(16, 32, 256, split_k=4),
    "split-K, the last program": GemmConfig(16, 32, 256, split_k=4,
                                            split_k_reduce="last_program"),
    "hopper": GemmConfig(16, 32, 256, path="hopper", split_k=2, swap_ab=True),
    "dequant": DEQUANT_CONFIG,
    "prepared": None,
}


def _problem(device, shape=SHAPE, seed=5):
    a, b, _, b_shuffle, b_scale_sh = reference.generate_input(*shape, seed=seed, device=device)
    return a, b, b_shuffle, b_scale_sh


def _exact_sums(a, b):
    """fp32 [M, N]: the reference's products (quantized A and B, dequantized) summed in fp32."""
    a_values = formats.dequantize_mxfp4(*formats.quantize_mxfp4(a.cpu()))
    b_values = formats.dequantize_mxfp4(*formats.quantize_mxfp4(b.cpu()))
    return a_values @ b_values.T, a_values.abs() @ b_values.abs().T


def as_the_kernels_round(x):
    """fp32 x in bf16 as a kernel's store converts it: to nearest even on a GPU, toward zero in
    Triton's interpreter (its fp32 -> bf16 conversion truncates)."""
    if interpreting():
        return (x.view(torch.int32) & -0x10000).view(torch.float32).to(torch.bfloat16)
    return x.to(torch.bfloat16)


def _outputs(path, device, a, b_shuffle, b_scale_sh):
    """(bf16 output, fp32 output) of `path`'s launcher (the op, for the prepared path)."""
    if path == "prepared":
        if current_target(device)[0] != "interpreter" and not prepared.serves(device):
            pytest.skip("the prepared path runs on NVIDIA sm_90 and up")
        weight = prepared.hopper_weight(b_shuffle, b_scale_sh)
        return tuple(prepared.gemm_prepared(a, weight, out_dtype)
                     for out_dtype in (None, torch.float32))
    config = PATHS[path]
    backend = current_target(device)[0]
    if config.path == "hopper" and backend not in ("interpreter", "cuda"):
        pytest.skip("the hopper path runs on CUDA and the interpreter")
    m, k = a.shape
    n = b_shuffle.shape[0]
    launcher_class = dequant.DequantLauncher if config.path == "dequant" else GemmLauncher
    return tuple(launcher_class(config, backend, m, n, k, a.stride(), torch.device(device),
                                out_dtype=out_dtype)(a, b_shuffle, b_scale_sh)
                 for out_dtype in (torch.bfloat16, torch.float32))


@pytest.mark.parametrize("path", PATHS)
def test_the_fp32_output_is_the_unrounded_sums_the_bf16_output_rounds(path, device):
    a, b, b_shuffle, b_scale_sh = _problem(device)
    out_bf16, out_fp32 = _outputs(path, device, a, b_shuffle, b_scale_sh)
    assert out_bf16.dtype == torch.bfloat16 and out_fp32.dtype == torch.float32
    assert compare(out_fp32, reference.ref_kernel((a, b, None, b_shuffle, b_scale_sh))) == \
        (True, "")
    sums, magnitudes = _exact_sums(a, b)
    got = out_fp32.cpu()
    assert ((got - sums).abs() <= 2 ** -16 * magnitudes).all()      # fp32 order, not bf16
    assert (got.view(torch.int32) & 0xFFFF).any()                    # not bf16 values
    if path != "dequant":
        assert torch.equal(as_the_kernels_round(out_fp32), out_bf16)


def test_the_op_takes_out_dtype_none_bf16_and_fp32(device):
    a, b, b_shuffle, b_scale_sh = _problem(device, (4, 64, 256), seed=3)
    data = (a, b, None, b_shuffle, b_scale_sh)
    expected = custom_kernel(data)
    assert torch.equal(torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh, None), expected)
    assert torch.equal(torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh, torch.bfloat16),
                       expected)
    out = torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh, out_dtype=torch.float32)
    assert out.dtype == torch.float32 and torch.equal(as_the_kernels_round(out), expected)
    empty = torch.ops.mxfp4_mm.gemm(a[:0], b_shuffle, b_scale_sh, torch.float32)
    assert empty.shape == (0, 64) and empty.dtype == torch.float32


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.int32])
def test_another_out_dtype_is_refused_in_one_line(device, out_dtype):
    a, _, b_shuffle, b_scale_sh = _problem(device, (4, 64, 256), seed=3)
    message = (f"^mxfp4_mm.gemm: expected out_dtype torch.bfloat16 or torch.float32, got "
               f"{out_dtype}$")
    with pytest.raises(ValueError, match=message):
        torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh, out_dtype)
    with pytest.raises(ValueError, match="^mxfp4_mm.gemm: expected out_dtype .* got 'float32'$"):
        mxfp4_gemm(a, b_shuffle, b_scale_sh, "float32")
    weight = prepared.hopper_weight(b_shuffle, b_scale_sh)
    with pytest.raises(ValueError, match="^mxfp4_mm.gemm_prepared: expected out_dtype "):
        prepared.gemm_prepared(a, weight, out_dtype)


def test_the_fake_and_a_compiled_caller_take_the_fp32_output(device):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        out = torch.ops.mxfp4_mm.gemm(torch.empty(5, 512, dtype=torch.bfloat16),
                                      torch.empty(96, 256, dtype=torch.uint8),
                                      torch.empty(256, 16, dtype=torch.uint8), torch.float32)
    assert out.shape == (5, 96) and out.dtype == torch.float32
    a, _, b_shuffle, b_scale_sh = _problem(device, (4, 64, 256), seed=6)
    compiled = torch.compile(
        lambda x: torch.ops.mxfp4_mm.gemm(x, b_shuffle, b_scale_sh, torch.float32) * 2,
        fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(a), torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh,
                                                            torch.float32) * 2)
