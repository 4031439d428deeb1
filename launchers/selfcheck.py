"""Import-time self-check of the gfx950 hardware quantizer against the software one.

On gfx950 the GEMM quantizes A with `v_cvt_scalef32_pk_fp4_f32`; its equivalence with the
software recipe is proven on a model of the instruction (tests/test_hw_quant.py), and this
check confirms it on the real chip: a small GEMM on random data and on rounding-tie, NaN,
inf and zero patterns, once with each quantizer. If any output differs, the software path
is used and one line on stderr says so.
"""

import functools

import torch

from kernels import formats
from launchers.bypass import notice_once
from launchers.configs import GemmConfig
from launchers.gemm import GemmLauncher

SELF_CHECK_SHAPE = (32, 256, 512)
SELF_CHECK_CONFIG = GemmConfig(16, 64, 256)
HARDWARE_ARCHS = ("gfx950",)
_TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.5, 4.0)


def self_check_inputs(device, seed=0):
    """[(A, B_shuffle, B_scale_sh)]: random data, then A rows of ties and special values."""
    m, n, k = SELF_CHECK_SHAPE
    gen = torch.Generator(device=device).manual_seed(seed)
    random_a = torch.randn((m, k), dtype=torch.bfloat16, device=device, generator=gen)
    b_codes, b_scales = formats.quantize_mxfp4(
        torch.randn((n, k), dtype=torch.bfloat16, device=device, generator=gen))
    b_shuffle, b_scale_sh = formats.shuffle_weight(b_codes), formats.e8m0_shuffle(b_scales)
    ties = torch.tensor(_TIES, dtype=torch.float32)
    pattern = torch.cat([ties, -ties, torch.tensor([0.0, -0.0, float("nan"), -float("nan"),
                                                    float("inf"), -float("inf"), 1e-40])])
    special_a = pattern.repeat(m * k // pattern.numel() + 1)[:m * k].view(m, k)
    special_a = (special_a * torch.logspace(-20, 20, m)[:, None]).to(torch.bfloat16)
    return [(random_a, b_shuffle, b_scale_sh), (special_a.to(device), b_shuffle, b_scale_sh)]


def same_values(x, y) -> bool:
    """Equal element by element, NaN equal to NaN (and +0 to -0, as == has it)."""
    return x.shape == y.shape and bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all())


def hardware_quantizer_agrees(run, cases) -> bool:
    """run(case, hw_cvt) -> output; True when both quantizers give the same output everywhere."""
    return all(same_values(run(case, True), run(case, False)) for case in cases)


def choose_hardware_quantizer(run, cases) -> bool:
    if hardware_quantizer_agrees(run, cases):
        return True
    notice_once("mxfp4-mm: the gfx950 hardware quantizer disagreed with the software one "
                "in the self-check; using the software quantizer")
    return False


@functools.lru_cache(maxsize=16)
def hardware_quantizer_ok(arch: str, backend: str, device: str) -> bool:
    """Whether the GEMM may use the hardware quantizer on `device` (self-checked once)."""
    if arch not in HARDWARE_ARCHS:
        return False
    m, n, k = SELF_CHECK_SHAPE
    launchers = {hw: GemmLauncher(SELF_CHECK_CONFIG, backend, m, n, k, (k, 1), device, hw)
                 for hw in (True, False)}
    return choose_hardware_quantizer(lambda case, hw: launchers[hw](*case),
                                     self_check_inputs(device))
