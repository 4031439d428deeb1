"""The prepared path's op and layer (launchers.prepared) at every M a decode or a short prefill
takes, compiled on an NVIDIA GPU of sm_90 and up (skipped elsewhere; the interpreter's cases
of the op are tests/test_hopper_prepared's): torch.ops.mxfp4_mm.gemm_prepared and MXFP4Linear
against the reference at M 1-16, 24, 32, 48, 64, 96, 128 and 256, on Llama-3-8B's four decode
weights and on odd shapes (N not a multiple of 128, K not a multiple of 256, strided A), the
op's launcher through its direct and its standard launch, bit for bit alike. Where the chip's
prepared_max_m (launchers.targets) stops short of an M, the op refuses it in one line and the
layer serves it by another path, still against the reference. With BEYOND_REACH_VARIABLE set
(tools/gpu_round.sh's fence step) the chip's reach is lifted: the op serves every M.
"""

import os

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.launchers import current_target, interpreting, prepared
from mxfp4_mm.launchers import targets
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.tools.prepared_check import lifted_targets, strided_copy
from test_hopper_gemm import hopper_device  # noqa: F401  (a fixture)

BEYOND_REACH_VARIABLE = "MXFP4_MM_PREPARED_BEYOND_REACH"

EVERY_M = list(range(1, 17)) + [24, 32, 48, 64, 96, 128, 256]
SHAPES = [   # n, k, strided A
    (6144, 4096, False), (4096, 4096, False), (28672, 4096, False), (4096, 14336, False),
    (80, 576, True),        # N < one BLOCK_N, K = 9 * 64: a ragged K tile
    (1040, 1088, False),    # N = 8 * 128 + 16, K = 17 * 64
    (208, 320, True),
]
compiled_only = pytest.mark.skipif(interpreting(), reason="compiled only: the interpreter's "
                                   "cases are tests/test_hopper_prepared's")


@pytest.fixture(autouse=True)
def reach(monkeypatch):
    if os.environ.get(BEYOND_REACH_VARIABLE):
        for arch, target in lifted_targets().items():
            monkeypatch.setitem(targets.TARGETS, arch, target)


@pytest.fixture(autouse=True)
def memory_given_back():
    """Each test's freed memory handed back to the GPU after it: model-sized weights cached by
    the allocator in each of several test processes outgrow one card."""
    yield
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@compiled_only
@pytest.mark.parametrize("n, k, strided", SHAPES)
@pytest.mark.parametrize("m", EVERY_M)
def test_the_op_and_the_layer_match_the_reference_at_every_m(hopper_device, m, n, k, strided):
    data = reference.generate_input(m, n, k, seed=m + n + k, device=hopper_device)
    a = strided_copy(data[0]) if strided else data[0]
    layer = MXFP4Linear(data[3], data[4])
    ok, message = reference.check_implementation(data, layer(a))
    assert ok, f"MXFP4Linear: {message}"
    weight = prepared.hopper_weight(data[3], data[4])
    arguments = (a, weight.values, weight.scales, weight.k, weight.wide_scales)
    if not prepared.serves_rows(current_target(hopper_device)[1], m):
        with pytest.raises(ValueError, match=f"^mxfp4_mm.gemm_prepared: M={m} on sm_"):
            torch.ops.mxfp4_mm.gemm_prepared(*arguments)
        return
    out = torch.ops.mxfp4_mm.gemm_prepared(*arguments)
    ok, message = reference.check_implementation(data, out)
    assert ok, f"gemm_prepared: {message}"
    launcher = prepared._checked_launcher(*arguments)
    assert torch.equal(launcher(a, weight.values, weight.scales, direct=False), out)
    assert torch.equal(launcher(a, weight.values, weight.scales, direct=True), out)
