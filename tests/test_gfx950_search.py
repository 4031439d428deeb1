"""tools.gfx950.search without compiling: what stage 1 tries and what eligible() refuses.

- stage 1 gives two pipeline stages to a config whose split holds two K tiles or more, one
  to a config with one K tile per split (nothing to overlap);
- eligible() refuses a call when any of its rows (the GEMM's, the reduce's) failed to
  compile, has no critical path, uses scratch, spills, needs more LDS than a CU's 160 KiB
  (163,840 bytes: that much is eligible), has a hazard, has an in-kernel reduce
  that is not release-ordered, or spends more fast-path instructions per element of the
  MFMA's tile than its quantizer's bar;
- ranked() orders by the worst member of the model family, ties by the next worst.
"""

import pytest

from mxfp4_mm.launchers.gemm_config import GemmConfig

HARDWARE_BAR = 8.0   # the hardware quantizer's fast-path bar, MAX_FAST_PATH_INSTRUCTIONS's


@pytest.fixture
def search():
    """tools.gfx950.search, whose bar the rows below are built against."""
    from mxfp4_mm.tools.gfx950 import search
    assert search.MAX_FAST_PATH_INSTRUCTIONS["hardware"] == HARDWARE_BAR
    return search


def _stage1(search, shape, block_m, block_n, block_k, split_k):
    found = [c for c in search.tile_configs(shape)
             if (c.block_m, c.block_n, c.block_k, c.split_k) == (block_m, block_n, block_k,
                                                                  split_k)]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("block_k, split_k, stages", [
    (512, 1, 2),      # two K tiles in the one split
    (256, 1, 2),      # four
    (512, 2, 1),      # one K tile per split
    (1024, 1, 1),     # the whole K in one tile
])
def test_stage_one_pipelines_only_splits_of_several_k_tiles(search, block_k, split_k, stages):
    config = _stage1(search, (4, 2880, 1024), 16, 32, block_k, split_k)
    assert config.num_stages == stages


def test_stage_one_counts_k_tiles_per_split_not_per_shape(search):
    """16x2112x7168 split 7: 1,024 of K per split, two tiles of 512 but one of 1,024."""
    assert _stage1(search, (16, 2112, 7168), 16, 128, 512, 7).num_stages == 2
    assert _stage1(search, (16, 2112, 7168), 16, 128, 1024, 7).num_stages == 1


def _row(**changes):
    row = dict(quantizer="hardware", critical_path={"issue": 500}, scratch_bytes=0, lds_bytes=0,
               vgpr_spills=0, sgpr_spills=0, hazards=[], release_ordered=True,
               fast_path_instructions_per_tile_element=HARDWARE_BAR)
    row.update(changes)
    return row


def _call(**by_member):
    return [_row(modelled_us=max(by_member.values()), modelled_us_by_member=by_member)]


HAZARD = dict(hazard="VALUWriteVgprReadlane", line=120, instruction="v_cvt_scalef32_pk_fp4_bf16",
              next_line=121, next_instruction="v_readlane_b32", wait_states=0, required=1)


def test_a_clean_call_at_the_fast_path_bar_is_eligible(search):
    assert search.eligible([_row()])
    assert search.eligible([_row(lds_bytes=160 * 1024)])
    assert search.eligible([_row(quantizer="software", fast_path_instructions_per_tile_element=40.0)])


@pytest.mark.parametrize("change", [
    dict(hazards=[HAZARD]),
    dict(scratch_bytes=16),
    dict(lds_bytes=160 * 1024 + 1),
    dict(vgpr_spills=1),
    dict(sgpr_spills=1),
    dict(release_ordered=False),
    dict(error="compile failed"),
    dict(fast_path_instructions_per_tile_element=HARDWARE_BAR + 0.1),
], ids=["hazard", "scratch", "lds-over-a-cu", "vgpr-spill", "sgpr-spill", "not-release-ordered", "error",
        "fast-path-past-the-bar"])
@pytest.mark.parametrize("which", [0, 1], ids=["gemm-row", "reduce-row"])
def test_a_call_with_any_row_at_fault_is_refused(search, change, which):
    rows = [_row(), _row()]
    rows[which] = _row(**change)
    assert not search.eligible(rows)


def test_a_row_without_a_critical_path_is_refused(search):
    row = _row()
    del row["critical_path"]
    assert not search.eligible([row])


def test_ranked_drops_a_hazardous_call_and_orders_the_rest_by_modelled_time(search):
    slow, fast = _call(a=9.0, b=8.0), _call(a=7.0, b=6.0)
    hazardous = [_row(modelled_us=5.0, modelled_us_by_member=dict(a=5.0), hazards=[HAZARD])]
    assert search.ranked([slow, hazardous, fast]) == [fast, slow]


def test_stage_two_offers_pipeline_stages_only_to_splits_of_several_k_tiles(search):
    one_tile = GemmConfig(16, 32, 512, split_k=2, split_k_reduce="last_program")
    two_tiles = GemmConfig(16, 32, 512)
    assert {c.num_stages for c in search.neighbours(one_tile, 1024)} == {1}
    assert {c.num_stages for c in search.neighbours(two_tiles, 1024)} == set(search.STAGES)


@pytest.mark.parametrize("block_k, splits", [(256, {1, 2}), (512, {1, 2, 4}), (1024, {1, 2, 4})])
def test_stage_two_splits_k_across_the_waves_only_into_slices_of_a_whole_mfma(
        search, block_k, splits):
    neighbours = search.neighbours(GemmConfig(16, 32, block_k), 2048)
    assert {c.wave_split_k for c in neighbours} == splits


def test_ranked_takes_the_worst_member_first_and_breaks_ties_by_the_next_worst(search):
    tied_worse = _call(a=10.44, b=9.73, c=8.3)
    tied_better = _call(a=10.44, b=9.56, c=8.3)
    lower_worst = _call(a=10.43, b=10.40, c=10.0)
    assert search.ranked([tied_worse, tied_better, lower_worst]) == [
        lower_worst, tied_better, tied_worse]
