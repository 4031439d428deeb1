"""custom_kernel rejects bad inputs with errors that name the argument."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.submission import custom_kernel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data(device):
    return reference.generate_input(4, 64, 256, seed=3, device=device)


def replaced(data, index, value):
    data = list(data)
    data[index] = value
    return tuple(data)


def test_wrong_tuple_length(data):
    with pytest.raises(TypeError, match="data: expected a tuple"):
        custom_kernel(data[:4])


@pytest.mark.parametrize("bad_a, message", [
    (lambda a: a.float(), "A: expected a 2-D tensor of dtype torch.bfloat16"),
    (lambda a: a[None], "A: expected a 2-D"),
    (lambda a: "not a tensor", "A: expected a torch.Tensor"),
])
def test_bad_a(data, bad_a, message):
    with pytest.raises(TypeError, match=message):
        custom_kernel(replaced(data, 0, bad_a(data[0])))


def test_k_not_a_multiple_of_64(data):
    a, b = data[0][:, :224], data[3][:, :112].contiguous()
    with pytest.raises(ValueError, match="A: K must be a multiple of 64"):
        custom_kernel(replaced(replaced(data, 0, a), 3, b))


def test_a_and_b_shuffle_of_different_k_are_named_together(data):
    with pytest.raises(ValueError, match=r"A, B_shuffle: A of shape \(4, 256\) has K=256, "
                                         r"B_shuffle of shape \(64, 64\) holds K=128"):
        custom_kernel(replaced(data, 3, data[3][:, :64].contiguous()))
    with pytest.raises(ValueError, match=r"A of shape \(4, 224\) has K=224"):
        custom_kernel(replaced(data, 0, data[0][:, :224]))


def test_a_given_transposed_is_told_to_pass_a_strided_view(data):
    """A [K, M] (a.t() of the right A) is neither a K problem nor B_shuffle's."""
    with pytest.raises(ValueError, match=r"A: shape \(256, 4\) is \[K, M\] .*the view a.t\(\)"):
        custom_kernel(replaced(data, 0, data[0].t()))


def test_a_k_major_view_is_taken(data, device):
    """The strided view that message asks for: A [M, K] with strides (1, M)."""
    k_major = data[0].t().contiguous().t()
    assert k_major.stride() == (1, 4)
    ok, message = reference.check_implementation(data, custom_kernel(replaced(data, 0, k_major)))
    assert ok, message


def test_n_the_layout_cannot_take(data):
    with pytest.raises(ValueError, match="N must be a multiple of 16"):
        custom_kernel(replaced(data, 3, data[3][:40]))


def test_b_scale_sh_that_does_not_fit(data):
    with pytest.raises(ValueError, match=r"B_scale_sh: expected shape \(256, 8\)"):
        custom_kernel(replaced(data, 4, data[4][:, :4].contiguous()))


def column_major(tensor):
    """The same shape, dtype and values, laid out column by column: not contiguous (through
    uint8, as torch cannot copy float4 tensors)."""
    return tensor.view(torch.uint8).t().contiguous().t().view(tensor.dtype)


@pytest.mark.parametrize("index, name", [(3, "B_shuffle"), (4, "B_scale_sh")])
def test_non_contiguous_weight_tensors(data, index, name):
    strided = column_major(data[index])
    assert strided.shape == data[index].shape and not strided.is_contiguous()
    with pytest.raises(ValueError, match=f"{name}: expected a contiguous tensor") as error:
        custom_kernel(replaced(data, index, strided))
    assert f"strides {strided.stride()}" in str(error.value)


CPU_CALL_WITHOUT_INTERPRETER = """
import reference
from submission import custom_kernel
try:
    custom_kernel(reference.generate_input(4, 64, 256, seed=3, device="cpu"))
except RuntimeError as error:
    print(error)
"""


def test_cpu_call_without_the_interpreter_says_how_to_run_on_a_cpu():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", CPU_CALL_WITHOUT_INTERPRETER], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("A: a CPU tensor, but the kernels were compiled for a GPU")
    assert "set TRITON_INTERPRET=1 before importing" in result.stdout


def test_tensors_on_different_devices(data):
    meta_scales = torch.empty(data[4].shape, dtype=data[4].dtype, device="meta")
    with pytest.raises(ValueError, match="expected one device"):
        custom_kernel(replaced(data, 4, meta_scales))


def test_strided_a_gives_the_right_answer(data, device):
    wide = torch.randn(4, 512, dtype=torch.bfloat16, device=device)
    a = wide[:, 128:384]
    sliced = replaced(data, 0, a)
    ok, message = reference.check_implementation(sliced, custom_kernel(sliced))
    assert ok, message


# ---------------------------------------------------------------------------------------
# launchers.inputs' decisions, at each boundary, on the shapes alone (no kernel runs):
# - the tuple: exactly DATA_FIELDS long, a tuple or a list; A, B_shuffle and B_scale_sh taken
#   from positions 0, 3 and 4;
# - each tensor: a torch.Tensor, 2-D, of its dtypes (fp4x2 or uint8; e8m0 or uint8);
# - K a multiple of 64, N of 16; B_shuffle (N, K/2) and contiguous; B_scale_sh
#   (pad(N, 256), pad(K/32, 8)) and contiguous; A may be strided;
# - one device for all three (each one elsewhere is refused); a CPU tensor only with
#   interpreted kernels.
# ---------------------------------------------------------------------------------------

from mxfp4_mm.kernels import formats  # noqa: E402
from mxfp4_mm.launchers import inputs  # noqa: E402


def tensors(m=4, n=64, k=256, device="meta"):
    return (torch.empty((m, k), dtype=torch.bfloat16, device=device),
            torch.empty((n, k // 2), dtype=torch.uint8, device=device),
            torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8, device=device))


@pytest.mark.parametrize("k, ok", [(64, True), (128, True), (32, False), (96, False)])
def test_k_boundary(k, ok):
    if ok:
        assert inputs.gemm_problem(*tensors(k=k)) == (4, 64, k)
    else:
        with pytest.raises(ValueError, match="multiple of 64"):
            inputs.gemm_problem(*tensors(k=k))


@pytest.mark.parametrize("n, ok", [(16, True), (48, True), (8, False), (40, False)])
def test_n_boundary(n, ok):
    if ok:
        assert inputs.gemm_problem(*tensors(n=n)) == (4, n, 256)
    else:
        with pytest.raises(ValueError, match="multiple of 16"):
            inputs.gemm_problem(*tensors(n=n))


@pytest.mark.parametrize("index, shape, message", [
    (1, (64, 64), r"A, B_shuffle: A of shape \(4, 256\) has K=256, .* holds K=128"),
    (1, (64, 130), r"A, B_shuffle: A of shape \(4, 256\) has K=256, .* holds K=260"),
    (2, (256, 16), r"B_scale_sh: expected shape \(256, 8\)"),
    (2, (255, 8), r"B_scale_sh: expected shape \(256, 8\)"),
    (2, (64, 8), r"B_scale_sh: expected shape \(256, 8\)")])
def test_shapes_that_do_not_fit(index, shape, message):
    given = list(tensors())
    given[index] = torch.empty(shape, dtype=torch.uint8, device="meta")
    with pytest.raises(ValueError, match=message):
        inputs.gemm_problem(*given)


@pytest.mark.parametrize("index, name", [(1, "B_shuffle"), (2, "B_scale_sh")])
def test_a_transposed_weight_tensor_is_refused(index, name):
    given = list(tensors())
    given[index] = given[index].t().contiguous().t()
    with pytest.raises(ValueError, match=f"{name}: expected a contiguous tensor"):
        inputs.gemm_problem(*given)


def test_a_may_be_strided():
    a, b, s = tensors()
    assert inputs.gemm_problem(a.t().contiguous().t(), b, s) == (4, 64, 256)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_tensor_on_another_device_is_refused(index):
    given = list(tensors(device="cpu"))
    given[index] = torch.empty(given[index].shape, dtype=given[index].dtype, device="meta")
    with pytest.raises(ValueError, match="expected one device"):
        inputs.gemm_problem(*given)


@pytest.mark.parametrize("index, dtype, name", [
    (0, torch.float16, "A"), (1, torch.int8, "B_shuffle"), (2, torch.int8, "B_scale_sh"),
    (1, torch.bfloat16, "B_shuffle")])
def test_dtypes(index, dtype, name):
    given = list(tensors())
    given[index] = given[index].to(dtype)
    with pytest.raises(TypeError, match=f"{name}: expected a 2-D tensor of dtype"):
        inputs.gemm_problem(*given)


def test_the_fp4_and_e8m0_dtypes_are_accepted_where_torch_has_them():
    fp4, e8m0 = getattr(torch, "float4_e2m1fn_x2", None), getattr(torch, "float8_e8m0fnu", None)
    if fp4 is None or e8m0 is None:
        pytest.skip("this torch has no fp4x2 or e8m0 dtype")
    a, b, s = tensors()
    assert inputs.gemm_problem(a, b.view(fp4), s.view(e8m0)) == (4, 64, 256)


@pytest.mark.parametrize("index", [1, 2])
def test_weight_tensors_must_be_2d(index):
    given = list(tensors())
    given[index] = given[index][None]
    with pytest.raises(TypeError, match="expected a 2-D"):
        inputs.gemm_problem(*given)


def test_the_tuple_positions_and_kinds():
    a, b, s = tensors()
    data = [a, "B", "B_q", b, s]
    assert inputs.problem_of(data) == (a, b, s, 4, 64, 256)
    assert inputs.problem_of(tuple(data))[3:] == (4, 64, 256)
    for bad in (data[:4], data + [s], "abcde", None):
        with pytest.raises(TypeError, match=r"data: expected a tuple \(A, B, B_q, B_shuffle"):
            inputs.problem_of(bad)


def test_a_cpu_tensor_needs_interpreted_kernels(monkeypatch):
    monkeypatch.setattr(inputs, "KERNELS_NEED_A_GPU", True)
    with pytest.raises(RuntimeError, match="A: a CPU tensor.*TRITON_INTERPRET=1"):
        inputs.gemm_problem(*tensors(device="cpu"))
    assert inputs.gemm_problem(*tensors(device="meta")) == (4, 64, 256)
    monkeypatch.setattr(inputs, "KERNELS_NEED_A_GPU", False)
    assert inputs.gemm_problem(*tensors(device="cpu")) == (4, 64, 256)
