"""custom_kernel rejects bad inputs with errors that name the argument."""

import pytest
import torch

import reference
from submission import custom_kernel


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
    with pytest.raises(ValueError, match=r"B_scale_sh: expected a contiguous tensor of shape \(256, 8\)"):
        custom_kernel(replaced(data, 4, data[4][:, :4].contiguous()))


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
