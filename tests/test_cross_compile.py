"""Every gfx950 config cross-compiles to a gfx950 code object (tools.isa, offline); the sm_90
entries compile to PTX for the instruction report.

Both quantizers: the software one, and the hardware one, whose code must hold
v_cvt_scalef32_pk_fp4_f32. Every GEMM must use a scaled MFMA; no kernel may use scratch.
Compiling needs real JIT functions, so tools.isa runs in a process without the interpreter.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.configs import GEMM_CONFIGS

ROOT = Path(__file__).resolve().parents[1]
SCALED_MFMA = ("v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4")


@pytest.fixture(scope="module", params=["software", "hardware"])
def isa_rows(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("isa") / f"{request.param}.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-m", "tools.isa", "--arch", "gfx950", "--quantizer",
                    request.param, "--json", str(out)], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=900)
    return request.param, json.loads(out.read_text())


def test_every_gfx950_config_is_compiled(isa_rows):
    _, rows = isa_rows
    gemm_shapes = {tuple(r["shape"]) for r in rows if r["kernel"] == "gemm"}
    assert gemm_shapes == set(GEMM_CONFIGS["gfx950"])
    split_shapes = {s for s, c in GEMM_CONFIGS["gfx950"].items() if c.split_k > 1}
    assert {tuple(r["shape"]) for r in rows if r["kernel"] == "reduce"} == split_shapes


def test_no_scratch_and_no_spills(isa_rows):
    _, rows = isa_rows
    for row in rows:
        assert row["scratch_bytes"] == 0, row["shape"]
        assert row["vgpr_spills"] == 0 and row["sgpr_spills"] == 0, row["shape"]


def test_gemm_uses_the_scaled_mfma_and_the_chosen_quantizer(isa_rows):
    quantizer, rows = isa_rows
    for row in (r for r in rows if r["kernel"] == "gemm"):
        assert any(row["counts"].get(name, 0) for name in SCALED_MFMA), row["shape"]
        cvt = row["counts"].get("v_cvt_scalef32_pk_fp4_f32", 0)
        assert (cvt > 0) == (quantizer == "hardware"), row["shape"]


def test_report_has_the_documented_keys(isa_rows):
    _, rows = isa_rows
    for row in rows:
        assert {"shape", "kernel", "config", "vgprs", "lds_bytes", "scratch_bytes",
                "waves_per_simd", "workgroups", "counts"} <= set(row)
        assert 1 <= row["waves_per_simd"] <= 8 and row["workgroups"] >= 1


def test_sm90_report_counts_the_quantizer_and_the_mma(tmp_path):
    """tools.isa --arch sm_90: every sm_90 entry compiles to PTX with MMA instructions, and
    pre-quantizing A removes instructions (the in-register quantizer's share)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "sm90.json"
    subprocess.run([sys.executable, "-m", "tools.isa", "--arch", "sm_90", "--json", str(out)],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=900)
    rows = json.loads(out.read_text())
    assert {tuple(row["shape"]) for row in rows} == set(GEMM_CONFIGS["sm_90"])
    for row in rows:
        assert row["mma"] > 0 and row["ptx_fused"] > row["ptx_a_prequantized"] > 0, row["shape"]
        assert 0 < row["quantizer_share"] < 1
        assert row["est_warp_instructions"] >= row["ptx_fused"] * row["programs"]
