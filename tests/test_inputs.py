"""custom_kernel rejects bad inputs with errors that name the argument."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import reference
from submission import custom_kernel

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
    with pytest.raises(ValueError, match="K must be a multiple of 64"):
        custom_kernel(replaced(data, 0, data[0][:, :224]))


def test_b_shuffle_that_does_not_fit_k(data):
    with pytest.raises(ValueError, match=r"B_shuffle: expected shape \(64, 128\)"):
        custom_kernel(replaced(data, 3, data[3][:, :64].contiguous()))


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
