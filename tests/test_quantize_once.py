"""The quantize-once path (GemmConfig.quantize_a_once): kernels.quantize's quantize kernel writes
A's MXFP4 codes and E8M0 scales once, then the GEMM runs on them. On odd shapes (M not a
multiple of the tile, K a multiple of 64 only, a ragged N tile, split K, a strided A) its
output is the reference's and, bit for bit, the fused GEMM's of the same tiles; the ladder
proves it like any launcher, and the heuristic takes it from GFX950.quantize_once_from_m on."""

import dataclasses

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import quantize_rows
from mxfp4_mm.launchers import current_target
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.gemm import GemmLauncher
from mxfp4_mm.launchers.ladder import proven_launcher
from mxfp4_mm.launchers.targets import GFX950


def launch(config, a, b_shuffle, b_scale_sh):
    m, k = a.shape
    launcher = GemmLauncher(config, current_target(a.device)[0], m, b_shuffle.shape[0], k,
                            a.stride(), a.device)
    return launcher, launcher(a, b_shuffle, b_scale_sh)


@pytest.mark.parametrize("shape, config", [
    ((37, 96, 320), GemmConfig(32, 32, 256, quantize_a_once=True)),
    ((300, 160, 192), GemmConfig(256, 128, 256, num_warps=8, quantize_a_once=True)),
    ((130, 64, 1088), GemmConfig(128, 64, 256, split_k=3, quantize_a_once=True)),
    ((70, 64, 1088), GemmConfig(64, 64, 256, split_k=2, split_k_reduce="last_program",
                                quantize_a_once=True)),
])
def test_quantize_once_on_odd_shapes_is_the_reference_and_the_fused_bits(device, shape, config):
    m, n, k = shape
    data = reference.generate_input(m, n, k, seed=71, device=device)
    a, _, _, b_shuffle, b_scale_sh = data
    launcher, out = launch(config, a, b_shuffle, b_scale_sh)
    assert launcher.quantize is not None
    assert launcher.launches_per_call == 2 + (config.split_k > 1
                                              and config.split_k_reduce == "kernel")
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    _, fused = launch(dataclasses.replace(config, quantize_a_once=False), a, b_shuffle, b_scale_sh)
    assert torch.equal(out.view(torch.int16), fused.view(torch.int16))


def test_quantize_once_reads_a_strided_a(device):
    m, n, k = 33, 64, 384
    data = reference.generate_input(m, n, k, seed=72, device=device)
    wide = torch.zeros(m, k + 64, dtype=torch.bfloat16, device=device)
    wide[:, 64:] = data[0]
    a = wide[:, 64:]
    _, out = launch(GemmConfig(32, 64, 256, quantize_a_once=True), a, data[3], data[4])
    ok, message = reference.check_implementation(data, out)
    assert ok, message


@pytest.mark.parametrize("rows, k", [(1, 64), (17, 192), (40, 576)])
def test_the_quantize_kernel_masks_the_rows_past_m_and_is_bit_exact(device, rows, k):
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    codes, scales = quantize_rows(x.to(device))
    want_codes, want_scales = formats.quantize_mxfp4(x)
    assert torch.equal(codes.cpu(), want_codes) and torch.equal(scales.cpu(), want_scales)


def test_the_heuristic_quantizes_a_once_from_its_threshold_with_tiles_up_to_256():
    below, at = heuristic_config("gfx950", GFX950.quantize_once_from_m - 1, 4096, 4096), \
        heuristic_config("gfx950", GFX950.quantize_once_from_m, 4096, 4096)
    assert not below.quantize_a_once and at.quantize_a_once and at.block_m == 128
    assert heuristic_config("gfx950", 8192, 4096, 4096).block_m == 256


@pytest.mark.interpreter
def test_the_ladder_proves_a_quantize_once_launcher(device):
    m, n, k = GFX950.quantize_once_from_m + 3, 64, 256
    launcher = proven_launcher("interpreter", "interpreter", m, n, k, (k, 1), device)
    assert launcher.config.quantize_a_once and launcher.rung == "software quantizer"
    assert launcher.launches_per_call == 2
