"""The decisions of launchers.gemm_config, launchers.heuristics and launchers.configs, each
tested where it turns (tests/test_launchers.py has the table-wide checks).

- GemmConfig accepts or refuses each field: block_n a multiple of 32 dividing 256, block_k and
  block_m powers of two from 256 and 16, split_k, group_m and num_xcds from 1, split_k_reduce,
  cache_modifier and store_modifier from their lists, wave_split_k a power of two leaving
  slices of at least one MFMA's K (the preshuffle path's rule); every problem is named in one
  error; the hopper path refuses the fields it does not read, by its own rule;
- the label: tiles, splits with who reduces them (only when split), warps, stages, and each
  option only when set;
- heuristic_config: each arch family's rules (an unknown sm_* arch takes sm_90's, any other
  gfx950's, the interpreter gfx950's);
- gfx950's: block_m the power of two of M clamped to 16..64, block_n 128 from N = 2048
  on, block_k 512 when K is a multiple of 512 and block_m is under 64, split-K only under half the target workgroups
  and from 4 K tiles on, as many splits as fill the target (at most the K tiles and 16), two
  stages only when a split holds more than one K tile;
- config_for: the arch's table entry for its exact shape, else the heuristic;
- the other paths' configs ("dequant", "aiter"): the fields each reads, their labels; the
  lookup serves "dequant" from vendor_gemm_from_m on NVIDIA before sm_100 only.
"""

import pytest

from mxfp4_mm.launchers import configs
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.configs import config_lookup
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GEMM_PATHS, GemmConfig, config_from_fields
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.targets import SM90, target_facts


def make(**fields):
    return GemmConfig(**(dict(block_m=16, block_n=64, block_k=512) | fields))


@pytest.mark.parametrize("field, good, bad", [
    ("block_n", (32, 64, 128, 256), (0, 16, 48, 160, 288, 512)),
    ("block_k", (256, 512, 1024), (0, 128, 255, 257, 384, 768)),
    ("block_m", (16, 32, 64, 128), (0, 8, 15, 17, 24, 48)),
    ("split_k", (1, 2, 3), (0, -1)),
    ("group_m", (1, 2, 8), (0, -1)),
    ("num_xcds", (1, 8), (0, -1)),
    ("wave_split_k", (1, 2, 4), (0, -1, 3, 8)),     # block_k 512: slices of 128 at least
    ("split_k_reduce", ("kernel", "last_program"), ("", "atomic", None)),
    ("cache_modifier", (None, ".cg", ".ca", ".cv"), (".wt", "cg", "")),
    ("store_modifier", (None, ".wb", ".cg", ".cs", ".wt"), (".ca", ".cv", "wt", "")),
    ("path", ("preshuffle", "dequant"), ("", "fused", None)),   # "aiter": tests/test_dequant.py
])
def test_each_field_is_accepted_or_refused_at_its_boundary(field, good, bad):
    for value in good:
        assert getattr(make(**{field: value}), field) == value
    for value in bad:
        with pytest.raises(ValueError, match=f"bad GemmConfig: .*{field}"):
            make(**{field: value})


@pytest.mark.parametrize("field, value", [("wave_split_k", 2), ("num_xcds", 8),
                                          ("b_scales_first", True), ("waves_per_eu", 2),
                                          ("matrix_instr_nonkdim", 32)])
def test_the_hopper_path_refuses_what_it_does_not_read_and_the_preshuffle_path_reads_it(field,
                                                                                      value):
    assert getattr(make(**{field: value}), field) == value
    with pytest.raises(ValueError, match=f"path='hopper' reads only .*; leave {field} out$"):
        make(path="hopper", **{field: value})
    assert make(path="hopper", swap_ab=True, split_k=2, split_k_reduce="last_program",
                quantize_a_once=True).swap_ab


def test_every_problem_is_named_in_one_error():
    with pytest.raises(ValueError) as error:
        make(block_n=48, block_k=128, block_m=8, split_k=0, split_k_reduce="x",
             cache_modifier="x", store_modifier="x", num_xcds=0)
    message = str(error.value)
    assert message.count("; ") == 7 and "\n" not in message
    for text in ("block_n=48", "block_k=128", "block_m=8", "split_k and group_m",
                 "split_k_reduce='x'", "cache_modifier='x'", "store_modifier='x'", "num_xcds=0"):
        assert text in message


@pytest.mark.parametrize("fields, label", [
    (dict(), "16x64x512 sk1 w4 s1"),
    (dict(split_k=2), "16x64x512 sk2/rk w4 s1"),
    (dict(split_k=2, split_k_reduce="last_program"), "16x64x512 sk2/lp w4 s1"),
    (dict(split_k_reduce="last_program"), "16x64x512 sk1 w4 s1"),
    (dict(num_warps=2, num_stages=3, cache_modifier=".cg"), "16x64x512 sk1 w2 s3 .cg"),
    (dict(waves_per_eu=2, num_xcds=8, store_modifier=".wt"),
     "16x64x512 sk1 w4 s1 wpe2 xcd8 store.wt"),
    (dict(wave_split_k=4), "16x64x512 sk1 w4 s1 wk4"),
    (dict(num_xcds=1, waves_per_eu=0), "16x64x512 sk1 w4 s1"),
    (dict(path="preshuffle"), "16x64x512 sk1 w4 s1"),
])
def test_the_label_names_what_is_set(fields, label):
    assert make(**fields).label == label


@pytest.mark.parametrize("m, block_m", [(1, 16), (16, 16), (17, 32), (32, 32), (33, 64),
                                        (64, 64), (65, 64), (1000, 64)])
def test_heuristic_block_m(m, block_m):
    assert heuristic_config("gfx950", m, 4096, 512).block_m == block_m


@pytest.mark.parametrize("n, block_n", [(64, 64), (2047, 64), (2048, 128), (8192, 128)])
def test_heuristic_block_n(n, block_n):
    assert heuristic_config("gfx950", 256, n, 512).block_n == block_n


@pytest.mark.parametrize("m, k, block_k", [(32, 512, 512), (32, 1024, 512), (32, 768, 256),
                                           (32, 320, 256), (33, 512, 256), (256, 1024, 256)])
def test_heuristic_block_k(m, k, block_k):
    assert heuristic_config("gfx950", m, 4096, k).block_k == block_k


@pytest.mark.parametrize("m, n, k, split_k, stages", [
    (16, 128 * 63, 4 * 512, 3, 1),     # 63 tiles: cdiv(128, 63) = 3 splits, one K tile each
    (16, 128 * 64, 4 * 512, 1, 2),     # 64 tiles: half the target, no split
    (16, 64 * 4, 3 * 512, 1, 2),       # 3 K tiles: no split
    (16, 64 * 4, 4 * 512, 4, 1),       # 4 K tiles, 4 tiles: at most the K tiles
    (16, 64, 40 * 512, 16, 2),         # 1 tile: at most 16 splits
    (16, 64 * 2, 64 * 512, 16, 2),     # 2 tiles: 64 wanted, 16 taken
    (16, 128 * 32, 8 * 512, 4, 2),     # 32 tiles: cdiv(128, 32) = 4
    (16, 64, 512, 1, 1),               # one K tile: one stage
])
def test_heuristic_split_k_and_stages(m, n, k, split_k, stages):
    config = heuristic_config("gfx950", m, n, k)
    assert (config.split_k, config.num_stages) == (split_k, stages)


def test_config_for_looks_up_the_exact_shape_of_its_arch(monkeypatch):
    entry = make(block_n=32)
    monkeypatch.setitem(configs.GEMM_CONFIGS, "test-arch", {(8, 64, 512): entry})
    assert configs.config_for("test-arch", 8, 64, 512) is entry
    assert configs.config_for("test-arch", 8, 64, 1024) == heuristic_config("test-arch", 8, 64, 1024)
    assert configs.config_for("other-arch", 8, 64, 512) == heuristic_config("other-arch", 8, 64, 512)


def test_table_entries_keep_every_field_but_the_note():
    table = configs._table({(1, 2, 3): {"block_m": 32, "block_n": 32, "block_k": 256,
                                        "split_k": 2, "num_warps": 2, "note": "x"}})
    assert table == {(1, 2, 3): GemmConfig(32, 32, 256, split_k=2, num_warps=2)}


def test_every_path_has_its_launcher_and_its_launches():
    from mxfp4_mm.launchers.paths import LAUNCH_SPECS, LAUNCHERS
    assert tuple(LAUNCHERS) == tuple(LAUNCH_SPECS) == GEMM_PATHS

def test_paths_read_their_fields_only_and_their_labels_name_them():
    assert DEQUANT_CONFIG.label == "dequant 32x32x256 w8" and AITER_CONFIG.label == "aiter"
    assert config_from_fields({"path": "dequant", "num_warps": 4}).num_warps == 4
    with pytest.raises(ValueError, match="path='dequant' reads only .*; leave split_k out"):
        config_from_fields({"path": "dequant", "split_k": 2})
    with pytest.raises(ValueError, match="path='aiter' reads only no field; leave block_m out"):
        config_from_fields({"path": "aiter", "block_m": 64})
    with pytest.raises(ValueError, match="path='cublas' is not one of"):
        GemmConfig(16, 32, 256, path="cublas")


@pytest.mark.usefixtures("fresh_lookup")
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
