"""Kernel options for the target to choose among: the per-wave release of the single-launch
split-K (AMD's), the XCD remap and the store cache modifier; and tools.gfx950.release_order, the
assembly check that the release is ordered."""

import pytest
import torch
import triton
import triton.language as tl

import reference
from kernels.preshuffle_gemm import _xcd_remapped
from launchers.configs import GemmConfig
from launchers.gemm import GemmLauncher
from tools.gfx950.release_order import release_ordered

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
@pytest.mark.parametrize("every_wave", [True, False])
def test_options_give_the_reference_on_repeated_calls(config, every_wave, device):
    m, n, k = SHAPE
    backend = "interpreter" if device == "cpu" else "cuda"
    launcher = GemmLauncher(config, backend, m, n, k, (k, 1), device,
                            release_every_wave=every_wave)
    for seed in (1, 2):
        data = reference.generate_input(m, n, k, seed=seed, device=device)
        a, _, _, b_shuffle, b_scale_sh = data
        assert reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh)) == (True, "")
    uses_slots = every_wave and config.split_k > 1 and config.split_k_reduce == "last_program"
    slots = launcher.gemm_arguments(a, b_shuffle, b_scale_sh)[0][7]
    assert (slots.dtype == torch.int32) == uses_slots


@pytest.mark.parametrize("kwargs", [dict(store_modifier=".ca"), dict(store_modifier="wt"),
                                    dict(num_xcds=0)])
def test_gemm_config_rejects_bad_options(kwargs):
    with pytest.raises(ValueError, match="^bad GemmConfig: "):
        GemmConfig(16, 64, 512, **kwargs)


ORDERED = """
\tbuffer_store_dwordx4 a[0:3], v2, s[12:15], 0 offen
\tv_mov_b32_e32 v3, 0
\tbuffer_wbl2 sc1
\ts_waitcnt vmcnt(0)
\tbuffer_atomic_add v3, v2, s[20:23], 0 offen
\ts_waitcnt vmcnt(0)
\tbuffer_inv sc1
\ts_barrier
\ts_and_saveexec_b64 s[10:11], vcc
\ts_cbranch_execz .LBB0_3
\tbuffer_wbl2 sc1
\tglobal_atomic_add v2, v2, v3, s[4:5] sc0
\ts_waitcnt vmcnt(0)
\tbuffer_inv sc1
.LBB0_3:
\ts_barrier
"""


def test_release_order_accepts_a_per_wave_release():
    assert release_ordered(ORDERED)


@pytest.mark.parametrize("broken", [
    ORDERED.replace("\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add", "\tbuffer_atomic_add"),
    ORDERED.replace("\tv_mov_b32_e32 v3, 0\n", "\ts_cbranch_execz .LBB0_9\n"),
    ORDERED.replace("\tbuffer_inv sc1\n.LBB0_3:", ".LBB0_3:"),
    ORDERED.replace(" sc0\n", "\n"),                              # no counter atomic at all
    # Each piece alone at its boundary: the acquire after the next barrier, or before the
    # counter's atomic; the per-wave release's write-back, or every wait for it before the
    # barrier, dropped; the release before the last partial store.
    ORDERED.replace("\tbuffer_inv sc1\n.LBB0_3:\n\ts_barrier\n",
                    ".LBB0_3:\n\ts_barrier\n\tbuffer_inv sc1\n"),
    ORDERED.replace("\tglobal_atomic_add v2, v2, v3, s[4:5] sc0\n\ts_waitcnt vmcnt(0)\n"
                    "\tbuffer_inv sc1\n", "\tbuffer_inv sc1\n"
                    "\tglobal_atomic_add v2, v2, v3, s[4:5] sc0\n\ts_waitcnt vmcnt(0)\n"),
    ORDERED.replace("\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add",
                    "\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add"),
    ORDERED.replace("\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add v3, v2, "
                    "s[20:23], 0 offen\n\ts_waitcnt vmcnt(0)\n", "\tbuffer_wbl2 sc1\n"
                    "\tbuffer_atomic_add v3, v2, s[20:23], 0 offen\n"),
    ORDERED.replace("\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add",
                    "\tbuffer_wbl2\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add"),  # not to L2's scope
    "\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n" + ORDERED.replace(
        "\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n\tbuffer_atomic_add", "\tbuffer_atomic_add"),
    # The barrier-plus-one-release code of Triton 3.6 without the per-wave release:
    ORDERED.replace("\tv_mov_b32_e32 v3, 0\n\tbuffer_wbl2 sc1\n\ts_waitcnt vmcnt(0)\n"
                    "\tbuffer_atomic_add v3, v2, s[20:23], 0 offen\n\ts_waitcnt vmcnt(0)\n"
                    "\tbuffer_inv sc1\n", ""),
])
def test_release_order_rejects_what_misses_a_piece(broken):
    assert broken != ORDERED
    assert not release_ordered(broken)
