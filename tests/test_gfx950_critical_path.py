"""tools.gfx950.critical_path on hand-written gfx950 assembly whose answers are known."""

import pytest

from mxfp4_mm.tools.gfx950.assembly import parse
from mxfp4_mm.tools.gfx950 import critical_path
from mxfp4_mm.tools.gfx950.critical_path import (ISSUE_CYCLES, LDS_CYCLES, VMEM_CYCLES, busiest_simd_cycles,
                                                 busiest_simd_rounds, busiest_simd_waves, walk)

MFMA = "\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v1, v2\n"
LOAD = "\tbuffer_load_dwordx4 v[4:7], v20, s[8:11], 0 offen\n"
STORE = "\tbuffer_store_dword v0, v21, s[12:15], 0 offen\n"
FAST = "\t.loc\t1 12 3 ; q.py:12:3 @[ gemm.py:40:5 ]\n"    # a line of the branch data takes
SLOW = "\t.loc\t1 22 3 ; q.py:22:3 @[ gemm.py:40:5 ]\n"    # a line of the one it does not
JOIN = "\t.loc\t1 30 3 ; q.py:30:3 @[ gemm.py:40:5 ]\n"


def events(path) -> tuple:
    """(instructions, global round trips, LDS waits, barriers) of a Path."""
    return tuple(path[:4])


def side(instruction):
    """q.py's lines 10-19 are the branch the data takes, 20-29 the one it does not."""
    lines = {line for name, line in instruction.frames if name == "q.py"}
    if lines & set(range(20, 30)):
        return "off"
    return "on" if lines & set(range(10, 20)) else None


def test_waits_move_the_clock_only_when_they_wait_for_an_operation_not_yet_complete():
    text = (LOAD                       # issued at 0, complete at 1
            + "\ts_waitcnt vmcnt(0)\n"     # blocks: clock 1
            + "\ts_waitcnt vmcnt(0)\n"     # nothing outstanding: no wait
            + LOAD + LOAD                  # issued at 1, complete at 2
            + "\ts_waitcnt vmcnt(2)\n"     # two outstanding, two allowed: no wait
            + "\ts_waitcnt vmcnt(1)\n"     # the first of them: clock 2
            + LOAD                         # issued at 2, complete at 3
            + "\ts_waitcnt vmcnt(1)\n"     # the second load of the pair, complete at 2: no move
            + STORE                        # not waited for: the wave ends at clock 2
            + "\ts_endpgm\n")
    assert events(walk(parse(text))) == (11, 2, 0, 0)


def test_an_lds_wait_counts_when_more_ds_operations_are_outstanding_than_it_allows():
    text = ("\ts_load_dword s4, s[0:1], 0x0\n"
            "\ts_waitcnt lgkmcnt(0)\n"           # only a scalar load outstanding: not LDS
            "\tds_write_b32 v1, v2\n"
            "\tds_read_b32 v3, v1 offset:64\n"
            "\ts_waitcnt lgkmcnt(1)\n"           # 2 outstanding > 1: a wait
            "\ts_waitcnt lgkmcnt(1)\n"           # 1 outstanding: none
            "\ts_barrier\n"
            "\ts_waitcnt vmcnt(0) lgkmcnt(0)\n"  # 1 > 0: a wait
            "\ts_barrier\n"
            "\ts_endpgm\n")
    assert events(walk(parse(text))) == (10, 0, 2, 2)


LOOP = ("\ts_mov_b32 s0, 0\n"
        ".LBB0_1:\n"
        + LOAD + "\ts_waitcnt vmcnt(0)\n" + MFMA +
        "\ts_add_u32 s0, s0, 1\n"
        "\ts_cmp_lg_u32 s0, s1\n"
        "\ts_cbranch_scc1 .LBB0_1\n"
        "\ts_endpgm\n")


def test_a_loop_runs_one_pass_per_k_tile():
    # 1 + 6 per pass + 1; one round trip per pass.
    assert events(walk(parse(LOOP), k_tiles=4)) == (1 + 6 * 4 + 1, 4, 0, 0)
    assert events(walk(parse(LOOP), k_tiles=1)) == (8, 1, 0, 0)


def test_tiles_peeled_out_of_the_loop_are_taken_off_its_passes():
    # Pipelined: the first tile's load before the loop, the last tile's MFMA after it; the
    # exit test in the middle of the loop, its back edge unconditional.
    text = (LOAD + ".LBB0_1:\n"
            "\ts_waitcnt vmcnt(0)\n" + MFMA + LOAD
            + "\ts_cmp_eq_u32 s0, s1\n\ts_cbranch_scc1 .LBB0_2\n"
            "\ts_add_u32 s0, s0, 1\n\ts_branch .LBB0_1\n"
            ".LBB0_2:\n\ts_waitcnt vmcnt(0)\n" + MFMA + "\ts_endpgm\n")
    # One MFMA after the loop: 4 tiles are 3 passes; the last leaves at the exit test.
    assert events(walk(parse(text), k_tiles=4)) == (1 + 3 * 5 + 2 * 2 + 3, 4, 0, 0)
    assert events(walk(parse(text), k_tiles=2)) == (1 + 5 + 3, 2, 0, 0)
    with pytest.raises(ValueError, match="whole number of passes"):
        walk(parse(text), k_tiles=1)


def test_a_loop_whose_join_lies_before_its_head():
    # LLVM's layout of a loop holding the quantizer's branch: the join (MFMAs, exit test)
    # first, then the head; the branch from the flow block back to the join is no back edge
    # of the loop but the skip of the fast path.
    text = ("\ts_branch .LBB0_2\n"
            ".LBB0_1:\n" + JOIN + MFMA + "\ts_cbranch_scc0 .LBB0_5\n"
            ".LBB0_2:\n" + LOAD + "\ts_waitcnt vmcnt(0)\n"
            "\ts_cbranch_vccz .LBB0_3\n"
            + SLOW + "\tv_cmp_u_f32_e32 vcc, v1, v1\n\tv_mov_b32_e32 v9, 0\n"
            ".LBB0_3:\n" + JOIN + "\ts_andn2_b64 vcc, exec, s[10:11]\n"
            "\ts_cbranch_vccnz .LBB0_1\n"
            + FAST + "\tv_cvt_scalef32_pk_fp4_bf16 v3, v4, v5\n"
            "\ts_branch .LBB0_1\n"
            ".LBB0_5:\n\ts_endpgm\n")
    path = walk(parse(text), side, k_tiles=2)
    # Per pass: load, wait, vccz, flow (2), fast (2), then the join (MFMA, exit test).
    assert events(path) == (1 + 2 * (2 + 1 + 2 + 2 + 2) + 1, 2, 0, 0)


UNIFORM = ("\tv_cmp_lt_u32_e32 vcc, s2, v65\n"
           "\ts_cbranch_vccz .LBB0_2\n"
           + SLOW + "\tv_cmp_u_f32_e32 vcc, v1, v1\n" + "\tds_write_b32 v1, v2\n" * 3
           + "\ts_waitcnt lgkmcnt(0)\n\ts_barrier\n\ts_branch .LBB0_3\n"
           ".LBB0_2:\n" + FAST + "\tv_cvt_scalef32_pk_fp4_bf16 v3, v4, v5\n\ts_nop 0\n"
           ".LBB0_3:\n" + JOIN + "\tv_or_b32_e32 v3, v3, v6\n\ts_endpgm\n")


def test_a_uniform_branch_takes_the_side_the_data_takes():
    assert events(walk(parse(UNIFORM), side)) == (2 + 2 + 2, 0, 0, 0)
    # The other way round: data that takes the slow branch.
    def flipped(instruction):
        return {"on": "off", "off": "on", None: None}[side(instruction)]
    assert events(walk(parse(UNIFORM), flipped)) == (2 + 7 + 2, 0, 1, 1)


def test_a_branch_it_cannot_tell_is_an_error_naming_its_line():
    with pytest.raises(ValueError, match=r"line 2: cannot tell which way `s_cbranch_vccz"):
        walk(parse(UNIFORM))


def test_exec_mask_branches_run_with_lanes_active_unless_the_lanes_side_leans_off():
    masked_store = ("\ts_and_saveexec_b64 s[2:3], vcc\n"
                    "\ts_cbranch_execz .LBB0_1\n" + STORE + "\ts_waitcnt vmcnt(0)\n"
                    ".LBB0_1:\n\ts_or_b64 exec, exec, s[2:3]\n\ts_endpgm\n")
    assert events(walk(parse(masked_store))) == (6, 1, 0, 0)
    # A divergent slow path (LLVM could not prove the test uniform): no lane takes it.
    divergent = ("\ts_and_saveexec_b64 s[2:3], vcc\n"
                 "\ts_cbranch_execz .LBB0_1\n" + SLOW + STORE + "\ts_waitcnt vmcnt(0)\n"
                 ".LBB0_1:\n\ts_or_saveexec_b64 s[2:3], s[2:3]\n"
                 "\ts_cbranch_execnz .LBB0_2\n\ts_endpgm\n"
                 ".LBB0_2:\n" + FAST + "\tv_cvt_scalef32_pk_fp4_bf16 v3, v4, v5\n\ts_endpgm\n")
    assert events(walk(parse(divergent), side)) == (6, 0, 0, 0)


def test_two_waves_per_simd_and_rounds_on_the_busiest_cu():
    # 512 workgroups of 4 waves: two on a CU, both resident at 2 waves per SIMD.
    assert busiest_simd_waves(512, 4, occupancy=2) == 2
    # Only one resident at a time: the same waves per SIMD, in two rounds.
    assert busiest_simd_waves(512, 4, occupancy=1) == 2
    # 8-wave workgroups: two waves per SIMD each; 384 of them at 2 waves per SIMD run in two
    # rounds on 128 CUs.
    assert busiest_simd_waves(45, 8, occupancy=2) == 2
    assert busiest_simd_waves(384, 8, occupancy=2) == 4
    # 2-wave workgroups: two resident at once share the 4 SIMDs; four on a CU run in two
    # rounds.
    assert busiest_simd_waves(512, 2, occupancy=1) == 1
    assert busiest_simd_waves(512, 2, occupancy=1, cus=128) == 2
    assert busiest_simd_waves(90, 4, occupancy=2) == 1


@pytest.mark.parametrize("workgroups, waves, occupancy, busiest", [
    # 1-wave workgroups: 3 on a CU share its 4 SIMDs, one wave on the busiest.
    (3 * 256, 1, 1, 1),
    (100, 1, 7, 1),
    # 2-wave workgroups, occupancy 3: 6 resident (3 waves per SIMD), then 1 (1 wave).
    (7 * 256, 2, 3, 3 + 1),
    # 3-wave workgroups: at occupancy 1 one resident at a time (3 waves on 3 SIMDs), two rounds;
    # at occupancy 5, 6 resident (18 waves: 5 on the busiest SIMD), then 1.
    (2 * 256, 3, 1, 1 + 1),
    (6 * 256 + 1, 3, 5, 5 + 1),
    # 6-wave workgroups: 2 waves on the busiest SIMD each; at occupancy 3, 2 resident (12
    # waves: 3 per SIMD), then 1; at occupancy 5, 3 resident (18 waves: 5), then 1.
    (256, 6, 2, 2),
    (3 * 256, 6, 3, 3 + 2),
    (4 * 256, 6, 5, 5 + 2),
])
def test_waves_that_do_not_fill_the_simds_evenly_round_up(workgroups, waves, occupancy, busiest):
    assert busiest_simd_waves(workgroups, waves, occupancy) == busiest


def test_masked_bodies_laid_out_after_the_end_run_once_each_with_lanes_active():
    # Entered by execnz (taken with lanes active), each body falls into the next while lanes
    # stay active, the last jumps back to the join: no loop, every body once.
    text = ("\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execnz .LBB0_8\n"
            ".LBB0_1:\n\ts_or_b64 exec, exec, s[0:1]\n"
            "\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execnz .LBB0_9\n"
            ".LBB0_2:\n\ts_or_b64 exec, exec, s[0:1]\n\ts_waitcnt lgkmcnt(0)\n\ts_barrier\n"
            "\ts_endpgm\n"
            ".LBB0_8:\n\tds_write_b32 v1, v2\n\ts_or_b64 exec, exec, s[0:1]\n"
            "\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execz .LBB0_2\n"
            ".LBB0_9:\n\tds_write_b32 v1, v2 offset:16\n\ts_branch .LBB0_2\n")
    # saveexec, execnz; body 8 (write, or, saveexec, execz); body 9 (write, branch); the join (4).
    assert tuple(walk(parse(text)))[:4] == (2 + 4 + 2 + 4, 0, 1, 1)


def _cycles(text, k_tiles=1):
    path = walk(parse(text), k_tiles=k_tiles)
    return path.issue_cycles, path.latency_cycles


def test_the_cycle_walk_issues_every_instruction_and_stalls_at_waits_until_the_data_is_back():
    # load at 4, complete at 4 + VMEM; a second load issued at 8 completes 4 later; the wait
    # for both stalls until the second; one more instruction; the end.
    text = LOAD + LOAD + "\ts_waitcnt vmcnt(0)\n\tv_mov_b32 v0, 0\n\ts_endpgm\n"
    issue, latency = _cycles(text)
    assert issue == 5 * ISSUE_CYCLES
    assert latency == (2 * ISSUE_CYCLES + VMEM_CYCLES + 2 * ISSUE_CYCLES,) * 2
    # a wait that allows the newer load outstanding waits only for the older one
    _, older = _cycles(LOAD + LOAD + "\ts_waitcnt vmcnt(1)\n\ts_endpgm\n")
    assert older[0] == ISSUE_CYCLES + VMEM_CYCLES + ISSUE_CYCLES
    # stores are not waited for at the end; s_nop N takes N + 1 cycles where that is longer
    assert _cycles(STORE + "\ts_nop 7\n\ts_endpgm\n") == (2 * ISSUE_CYCLES + 8,
                                                         (2 * ISSUE_CYCLES + 8,) * 2)


def test_an_lds_wait_stalls_for_the_lds_latency():
    text = "\tds_read_b32 v3, v1\n\ts_waitcnt lgkmcnt(0)\n\ts_endpgm\n"
    assert _cycles(text)[1] == (ISSUE_CYCLES + LDS_CYCLES + ISSUE_CYCLES,) * 2


@pytest.mark.parametrize("sync", ["\tbuffer_wbl2 sc1\n", "\tbuffer_inv sc1\n",
                                  "\tglobal_atomic_add v2, v2, v3, s[4:5] sc0\n"])
def test_a_waited_sync_op_costs_its_multiple_of_a_load(sync):
    """An atomic, a whole-L2 writeback or invalidate waited for: one load's latency at sync 1x,
    two at 2x; the same code with a load instead is slower only at 2x."""
    text = sync + "\ts_waitcnt vmcnt(0)\n\ts_endpgm\n"
    _, (one, two) = _cycles(text)
    assert one == 3 * ISSUE_CYCLES + VMEM_CYCLES - ISSUE_CYCLES
    assert two - one == VMEM_CYCLES
    _, load = _cycles(LOAD + "\ts_waitcnt vmcnt(0)\n\ts_endpgm\n")
    assert load == (one, one)


def test_an_extra_serialized_round_trip_walks_slower():
    one = LOAD + "\ts_waitcnt vmcnt(0)\n"
    base, extra = _cycles(one + "\ts_endpgm\n")[1], _cycles(one + one + "\ts_endpgm\n")[1]
    assert extra[0] - base[0] == ISSUE_CYCLES + VMEM_CYCLES   # the wait's own issue is hidden


def test_the_busiest_simd_takes_a_walk_per_round_and_the_issue_of_the_others():
    path = walk(parse(LOAD + "\ts_waitcnt vmcnt(0)\n\ts_endpgm\n"))
    # 2 rounds on the busiest SIMD: 3 waves, then 1
    rounds = busiest_simd_rounds(7 * 256, 2, 3)
    assert rounds == [3, 1]
    assert busiest_simd_cycles(path, rounds) == tuple(
        2 * c + 2 * path.issue_cycles for c in path.latency_cycles)


def test_the_latencies_are_the_cited_figures():
    assert critical_path.CLOCK_GHZ == 2.4 and VMEM_CYCLES == 864 and LDS_CYCLES == 69
    assert critical_path.SYNC_MULTIPLIERS == (1, 2)
