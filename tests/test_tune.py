"""tools.tune's CPU-side parts: the candidate spaces (the other paths first, none of them
refined), the resumable state, the winner (none that spills where one that does not exists,
over every launch of a result), the table writer."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxfp4_mm.launchers import aiter_path, config_table
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.configs import GEMM_CONFIGS
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GemmConfig
from mxfp4_mm.launchers.targets import GFX950, SM90
from mxfp4_mm.tools import tune

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("arch", ["sm_90", "gfx950"])
@pytest.mark.parametrize("shape", [(4, 2880, 512), (16, 2112, 7168), (256, 3072, 1536)])
def test_tile_candidates_are_valid_and_distinct(arch, shape):
    m, n, k = shape
    candidates = tune.tile_candidates(arch, m, n, k, processors=132)
    assert len(candidates) >= 6
    assert len({tune.config_key(c) for c in candidates}) == len(candidates)
    for config in candidates:
        if config.path != "preshuffle":    # another path's launcher (tests/test_dequant.py)
            continue
        assert config.splits_for(k)[0] == config.split_k     # no empty splits
        if config.quantize_a_once:
            assert m >= tune.QUANTIZE_ONCE_FROM_M and config.block_m <= max(64, m)
            assert config.block_m * config.block_n * config.block_k <= tune.QUANTIZE_ONCE_MAX_TILE
            continue
        assert config.block_m == 16 or config.block_m <= m
        assert config.block_m * config.block_n * config.block_k <= tune.MAX_TILE_ELEMENTS
        default_warps = 4
        if arch == "sm_90":
            assert config.block_n * config.block_k <= tune.MAX_WEIGHT_TILE
            big = 2 * config.block_n * config.block_k > tune.MAX_WEIGHT_TILE
            default_warps = 8 if big else 4
        narrow = config.block_m * config.block_n <= 16 * 64   # 1 and 2 warps join
        assert config.num_warps in ((1, 2, default_warps) if narrow else (default_warps,))
    assert any(c.split_k > 1 for c in candidates)
    narrow_warps = {c.num_warps for c in candidates if (c.block_m, c.block_n) == (16, 32)}
    assert {1, 2} <= narrow_warps


def test_tile_candidates_put_two_waves_first():
    candidates = tune.tile_candidates("sm_90", 16, 2112, 7168, processors=132)
    distances = [abs(tune._waves(c, 16, 2112, 7168, 132) - 2) for c in candidates]
    assert max(distances[:3]) < 1.0
    assert distances[:3] <= sorted(distances)[-3:]


def test_refine_candidates_pass_hip_options_only_on_hip():
    base = GemmConfig(16, 64, 256, split_k=4, split_k_reduce="last_program")
    nvidia = tune.refine_candidates("sm_90", base, 2048)
    amd = tune.refine_candidates("gfx950", dataclasses.replace(base, split_k_reduce="kernel"), 2048)
    assert {c.waves_per_eu for c in nvidia} == {0}
    assert {c.waves_per_eu for c in amd} == {0, 1, 2}
    assert {c.split_k_reduce for c in nvidia} == {"kernel", "last_program"}
    assert {c.split_k_reduce for c in amd} == {"kernel"}
    single = tune.refine_candidates("sm_90", GemmConfig(16, 64, 512), 512)
    assert {c.num_stages for c in single} == {1} and {c.split_k_reduce for c in single} == {"kernel"}


def test_rendered_table_reads_back_as_the_same_data():
    text = tune.render_table(config_table.CONFIG_TABLE, config_table.__doc__)
    namespace = {}
    exec(compile(text, "config_table.py", "exec"), namespace)
    assert namespace["CONFIG_TABLE"] == config_table.CONFIG_TABLE
    assert namespace["__doc__"] == config_table.__doc__


def test_write_winners_replaces_one_arch_and_keeps_the_rest(tmp_path):
    path = tmp_path / "config_table.py"
    winner = GemmConfig(16, 32, 256, split_k=2, split_k_reduce="last_program", num_warps=8)
    result = {"config": dataclasses.asdict(winner), "median_us": 5.0}
    tune.write_winners("sm_90", {(4, 2880, 512): (result, "measured 5.0")}, path)
    namespace = {}
    exec(path.read_text(), namespace)
    table = namespace["CONFIG_TABLE"]
    assert table["gfx950"] == config_table.CONFIG_TABLE["gfx950"]
    entry = table["sm_90"][(4, 2880, 512)]
    assert entry["note"] == "measured 5.0"
    assert GemmConfig(**{k: v for k, v in entry.items() if k != "note"}) == winner
    untouched = (16, 2112, 7168)
    assert table["sm_90"][untouched] == config_table.CONFIG_TABLE["sm_90"][untouched]
    assert GEMM_CONFIGS["sm_90"][untouched] != winner


def test_state_resumes_from_its_file(tmp_path):
    path = tmp_path / "state.json"
    state = tune.State(path)
    fields = dataclasses.asdict(GemmConfig(16, 64, 512))
    state.record("sm_90", (4, 2880, 512), "k1", {"ok": True, "median_us": 7.0, "config": fields})
    state.record("sm_90", (4, 2880, 512), "k2", {"ok": False, "error": "wrong output"})
    state.record("sm_90", (4, 2880, 512), "old", {"ok": True, "median_us": 1.0,
                                                  "config": {"block_m": 16, "dot": "bf16"}})
    resumed = tune.State(path)
    results = resumed.results("sm_90", (4, 2880, 512))
    assert set(results) == {"k1", "k2", "old"}   # "old": a config this version rejects
    assert tune.best_result(results)["median_us"] == 7.0
    assert tune.best_result({"k2": results["k2"]}) is None


def test_the_winner_is_the_fastest_that_does_not_spill_where_one_does_not():
    fields = dataclasses.asdict(GemmConfig(16, 64, 512))

    def result(us, spilled):
        return {"ok": True, "median_us": us, "config": fields,
                "resources": {"gemm": {"n_regs": 255, "n_spills": spilled}}}
    results = {"fast": result(5.0, 12), "slower": result(6.0, 0), "slowest": result(9.0, 0)}
    assert tune.best_result(results)["median_us"] == 6.0
    assert tune.best_result({"fast": results["fast"]})["median_us"] == 5.0


def test_a_result_spills_when_any_of_its_launches_does():
    fields = dataclasses.asdict(GemmConfig(16, 64, 512, split_k=2))
    launches = {"gemm": {"n_regs": 128, "n_spills": 0}, "reduce": {"n_regs": 255, "n_spills": 8}}
    second_spills = {"ok": True, "median_us": 5.0, "config": fields, "resources": launches}
    neither = {"ok": True, "median_us": 6.0, "config": fields,
               "resources": dict(launches, reduce={"n_regs": 64, "n_spills": 0})}
    assert tune.spills(second_spills) and not tune.spills(neither)
    assert tune.best_result({"fast": second_spills, "slower": neither}) is neither


def test_without_a_gpu_it_says_so_and_fails():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tools.tune", "--shapes", "4,2880,512"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "needs a GPU" in done.stderr

@pytest.mark.usefixtures("fresh_lookup")
def test_tools_tune_tries_the_other_paths_first_and_refines_none_of_them(monkeypatch):
    from mxfp4_mm.tools import tune
    monkeypatch.setattr(aiter_path, "available", lambda: True)
    m = SM90.vendor_gemm_from_m
    assert tune.tile_candidates("sm_90", m, 4096, 4096, 132)[0] == DEQUANT_CONFIG
    assert DEQUANT_CONFIG not in tune.tile_candidates("sm_90", m - 1, 4096, 4096, 132)
    assert tune.tile_candidates("gfx950", GFX950.aiter_candidate_from_m, 4096, 4096,
                                256)[0] == AITER_CONFIG
    assert tune.refine_candidates("sm_90", DEQUANT_CONFIG, 4096) == []


class CallingLoop:
    """Stands in for the runner's timed loop: calls the function, 1 µs a call."""

    def time(self, fn, calls):
        for _ in range(calls):
            fn()
        return [1.0] * calls


def fake_aiter(monkeypatch):
    """aiter's three functions as the exact computation on the CPU (aiter is AMD-only)."""
    import torch
    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers import aiter_path

    def gemm_a4w4(codes, b_shuffle, a_scales, b_scale_sh, dtype, bpreshuffle):
        n, k = b_shuffle.shape[0], 2 * b_shuffle.view(torch.uint8).shape[1]
        b_codes = formats.unshuffle_weight(b_shuffle.view(torch.uint8))
        b_scales = formats.e8m0_unshuffle(b_scale_sh.view(torch.uint8), n, k // 32)
        a = formats.dequantize_mxfp4(codes.view(torch.uint8), a_scales.view(torch.uint8))
        return (a @ formats.dequantize_mxfp4(b_codes, b_scales).t()).to(dtype)
    monkeypatch.setattr(aiter_path, "_aiter",
                        lambda: (formats.quantize_mxfp4, lambda scales: scales, gemm_a4w4))


@pytest.mark.interpreter
@pytest.mark.parametrize("path", ["preshuffle", "hopper", "dequant", "aiter"])
def test_measure_takes_every_paths_launcher(monkeypatch, path):
    """tools.tune's measure on each path's launcher (launchers.paths): checked against the
    reference, timed, its launches' registers and spills read through the launcher contract
    (launchers.launcher), none known in the interpreter."""
    from mxfp4_mm import reference
    from mxfp4_mm.launchers.gemm_config import config_from_fields
    fake_aiter(monkeypatch)
    fields = {"preshuffle": dict(block_m=16, block_n=32, block_k=256),
              "hopper": dict(block_m=16, block_n=32, block_k=256, swap_ab=True)}
    config = config_from_fields(dict(fields.get(path, {}), path=path))
    data = reference.generate_input(8, 64, 256, seed=3)
    result = tune.measure(config, "interpreter", data, CallingLoop(), calls=2)
    assert result["ok"], result
    assert result["calls"] == 2 and result["median_us"] == 1.0
    launches = {"preshuffle": ["gemm"], "hopper": ["gemm"], "aiter": [],
                "dequant": ["quantize_a", "dequantize_b"]}[path]
    assert list(result["resources"]) == launches
    assert all(found == dict(n_regs=None, n_spills=None) for found in result["resources"].values())
    assert not tune.spills(result)
