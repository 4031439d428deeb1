"""The prepared path's large tiles (launchers.prepared.LARGE_TILES: A quantized once, no split,
Triton's pipeliner staging A and B), which its rule serves from sm_90's
Target.large_tiles_from_m on.

On the CPU: the rule changes at the Target's threshold and nowhere else (moving the threshold
moves it); at the large shapes of interest it takes the first tile whose grid has a program for
every SM, or the last, never a split. On `device` (the interpreter on a CPU, compiled on an
NVIDIA GPU of sm_90 and up): each large tile against the reference at odd shapes (M not a
multiple of BLOCK_M, N not one of BLOCK_N, K a multiple of 64 only, a strided A).
Cross-compiled for sm_90 with the runner's Triton: every large tile at
sample shapes (even and ragged K, a ragged N) and the rule's config of each sample shape fit
the chip's shared memory with no stack, each K tile holding BLOCK_K / 16 wgmmas a warp.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import current_target, prepared
from mxfp4_mm.launchers.targets import SM90, target_facts
from mxfp4_mm.tools.prepared_check import strided_copy
from test_hopper_gemm import hopper_device  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[1]
# M x N x K of large-M GEMMs: square layers, Llama-3-8B's and -70B's, DeepSeek's, a narrow N.
LARGE_SHAPES = [(1024, 4096, 4096), (2048, 4096, 4096), (2048, 7168, 2048), (1536, 2112, 7168),
                (2048, 4096, 4352), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 208, 512),
                (2048, 28672, 4096), (4096, 4096, 14336), (256, 4096, 4096), (512, 4096, 4096)]


def test_the_rule_takes_the_large_tiles_from_the_targets_threshold(monkeypatch):
    threshold = SM90.large_tiles_from_m
    assert target_facts("sm_90").large_tiles_from_m == threshold
    assert target_facts("sm_100").large_tiles_from_m is None    # its own FP4 MMA
    assert target_facts("sm_89").large_tiles_from_m is None     # no wgmma
    assert target_facts("gfx950").large_tiles_from_m is None
    below = prepared.prepared_config(threshold - 1, 4096, 4096)
    assert below not in prepared.large_tiles() and below.block_k == 256
    assert prepared.prepared_config(threshold, 4096, 4096) in prepared.large_tiles()
    moved = dataclasses.replace(SM90, large_tiles_from_m=2 * threshold)
    monkeypatch.setattr(prepared, "SM90", moved)
    assert prepared.prepared_config(threshold, 4096, 4096) not in prepared.large_tiles()
    assert prepared.prepared_config(2 * threshold, 4096, 4096) in prepared.large_tiles()


@pytest.mark.parametrize("m, n, k", LARGE_SHAPES)
def test_a_large_shape_takes_the_first_tile_that_fills_the_sms_with_no_split(m, n, k):
    config = prepared.prepared_config(m, n, k)
    tiles = prepared.large_tiles()
    assert config in tiles and config.a_dequantized and config.num_stages > 1
    assert config.splits_for(k) == (1, formats.cdiv(formats.pad_to(k, 256), config.block_k)
                                    * config.block_k)

    def grid(tile):
        return formats.cdiv(m, tile.block_m) * formats.cdiv(n, tile.block_n)
    earlier = tiles[:tiles.index(config)]
    assert all(grid(tile) < SM90.processors for tile in earlier)
    assert grid(config) >= SM90.processors or config == tiles[-1]


def test_the_large_tiles_are_the_kernels_shapes():
    """BLOCK_N 16 rows a warp, BLOCK_K whole units of the layout, BLOCK_M a power of two."""
    for config in prepared.large_tiles():
        assert config.block_n == 16 * config.num_warps
        assert config.block_k in (64, 128, 256) and config.split_k == 1
        assert config.block_m >= 16 and config.block_m & (config.block_m - 1) == 0


# m, n, k, strided A: M past a multiple of every BLOCK_M (300: 2 tiles of 256, 3 of 128, 5 of
# 64), N not a multiple of 128 (80: one ragged tile; 272: two and a ragged one), K a
# multiple of 64 only (320, padded to 512: a ragged last tile of 128; 64: one unit). Small
# enough to interpret in a few seconds each.
ODD_SHAPES = [(300, 80, 320, False), (130, 272, 64, True)]


@pytest.mark.parametrize("tile", prepared.large_tiles(), ids=lambda tile: tile.label)
@pytest.mark.parametrize("m, n, k, strided", ODD_SHAPES)
def test_each_large_tile_matches_the_reference_at_odd_shapes(hopper_device, tile, m, n, k,
                                                             strided):
    data = reference.generate_input(m, n, k, seed=m + n + k, device=hopper_device)
    a = strided_copy(data[0]) if strided else data[0]
    weight = prepared.hopper_weight(data[3], data[4])
    launcher = prepared.PreparedLauncher(tile, current_target(a.device)[0], m, n, k, a.stride(),
                                         a.device, weight.wide_scales)
    ok, message = reference.check_implementation(data, launcher(a, weight.values, weight.scales))
    assert ok, message


_CROSS_COMPILE = """
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
from mxfp4_mm.launchers.gemm_config import config_from_fields
from mxfp4_mm.launchers.prepared import large_tiles
from mxfp4_mm.tools import fit, sm90_loop
served = [tuple(shape) for shape in json.loads(sys.argv[1])]
rows = sm90_loop.rows(served, paths=("prepared",))
for tile in large_tiles():
    rows += sm90_loop.rows([(4096, 4096, 4096), (1024, 1040, 576)], paths=("prepared",),
                           prepared_tile=tile)
hopper = [fit.config_row("sm_90", shape, config_from_fields(HOPPER_LARGE_TILE))
          for shape in [(4096, 4096, 4096), (300, 1040, 576)]]
print(json.dumps([rows, hopper]))
"""


def test_every_large_tile_and_served_config_compiles_for_sm90_within_shared_memory_and_no_stack(
        runners_triton):
    """The prepared path's (tools.sm90_loop) and the hopper path's large tile (tools.fit: its
    quantize launch and its GEMM)."""
    import json
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT)])
    served = [shape for shape in LARGE_SHAPES if shape[0] >= SM90.large_tiles_from_m]
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE, json.dumps(served)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    rows, hopper = json.loads(done.stdout.splitlines()[-1])
    assert len(rows) == len(served) + 2 * len(prepared.large_tiles())
    labels = {tile.label for tile in prepared.large_tiles()}
    for row in rows:
        assert row["triton"] == "3.6.0" and row["config"]["label"] in labels, row
        assert row["fits"] and row["shared_bytes"] <= SM90.shared_memory_bytes, row
        assert row["stack_bytes"] == 0 and row["registers"] <= 255, row
        assert row["loop_mix"]["HGMMA"] == row["config"]["block_k"] // 16, row
    for row in hopper:
        assert row["triton"] == "3.6.0" and [launch["kernel"] for launch in row["launches"]] == [
            "quantize", "gemm"], row
        assert row["fits"] and not row["spills"], row


@pytest.mark.usefixtures("fresh_lookup")
def test_the_hopper_paths_large_tile_is_timed_beside_the_dequant_path_from_the_threshold():
    """custom_kernel's weight: from Target.large_tiles_from_m on the import-time tuner and
    tools.tune time kernels.hopper_gemm's large tile beside the dequant path, which the lookup
    still serves (launchers.configs)."""
    from mxfp4_mm.launchers import tuner
    from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
    from mxfp4_mm.launchers.configs import config_lookup
    from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, config_from_fields
    large = config_from_fields(HOPPER_LARGE_TILE)
    m = SM90.large_tiles_from_m
    assert config_lookup("sm_90", m, 4096, 4096)[0] == DEQUANT_CONFIG
    found = tuner.candidate_configs("sm_90", (m, 4096, 4096))
    assert DEQUANT_CONFIG in found and large in found
    assert large not in tuner.candidate_configs("sm_90", (m - 1, 4096, 4096))
    assert large not in tuner.candidate_configs("gfx950", (m, 4096, 4096))


@pytest.mark.parametrize("m, n, k", [(300, 80, 320)])
def test_the_hopper_paths_large_tile_matches_the_reference_at_an_odd_shape(hopper_device, m, n,
                                                                           k):
    from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
    from mxfp4_mm.launchers.gemm_config import config_from_fields
    from mxfp4_mm.launchers.paths import build_launcher
    data = reference.generate_input(m, n, k, seed=m + n + k, device=hopper_device)
    a = data[0]
    launcher = build_launcher(config_from_fields(HOPPER_LARGE_TILE),
                              current_target(a.device)[0], m, n, k, a.stride(), a.device)
    ok, message = reference.check_implementation(data, launcher(a, data[3], data[4]))
    assert ok, message


def test_the_bench_times_the_other_kind_of_tile_and_at_large_m_no_flips():
    """tools.bench --prepared: below the threshold "tile_alt" is the large tile that would
    serve there; from it the rule's neighbour in LARGE_TILES, and the flips are not timed."""
    from mxfp4_mm.tools.bench_prepared import FLIP_COMBINATIONS, variant_configs
    tiles = prepared.large_tiles()
    below = variant_configs(64, 4096, 4096)
    assert below["tile_alt"] == prepared.large_tile_config(64, 4096, 4096)
    assert set(FLIP_COMBINATIONS) <= set(below)
    for m in (1024, 4096, 256):
        configs = variant_configs(m, 4096, 4096)
        assert list(configs) == ["prepared", "tile_alt"]
        at = tiles.index(configs["prepared"])
        assert configs["tile_alt"] == tiles[at - 1 if at else 1]


def test_the_ladder_steps_down_from_a_large_tile_to_the_small_tiles_rule():
    """From the threshold the ladder holds the large tile (direct, then standard launch), then
    the small tiles' rule at that M the same two ways; below it, the rule's config alone."""
    m, n, k = SM90.large_tiles_from_m + 44, 80, 320
    rungs = prepared.prepared_rungs("interpreter", m, n, k, (k, 1), "cpu", False)
    assert [rung.name for rung in rungs] == [
        "prepared", "prepared, standard launch", "prepared, small tiles",
        "prepared, small tiles, standard launch"]
    assert [rung.config for rung in rungs] == [prepared.large_tile_config(m, n, k)] * 2 + [
        prepared.small_tile_config(m, n, k)] * 2
    below = prepared.prepared_rungs("interpreter", 3, n, k, (k, 1), "cpu", False)
    assert [rung.name for rung in below] == ["prepared", "prepared, standard launch"]


def test_a_large_tile_that_does_not_fit_is_served_by_the_small_tiles(hopper_device, monkeypatch,
                                                                     capfd):
    """A large tile refused as not fitting (faked): the op steps past its standard launch (the
    same kernels) to the small tiles' rule, and its output matches the reference."""
    from collections import OrderedDict

    import mxfp4_mm.launchers as launchers
    from mxfp4_mm.launchers.fit import DoesNotFit
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())
    monkeypatch.setattr(launchers, "_checked_signatures", {})
    real = prepared.PreparedLauncher

    def launcher(config, *arguments, **options):
        if config in prepared.large_tiles():
            raise DoesNotFit("the gemm kernel asks for more shared memory than the chip has")
        return real(config, *arguments, **options)
    monkeypatch.setattr(prepared, "PreparedLauncher", launcher)
    m, n, k = SM90.large_tiles_from_m + 44, 80, 320
    data = reference.generate_input(m, n, k, seed=5, device=hopper_device)
    weight = prepared.hopper_weight(data[3], data[4])
    ok, message = reference.check_implementation(data, prepared.gemm_prepared(data[0], weight))
    assert ok, message
    printed = capfd.readouterr().err
    assert f"{m}x{n}x{k}: prepared failed (DoesNotFit: the gemm kernel asks" in printed
    assert f"{m}x{n}x{k}: served by prepared, small tiles" in printed
