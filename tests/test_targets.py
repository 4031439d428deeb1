"""launchers.targets: each chip's record, and the vendor defaults of an arch without one.

- gfx950, sm_90 and the interpreter have records of their own; the interpreter takes gfx950's
  table and rules but none of its hardware (no hardware quantizer, no aiter candidate);
- an NVIDIA arch without a record takes sm_90's rules, and the dequant threshold only before
  FP4 MMA (sm_100); any other arch gfx950's rules and nothing measured on gfx950;
- the first rung's quantizer follows the hardware quantizer;
- each Triton backend's launch facts: HIP's 64-wide waves, written-through split-K partials, its
  own compile options and no repeated prequantized rows; CUDA's quantizer without the fast
  path; the interpreter and any other backend the generic ones.
"""

import pytest

from mxfp4_mm.launchers.targets import (ANY_M, FP4_MMA_FROM_SM, GENERIC_BACKEND, GFX950, SM90,
                                        TARGETS, backend_facts, target_facts)


def test_the_recorded_chips_are_their_records():
    assert {arch: target_facts(arch) for arch in TARGETS} == TARGETS
    assert (GFX950.first_quantizer, SM90.first_quantizer) == ("hardware", "software")
    interpreter = target_facts("interpreter")
    assert (interpreter.entries_of, interpreter.heuristic) == ("gfx950", "gfx950")
    assert interpreter.first_quantizer == "software"
    assert interpreter.aiter_candidate_from_m is None and interpreter.vendor_gemm_from_m is None


@pytest.mark.parametrize("arch, vendor, rules, vendor_gemm", [
    ("sm_80", "nvidia", "sm_90", SM90.vendor_gemm_from_m),
    ("sm_89", "nvidia", "sm_90", SM90.vendor_gemm_from_m),
    (f"sm_{FP4_MMA_FROM_SM}", "nvidia", "sm_90", None),
    ("sm_120", "nvidia", "sm_90", None),
    ("gfx942", "amd", "gfx950", None)])
def test_an_arch_without_a_record_takes_its_vendors_defaults(arch, vendor, rules, vendor_gemm):
    target = target_facts(arch)
    assert (target.arch, target.vendor, target.heuristic) == (arch, vendor, rules)
    assert target.vendor_gemm_from_m == vendor_gemm
    assert target.shared_memory_bytes is None and not target.hardware_quantizer
    assert target.hopper_max_m is None and target.aiter_candidate_from_m is None


def test_each_backend_states_its_launch_facts():
    hip, cuda = backend_facts("hip"), backend_facts("cuda")
    assert (hip.warp_size, hip.splitk_sync, hip.hip_options, hip.repeats_loaded_codes,
            hip.quant_fast_path) == (64, "write_through", True, False, True)
    assert (cuda.warp_size, cuda.splitk_sync, cuda.hip_options, cuda.repeats_loaded_codes,
            cuda.quant_fast_path) == (32, "acq_rel", False, True, False)
    assert backend_facts("interpreter") == backend_facts("other") == GENERIC_BACKEND
    assert GENERIC_BACKEND.quant_fast_path and GENERIC_BACKEND.repeats_loaded_codes


@pytest.mark.parametrize("arch, limit", [("sm_90", ANY_M), ("sm_100", ANY_M),
                                         ("sm_120", ANY_M), ("sm_89", None), ("sm_80", None), ("gfx950", None),
                                         ("interpreter", None)])
def test_the_prepared_path_serves_nvidia_from_sm90_at_any_m(arch, limit):
    assert target_facts(arch).prepared_max_m == limit
