"""The hopper path (kernels.hopper_gemm): both operands dequantized to bf16 for tl.dot.

Through the interpreter: odd shapes (M not a multiple of any tile, K a multiple of 64 only, a
ragged last K tile), strided A, the tile transposed or not, split-K summed in the kernel or by a
second launch; A quantized exactly as kernels.quantize does (the fused and the prequantized A
give the same bits); outputs bit-identical call to call. The config rule for sm_90 and the
backends the path is refused on. Cross-compiled for sm_90 with the runner's Triton: the rule's
kernels neither spill nor use a stack, and take B's dequantized values from registers into
wgmma.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import quantize_rows
from mxfp4_mm.launchers.configs import GEMM_CONFIGS, config_lookup
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.heuristics.sm90 import hopper_config
from mxfp4_mm.launchers.gemm import GemmLauncher, launch_specs
from mxfp4_mm.launchers.paths import build_launcher
from mxfp4_mm.launchers.targets import SM90

ROOT = Path(__file__).resolve().parents[1]


def hopper(block_m, block_n, **fields):
    return GemmConfig(block_m, block_n, 256, path="hopper", **fields)


CASES = [
    # (m, n, k), config
    ((3, 96, 320), hopper(16, 32, swap_ab=True)),        # K = 5 * 64: a ragged K tile
    ((3, 96, 320), hopper(16, 32)),
    ((1, 64, 192), hopper(16, 64, swap_ab=True)),        # one row of A, K < BLOCK_K
    ((5, 80, 1024), hopper(16, 64, split_k=2, split_k_reduce="last_program", swap_ab=True)),
    ((20, 64, 576), hopper(16, 32, split_k=2)),          # two M tiles, the 2nd ragged; reduce launch
    ((33, 48, 448), hopper(32, 32, swap_ab=True, num_stages=2)),
    ((6, 64, 512), hopper(16, 64, swap_ab=True, quantize_a_once=True)),   # A by its own launch
]


def run(config, data, a=None):
    a = data[0] if a is None else a
    m, k = a.shape
    launcher = build_launcher(config, "interpreter", m, data[3].shape[0], k, a.stride(), a.device)
    return launcher, launcher(a, data[3], data[4])


@pytest.mark.interpreter
@pytest.mark.parametrize("shape, config", CASES, ids=[f"{s}-{c.label}" for s, c in CASES])
def test_matches_the_reference_and_repeats_its_bits(shape, config):
    data = reference.generate_input(*shape, seed=sum(shape), device="cpu")
    launcher, out = run(config, data)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    assert torch.equal(out, launcher(data[0], data[3], data[4]))


@pytest.mark.interpreter
def test_strided_a():
    m, n, k = 5, 64, 384
    data = reference.generate_input(m, n, k, seed=3, device="cpu")
    wide = torch.zeros(m, k + 64, dtype=torch.bfloat16)
    wide[:, 32:32 + k] = data[0]
    strided = wide[:, 32:32 + k]
    assert not strided.is_contiguous()
    config = hopper(16, 32, swap_ab=True)
    _, out = run(config, data, strided)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    assert torch.equal(out, run(config, data)[1])


@pytest.mark.interpreter
@pytest.mark.parametrize("config", [hopper(16, 32, swap_ab=True), hopper(16, 32, split_k=2)])
def test_a_is_quantized_as_kernels_quantize_does(config):
    """The in-register quantization of A gives the bits that quantize_rows (bit-exact with
    formats.quantize_mxfp4, tests/test_quantize_kernel.py) gives, fed to the same kernel."""
    m, n, k = 4, 64, 512
    data = reference.generate_input(m, n, k, seed=9, device="cpu")
    _, fused = run(config, data)
    prequantized = GemmLauncher(config, "interpreter", m, n, k, data[0].stride(), "cpu",
                                a_prequantized=True)
    codes, scales = quantize_rows(data[0])
    assert torch.equal(fused, prequantized(codes, data[3], data[4], scales))


@pytest.mark.interpreter
def test_a_weight_scale_of_zero_and_of_nan_reach_the_output_as_the_reference_reads_them():
    """E8M0 0 is 2**-127 and 255 NaN (formats.e8m0_to_f32), both in the dequantized B."""
    m, n, k = 2, 32, 256
    data = list(reference.generate_input(m, n, k, seed=5, device="cpu"))
    codes = formats.unshuffle_weight(data[3].view(torch.uint8))
    scales = formats.e8m0_unshuffle(data[4].view(torch.uint8), n, k // 32).clone()
    scales[0, 0], scales[1, 1] = 0, 255
    data[4] = formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE)
    _, out = run(hopper(16, 32, swap_ab=True), data)
    expected = (formats.dequantize_mxfp4(*formats.quantize_mxfp4(data[0]))
                @ formats.dequantize_mxfp4(codes, scales).T)
    assert torch.isnan(out[:, 1]).all() and torch.isnan(expected[:, 1]).all()
    assert torch.allclose(out[:, 0].float(), expected[:, 0], rtol=1e-2, atol=1e-2)


def test_the_sm90_rule_serves_the_hopper_path_up_to_its_m_and_nothing_else_changes():
    for m in (1, 8, SM90.hopper_max_m):
        for n, k in ((6144, 4096), (4096, 14336), (2880, 1024)):
            config, source = config_lookup("sm_90", m, n, k)
            assert (config, source) == (hopper_config(m, n, k), "heuristic")
            assert config.path == "hopper" and config.swap_ab
            assert config.block_m >= m and config.block_k == 256
            programs = formats.cdiv(m, config.block_m) * formats.cdiv(n, config.block_n)
            assert config.split_k == 1 or programs * config.split_k <= 400
    assert config_lookup("sm_90", SM90.hopper_max_m + 1, 4096, 4096)[0].path == "preshuffle"
    for arch in ("gfx950", "interpreter"):
        assert config_lookup(arch, 1, 6144, 4096)[0].path == "preshuffle"
    assert all(c.path == "preshuffle" for table in GEMM_CONFIGS.values() for c in table.values())


def test_the_rule_splits_k_only_while_the_grid_is_small():
    assert hopper_config(1, 28672, 4096).split_k == 1       # 448 tiles
    assert hopper_config(1, 4096, 4096).split_k == 4        # 64 tiles
    assert hopper_config(1, 4096, 256).split_k == 1         # one K tile


def test_the_hopper_path_is_refused_on_hip_and_with_a_hardware_quantizer():
    config = hopper(16, 64, swap_ab=True)
    with pytest.raises(ValueError, match="hopper GEMM path runs on CUDA"):
        launch_specs(config, "hip", 16, 64, 256, (256, 1), "meta")
    with pytest.raises(ValueError, match="hopper GEMM path runs on CUDA"):
        launch_specs(config, "cuda", 16, 64, 256, (256, 1), "meta", quantizer="hardware")


def test_swap_ab_belongs_to_the_hopper_path():
    with pytest.raises(ValueError, match="swap_ab needs path='hopper'"):
        GemmConfig(16, 64, 256, swap_ab=True)
    assert hopper(16, 64, swap_ab=True).label.endswith("hopper swap")


_CROSS_COMPILE = """
import os, re
os.environ.pop("TRITON_INTERPRET", None)
import triton
from mxfp4_mm.tools.fit import cubin_resources
from mxfp4_mm.tools.gfx950.cross_compile import SM90, compile_for
from mxfp4_mm.launchers.heuristics.sm90 import hopper_config
from mxfp4_mm.launchers.gemm import launch_specs
for m, n, k in ((1, 4096, 4096), (8, 28672, 4096), (32, 4096, 14336), (64, 6144, 4096)):
    spec = [s for s in launch_specs(hopper_config(m, n, k), "cuda", m, n, k, (k, 1), "meta")
            if s.name == "gemm"][0]
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, SM90)
    usage = cubin_resources(compiled.asm["cubin"])
    registers, stack = usage["registers"], usage["stack_bytes"]
    ptx = compiled.asm["ptx"]
    print(triton.__version__, m, n, k, registers, stack, "mul.rn.bf16x2" in ptx,
          len(re.findall(r"wgmma.mma_async.sync.aligned.m64n\\d+k16.f32.bf16.bf16 +\\{", ptx)),
          len(re.findall(r"wgmma.mma_async[^;]*\\{[^}]*\\}, *\\{", ptx)))
"""


def test_the_rules_kernels_compile_for_sm90_without_a_stack_and_feed_wgmma_from_registers(
        runners_triton):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT)])
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert len(rows) == 4
    for version, m, n, k, registers, stack, pairs_asm, wgmma, register_a in rows:
        assert version == "3.6.0"
        assert int(registers) <= 255 and int(stack) == 0, (m, n, k, registers, stack)
        assert pairs_asm == "True"
        assert int(wgmma) > 0 and int(register_a) == int(wgmma), (m, n, k)
