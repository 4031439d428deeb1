"""Kernel options for the target to choose among: the XCD remap and the store cache modifier,
with and without the single-launch split-K; and tools.gfx950.release_order, the assembly check
of AMD's write-through hand-over of the partials."""

import pytest
import torch
import triton
import triton.language as tl

from mxfp4_mm import reference
from mxfp4_mm.kernels.preshuffle_gemm import _xcd_remapped
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.gemm import GemmLauncher
from mxfp4_mm.tools.gfx950.release_order import release_ordered, release_problems

SHAPE = (20, 192, 1024)


@triton.jit
def _remap_kernel(out_ptr, NUM_XCDS: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, _xcd_remapped(pid, tl.num_programs(0), NUM_XCDS))


@pytest.mark.parametrize("programs", [1, 7, 8, 9, 16, 90, 238, 256, 257])
def test_xcd_remap_is_a_permutation_that_gives_each_xcd_a_run_of_ids(programs, device):
    out = torch.full((programs,), -1, dtype=torch.int32, device=device)
    _remap_kernel[(programs,)](out, NUM_XCDS=8)
    logical = out.cpu().tolist()
    assert sorted(logical) == list(range(programs))
    for xcd in range(min(8, programs)):
        run = sorted(logical[xcd::8])        # the programs the hardware puts on this XCD
        assert run == list(range(run[0], run[0] + len(run)))


@pytest.mark.parametrize("config", [
    GemmConfig(16, 64, 256, split_k=4, split_k_reduce="last_program"),
    GemmConfig(16, 64, 256, split_k=3, split_k_reduce="last_program", num_xcds=8,
               store_modifier=".wt"),
    GemmConfig(16, 64, 256, split_k=4, num_xcds=8, store_modifier=".wt"),
    GemmConfig(16, 64, 512, num_xcds=8, store_modifier=".wt"),
])
def test_options_give_the_reference_on_repeated_calls(config, device):
    m, n, k = SHAPE
    backend = "interpreter" if device == "cpu" else "cuda"
    launcher = GemmLauncher(config, backend, m, n, k, (k, 1), device)
    for seed in (1, 2):
        data = reference.generate_input(m, n, k, seed=seed, device=device)
        a, _, _, b_shuffle, b_scale_sh = data
        assert reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh)) == (True, "")


@pytest.mark.parametrize("kwargs", [dict(store_modifier=".ca"), dict(store_modifier="wt"),
                                    dict(num_xcds=0)])
def test_gemm_config_rejects_bad_options(kwargs):
    with pytest.raises(ValueError, match="^bad GemmConfig: "):
        GemmConfig(16, 64, 512, **kwargs)


ORDERED = """
\tbuffer_load_dwordx4 v[2:5], v11, s[12:15], 0 offen sc0 nt
\tbuffer_store_dwordx4 a[0:3], v3, s[12:15], 0 offen sc0 sc1
\ts_nop 0
\tbuffer_store_dwordx4 a[4:7], v2, s[12:15], 0 offen sc0 sc1
\ts_waitcnt vmcnt(0)
\tv_cmp_eq_u32_e64 s[2:3], 0, v0
\ts_barrier
\ts_and_saveexec_b64 s[6:7], s[2:3]
\ts_cbranch_execz .LBB0_9
\tglobal_atomic_add v2, v2, v3, s[4:5] sc0
\ts_waitcnt vmcnt(0)
\tds_write_b32 v2, v0
.LBB0_9:
\ts_barrier
\tds_read_b32 v0, v0
\ts_cbranch_vccnz .LBB0_12
\tbuffer_load_dwordx4 v[2:5], v11, s[12:15], 0 offen sc0 sc1
\tbuffer_load_dwordx4 v[6:9], v12, s[12:15], 0 offen sc0 sc1
\ts_waitcnt vmcnt(0)
\tbuffer_store_dwordx4 v[2:5], v0, s[20:23], 0 offen
\tglobal_atomic_swap v0, v0, s[4:5]
.LBB0_12:
\ts_endpgm
"""


def test_release_order_accepts_the_write_through_hand_over():
    assert release_problems(ORDERED) == [] and release_ordered(ORDERED)


@pytest.mark.parametrize("broken, problem", [
    # a partial store that is not written through
    (ORDERED.replace("a[4:7], v2, s[12:15], 0 offen sc0 sc1", "a[4:7], v2, s[12:15], 0 offen"),
     "partial store not written through"),
    # the wait moved after the counter's atomic
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\tv_cmp_eq").replace(
        "s[4:5] sc0\n", "s[4:5] sc0\n\ts_waitcnt vmcnt(0)\n"), "no unconditional s_waitcnt"),
    # the wait weakened: one store may still be in flight, or a wait for LDS and scalar
    # memory (lgkmcnt) that waits for no store
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\ts_waitcnt vmcnt(1)\n\tv_cmp_eq"),
     "no unconditional s_waitcnt"),
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\ts_waitcnt lgkmcnt(0)\n\tv_cmp_eq"),
     "no unconditional s_waitcnt"),
    # the wait only under a branch
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\ts_cbranch_execz .LBB0_9\n"
                     "\ts_waitcnt vmcnt(0)\n\tv_cmp_eq"), "no unconditional s_waitcnt"),
    # a cached partial load in the last program
    (ORDERED.replace("v[6:9], v12, s[12:15], 0 offen sc0 sc1", "v[6:9], v12, s[12:15], 0 offen sc0 nt"),
     "partial load after the counter may read a stale line"),
    # a whole-L2 writeback or invalidate on the path
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n"
                     "\tv_cmp_eq"), "`buffer_wbl2` on the path"),
    (ORDERED.replace("\tds_write_b32 v2, v0\n", "\tbuffer_inv sc1\n\tds_write_b32 v2, v0\n"),
     "`buffer_inv` on the path"),
    # a release atomic by every thread
    (ORDERED.replace("\ts_waitcnt vmcnt(0)\n\tv_cmp_eq", "\tbuffer_atomic_add v3, v2, s[20:23], 0 offen\n"
                     "\ts_waitcnt vmcnt(0)\n\tv_cmp_eq"), "an atomic besides the counter's"),
    # no barrier between the waves' waits and the atomic
    (ORDERED.replace("\ts_barrier\n\ts_and_saveexec", "\ts_and_saveexec"), "no barrier"),
    (ORDERED.replace("s[4:5] sc0\n", "s[4:5]\n"), "no returning atomic add"),
])
def test_release_order_names_each_single_break(broken, problem):
    assert broken != ORDERED
    found = release_problems(broken)
    assert any(p.startswith(problem) for p in found), found
    assert not release_ordered(broken)
