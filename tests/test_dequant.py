"""The "dequant" path: kernels.dequantize and launchers.dequant.

Decisions tested, each by what it changes:
- kernels.dequantize: every (E2M1 code, E8M0 scale) pair gives formats.dequantize_mxfp4's value
  in bf16 bit for bit (and each such value is exact in bf16, or inf in fp32 too); the
  preshuffled layout is a round trip of formats.shuffle_weight / e8m0_shuffle, K a multiple of
  64 only, N not a multiple of 32;
- launchers.dequant: the reference's check and the ladder's proof at odd shapes (M no multiple
  of a tile, K % 128 != 0, A strided, N in chunks with a last smaller one), the same bytes on
  every call, the reduced-precision flag restored, the chunk bounded and checked;
- every launch of the path compiles for gfx950 (no spill, no scratch) and sm_90 with the
  runner's Triton (3.6.0).

The path's config and its place in the lookup are tested in tests/test_configs.py and
tests/test_tuned_shapes.py, "aiter" in tests/test_aiter_path.py, the candidates beside it in
tests/test_tuner.py and tests/test_tune.py, tools.bench --vendor-gemm in tests/test_bench.py.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.dequantize import dequantize_to_bf16
from mxfp4_mm.launchers import current_target, dequant, ladder
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, config_from_fields

ODD = (37, 96, 320)       # M no multiple of a tile, N = 3 * 32, K = 5 * 64


def same_values(got, want_fp32):
    """bf16 got equals want_fp32 in bf16 bit for bit, NaN where it is NaN."""
    want = want_fp32.to(torch.bfloat16)
    nan = torch.isnan(want)
    return (torch.equal(torch.isnan(got), nan)
            and torch.equal(got.view(torch.int16)[~nan], want.view(torch.int16)[~nan]))


def test_every_code_under_every_scale_is_the_formats_value_bit_for_bit(device):
    codes = torch.arange(16, dtype=torch.uint8).repeat(4)            # 64 codes a row
    rows = torch.arange(256, dtype=torch.int32).to(torch.uint8)      # scale byte = row
    packed = formats.pack_nibbles(codes.expand(256, 64))
    scales = rows[:, None].expand(256, 2).contiguous()
    want = formats.dequantize_mxfp4(packed, scales)
    finite = torch.isfinite(want)
    # Every product is exact in bf16: none rounds, the denormals at scale 2**-127 included.
    assert torch.equal(want[finite].to(torch.bfloat16).float(), want[finite])
    assert want[0, 1].item() == 2.0 ** -128 and torch.isinf(want[254, 4])   # 0.5 * 2**-127, 2 * 2**127
    got = dequantize_to_bf16(packed.to(device), scales.to(device), 64, block_rows=32).cpu()
    assert same_values(got, want)


@pytest.mark.parametrize("n, k, block_k", [(48, 320, 256), (96, 64, 256), (256, 576, 512)])
def test_the_preshuffled_weight_dequantizes_to_the_unshuffled_values(device, n, k, block_k):
    """K a multiple of 64 only: the last K tile is ragged; at K = 576 with 512-wide tiles it
    also runs past the scales' padding, which only the masks keep it from reading."""
    generator = torch.Generator().manual_seed(n + k)
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=generator)
    scales = torch.randint(100, 150, (n, k // 32), dtype=torch.uint8, generator=generator)
    scales[0, 0], scales[-1, -1] = 0, 255
    b_shuffle = formats.shuffle_weight(codes)
    b_scale_sh = formats.e8m0_shuffle(scales, pad_value=formats.SCALE_PAD_BYTE)
    got = dequantize_to_bf16(b_shuffle.to(device), b_scale_sh.to(device), k, preshuffled=True,
                             block_rows=32, block_k=block_k).cpu()
    assert same_values(got, formats.dequantize_mxfp4(codes, scales))


def launcher(m, n, k, a_strides, device, chunk_n=None, config=DEQUANT_CONFIG):
    return dequant.DequantLauncher(config, current_target(device)[0], m, n, k, a_strides,
                                   torch.device(device), chunk_n=chunk_n)


@pytest.mark.parametrize("chunk_n", [32, 64, None])
def test_the_launcher_matches_the_reference_at_odd_shapes_with_a_strided_a(device, chunk_n):
    m, n, k = ODD
    data = reference.generate_input(m, n, k, seed=11, device=device)
    a_t = data[0].t().contiguous().t()           # a.t() of a [K, M] tensor
    data = (a_t,) + data[1:]
    run = launcher(m, n, k, a_t.stride(), device, chunk_n,
                   config_from_fields({"path": "dequant", "block_m": 16, "block_n": 32}))
    assert run.chunk_n == (chunk_n or n)
    ok, message = reference.check_implementation(data, run(a_t, data[3], data[4]))
    assert ok, message


def test_the_launcher_passes_the_ladders_proof_repeated_calls_included(device):
    m, n, k = ODD
    rung = ladder.Rung("dequant", lambda: launcher(m, n, k, (k, 1), device, chunk_n=64))
    proven = ladder.prove_rung(rung, m, n, k, (k, 1), device)
    assert proven.proof_repeats >= 1 and proven.launches_per_call == 1 + 2 * 2
    assert list(proven.launches) == ["quantize_a", "dequantize_b", "dequantize_b_last"]


@pytest.mark.parametrize("m, n, k, chunk_n", [(1, 16, 128, None), (2, 48, 64, 32)])
def test_n_of_16_rows_past_a_scale_tile_is_proven_whole_and_as_a_last_chunk(device, m, n, k,
                                                                            chunk_n):
    rung = ladder.Rung("dequant", lambda: launcher(m, n, k, (k, 1), device, chunk_n))
    assert ladder.prove_rung(rung, m, n, k, (k, 1), device).chunk_n == min(n, chunk_n or n)


class SkippedLaunch:
    """A KernelLaunch (launchers.bypass) that launches nothing."""
    is_direct = False
    registers = spilled_registers = None

    def __call__(self, *arguments):
        pass

    standard = __call__


def test_a_launcher_that_skips_the_last_chunk_fails_the_proof(device):
    """Its last chunk multiplies the rows the chunk before left in the buffer."""
    m, n, k = 5, 96, 64
    run = launcher(m, n, k, (k, 1), device, chunk_n=64)
    run.launches["dequantize_b_last"] = SkippedLaunch()
    with pytest.raises(Exception, match="wrong output"):
        ladder.prove_rung(ladder.Rung("dequant", lambda: run), m, n, k, (k, 1), device)


@pytest.mark.parametrize("flag", [True, False])
def test_calls_give_the_same_bytes_and_leave_the_flag_as_found(device, flag):
    m, n, k = 9, 64, 128
    data = reference.generate_input(m, n, k, seed=5, device=device)
    run = launcher(m, n, k, (k, 1), device)
    saved = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flag
    try:
        first = run(data[0], data[3], data[4])
        assert torch.equal(first.view(torch.int16), run(data[0], data[3], data[4]).view(torch.int16))
        assert torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction == flag
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved


def test_the_chunk_of_b_is_bounded_and_checked():
    rows = dequant.chunk_rows(1 << 20, 8192)
    assert rows % dequant.CHUNK_ROW_MULTIPLE == 0 and 2 * rows * 8192 <= dequant.B_CHUNK_BYTES
    assert dequant.chunk_rows(96, 64) == 96
    assert dequant.chunk_rows(1 << 20, 1 << 30) == dequant.CHUNK_ROW_MULTIPLE
    with pytest.raises(ValueError, match="chunk_n=48 must be a positive multiple of 32"):
        launcher(4, 96, 64, (64, 1), "cpu", chunk_n=48)


# ----------------------------------------------------------------------------- cross-compiled

_CROSS_COMPILE = """
import json, torch
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG
from mxfp4_mm.launchers.dequant import dequant_launch_specs
from mxfp4_mm.tools.gfx950.cross_compile import GFX950, SM90, compile_for
from mxfp4_mm.tools.gfx950.report import _metadata_int
rows = []
for target, backend in ((GFX950, "hip"), (SM90, "cuda")):
    for spec in dequant_launch_specs(DEQUANT_CONFIG, backend, 37, 96, 320, (1, 37),
                                     torch.device("meta"), chunk_n=64):
        asm = compile_for(spec.kernel, spec.sample_args, spec.options, target).asm
        code = asm.get("amdgcn", "")
        rows.append([backend, spec.name, sorted(asm), _metadata_int(code, "vgpr_spill_count"),
                     _metadata_int(code, "private_segment_fixed_size")])
print(json.dumps(rows))
"""


def test_every_launch_compiles_for_gfx950_and_sm90_with_the_runners_triton(runners_triton):
    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(root)])
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.splitlines()[-1])
    names = ["quantize_a", "dequantize_b", "dequantize_b_last"]
    assert [(backend, name) for backend, name, *_ in rows] == [
        (backend, name) for backend in ("hip", "cuda") for name in names]
    for backend, name, stages, spills, scratch in rows:
        assert ("hsaco" if backend == "hip" else "cubin") in stages, (backend, name)
        assert spills == scratch == 0, (backend, name)


