"""torch.ops.mxfp4_mm.gemm: the same path and bytes as custom_kernel, under torch.compile in
the interpreter, and under CUDA graph capture and replay where a GPU is present."""

import importlib.util

import pytest
import torch

from mxfp4_mm import launchers  # noqa: F401  (registers the op)
from mxfp4_mm import reference
from mxfp4_mm.launchers.task_shapes import TASK_SHAPES
from mxfp4_mm.submission import custom_kernel

SMALL = (4, 64, 256)


def _tensors(data):
    a, _, _, b_shuffle, b_scale_sh = data
    return a, b_shuffle, b_scale_sh


def test_the_op_gives_custom_kernels_bytes(device):
    data = reference.generate_input(*SMALL, seed=3, device=device)
    assert torch.equal(torch.ops.mxfp4_mm.gemm(*_tensors(data)), custom_kernel(data))


def test_the_op_checks_its_inputs_as_custom_kernel_does(device):
    a, b_shuffle, b_scale_sh = _tensors(reference.generate_input(*SMALL, seed=3, device=device))
    with pytest.raises(ValueError, match="B_scale_sh: expected shape"):
        torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh[:-1])


def test_a_second_copy_of_the_code_keeps_the_op(device, monkeypatch):
    """The launchers' code run again in the process (a bundle beside the package, a reload)
    defines nothing twice (torch releases differ on whether a second definition raises), and
    the op still answers."""
    def second_definition(*args, **kwargs):
        raise RuntimeError("mxfp4_mm::gemm defined twice")

    monkeypatch.setattr(torch.library, "Library", second_definition)
    monkeypatch.setattr(torch.library, "custom_op", second_definition)
    # the package's own name, so that its relative imports resolve; never put in sys.modules
    spec = importlib.util.spec_from_file_location(
        launchers.__name__, launchers.__file__,
        submodule_search_locations=list(launchers.__path__))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    data = reference.generate_input(*SMALL, seed=4, device=device)
    assert torch.equal(torch.ops.mxfp4_mm.gemm(*_tensors(data)), custom_kernel(data))


def test_the_fake_gives_the_output_shape_without_running_a_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(5, 512, dtype=torch.bfloat16)
        b_shuffle = torch.empty(96, 256, dtype=torch.uint8)
        b_scale_sh = torch.empty(256, 16, dtype=torch.uint8)
        out = torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh)
    assert out.shape == (5, 96) and out.dtype == torch.bfloat16


def test_a_compiled_caller_gives_the_plain_calls_bytes(device):
    a, b_shuffle, b_scale_sh = _tensors(reference.generate_input(*SMALL, seed=5, device=device))
    compiled = torch.compile(lambda x: torch.ops.mxfp4_mm.gemm(x, b_shuffle, b_scale_sh) * 2,
                             fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(a), torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh) * 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("shape", TASK_SHAPES)
def test_graph_replay_with_new_a_gives_the_eager_bytes(shape):
    data = reference.generate_input(*shape, seed=11, device="cuda")
    a, b_shuffle, b_scale_sh = _tensors(data)
    static_a = a.clone()
    torch.ops.mxfp4_mm.gemm(static_a, b_shuffle, b_scale_sh)      # build and prove first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op_out = torch.ops.mxfp4_mm.gemm(static_a, b_shuffle, b_scale_sh)
        kernel_out = custom_kernel((static_a,) + tuple(data[1:]))
    for seed in (12, 13):
        fresh = reference.generate_input(*shape, seed=seed, device="cuda")[0]
        static_a.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        eager = custom_kernel((fresh,) + tuple(data[1:]))
        assert torch.equal(op_out, eager) and torch.equal(kernel_out, eager), (shape, seed)
