"""Configs, config lookup, launch options, the bypass launch and the launcher cache."""

import contextlib
import itertools
from collections import OrderedDict

import pytest
import torch

from mxfp4_mm import launchers
from mxfp4_mm.launchers import bypass, configs
from mxfp4_mm.launchers.configs import GEMM_CONFIGS, config_for
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.task_shapes import TASK_SHAPES
from mxfp4_mm.launchers.gemm import GemmLauncher

ARCHES = ("gfx950", "sm_90")


def assert_valid(config: GemmConfig, k: int):
    """The kernel's constraints on a config, and on the splits it gives for this K."""
    assert config.block_n % 32 == 0 and 256 % config.block_n == 0
    assert config.block_k % 256 == 0
    assert config.block_k & (config.block_k - 1) == 0     # tl.arange(0, BLOCK_K)
    assert config.block_m >= 16 and config.block_m & (config.block_m - 1) == 0
    assert config.split_k >= 1 and config.group_m >= 1
    splits, size = config.splits_for(k)
    assert 1 <= splits <= config.split_k
    assert size % config.block_k == 0
    # Every split is non-empty and together they cover K.
    assert (splits - 1) * size < k <= splits * size


# ---------------------------------------------------------------------------------------
# The per-arch tables
# ---------------------------------------------------------------------------------------

def test_task_shapes_are_the_ten_distinct_task_shapes():
    assert len(TASK_SHAPES) == 10 and len(set(TASK_SHAPES)) == 10
    for m, n, k in TASK_SHAPES:
        assert n % 16 == 0 and k % 64 == 0


@pytest.mark.parametrize("arch", ARCHES)
def test_every_arch_table_covers_every_task_shape(arch):
    assert set(GEMM_CONFIGS[arch]) == set(TASK_SHAPES)


@pytest.mark.parametrize("arch, shape", list(itertools.product(ARCHES, TASK_SHAPES)))
def test_table_configs_obey_the_kernel_constraints(arch, shape):
    assert_valid(GEMM_CONFIGS[arch][shape], shape[2])


def test_interpreter_uses_the_gfx950_table():
    assert GEMM_CONFIGS["interpreter"] is GEMM_CONFIGS["gfx950"]


@pytest.mark.parametrize("block_k, split_k, k, want", [
    (512, 1, 512, (1, 512)),
    (512, 1, 576, (1, 1024)),
    (512, 14, 7168, (14, 512)),
    (512, 2, 1536, (2, 1024)),     # the second split is half empty
    (256, 3, 1536, (3, 512)),
    (256, 4, 1344, (3, 512)),      # fewer splits than requested
    (256, 3, 576, (3, 256)),       # the last split holds 64 of K
    (256, 16, 320, (2, 256)),      # never more splits than K tiles
    (512, 16, 64, (1, 512)),
])
def test_splits_for(block_k, split_k, k, want):
    config = GemmConfig(16, 64, block_k, split_k=split_k)
    assert config.splits_for(k) == want
    assert_valid(config, k)


# ---------------------------------------------------------------------------------------
# GemmConfig validation
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(block_n=48), dict(block_n=16), dict(block_n=512), dict(block_n=96),
    dict(block_k=128), dict(block_k=384), dict(block_k=64),
    dict(block_m=24), dict(block_m=0), dict(block_m=-16), dict(block_m=8),
    dict(split_k=0), dict(group_m=0),
    dict(cache_modifier=".xx"), dict(cache_modifier="cg"),
    dict(split_k_reduce="atomic"),
    # The kernel's tl.arange(0, BLOCK_K) needs a power of two.
    dict(block_k=768),
])
def test_gemm_config_rejects_bad_values(kwargs):
    values = dict(block_m=16, block_n=64, block_k=512) | kwargs
    with pytest.raises(ValueError, match="^bad GemmConfig: "):
        GemmConfig(**values)


@pytest.mark.parametrize("block_m, block_n, block_k, cache_modifier", [
    (16, 32, 256, None), (16, 64, 512, ".cg"), (32, 128, 2048, ".ca"), (64, 256, 1024, ".cv"),
])
def test_gemm_config_accepts_good_values(block_m, block_n, block_k, cache_modifier):
    GemmConfig(block_m, block_n, block_k, cache_modifier=cache_modifier)


# ---------------------------------------------------------------------------------------
# heuristic_config and config_for
# ---------------------------------------------------------------------------------------

HEURISTIC_M = (1, 2, 7, 16, 33, 100, 256, 1000, 4096)
HEURISTIC_N = (64, 80, 192, 1024, 2048, 2880, 8192)
HEURISTIC_K = (64, 320, 512, 1344, 2048, 7168, 8192)


@pytest.mark.parametrize("m", HEURISTIC_M)
def test_heuristic_config_is_valid_for_a_grid_of_shapes(m):
    for arch, n, k in itertools.product(("gfx950", "sm_90"), HEURISTIC_N, HEURISTIC_K):
        assert_valid(heuristic_config(arch, m, n, k), k)


@pytest.mark.parametrize("shape", [(1, 512, 8192), (1, 64, 8192), (8, 2112, 7168), (4, 256, 4096)])
def test_heuristic_splits_k_when_the_grid_is_small_and_k_is_big(shape):
    m, n, k = shape
    config = heuristic_config("gfx950", m, n, k)
    assert config.split_k > 1 and config.splits_for(k)[0] > 1


@pytest.mark.parametrize("shape", [(4096, 8192, 8192), (256, 8192, 512), (1, 512, 512)])
def test_heuristic_does_not_split_a_big_grid_or_a_short_k(shape):
    assert heuristic_config("gfx950", *shape).splits_for(shape[2])[0] == 1


@pytest.mark.parametrize("arch", ARCHES + ("interpreter",))
@pytest.mark.parametrize("shape", TASK_SHAPES)
def test_config_for_returns_the_table_entry_for_a_task_shape(arch, shape):
    assert config_for(arch, *shape) is GEMM_CONFIGS[arch][shape]


@pytest.mark.parametrize("arch", ARCHES + ("interpreter", "gfx942", "sm_100"))
@pytest.mark.parametrize("shape", [(5, 2880, 512), (8, 2112, 7680), (1, 512, 8192)])
def test_config_for_uses_the_heuristic_for_other_shapes(arch, shape):
    config = config_for(arch, *shape)
    assert config == heuristic_config(arch, *shape)


# ---------------------------------------------------------------------------------------
# bypass: backend options, notices, direct launch
# ---------------------------------------------------------------------------------------

AMD_ONLY = {"waves_per_eu", "matrix_instr_nonkdim"}


@pytest.mark.parametrize("backend", ["hip", "cuda", "interpreter"])
def test_backend_options_keep_amd_only_keys_for_hip(backend):
    options = bypass.backend_options(backend, num_warps=8, num_stages=2, waves_per_eu=1,
                                     matrix_instr_nonkdim=16)
    assert options["num_warps"] == 8 and options["num_stages"] == 2
    if backend == "hip":
        assert options["waves_per_eu"] == 1 and options["matrix_instr_nonkdim"] == 16
    else:
        assert not AMD_ONLY & set(options)


def test_notice_once_prints_a_message_once_on_stderr(capsys):
    message = "mxfp4-mm test: a notice only this test gives"
    bypass.notice_once(message)
    bypass.notice_once(message)
    captured = capsys.readouterr()
    assert captured.err == message + "\n"
    assert captured.out == ""
    bypass.notice_once(message)
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not launchers.interpreting(), reason="only the interpreter has no direct launch")
@pytest.mark.parametrize("config", [GemmConfig(16, 64, 512), GemmConfig(16, 128, 512, split_k=4)])
def test_interpreter_launches_are_not_direct(device, config):
    launcher = GemmLauncher(config, "interpreter", 16, 256, 2048, (2048, 1), torch.device(device))
    assert not launcher.gemm.is_direct
    assert (launcher.reduce is None) == (config.split_k == 1)
    assert launcher.reduce is None or not launcher.reduce.is_direct
    assert not launcher.is_direct


def test_aligned():
    storage = torch.zeros(64, dtype=torch.uint8)
    assert bypass.aligned(storage, storage[16:], storage[32:])
    assert not bypass.aligned(storage, storage[1:])


# ---------------------------------------------------------------------------------------
# launcher_for and its cache
# ---------------------------------------------------------------------------------------

@pytest.fixture
def empty_cache(monkeypatch):
    """A fresh, empty launcher cache for one test; the module's own cache is left as it was."""
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())


def a_of(m, k, device, transposed=False):
    if transposed:
        return torch.empty((k, m), dtype=torch.bfloat16, device=device).t()
    return torch.empty((m, k), dtype=torch.bfloat16, device=device)


def test_launcher_for_reuses_the_launcher_of_a_shape_and_strides(device, empty_cache):
    first = launchers.launcher_for(a_of(16, 512, device), 256)
    assert launchers.launcher_for(a_of(16, 512, device), 256) is first
    assert launchers.cached_launcher_count() == 1
    assert launchers.launcher_for(a_of(16, 512, device, transposed=True), 256) is not first
    assert launchers.launcher_for(a_of(16, 512, device), 512) is not first
    assert launchers.launcher_for(a_of(32, 512, device), 256) is not first
    assert launchers.launcher_for(a_of(16, 1024, device), 256) is not first
    assert launchers.cached_launcher_count() == 5


def test_launcher_for_uses_the_config_of_its_shape(device, empty_cache):
    for shape in (TASK_SHAPES[0], TASK_SHAPES[1], (5, 208, 576)):
        m, n, k = shape
        launcher = launchers.launcher_for(a_of(m, k, device), n)
        assert launcher.config == config_for(launchers.current_target(device)[1], *shape)
        assert (launcher.m, launcher.n) == (m, n)


def test_launcher_cache_is_bounded_and_evicts_the_least_recently_used(device, empty_cache,
                                                                      monkeypatch):
    monkeypatch.setattr(launchers, "LAUNCHER_CACHE_CAPACITY", 2)
    a1, a2, a3 = a_of(1, 256, device), a_of(2, 256, device), a_of(3, 256, device)
    first = launchers.launcher_for(a1, 64)
    second = launchers.launcher_for(a2, 64)
    assert launchers.launcher_for(a1, 64) is first         # a1 is now the most recent
    third = launchers.launcher_for(a3, 64)                  # evicts a2, the least recent
    assert launchers.cached_launcher_count() <= 2
    assert launchers.launcher_for(a1, 64) is first
    assert launchers.launcher_for(a3, 64) is third
    assert launchers.launcher_for(a2, 64) is not second     # rebuilt: it had been evicted
    assert launchers.cached_launcher_count() <= 2
    for m in range(4, 20):
        launchers.launcher_for(a_of(m, 256, device), 64)
        assert launchers.cached_launcher_count() <= 2


def test_default_cache_capacity_is_readmes_64():
    """README's figure: at most 64 launchers, room for every task shape."""
    assert launchers.LAUNCHER_CACHE_CAPACITY == 64 >= len(TASK_SHAPES)


# ---------------------------------------------------------------------------------------
# launchers/__init__'s decisions, with a recording proven_launcher (no kernel runs):
# - the cache key: target arch, device, M, N, K, A's strides and the output's dtype, each
#   telling launchers apart;
#   a hit moves its entry to the most recently used end; past the capacity the least recently
#   used goes;
# - the target: the interpreter whenever TRITON_INTERPRET is set to anything but "" or "0";
#   CUDA's arch as sm_NN, HIP's without its feature suffix; a device without an index is the
#   current one;
# - M = 0 gives an empty [0, N] output without a launcher; prewarm builds each shape at
#   contiguous strides on the current device, then synchronizes.
# ---------------------------------------------------------------------------------------

import types  # noqa: E402


@pytest.fixture
def recorded_ladder(monkeypatch):
    built = []

    def proven_launcher(arch, backend, m, n, k, a_strides, device, out_dtype):
        built.append((arch, backend, m, n, k, a_strides, str(device), out_dtype))
        return object()
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())
    monkeypatch.setattr(launchers, "proven_launcher", proven_launcher)
    return built


def test_every_part_of_the_key_tells_launchers_apart(recorded_ladder, monkeypatch):
    first = launchers._launcher("cpu", 4, 64, 512, (512, 1))
    assert launchers._launcher("cpu", 4, 64, 512, (512, 1)) is first
    for args in [("meta", 4, 64, 512, (512, 1)), ("cpu", 8, 64, 512, (512, 1)),
                 ("cpu", 4, 96, 512, (512, 1)), ("cpu", 4, 64, 1024, (1024, 1)),
                 ("cpu", 4, 64, 512, (1, 4))]:
        assert launchers._launcher(*args) is not first
    fp32 = launchers._launchers[launchers._launcher_key("cpu", 4, 64, 512, (512, 1),
                                                        torch.float32)]
    assert fp32 is not first and recorded_ladder[-1][-1] == torch.float32
    monkeypatch.setattr(launchers, "current_target", lambda device: ("hip", "gfx950"))
    assert launchers._launcher("cpu", 4, 64, 512, (512, 1)) is not first
    assert len(recorded_ladder) == 8 and recorded_ladder[-1][:2] == ("gfx950", "hip")


def test_a_hit_is_the_most_recent_and_the_least_recent_goes(recorded_ladder, monkeypatch):
    monkeypatch.setattr(launchers, "LAUNCHER_CACHE_CAPACITY", 2)
    a = launchers._launcher("cpu", 1, 64, 512, (512, 1))
    launchers._launcher("cpu", 2, 64, 512, (512, 1))
    assert launchers._launcher("cpu", 1, 64, 512, (512, 1)) is a        # 1 is now the newest
    launchers._launcher("cpu", 3, 64, 512, (512, 1))                     # 2 goes
    assert launchers.cached_launcher_count() == 2
    assert launchers._launcher("cpu", 1, 64, 512, (512, 1)) is a
    launchers._launcher("cpu", 2, 64, 512, (512, 1))
    assert [entry[2] for entry in recorded_ladder] == [1, 2, 3, 2]


def test_launcher_for_keys_by_the_tensors_shape_strides_and_device(recorded_ladder):
    a = torch.empty((8, 512), dtype=torch.bfloat16, device="meta")
    launchers.launcher_for(a, 64)
    launchers.launcher_for(a.t().contiguous().t(), 64)
    assert [entry[2:] for entry in recorded_ladder] == [
        (8, 64, 512, (512, 1), "meta", torch.bfloat16),
        (8, 64, 512, (1, 8), "meta", torch.bfloat16)]


@pytest.mark.parametrize("text, on", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_interpreting(monkeypatch, text, on):
    monkeypatch.setenv("TRITON_INTERPRET", text)
    assert launchers.interpreting() is on


@pytest.mark.parametrize("backend, arch, want", [
    ("cuda", 90, ("cuda", "sm_90")), ("hip", "gfx950:sramecc+:xnack-", ("hip", "gfx950")),
    ("hip", "gfx942", ("hip", "gfx942"))])
def test_the_target_of_a_device(monkeypatch, backend, arch, want):
    target = types.SimpleNamespace(backend=backend, arch=arch)
    driver = types.SimpleNamespace(active=types.SimpleNamespace(get_current_target=lambda: target))
    monkeypatch.setattr(launchers.triton.runtime, "driver", driver)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    launchers._target_of_device.cache_clear()
    try:
        assert launchers.current_target("cpu") == want
    finally:
        launchers._target_of_device.cache_clear()


def test_a_device_without_an_index_is_the_current_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert launchers._gpu("cuda") == torch.device("cuda", 3)
    assert launchers._gpu("cuda:1") == torch.device("cuda", 1)


def test_m_zero_needs_no_launcher(monkeypatch, device):
    monkeypatch.setattr(launchers, "launcher_for", None)   # calling it would fail
    a = torch.empty((0, 256), dtype=torch.bfloat16, device=device)
    b = torch.empty((64, 128), dtype=torch.uint8, device=device)
    s = torch.empty((256, 8), dtype=torch.uint8, device=device)
    out = launchers.mxfp4_gemm(a, b, s)
    assert out.shape == (0, 64) and out.dtype == torch.bfloat16 and out.device == a.device


def test_prewarm_builds_each_shape_contiguous_on_the_current_device(recorded_ladder, monkeypatch):
    synced = []
    build_devices = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(True))
    monkeypatch.setattr(torch.cuda, "device", lambda device: build_devices.append(str(device))
                        or contextlib.nullcontext())     # the build thread's device
    monkeypatch.setattr(launchers, "current_target", lambda device: ("cuda", "sm_90"))
    launchers.prewarm([(4, 64, 512), (8, 96, 1024)], device="cuda")
    assert build_devices == ["cuda:0", "cuda:0"]
    assert [entry[2:] for entry in recorded_ladder] == [
        (4, 64, 512, (512, 1), "cuda:0", torch.bfloat16),
        (8, 96, 1024, (1024, 1), "cuda:0", torch.bfloat16)]
    assert synced == [True]


def test_a_second_registration_of_the_op_keeps_the_first():
    """The bundle imported beside the package (or twice) registers torch.ops.mxfp4_mm.gemm
    once: the op that callers and compiled graphs hold stays the op."""
    from mxfp4_mm.launchers import prepared
    op = torch.ops.mxfp4_mm.gemm
    for name in ("gemm", "gemm_prepared"):
        kept = getattr(torch.ops.mxfp4_mm, name).default
        assert launchers.define_op(name, "Tensor a", lambda a: a, lambda a: a) is kept
    assert torch.ops.mxfp4_mm.gemm is op
    assert torch.ops.mxfp4_mm.gemm_prepared.default._schema.arguments[3].name == "k"
    assert prepared.OP_NAME == "gemm_prepared"
