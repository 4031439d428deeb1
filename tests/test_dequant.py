"""The "dequant" path and the config paths beside the fused GEMM ("dequant", "aiter").

Decisions tested, each by what it changes:
- kernels.dequantize: every (E2M1 code, E8M0 scale) pair gives formats.dequantize_mxfp4's value
  in bf16 bit for bit (and each such value is exact in bf16, or inf in fp32 too); the
  preshuffled layout is a round trip of formats.shuffle_weight / e8m0_shuffle, K a multiple of
  64 only, N not a multiple of 32;
- launchers.dequant: the reference's check and the ladder's proof at odd shapes (M no multiple
  of a tile, K % 128 != 0, A strided, N in chunks with a last smaller one), the same bytes on
  every call, the reduced-precision flag restored, the chunk bounded and checked;
- launchers.gemm_config and launchers.configs: the fields a path reads, labels, the lookup
  serving "dequant" from the target's vendor_gemm_from_m on NVIDIA before sm_100 only, after
  table and file entries;
- the tuned-shapes file naming "dequant" and "aiter" per (N, K, M bucket);
- "aiter" refused in one line where aiter does not import;
- the candidates of the import-time tuner and tools.tune at large M;
- tools.bench --vendor-gemm's threshold from its rows;
- every launch of the path compiles for gfx950 (no spill, no scratch) and sm_90 with the
  runner's Triton (3.6.0).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.dequantize import dequantize_to_bf16
from mxfp4_mm.launchers import aiter_path, configs, current_target, dequant, ladder, tuner
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.configs import config_lookup
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GemmConfig, config_from_fields
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.launcher import Launcher
from mxfp4_mm.launchers.paths import build_launcher
from mxfp4_mm.launchers.targets import GFX950, SM90, target_facts
from mxfp4_mm.launchers.tuned_shapes import file_entry, load_configs, write_configs

ODD = (37, 96, 320)       # M no multiple of a tile, N = 3 * 32, K = 5 * 64


@pytest.fixture(autouse=True)
def fresh_lookup(monkeypatch):
    monkeypatch.setattr(configs, "FILE_SHAPES", {})
    monkeypatch.setattr(configs, "FILE_BUCKETS", {})
    monkeypatch.setattr(configs, "_untuned", {})


def same_values(got, want_fp32):
    """bf16 got equals want_fp32 in bf16 bit for bit, NaN where it is NaN."""
    want = want_fp32.to(torch.bfloat16)
    nan = torch.isnan(want)
    return (torch.equal(torch.isnan(got), nan)
            and torch.equal(got.view(torch.int16)[~nan], want.view(torch.int16)[~nan]))


def test_every_code_under_every_scale_is_the_formats_value_bit_for_bit(device):
    codes = torch.arange(16, dtype=torch.uint8).repeat(4)            # 64 codes a row
    rows = torch.arange(256, dtype=torch.int32).to(torch.uint8)      # scale byte = row
    packed = formats.pack_nibbles(codes.expand(256, 64))
    scales = rows[:, None].expand(256, 2).contiguous()
    want = formats.dequantize_mxfp4(packed, scales)
    finite = torch.isfinite(want)
    # Every product is exact in bf16: none rounds, the denormals at scale 2**-127 included.
    assert torch.equal(want[finite].to(torch.bfloat16).float(), want[finite])
    assert want[0, 1].item() == 2.0 ** -128 and torch.isinf(want[254, 4])   # 0.5 * 2**-127, 2 * 2**127
    got = dequantize_to_bf16(packed.to(device), scales.to(device), 64, block_rows=32).cpu()
    assert same_values(got, want)


@pytest.mark.parametrize("n, k, block_k", [(48, 320, 256), (96, 64, 256), (256, 576, 512)])
def test_the_preshuffled_weight_dequantizes_to_the_unshuffled_values(device, n, k, block_k):
    """K a multiple of 64 only: the last K tile is ragged; at K = 576 with 512-wide tiles it
    also runs past the scales' padding, which only the masks keep it from reading."""
    generator = torch.Generator().manual_seed(n + k)
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=generator)
    scales = torch.randint(100, 150, (n, k // 32), dtype=torch.uint8, generator=generator)
    scales[0, 0], scales[-1, -1] = 0, 255
    b_shuffle = formats.shuffle_weight(codes)
    b_scale_sh = formats.e8m0_shuffle(scales, pad_value=formats.SCALE_PAD_BYTE)
    got = dequantize_to_bf16(b_shuffle.to(device), b_scale_sh.to(device), k, preshuffled=True,
                             block_rows=32, block_k=block_k).cpu()
    assert same_values(got, formats.dequantize_mxfp4(codes, scales))


def launcher(m, n, k, a_strides, device, chunk_n=None, config=DEQUANT_CONFIG):
    return dequant.DequantLauncher(config, current_target(device)[0], m, n, k, a_strides,
                                   torch.device(device), chunk_n=chunk_n)


@pytest.mark.parametrize("chunk_n", [32, 64, None])
def test_the_launcher_matches_the_reference_at_odd_shapes_with_a_strided_a(device, chunk_n):
    m, n, k = ODD
    data = reference.generate_input(m, n, k, seed=11, device=device)
    a_t = data[0].t().contiguous().t()           # a.t() of a [K, M] tensor
    data = (a_t,) + data[1:]
    run = launcher(m, n, k, a_t.stride(), device, chunk_n,
                   config_from_fields({"path": "dequant", "block_m": 16, "block_n": 32}))
    assert run.chunk_n == (chunk_n or n)
    ok, message = reference.check_implementation(data, run(a_t, data[3], data[4]))
    assert ok, message


def test_the_launcher_passes_the_ladders_proof_repeated_calls_included(device):
    m, n, k = ODD
    rung = ladder.Rung("dequant", lambda: launcher(m, n, k, (k, 1), device, chunk_n=64))
    proven = ladder.prove_rung(rung, m, n, k, (k, 1), device)
    assert proven.proof_repeats >= 1 and proven.launches_per_call == 2 + 2 * 2
    assert list(proven.launches) == ["quantize", "dequantize_a", "dequantize_b",
                                     "dequantize_b_last"]


@pytest.mark.parametrize("m, n, k, chunk_n", [(1, 16, 128, None), (2, 48, 64, 32)])
def test_n_of_16_rows_past_a_scale_tile_is_proven_whole_and_as_a_last_chunk(device, m, n, k,
                                                                            chunk_n):
    rung = ladder.Rung("dequant", lambda: launcher(m, n, k, (k, 1), device, chunk_n))
    assert ladder.prove_rung(rung, m, n, k, (k, 1), device).chunk_n == min(n, chunk_n or n)


class SkippedLaunch:
    """A KernelLaunch (launchers.bypass) that launches nothing."""
    is_direct = False
    registers = spilled_registers = None

    def __call__(self, *arguments):
        pass

    standard = __call__


def test_a_launcher_that_skips_the_last_chunk_fails_the_proof(device):
    """Its last chunk multiplies the rows the chunk before left in the buffer."""
    m, n, k = 5, 96, 64
    run = launcher(m, n, k, (k, 1), device, chunk_n=64)
    run.launches["dequantize_b_last"] = SkippedLaunch()
    with pytest.raises(Exception, match="wrong output"):
        ladder.prove_rung(ladder.Rung("dequant", lambda: run), m, n, k, (k, 1), device)


@pytest.mark.parametrize("flag", [True, False])
def test_calls_give_the_same_bytes_and_leave_the_flag_as_found(device, flag):
    m, n, k = 9, 64, 128
    data = reference.generate_input(m, n, k, seed=5, device=device)
    run = launcher(m, n, k, (k, 1), device)
    saved = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flag
    try:
        first = run(data[0], data[3], data[4])
        assert torch.equal(first.view(torch.int16), run(data[0], data[3], data[4]).view(torch.int16))
        assert torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction == flag
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved


def test_the_chunk_of_b_is_bounded_and_checked():
    rows = dequant.chunk_rows(1 << 20, 8192)
    assert rows % dequant.CHUNK_ROW_MULTIPLE == 0 and 2 * rows * 8192 <= dequant.B_CHUNK_BYTES
    assert dequant.chunk_rows(96, 64) == 96
    assert dequant.chunk_rows(1 << 20, 1 << 30) == dequant.CHUNK_ROW_MULTIPLE
    with pytest.raises(ValueError, match="chunk_n=48 must be a positive multiple of 32"):
        launcher(4, 96, 64, (64, 1), "cpu", chunk_n=48)


# ----------------------------------------------------------------------------- configs

def test_paths_read_their_fields_only_and_their_labels_name_them():
    assert DEQUANT_CONFIG.label == "dequant 32x32x256 w8" and AITER_CONFIG.label == "aiter"
    assert config_from_fields({"path": "dequant", "num_warps": 4}).num_warps == 4
    with pytest.raises(ValueError, match="path='dequant' reads only .*; leave split_k out"):
        config_from_fields({"path": "dequant", "split_k": 2})
    with pytest.raises(ValueError, match="path='aiter' reads only no field; leave block_m out"):
        config_from_fields({"path": "aiter", "block_m": 64})
    with pytest.raises(ValueError, match="path='cublas' is not one of"):
        GemmConfig(16, 32, 256, path="cublas")


@pytest.mark.parametrize("arch, served", [("sm_80", True), ("sm_89", True), ("sm_90", True),
                                          ("sm_100", False), ("sm_120", False),
                                          ("gfx950", False), ("interpreter", False)])
def test_the_lookup_serves_dequant_from_the_threshold_on_nvidia_before_sm100(arch, served):
    n, k = 4096, 4096
    assert (target_facts(arch).vendor_gemm_from_m is not None) == served
    for m in (SM90.vendor_gemm_from_m, 4 * SM90.vendor_gemm_from_m):
        assert (config_lookup(arch, m, n, k) == (DEQUANT_CONFIG, "heuristic")) == served
    below = config_lookup(arch, SM90.vendor_gemm_from_m - 1, n, k)[0]
    assert below.path == "preshuffle"


def test_table_and_file_entries_come_before_the_dequant_path(tmp_path):
    m, n, k = 2 * SM90.vendor_gemm_from_m, 4096, 4096
    entry = GemmConfig(128, 128, 256, quantize_a_once=True)
    configs.add_entries("sm_90", {}, {(n, k, configs.m_bucket(m)): entry})
    assert config_lookup("sm_90", m, n, k) == (entry, "bucket")


def test_the_tuned_shapes_file_names_dequant_and_aiter_per_bucket(tmp_path):
    path = tmp_path / "tuned.json"
    write_configs(path, [file_entry("sm_90", 4096, 4096, DEQUANT_CONFIG, "dequant", m_bucket=2048),
                         file_entry("gfx950", 4096, 4096, AITER_CONFIG, "aiter", m_bucket=4096)])
    hand = tmp_path / "hand.json"
    hand.write_text('{"entries": [{"arch": "sm_90", "n": 2112, "k": 7168, "m_bucket": 8192, '
                    '"config": {"path": "dequant", "num_warps": 4}}, {"arch": "gfx950", "n": 2112, '
                    '"k": 7168, "m": 3000, "config": {"path": "aiter"}}]}')
    assert load_configs(path) == 2 and load_configs(hand) == 2
    assert config_lookup("sm_90", 1500, 4096, 4096) == (DEQUANT_CONFIG, "bucket")
    assert config_lookup("gfx950", 3000, 4096, 4096) == (AITER_CONFIG, "bucket")
    assert config_lookup("sm_90", 8000, 2112, 7168)[0] == config_from_fields(
        {"path": "dequant", "num_warps": 4})
    assert config_lookup("gfx950", 3000, 2112, 7168) == (AITER_CONFIG, "file")


def test_aiter_is_refused_in_one_line_where_it_does_not_import(monkeypatch):
    monkeypatch.setattr(aiter_path, "available", lambda: False)
    with pytest.raises(aiter_path.AiterUnavailable, match="^path 'aiter' needs aiter, which does "
                                                         "not import here$"):
        build_launcher(AITER_CONFIG, "hip", 2048, 256, 512, (512, 1), "cpu")
    monkeypatch.setattr(aiter_path, "available", lambda: True)
    built = build_launcher(AITER_CONFIG, "hip", 2048, 256, 512, (512, 1), "cpu")
    assert isinstance(built, aiter_path.AiterLauncher) and built.config == AITER_CONFIG


# ----------------------------------------------------------------------------- candidates

def test_the_import_time_tuner_offers_dequant_from_the_threshold_and_the_fused_gemm_beside_it():
    m, n, k = SM90.vendor_gemm_from_m, 2048, 512
    found = tuner.candidate_configs("sm_90", (m, n, k))
    assert found[0] == DEQUANT_CONFIG and heuristic_config("sm_90", m, n, k) in found
    assert all(c.path == "preshuffle" for c in tuner.candidate_configs("sm_90", (m - 1, n, k)))
    assert all(c.path == "preshuffle" for c in tuner.candidate_configs("sm_100", (m, n, k)))


@pytest.mark.parametrize("imports", [True, False])
def test_aiter_is_a_candidate_on_gfx950_at_large_m_where_it_imports(monkeypatch, imports):
    monkeypatch.setattr(aiter_path, "available", lambda: imports)
    m = GFX950.aiter_candidate_from_m
    assert (AITER_CONFIG in tuner.candidate_configs("gfx950", (m, 4096, 4096))) == imports
    assert AITER_CONFIG not in tuner.candidate_configs("gfx950", (m - 1, 4096, 4096))
    assert AITER_CONFIG not in tuner.candidate_configs("sm_90", (m, 4096, 4096))


def test_tune_times_dequant_against_the_fused_gemm_on_an_arch_without_listed_candidates(
        monkeypatch, capsys):
    """tune() on sm_89 (no listed candidates): at the threshold it builds the fused heuristic
    beside the served dequant launcher and times both; below it, it tunes nothing."""
    from mxfp4_mm.launchers.proof import reference_output
    shape = (SM90.vendor_gemm_from_m, 32, 64)
    built = []

    class Right(Launcher):
        def __init__(self, config, *args, **kwargs):
            self.config, self.quantizer = config, "software"
            self.rung = ladder.QUANTIZER_RUNGS["software"]
            built.append(config)

        def kernel_launches(self):
            return {}

        def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
            codes = formats.unshuffle_weight(b_shuffle)
            scales = formats.e8m0_unshuffle(b_scale_sh, codes.shape[0], a.shape[1] // 32)
            return reference_output(a, codes, scales)

    class Loop:
        def __init__(self, *args, **kwargs):
            pass

        def time_interleaved(self, calls, count):
            return [[5.0 + 0.1 * (-1) ** i if index == 0 else 1.0 + 0.1 * (-1) ** i
                     for i in range(count)] for index, _ in enumerate(calls)]

    monkeypatch.setattr(tuner, "build_launcher", Right)
    monkeypatch.setattr(tuner, "RunnerLoop", Loop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Right(config_lookup("sm_89", *shape)[0])
    assert served.config == DEQUANT_CONFIG
    built.clear()
    replacements = tuner.tune([shape], lambda s: served, "cpu", "sm_89", "cuda")
    assert built == [heuristic_config("sm_89", *shape)] and list(replacements) == [shape]
    assert "dequant 32x32x256 w8" in capsys.readouterr().err
    below = (SM90.vendor_gemm_from_m - 1, 32, 64)
    served_below = Right(config_lookup("sm_89", *below)[0])
    assert tuner.tune([below], lambda s: served_below, "cpu", "sm_89", "cuda") == {}
    assert capsys.readouterr().err == ""


def test_tools_tune_tries_the_other_paths_first_and_refines_none_of_them(monkeypatch):
    from mxfp4_mm.tools import tune
    monkeypatch.setattr(aiter_path, "available", lambda: True)
    m = SM90.vendor_gemm_from_m
    assert tune.tile_candidates("sm_90", m, 4096, 4096, 132)[0] == DEQUANT_CONFIG
    assert DEQUANT_CONFIG not in tune.tile_candidates("sm_90", m - 1, 4096, 4096, 132)
    assert tune.tile_candidates("gfx950", GFX950.aiter_candidate_from_m, 4096, 4096,
                                256)[0] == AITER_CONFIG
    assert tune.refine_candidates("sm_90", DEQUANT_CONFIG, 4096) == []


# ----------------------------------------------------------------------------- tools.bench

def vendor_row(m, fused, dequant_us, n=4096, k=4096):
    return {"m": m, "n": n, "k": k, "fused_us": fused, "dequant_us": dequant_us, "bf16_us": 1.0,
            "fused_config": "x"}


def test_the_vendor_gemm_threshold_is_where_dequant_wins_from_on_every_n_k():
    from mxfp4_mm.tools import bench
    rows = [vendor_row(256, 10.0, 12.0), vendor_row(512, 20.0, 15.0), vendor_row(1024, 30.0, 31.0),
            vendor_row(2048, 60.0, 40.0), vendor_row(4096, None, 80.0),
            vendor_row(256, 10.0, 9.0, n=7168), vendor_row(512, 20.0, 19.0, n=7168)]
    wins_from = bench.dequant_wins_from(rows)
    assert wins_from == {(4096, 4096): 2048, (7168, 4096): 256}
    assert bench.vendor_gemm_threshold(wins_from) == 2048
    assert bench.vendor_gemm_threshold({**wins_from, (1, 1): None}) is None
    lines = bench.format_vendor_table(rows).splitlines()
    assert lines[1].endswith("fused") and lines[2].endswith("dequant") and len(lines) == 8
    assert bench.vendor_gemm_grid()[:2] == ["256,4096,4096", "512,4096,4096"]


# ----------------------------------------------------------------------------- cross-compiled

_CROSS_COMPILE = """
import json, torch
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG
from mxfp4_mm.launchers.dequant import dequant_launch_specs
from mxfp4_mm.tools.gfx950.cross_compile import GFX950, SM90, compile_for
from mxfp4_mm.tools.gfx950.report import _metadata_int
rows = []
for target, backend in ((GFX950, "hip"), (SM90, "cuda")):
    for spec in dequant_launch_specs(DEQUANT_CONFIG, backend, 37, 96, 320, (1, 37),
                                     torch.device("meta"), chunk_n=64):
        asm = compile_for(spec.kernel, spec.sample_args, spec.options, target).asm
        code = asm.get("amdgcn", "")
        rows.append([backend, spec.name, sorted(asm), _metadata_int(code, "vgpr_spill_count"),
                     _metadata_int(code, "private_segment_fixed_size")])
print(json.dumps(rows))
"""


def test_every_launch_compiles_for_gfx950_and_sm90_with_the_runners_triton(runners_triton):
    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(root)])
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.splitlines()[-1])
    names = ["quantize", "dequantize_a", "dequantize_b", "dequantize_b_last"]
    assert [(backend, name) for backend, name, *_ in rows] == [
        (backend, name) for backend in ("hip", "cuda") for name in names]
    for backend, name, stages, spills, scratch in rows:
        assert ("hsaco" if backend == "hip" else "cubin") in stages, (backend, name)
        assert spills == scratch == 0, (backend, name)


def test_a_vendor_gemm_row_proves_checks_and_times_both_paths_and_bf16(device):
    from mxfp4_mm.tools import bench
    timed = []

    def time_us(fn):
        timed.append(fn())
        return float(len(timed))
    row = bench.vendor_gemm_row({"m": 5, "n": 64, "k": 192, "seed": 1}, time_us, device=device)
    arch = row["arch"]
    assert row["errors"] == {} and row["fused_config"] == heuristic_config(arch, 5, 64, 192).label
    assert (row["fused_us"], row["dequant_us"], row["bf16_us"]) == (1.0, 2.0, 3.0)
    assert [tuple(out.shape) for out in timed] == [(5, 64)] * 3
