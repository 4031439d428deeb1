"""Every config the lookup serves fits the chip it is built for, and spills nothing where a
config that does not spill exists (launchers.configs, launchers.fit, launchers.targets,
launchers.heuristics, tools.fit).

- Over a grid of M from 1 to 16384 (powers of two and odd M) x the built-in model shapes
  (tools/model_shapes.py), and the task shapes, on gfx950 and on sm_90: the config served
  first (table or heuristic) has every launch within the target's shared memory (LDS) and
  spilling no register, each launch cross-compiled with the runner's Triton (3.6.0) by
  `python -m tools.isa --shapes` (each distinct kernel compiled once). The ladder's last own
  rung (gemm_config.FITTING_CONFIG) is a config that fits without spilling on both targets at
  every shape of the grid, so no served config may spill.
- A config too big for a target is reported as not fitting, with its bytes and the limit,
  and tools.isa then exits 1.
- The heuristic of an arch is its family's: an sm_* arch takes sm_90's rules, any other
  gfx950's, the interpreter gfx950's; sm_90's splits K to about four K tiles a split while
  the fp32 partials stay under the weight's bytes.
- tools.fit, with a faked compiler: gfx950 code with scratch bytes spills (as VGPR and SGPR
  spills do); a launch is compiled once per distinct options, not once per kernel and
  arguments; each target's row compiles the quantizer of its ladder's first rung (gfx950's
  hardware one) and names it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mxfp4_mm.launchers import ladder
from mxfp4_mm.launchers.gemm_config import FITTING_CONFIG, GemmConfig
from mxfp4_mm.launchers.heuristics import HEURISTICS, heuristic_config
from mxfp4_mm.launchers.heuristics.sm90 import hopper_config, sm90_preshuffle
from mxfp4_mm.launchers.targets import SM90, target_facts
from mxfp4_mm.launchers.task_shapes import TASK_SHAPES
from mxfp4_mm.tools import fit as tools_fit
from mxfp4_mm.tools.model_shapes import MODEL_LAYERS

ROOT = Path(__file__).resolve().parents[1]
RUNNER_TRITON = "3.6.0"
ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
GRID_M = (1, 2, 3, 4, 8, 16, 32, 64, 100, 128, 256, 512, 1000, 1024, 2048, 4096, 8192, 16384)
TARGETS = ("gfx950", "sm_90")


def _isa(*args, timeout=1500):
    return subprocess.run([sys.executable, "-m", "tools.isa", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", params=TARGETS)
def grid_rows(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / f"{request.param}.json"
    done = _isa("--arch", request.param, "--shapes", "all", *MODEL_LAYERS,
                "--m", ",".join(map(str, GRID_M)), "--json", str(out))
    assert out.exists(), done.stderr[-2000:]
    return request.param, json.loads(out.read_text()), done


def test_the_grid_covers_every_model_shape_and_m(grid_rows):
    arch, rows, _ = grid_rows
    shapes = {tuple(row["shape"]) for row in rows}
    for layers in MODEL_LAYERS.values():
        for n, k in layers.values():
            assert {(m, n, k) for m in GRID_M} <= shapes
    assert set(TASK_SHAPES) <= shapes
    assert {row["triton"] for row in rows} == {RUNNER_TRITON}
    assert {row["source"] for row in rows} == {"table", "heuristic"}


def test_every_served_config_fits_its_target(grid_rows):
    arch, rows, done = grid_rows
    too_big = [(row["shape"], row["label"], launch["kernel"], launch["shared_bytes"])
               for row in rows for launch in row["launches"] if not launch["fits"]]
    assert too_big == []
    assert all(launch["shared_limit"] == target_facts(arch).shared_memory_bytes
               and 0 <= launch["shared_bytes"] <= launch["shared_limit"]
               for row in rows for launch in row["launches"])
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_served_config_spills(grid_rows):
    """FITTING_CONFIG does not spill anywhere (test below), so nothing served may."""
    arch, rows, _ = grid_rows
    spilling = [(row["shape"], row["label"], launch["kernel"], launch["registers"])
                for row in rows for launch in row["launches"] if launch["spills"]]
    assert spilling == []
    assert all(launch["registers"] > 0 for row in rows for launch in row["launches"])


CONFIG_ROWS = '''
import json, sys
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.tools.fit import compile_all, config_row
arch, config, shapes = sys.argv[1], GemmConfig(**json.loads(sys.argv[2])), json.loads(sys.argv[3])
compile_all(arch, [(shape, config) for shape in shapes])
print(json.dumps([config_row(arch, shape, config) for shape in shapes]))
'''


def _config_rows(arch, config, shapes):
    """tools.fit.config_row of `config` at each shape, compiled with the runner's Triton."""
    from mxfp4_mm.tools.gfx950.cross_compile import triton_paths
    env = dict(ENV, PYTHONPATH=os.pathsep.join([*triton_paths(RUNNER_TRITON), str(ROOT)]))
    fields = {f: v for f, v in vars(config).items()}
    done = subprocess.run([sys.executable, "-c", CONFIG_ROWS, arch, json.dumps(fields),
                           json.dumps(shapes)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("arch", TARGETS)
def test_the_last_own_rung_fits_every_target_without_spilling(arch):
    pairs = sorted({pair for layers in MODEL_LAYERS.values() for pair in layers.values()})
    shapes = [[m, n, k] for n, k in pairs for m in (1, 3, 16384)]
    assert FITTING_CONFIG.num_stages == 1 and FITTING_CONFIG.split_k == 1
    for row in _config_rows(arch, FITTING_CONFIG, shapes):
        assert row["fits"] and not row["spills"], (row["shape"], row["launches"])


def test_a_config_too_big_for_sm90_is_reported_as_not_fitting():
    """128x256x512 w8 s2 with A quantized once: its GEMM's pipeline buffers pass an H100's
    232,448 bytes a block (gfx950's LDS holds them)."""
    big = GemmConfig(128, 256, 512, num_warps=8, num_stages=2, quantize_a_once=True)
    (row,) = _config_rows("sm_90", big, [[1024, 4096, 4096]])
    gemm = next(launch for launch in row["launches"] if launch["kernel"] == "gemm")
    assert not row["fits"] and not gemm["fits"]
    assert gemm["shared_bytes"] > gemm["shared_limit"] == 232448
    (row,) = _config_rows("gfx950", big, [[1024, 4096, 4096]])
    assert row["fits"]


def test_tools_isa_names_the_bytes_and_exits_1_when_a_served_config_does_not_fit(tmp_path):
    """A tuned-shapes file serving the config above on sm_90 (the table is not touched)."""
    from mxfp4_mm.launchers.tuned_shapes import file_entry, write_configs
    path = tmp_path / "configs.json"
    big = GemmConfig(128, 256, 512, num_warps=8, num_stages=2, quantize_a_once=True)
    write_configs(str(path), [file_entry("sm_90", 4096, 4096, big, "too big", m=1024)])
    env_file = dict(ENV, MXFP4_MM_CONFIGS=str(path))
    done = subprocess.run([sys.executable, "-m", "tools.isa", "--arch", "sm_90", "--shapes",
                           "1024,4096,4096"], cwd=ROOT, env=env_file, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "DOES NOT FIT" in done.stdout and "/232,448 B" in done.stdout


@pytest.mark.parametrize("arch, rules", [("sm_90", "sm_90"), ("sm_80", "sm_90"),
                                         ("sm_100", "sm_90"), ("gfx950", "gfx950"),
                                         ("gfx942", "gfx950"), ("interpreter", "gfx950")])
def test_each_arch_takes_its_familys_heuristic(arch, rules):
    assert target_facts(arch).heuristic == rules
    assert heuristic_config(arch, 8, 4096, 4096) == HEURISTICS[rules](8, 4096, 4096)


@pytest.mark.parametrize("m", [1, 7, SM90.hopper_max_m, SM90.hopper_max_m + 1, 64, 1000])
def test_sm90_serves_the_hopper_path_up_to_its_m_and_the_preshuffle_gemm_above(m):
    expected = (hopper_config(m, 4096, 4096) if m <= SM90.hopper_max_m
                else sm90_preshuffle(m, 4096, 4096))
    assert heuristic_config("sm_90", m, 4096, 4096) == expected
    assert expected.path == ("hopper" if m <= SM90.hopper_max_m else "preshuffle")


@pytest.mark.parametrize("m, n, k, split_k", [
    (1, 6144, 4096, 4),       # 16 K tiles: four a split
    (1, 28672, 4096, 4),
    (16, 2112, 7168, 7),      # 28 K tiles
    (64, 7168, 2048, 2),      # partials bound: 2048 // (16 * 64) = 2
    (256, 3072, 1536, 1),     # partials bound: 0
    (32, 4096, 14336, 14),    # 56 K tiles, the bound 28
    (1, 4096, 65536, 16),     # at most 16
    (4, 2880, 512, 1),        # two K tiles
])
def test_sm90_splits_k_by_k_tiles_within_the_partials_bound(m, n, k, split_k):
    config = sm90_preshuffle(m, n, k)
    assert config.split_k == split_k
    assert config.split_k_reduce == ("last_program" if split_k > 1 else "kernel")


@pytest.mark.parametrize("m, tiles", [(1, (16, 64, 4)), (16, (16, 64, 4)), (17, (32, 64, 8)),
                                      (32, (32, 64, 8)), (33, (64, 64, 8)),
                                      (1023, (64, 64, 8)), (1024, (128, 64, 8))])
def test_sm90_tiles_by_m(m, tiles):
    config = sm90_preshuffle(m, 4096, 4096)
    assert (config.block_m, config.block_n, config.num_warps) == tiles
    assert config.block_k == 256 and config.quantize_a_once == (m >= 1024)


def _gfx950_compiled(shared=0, vgpr_spills=0, sgpr_spills=0, scratch=0):
    """What compile_for returns for gfx950, as far as tools.fit reads it."""
    amdgcn = (f"  .group_segment_fixed_size: 0\n  .private_segment_fixed_size: {scratch}\n"
              f"  .sgpr_spill_count: {sgpr_spills}\n  .vgpr_count: 128\n"
              f"  .vgpr_spill_count: {vgpr_spills}\n")
    return SimpleNamespace(metadata=SimpleNamespace(shared=shared), asm={"amdgcn": amdgcn})


@pytest.mark.parametrize("found, spills", [
    (dict(), False), (dict(scratch=64), True), (dict(vgpr_spills=3), True),
    (dict(sgpr_spills=1), True)])
def test_gfx950_code_with_scratch_or_spill_counts_spills(monkeypatch, found, spills):
    monkeypatch.setattr(tools_fit, "compile_for", lambda *args: _gfx950_compiled(**found))
    spec = SimpleNamespace(name="gemm", kernel=None, sample_args=(), options={})
    assert tools_fit._compile("gfx950", spec)["spills"] is spills


def test_a_launch_is_compiled_once_per_distinct_options(monkeypatch):
    compiled = []

    def compile_for(kernel, args, options, target):
        compiled.append(options)
        return _gfx950_compiled(shared=1000 * options["num_warps"])
    monkeypatch.setattr(tools_fit, "compile_for", compile_for)
    monkeypatch.setattr(tools_fit, "specialization", lambda kernel, args, target: "same")
    monkeypatch.setattr(tools_fit, "_compiled", {})
    specs = [SimpleNamespace(name="gemm", kernel=None, sample_args=(), options=dict(num_warps=w))
             for w in (4, 8, 4)]
    assert [tools_fit.launch_resources("gfx950", spec)["shared_bytes"] for spec in specs] == \
        [4000, 8000, 4000]
    assert compiled == [dict(num_warps=4), dict(num_warps=8)]


@pytest.mark.parametrize("arch", TARGETS)
def test_a_row_compiles_and_names_the_quantizer_of_the_ladders_first_rung(monkeypatch, arch):
    m, n, k = 16, 64, 512
    config = GemmConfig(16, 64, 256)
    built, compiled = [], []
    monkeypatch.setattr(ladder, "note_untuned", lambda *args: None)
    monkeypatch.setattr(ladder, "build_launcher",
                        lambda config, backend, m, n, k, strides, device, quantizer, **_:
                        built.append(quantizer))
    ladder.rungs_for(arch, tools_fit.BACKENDS[arch], m, n, k, (k, 1), "meta")[0].build()
    monkeypatch.setattr(tools_fit, "path_launch_specs",
                        lambda *args: compiled.append(args[-1]) or [])
    row = tools_fit.config_row(arch, (m, n, k), config)
    assert compiled == built and row["quantizer"] == built[0]
    assert (built[0] == "hardware") is (arch == "gfx950")
