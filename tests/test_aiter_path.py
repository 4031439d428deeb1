"""launchers.aiter_path's decisions, with a fake aiter (aiter itself is AMD-only).

Decisions of launchers.aiter_path:
- available: aiter's three functions import; any error while importing means unavailable;
- a call: A quantized by aiter's quantizer, its scales shuffled, then gemm_a4w4 with the codes
  and weight as fp4x2, the scales as e8m0, bf16 output and the preshuffled weight; the
  output cut to the launcher's M rows;
- building the "aiter" config: refused in one line where aiter does not import.
- the launcher's contract: its config the "aiter" path's, no launch of ours.
"""

import builtins

import pytest
import torch

from mxfp4_mm.launchers import aiter_path
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.paths import build_launcher


def test_unavailable_when_importing_aiter_raises_anything(monkeypatch):
    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name.startswith("aiter"):
            raise OSError("built for another GPU")
        return real_import(name, *args, **kwargs)
    aiter_path._aiter.cache_clear()
    monkeypatch.setattr(builtins, "__import__", failing)
    try:
        assert aiter_path._aiter() is None and not aiter_path.available()
    finally:
        aiter_path._aiter.cache_clear()


def test_available_when_aiter_imports(monkeypatch):
    monkeypatch.setattr(aiter_path, "_aiter", lambda: ("q", "s", "g"))
    assert aiter_path.available()


def test_a_call_quantizes_shuffles_and_multiplies_with_the_preshuffled_weight(monkeypatch):
    calls = {}
    m, n, k = 3, 32, 64

    def quantize(a):
        calls["quantized"] = a
        return torch.zeros((32, k // 2), dtype=torch.uint8), torch.ones((32, k // 32),
                                                                       dtype=torch.uint8)

    def shuffle(scales):
        calls["shuffled"] = scales
        return scales.view(torch.uint8) + 1

    def gemm_a4w4(a, b, a_scales, b_scales, dtype, bpreshuffle):
        calls["gemm"] = (a, b, a_scales, b_scales, dtype, bpreshuffle)
        return torch.arange(32 * n, dtype=torch.float32).view(32, n).to(dtype)

    monkeypatch.setattr(aiter_path, "_aiter", lambda: (quantize, shuffle, gemm_a4w4))
    a = torch.randn(m, k).to(torch.bfloat16)
    b, b_scales = torch.zeros(n, k // 2, dtype=torch.uint8), torch.zeros(256, 8, dtype=torch.uint8)
    out = aiter_path.AiterLauncher(m, n)(a, b, b_scales)
    assert calls["quantized"] is a
    assert calls["shuffled"].dtype == aiter_path._E8M0
    codes, weight, a_scales, weight_scales, dtype, preshuffled = calls["gemm"]
    assert codes.dtype == weight.dtype == aiter_path._FP4
    assert a_scales.eq(2).all() and weight_scales.dtype == aiter_path._E8M0
    assert dtype == torch.bfloat16 and preshuffled is True
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    assert torch.equal(out.float(), torch.arange(m * n, dtype=torch.float32).view(m, n))


def test_the_launcher_states_its_config_and_has_no_kernel_of_ours():
    """Its config is the "aiter" path's from construction on, as every launcher's is
    (launchers.launcher): what tools.check and tools.bench print."""
    launcher = aiter_path.AiterLauncher(3, 32)
    assert launcher.config == aiter_path.AITER_CONFIG and launcher.config.label == "aiter"
    assert (launcher.splits, launcher.launches_per_call, launcher.is_direct) == (1, 3, False)
    assert launcher.launch_resources() == launcher.spilling_launches() == {}
    assert launcher.proof_repeats == 0 and launcher.rung is None

def test_aiter_is_refused_in_one_line_where_it_does_not_import(monkeypatch):
    monkeypatch.setattr(aiter_path, "available", lambda: False)
    with pytest.raises(aiter_path.AiterUnavailable, match="^path 'aiter' needs aiter, which does "
                                                         "not import here$"):
        build_launcher(AITER_CONFIG, "hip", 2048, 256, 512, (512, 1), "cpu")
    monkeypatch.setattr(aiter_path, "available", lambda: True)
    built = build_launcher(AITER_CONFIG, "hip", 2048, 256, 512, (512, 1), "cpu")
    assert isinstance(built, aiter_path.AiterLauncher) and built.config == AITER_CONFIG
