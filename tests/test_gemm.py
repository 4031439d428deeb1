"""End to end: custom_kernel and explicit GemmLauncher configs against the reference GEMM.

Shapes cover M in {1, 4, 8, 16, 33, 64, 256}, ragged last N tiles (N % BLOCK_N != 0, also
N % 32 != 0), ragged K (K not a multiple of BLOCK_K: EVEN_K False), split-K with even and
uneven splits, grouped tile orders and every BLOCK_N, plus two full task shapes.
"""

import dataclasses
import gc
import weakref

import pytest
import torch
from triton.runtime.errors import OutOfResources

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import quantize_rows
from mxfp4_mm.launchers import current_target, launcher_for
from mxfp4_mm.kernels.preshuffle_gemm import SCALED_MFMA_K
from mxfp4_mm.launchers.configs import GEMM_CONFIGS
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.fit import DoesNotFit
from mxfp4_mm.launchers import ladder
from mxfp4_mm.launchers.gemm import GemmLauncher
from mxfp4_mm.launchers.proof import SPLIT_K_REPEATS
from mxfp4_mm.submission import custom_kernel


def assert_correct(data, out):
    m, n = data[0].shape[0], data[3].shape[0]
    assert out.dtype == torch.bfloat16
    assert tuple(out.shape) == (m, n)
    assert out.device == data[0].device
    ok, message = reference.check_implementation(data, out)
    assert ok, message


def run_config(config, data):
    a, _, _, b_shuffle, b_scale_sh = data
    m, k = a.shape
    launcher = GemmLauncher(config, current_target(a.device)[0], m, b_shuffle.shape[0], k,
                            a.stride(), a.device)
    return launcher, launcher(a, b_shuffle, b_scale_sh)


# ---------------------------------------------------------------------------------------
# custom_kernel over a grid of shapes (the configs custom_kernel itself picks)
# ---------------------------------------------------------------------------------------

SHAPES = [
    # (m, n, k)                  what the heuristic config makes of it
    (1, 64, 64),                 # one tile, K shorter than BLOCK_K
    (1, 208, 576),               # N % 32 != 0, ragged K
    (1, 256, 2048),              # split-K 4, even
    (4, 80, 320),                # N = 16 * 5, K = 320
    (4, 192, 1344),              # split-K: 3 splits of 512, the last one ragged
    (8, 128, 1024),
    (8, 80, 2560),               # split-K 5 with BLOCK_K 512
    (16, 192, 512),
    (16, 448, 576),
    (33, 208, 320),              # a ragged M tile (block_m 64)
    (33, 512, 1024),
    (64, 80, 640),
    (64, 1024, 512),
    (256, 192, 320),             # several M tiles
    (256, 2880, 512),            # task shape: BLOCK_N 128 and N % 128 == 64
]


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_custom_kernel_matches_reference(device, m, n, k):
    data = reference.generate_input(m, n, k, seed=m + n + k, device=device)
    assert_correct(data, custom_kernel(data))


@pytest.mark.parametrize("shape", [(8, 2112, 7168), (16, 3072, 1536)])
def test_full_task_shape(device, shape):
    m, n, k = shape
    data = reference.generate_input(m, n, k, seed=0, device=device)
    launcher = launcher_for(data[0], n)
    config = GEMM_CONFIGS[current_target(device)[1]][shape]
    splits = config.splits_for(k)[0]
    reduce_launch = splits > 1 and config.split_k_reduce == "kernel"
    assert launcher.config == config and launcher.splits == splits
    assert (launcher.reduce is not None) == reduce_launch
    assert_correct(data, custom_kernel(data))


@pytest.mark.parametrize("seed", [1, 2])
def test_several_seeds_of_a_task_shape(device, seed):
    data = reference.generate_input(4, 2880, 512, seed=seed, device=device)
    assert_correct(data, custom_kernel(data))


# ---------------------------------------------------------------------------------------
# Explicit configs
# ---------------------------------------------------------------------------------------

CONFIG_CASES = [
    # (m, n, k), config, K splits launched (worked out by hand: K/split_k rounded up to whole
    # BLOCK_K tiles, then as many of those as K needs)
    # single pass, every BLOCK_N, ragged N and K
    ((16, 208, 576), GemmConfig(16, 32, 256), 1),
    ((16, 192, 512), GemmConfig(16, 32, 512), 1),
    ((8, 208, 1024), GemmConfig(16, 64, 512), 1),
    ((33, 192, 320), GemmConfig(32, 128, 256), 1),
    ((16, 192, 1536), GemmConfig(16, 128, 1024), 1),
    ((8, 320, 512), GemmConfig(16, 256, 512), 1),
    ((4, 272, 576), GemmConfig(16, 256, 256), 1),
    ((64, 128, 256), GemmConfig(64, 128, 256, cache_modifier=".cg"), 1),
    ((3, 64, 512), GemmConfig(16, 64, 512), 1),
    # split-K
    ((8, 256, 1536), GemmConfig(16, 128, 512, split_k=2), 2),    # 768 -> 1024: 2 splits, the 2nd half empty
    ((8, 192, 1536), GemmConfig(16, 64, 256, split_k=3), 3),     # 3 x 512
    ((4, 208, 1344), GemmConfig(16, 64, 256, split_k=4), 3),     # 336 -> 512: 3 splits, last ragged
    ((16, 256, 2048), GemmConfig(16, 64, 512, split_k=4), 4),    # 4 x 512
    ((8, 80, 576), GemmConfig(16, 32, 256, split_k=3), 3),       # 192 -> 256: 3, the last 64 wide
    ((33, 320, 1024), GemmConfig(16, 256, 256, split_k=2, reduce_block_m=32, reduce_block_n=128), 2),
    # grouped tile order over several M tiles
    ((256, 192, 256), GemmConfig(16, 64, 256, group_m=2), 1),    # 16 x 3 tiles
    ((80, 208, 512), GemmConfig(16, 64, 512, group_m=2), 1),     # 5 M tiles: the last group has 1
    ((112, 192, 256), GemmConfig(16, 32, 256, group_m=3), 1),    # 7 M tiles in groups of 3, 3, 1
    ((64, 192, 1024), GemmConfig(16, 128, 256, split_k=2, group_m=2), 2),
    ((64, 128, 512), GemmConfig(16, 64, 512, group_m=8), 1),     # group_m > M tiles
]


VARIANTS = {   # name: the GemmConfig fields that select it, given the case's config
    "reduce-kernel": lambda config: {},
    "last-program": lambda config: {"split_k_reduce": "last_program"},
    # K split across the waves into as many slices as the tile's K holds MFMAs
    "wave-split": lambda config: {"wave_split_k": config.block_k // SCALED_MFMA_K},
}
VARIANT_CASES = [(shape, dataclasses.replace(config, **fields(config)), splits, name)
                 for shape, config, splits in CONFIG_CASES for name, fields in VARIANTS.items()
                 if config.split_k > 1 or name != "last-program"]


def run_fitting_wave_split(config, data):
    """run_config; on a GPU a wave split whose kernel asks for more shared memory than the GPU
    has (launchers.fit's DoesNotFit, or Triton's OutOfResources) is halved until it fits, down
    to 2 slices."""
    while True:
        try:
            return run_config(config, data)
        except (DoesNotFit, OutOfResources):
            if config.wave_split_k <= 2:
                raise
            config = dataclasses.replace(config, wave_split_k=config.wave_split_k // 2)


@pytest.mark.parametrize("shape, config, splits, variant", VARIANT_CASES,
                         ids=[f"{m}x{n}x{k}-bm{c.block_m}-bn{c.block_n}-bk{c.block_k}"
                              f"-sk{c.split_k}-g{c.group_m}-{name}"
                              for (m, n, k), c, _, name in VARIANT_CASES])
def test_explicit_config_matches_reference(device, shape, config, splits, variant):
    m, n, k = shape
    data = reference.generate_input(m, n, k, seed=k + 3 * n + 7 * m, device=device)
    launcher, out = run_fitting_wave_split(config, data)
    assert launcher.splits == splits
    two_launches = launcher.splits > 1 and config.split_k_reduce == "kernel"
    assert launcher.launches_per_call == (2 if two_launches else 1)
    assert launcher.reduces_in_kernel == (launcher.splits > 1 and not two_launches)
    assert_correct(data, out)


def test_last_program_reduce_over_repeated_calls_with_fresh_inputs(device):
    """One launcher, several inputs: each call counts on a counter row of its own."""
    m, n, k = 8, 192, 1536
    config = GemmConfig(16, 64, 256, split_k=3, split_k_reduce="last_program")
    launcher = None
    for seed in range(3):
        data = reference.generate_input(m, n, k, seed=50 + seed, device=device)
        if launcher is None:
            launcher, out = run_config(config, data)
        else:
            out = launcher(data[0], data[3], data[4])
        assert_correct(data, out)


def test_an_in_kernel_reduce_counts_on_one_counter_row_call_after_call(device):
    """Held to one counter row, every call must find it zeroed by the call before: a row its
    last program did not reset would never see a tile's last split again, and C would never be
    written (on a GPU from the call after each row's first)."""
    m, n, k = 4, 64, 512
    config = GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program")
    launcher = None
    for seed in range(3 if device == "cpu" else 50):
        data = reference.generate_input(m, n, k, seed=70 + seed, device=device)
        if launcher is None:
            launcher, out = run_config(config, data)
            launcher.counter_rows = launcher.counter_rows[:1]
        else:
            out = launcher(data[0], data[3], data[4])
        assert_correct(data, out)
        assert not launcher.counter_rows[0].any()


@pytest.mark.parametrize("config, repeats", [
    (GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program"), SPLIT_K_REPEATS),
    (GemmConfig(16, 64, 256, split_k=2), 0),                             # a reduce launch
    (GemmConfig(16, 64, 512, split_k=2, split_k_reduce="last_program"), 0),   # one split
])
def test_the_proof_repeats_the_first_case_of_an_in_kernel_reduce(device, config, repeats):
    """The ladder's proof of a GEMM that reduces split-K in the kernel calls it
    SPLIT_K_REPEATS more times on the first case; no other GEMM is called more than once."""
    m, n, k = 4, 64, 512
    calls = []

    class Counted(GemmLauncher):
        def __call__(self, *args, **kwargs):
            calls.append(args[0].data_ptr())
            return super().__call__(*args, **kwargs)

    backend = current_target(torch.empty(0, device=device).device)[0]
    launcher = ladder.prove_rung(ladder.Rung("counted", lambda: Counted(
        config, backend, m, n, k, (k, 1), device)), m, n, k, (k, 1), device)
    direct = 2 if launcher.is_direct else 1
    cases = len(set(calls))
    assert len(calls) == direct * cases + repeats
    assert calls.count(calls[0]) == direct + repeats


def test_split_k_and_single_pass_agree(device):
    data = reference.generate_input(8, 128, 2048, seed=21, device=device)
    _, single = run_config(GemmConfig(16, 64, 512), data)
    _, split = run_config(GemmConfig(16, 64, 512, split_k=4), data)
    assert reference.compare(split, single)[0]
    assert_correct(data, split)


# ---------------------------------------------------------------------------------------
# Inputs the kernel must handle
# ---------------------------------------------------------------------------------------

def test_strided_a(device):
    """A is a column slice of a wider tensor: row stride != K."""
    m, n, k = 16, 192, 576
    data = reference.generate_input(m, n, k, seed=31, device=device)
    wide = torch.zeros((m, k + 128), dtype=torch.bfloat16, device=device)
    wide[:, 64:64 + k] = data[0]
    a = wide[:, 64:64 + k]
    assert a.stride() == (k + 128, 1)
    assert_correct(data, custom_kernel((a,) + data[1:]))


def test_misaligned_a(device):
    """A starts 2 bytes into its storage: not 16-byte aligned."""
    m, n, k = 8, 128, 512
    data = reference.generate_input(m, n, k, seed=32, device=device)
    flat = torch.zeros(m * k + 1, dtype=torch.bfloat16, device=device)
    flat[1:] = data[0].flatten()
    a = flat[1:].view(m, k)
    assert a.data_ptr() % 16 != 0
    assert_correct(data, custom_kernel((a,) + data[1:]))


def test_m_zero_returns_an_empty_output(device):
    data = reference.generate_input(0, 192, 512, seed=0, device=device)
    out = custom_kernel(data)
    assert out.dtype == torch.bfloat16
    assert tuple(out.shape) == (0, 192)
    assert out.device == data[0].device


# ---------------------------------------------------------------------------------------
# Output ownership, and a check that can fail
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(16, 192, 512), (4, 256, 2048)])   # single pass, split-K
def test_outputs_are_never_overwritten_by_a_later_call(device, shape):
    m, n, k = shape
    first_data = reference.generate_input(m, n, k, seed=41, device=device)
    second_data = reference.generate_input(m, n, k, seed=42, device=device)
    first = custom_kernel(first_data)
    first_copy = first.clone()
    second = custom_kernel(second_data)
    assert torch.equal(first.view(torch.int16), first_copy.view(torch.int16))
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()
    assert not torch.equal(first, second)
    assert_correct(first_data, first)
    assert_correct(second_data, second)


def test_same_input_twice_gives_the_same_bits_in_new_tensors(device):
    data = reference.generate_input(8, 208, 1344, seed=43, device=device)
    first, second = custom_kernel(data), custom_kernel(data)
    assert torch.equal(first.view(torch.int16), second.view(torch.int16))
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()


@pytest.mark.parametrize("shape", [(16, 192, 512), (4, 256, 2048)])   # single pass, split-K
def test_nothing_holds_an_input_after_the_call(device, shape):
    """The launcher cache and the launchers keep no reference to a caller's tensors."""
    data = reference.generate_input(*shape, seed=44, device=device)
    alive = [weakref.ref(tensor) for tensor in data]
    out = custom_kernel(data)
    del data
    gc.collect()
    assert [ref() is None for ref in alive] == [True] * len(alive)
    assert out.shape == (shape[0], shape[1])


@pytest.mark.parametrize("shape", [(16, 192, 512), (4, 256, 2048)])
def test_a_corrupted_weight_fails_the_check(device, shape):
    m, n, k = shape
    data = reference.generate_input(m, n, k, seed=51, device=device)
    b_shuffle = data[3].view(torch.uint8).clone()
    b_shuffle[:16] ^= 0x88          # negate every weight of rows 0..15 (both nibbles' sign bits)
    b_shuffle[40, ::7] ^= 0x35      # and scramble some codes of rows 32..47
    corrupted = data[:3] + (b_shuffle.view(data[3].dtype),) + data[4:]
    ok, message = reference.check_implementation(data, custom_kernel(corrupted))
    assert not ok and "elements mismatch" in message


def test_a_corrupted_scale_fails_the_check(device):
    m, n, k = 16, 192, 512
    data = reference.generate_input(m, n, k, seed=52, device=device)
    scales = data[4].view(torch.uint8).clone()
    scales[0, :4] += 3               # some scales of the first rows x 8
    corrupted = data[:4] + (scales.view(data[4].dtype),)
    assert not reference.check_implementation(data, custom_kernel(corrupted))[0]


@pytest.mark.parametrize("shape, config", [((8, 192, 1536), GemmConfig(16, 64, 512)),
                                           ((4, 208, 576), GemmConfig(16, 32, 256, split_k=2))])
def test_prequantized_a_gives_the_fused_bits(device, shape, config):
    """The unfused baseline (quantize_rows, then the GEMM on codes) equals the fused kernel."""
    m, n, k = shape
    data = reference.generate_input(m, n, k, seed=61, device=device)
    a, _, _, b_shuffle, b_scale_sh = data
    _, fused = run_config(config, data)
    codes, scales = quantize_rows(a)
    want_codes, want_scales = formats.quantize_mxfp4(a.cpu())
    assert torch.equal(codes.cpu(), want_codes) and torch.equal(scales.cpu(), want_scales)
    unfused = GemmLauncher(config, current_target(device)[0], m, n, k, a.stride(), device,
                           a_prequantized=True)(codes, b_shuffle, b_scale_sh, scales)
    assert torch.equal(unfused.view(torch.int16), fused.view(torch.int16))


def test_column_major_a_over_several_k_tiles(device):
    """A column-major (strides (1, M)): each K step moves A's pointers by BLOCK_K columns, i.e.
    BLOCK_K * stride_ak elements; three K tiles in one split and a ragged last N tile."""
    m, n, k = 16, 96, 768
    data = reference.generate_input(m, n, k, seed=33, device=device)
    a = data[0].t().contiguous().t()
    assert a.stride() == (1, m)
    launcher, out = run_config(GemmConfig(16, 64, 256), (a,) + data[1:])
    assert launcher.splits == 1
    assert_correct(data, out)


# ---------------------------------------------------------------------------------------
# launchers.gemm's decisions, with recording fakes (no kernel runs). Decisions listed:
# - the release plan: every wave releases on HIP unless told, threads = warp size (64 on HIP,
#   32 elsewhere) * num_warps;
# - per-tile counters only for more than one launched split with "last_program", release
#   slots only for those with every-wave release, one per thread of every program; new ones
#   on every call, C where the kernel reads neither;
# - the specs: the quantizer checked and passed on, the quantizer's fast path off on CUDA only,
#   A as given strides (or its codes and scales when prequantized), a reduce launch only for
#   more than one launched split with split_k_reduce "kernel", each with its own options;
# - a call: direct only when asked and A, B and B's scales are all 16-byte aligned, the reduce
#   taking the GEMM's choice; fresh outputs every call.
# ---------------------------------------------------------------------------------------

from mxfp4_mm.launchers import gemm as gemm_module  # noqa: E402


@pytest.mark.parametrize("backend, sync, threads", [
    ("hip", "write_through", 64 * 2), ("cuda", "acq_rel", 32 * 2),
    ("interpreter", "acq_rel", 32 * 2)])
def test_split_k_sync_and_threads_per_backend(backend, sync, threads):
    assert gemm_module.splitk_sync(backend) == sync
    assert gemm_module.threads_per_program(2, backend) == threads


@pytest.mark.parametrize("backend, sync", [("hip", "write_through"), ("cuda", "acq_rel")])
def test_the_split_k_sync_reaches_the_kernel(backend, sync):
    config = GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program")
    spec, = gemm_module.launch_specs(config, backend, 16, 64, 512, (512, 1), "meta")
    names = spec.kernel.arg_names
    assert spec.sample_args[names.index("SPLIT_K_SYNC")] == sync
    assert spec.sample_args[names.index("REDUCE_IN_GEMM")] is True


@pytest.mark.parametrize("split_k, reduce, k, tiles", [
    (2, "last_program", 512, 3 * 2),                # 3 x 2 tiles
    (2, "kernel", 512, None),
    (2, "last_program", 256, None),                 # one split launched
    (1, "last_program", 512, None)])
def test_counter_rows(split_k, reduce, k, tiles):
    """Zeroed counter rows only for an in-kernel split-K reduce: IN_FLIGHT_CALLS rows of one
    buffer, each 16-byte aligned."""
    config = GemmConfig(16, 64, 256, split_k=split_k, split_k_reduce=reduce)
    rows = gemm_module.counter_rows(config, 40, 128, gemm_module.split_plan(config, k), "cpu")
    if tiles is None:
        assert rows is None
        return
    assert len(rows) == gemm_module.IN_FLIGHT_CALLS
    assert all(r.dtype == torch.int32 and r.shape == (tiles,) and not r.any() for r in rows)
    assert len({r.data_ptr() for r in rows}) == len(rows)
    assert all(r.data_ptr() % 16 == 0 for r in rows)


def test_counter_rows_stay_within_their_memory_bound():
    config = GemmConfig(16, 32, 256, split_k=2, split_k_reduce="last_program")
    rows = gemm_module.counter_rows(config, 4096, 4096, gemm_module.split_plan(config, 512),
                                   "cpu")
    tiles = 256 * 128
    assert len(rows) == gemm_module.COUNTER_WORDS // tiles and rows[0].shape == (tiles,)
    assert gemm_module.counter_rows(config, 16, 64, gemm_module.split_plan(config, 512), "cpu",
                                    rows=1)[0].shape == (2,)


@pytest.fixture
def recorded_arguments(monkeypatch):
    """The keyword arguments launch_specs gives gemm_arguments."""
    calls = []
    real = gemm_module.gemm_arguments

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)
    monkeypatch.setattr(gemm_module, "gemm_arguments", recording)
    return calls


@pytest.mark.parametrize("backend, fast_path", [("hip", True), ("cuda", False),
                                                ("interpreter", True)])
def test_the_quantizers_fast_path_is_off_on_cuda_only(recorded_arguments, backend, fast_path):
    gemm_module.launch_specs(GemmConfig(16, 64, 256), backend, 16, 64, 512, (512, 1), "meta",
                             "hardware")
    (_, kwargs), = recorded_arguments
    assert kwargs["quant_fast_path"] is fast_path and kwargs["quantizer"] == "hardware"


def test_an_unknown_quantizer_is_refused():
    with pytest.raises(ValueError, match="quantizer"):
        gemm_module.launch_specs(GemmConfig(16, 64, 256), "hip", 16, 64, 512, (512, 1), "meta",
                                 "hardwar")


@pytest.mark.parametrize("split_k, reduce, k, kernels, in_gemm", [
    (1, "kernel", 512, ["gemm"], False), (2, "kernel", 512, ["gemm", "reduce"], False),
    (2, "last_program", 512, ["gemm"], True), (2, "kernel", 256, ["gemm"], False)])
def test_which_kernels_a_config_launches(recorded_arguments, split_k, reduce, k, kernels,
                                         in_gemm):
    config = GemmConfig(16, 64, 256, split_k=split_k, split_k_reduce=reduce, num_warps=2)
    specs = gemm_module.launch_specs(config, "hip", 16, 64, k, (k, 1), "meta")
    assert [spec.name for spec in specs] == kernels
    (_, kwargs), = recorded_arguments
    assert kwargs["reduce_in_gemm"] is in_gemm
    assert specs[0].options["num_warps"] == 2 and specs[0].grid[0] == kwargs["splits"]
    if len(specs) > 1:
        assert specs[1].options == dict(num_warps=4, num_stages=1, waves_per_eu=0,
                                        matrix_instr_nonkdim=0)
        assert specs[1].grid == (1, 1, 1)


def test_the_sample_tensors_are_on_the_device_and_the_options_reach_the_kernel(
        recorded_arguments):
    config = GemmConfig(16, 64, 256, cache_modifier=".cg", store_modifier=".wt", num_xcds=8)
    gemm_module.launch_specs(config, "hip", 16, 64, 512, (512, 1), "meta")
    (args, kwargs), = recorded_arguments
    assert all(t.device.type == "meta" for t in args if isinstance(t, torch.Tensor))
    assert (kwargs["cache_modifier"], kwargs["store_modifier"], kwargs["num_xcds"]) == \
        (".cg", ".wt", 8)


@pytest.mark.parametrize("block_n, b_scales_first, first", [
    (128, None, True), (64, None, False), (128, False, False), (64, True, True)])
def test_the_b_scale_loads_place_reaches_the_kernel(recorded_arguments, block_n, b_scales_first,
                                                    first):
    config = GemmConfig(16, block_n, 256, b_scales_first=b_scales_first)
    gemm_module.launch_specs(config, "hip", 16, 256, 512, (512, 1), "meta")
    (_, kwargs), = recorded_arguments
    assert kwargs["scales_first"] is first


def test_a_prequantized_as_sample_sits_on_the_device(recorded_arguments):
    gemm_module.launch_specs(GemmConfig(16, 64, 256), "hip", 16, 64, 512, (512, 1), "meta",
                             a_prequantized=True)
    (args, kwargs), = recorded_arguments
    assert args[0].device.type == "meta" and kwargs["a_scales"].device.type == "meta"


def test_a_takes_the_given_strides_or_comes_prequantized(recorded_arguments):
    gemm_module.launch_specs(GemmConfig(16, 64, 256), "hip", 16, 64, 512, (1, 16), "meta")
    gemm_module.launch_specs(GemmConfig(16, 64, 256), "hip", 16, 64, 512, (512, 1), "meta",
                             a_prequantized=True)
    (plain, plain_kwargs), (pre, pre_kwargs) = recorded_arguments
    assert plain[0].stride() == (1, 16) and plain[0].dtype == torch.bfloat16
    assert plain_kwargs["a_scales"] is None
    assert pre[0].shape == (16, 256) and pre[0].dtype == torch.uint8
    assert pre_kwargs["a_scales"].shape == (16, 16)


class RecordingLaunch:
    """Stands in for KernelLaunch: records which of its launches each call took."""
    log = []

    def __init__(self, kernel, grid, options, sample_args, allow_direct=True):
        self.name = getattr(getattr(kernel, "fn", kernel), "__name__", "kernel")
        self.is_direct = allow_direct
        self.direct = self.__call__ if allow_direct else None

    def __call__(self, *args):
        self.log.append((self.name, "direct"))

    def standard(self, *args):
        self.log.append((self.name, "standard"))


@pytest.fixture
def recording_launcher(monkeypatch):
    RecordingLaunch.log = []
    monkeypatch.setattr(gemm_module, "KernelLaunch", RecordingLaunch)

    def make(config=GemmConfig(16, 64, 256, split_k=2), m=16, n=64, k=512):
        return GemmLauncher(config, "hip", m, n, k, (k, 1), "cpu")
    return make


def shifted(tensor, offset_bytes):
    """tensor's values in storage offset_bytes past an aligned start."""
    flat = torch.empty(tensor.numel() * tensor.element_size() + 64, dtype=torch.uint8)
    start = (-flat.data_ptr()) % 16 + offset_bytes
    out = flat[start:start + tensor.numel() * tensor.element_size()].view(tensor.dtype)
    return out.view(tensor.shape)


@pytest.mark.parametrize("which", [None, 0, 1, 2])
def test_a_call_launches_directly_only_when_every_tensor_is_aligned(recording_launcher, which):
    launcher = recording_launcher()
    tensors = [torch.zeros(16, 512, dtype=torch.bfloat16), torch.zeros(64, 256, dtype=torch.uint8),
               torch.zeros(256, 16, dtype=torch.uint8)]
    tensors = [shifted(t, 8 if index == which else 0) for index, t in enumerate(tensors)]
    launcher(*tensors)
    how = "direct" if which is None else "standard"
    assert [entry[1] for entry in RecordingLaunch.log] == [how, how]
    assert len({entry[0] for entry in RecordingLaunch.log}) == 2


def test_direct_false_takes_the_standard_launch(recording_launcher):
    launcher = recording_launcher()
    tensors = [shifted(t, 0) for t in (torch.zeros(16, 512, dtype=torch.bfloat16),
                                       torch.zeros(64, 256, dtype=torch.uint8),
                                       torch.zeros(256, 16, dtype=torch.uint8))]
    launcher(*tensors, direct=False)
    assert [entry[1] for entry in RecordingLaunch.log] == ["standard", "standard"]


@pytest.mark.parametrize("config, launches, in_kernel", [
    (GemmConfig(16, 64, 256), 1, False), (GemmConfig(16, 64, 256, split_k=2), 2, False),
    (GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program"), 1, True)])
def test_launches_per_call_and_the_in_kernel_reduce(recording_launcher, config, launches,
                                                    in_kernel):
    launcher = recording_launcher(config)
    assert launcher.launches_per_call == launches and launcher.reduces_in_kernel is in_kernel
    assert launcher.is_direct


def test_calls_of_an_in_kernel_reduce_take_the_counter_rows_in_turn(recording_launcher):
    """Each call counts on the next zeroed row, so calls in flight together never share one
    (fewer than IN_FLIGHT_CALLS of them)."""
    config = GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program", num_warps=4)
    launcher = recording_launcher(config, n=256)
    a = torch.zeros(16, 512, dtype=torch.bfloat16)
    b, s = torch.zeros(256, 256, dtype=torch.uint8), torch.zeros(256, 16, dtype=torch.uint8)
    rows = launcher.counter_rows
    calls = [launcher.gemm_arguments(a, b, s)[0] for _ in range(len(rows) + 1)]
    assert calls[0][6].shape == (4,) and not calls[0][6].any()          # 1 x 4 tiles
    assert [c[6].data_ptr() for c in calls[:-1]] == [r.data_ptr() for r in rows]
    assert calls[-1][6].data_ptr() == rows[0].data_ptr()              # round again


def test_every_call_gets_fresh_outputs(recording_launcher):
    launcher = recording_launcher()
    a = torch.zeros(16, 512, dtype=torch.bfloat16)
    b, s = torch.zeros(64, 256, dtype=torch.uint8), torch.zeros(256, 16, dtype=torch.uint8)
    first, partials, out = launcher.gemm_arguments(a, b, s)
    second = launcher.gemm_arguments(a, b, s)
    assert out.shape == (16, 64) and partials.shape == (2, 16, 64)
    assert out.dtype == torch.bfloat16 and partials.dtype == torch.float32
    assert out.data_ptr() != second[2].data_ptr() and partials.data_ptr() != second[1].data_ptr()
    assert first[6] is out                            # no in-kernel reduce: no counters
    assert first[1] is a and launcher.gemm_arguments(a, b, s, a_scales=s)[0][1] is s


@pytest.mark.parametrize("m, block_m, wave_split_k, rows", [
    (1, 16, 1, 1), (3, 16, 1, 4), (4, 16, 1, 4), (8, 32, 1, 8), (16, 16, 1, 16), (17, 16, 1, 16),
    (300, 64, 1, 64),
    # K split across the waves stacks the slices' rows: at least 16 of them for the MFMA
    (1, 16, 2, 8), (1, 16, 4, 4), (3, 16, 2, 8), (4, 16, 4, 4), (5, 16, 2, 8), (9, 16, 2, 16),
    (17, 32, 2, 32)])
def test_a_program_quantizes_only_the_rows_of_a_there_are(m, block_m, wave_split_k, rows):
    """A_ROWS: block_m, or the power of two at or above M where that is fewer (the codes are
    repeated to block_m rows for the MFMA, and rows past M are masked at the store); with K
    split across the waves, at least 16 / wave_split_k."""
    from mxfp4_mm.kernels.preshuffle_gemm import a_rows
    assert a_rows(m, block_m, wave_split_k) == rows
    config = GemmConfig(block_m, 64, 512, wave_split_k=wave_split_k)
    spec, = gemm_module.launch_specs(config, "hip", m, 64, 512, (512, 1), "meta")
    assert spec.sample_args[spec.kernel.arg_names.index("A_ROWS")] == rows
    assert spec.sample_args[spec.kernel.arg_names.index("WAVE_SPLIT_K")] == wave_split_k
    for backend, want in (("hip", block_m), ("cuda", rows)):
        prequantized, = gemm_module.launch_specs(config, backend, m, 64, 512, (512, 1), "meta",
                                                 a_prequantized=True)
        assert prequantized.sample_args[spec.kernel.arg_names.index("A_ROWS")] == want
