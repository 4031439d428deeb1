"""Stand-in for the runner's reference.py: inputs, the reference GEMM and the checker.

generate_input(m, n, k, seed) -> (A, B, B_q, B_shuffle, B_scale_sh), as the runner makes them:
  A bf16 [m, k] and B bf16 [n, k] from torch.randn with a seeded generator (on the GPU when
  there is one, else on the CPU); B_q the MXFP4 codes of B [n, k/2]; B_shuffle =
  shuffle_weight(B_q); B_scale_sh = e8m0_shuffle(B's scales) [pad(n,256), pad(k/32,8)].
  The runner leaves the scale padding uninitialized; here it is 0xFF (a NaN scale), so a
  kernel that reads it shows up as wrong.
ref_kernel(data) -> bf16 [m, n] = bf16(dequant(quantize(A)) @ dequant(B)^T) in fp32.
check_implementation(data, output) -> (ok, message), rtol = atol = 1e-2 per element
(launchers.proof.compare, the element check the launchers' proofs use too).

With aiter importable (AMD), quantization, shuffles and the GEMM are aiter's own, as in the
runner; otherwise kernels.formats, which is bit-exact with aiter's Triton quantizer.
"""

import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers.proof import ATOL, RTOL, compare, reference_output  # noqa: F401 (re-exported)
from mxfp4_mm.task import input_t, output_t

try:
    import aiter
    from aiter.ops.shuffle import shuffle_weight as aiter_shuffle_weight
    from aiter.ops.triton.quant import dynamic_mxfp4_quant as aiter_quant
    from aiter.utility.fp4_utils import e8m0_shuffle as aiter_e8m0_shuffle
except ImportError:
    aiter = None

SCALE_PAD_BYTE = formats.SCALE_PAD_BYTE
_FP4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
_E8M0 = getattr(torch, "float8_e8m0fnu", torch.uint8)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _quantize(x):
    if aiter is not None:
        codes, scales = aiter_quant(x)
        return codes.view(torch.uint8), scales.view(torch.uint8)
    return formats.quantize_mxfp4(x)


def generate_input(m: int, n: int, k: int, seed: int, device=None) -> input_t:
    if k % 64:
        raise ValueError(f"k must be a multiple of 64, got {k}")
    device = device or default_device()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    A = torch.randn((m, k), dtype=torch.bfloat16, device=device, generator=gen)
    B = torch.randn((n, k), dtype=torch.bfloat16, device=device, generator=gen)
    B_codes, B_scales = _quantize(B)
    B_q = B_codes.view(_FP4)
    if aiter is not None:
        B_shuffle = aiter_shuffle_weight(B_q, layout=(16, 16))
        B_scale_sh = aiter_e8m0_shuffle(B_scales.view(_E8M0))
    else:
        B_shuffle = formats.shuffle_weight(B_q)
        B_scale_sh = formats.e8m0_shuffle(B_scales, pad_value=SCALE_PAD_BYTE).view(_E8M0)
    return A, B, B_q, B_shuffle, B_scale_sh


def ref_kernel(data: input_t) -> output_t:
    A, B, B_q, B_shuffle, B_scale_sh = data
    if aiter is not None:
        codes, scales = aiter_quant(A)
        return aiter.gemm_a4w4(codes.view(_FP4), B_shuffle, aiter_e8m0_shuffle(scales.view(_E8M0)),
                               B_scale_sh, dtype=torch.bfloat16, bpreshuffle=True)[:A.shape[0]]
    return reference_output(A, *formats.quantize_mxfp4(B))


def check_implementation(data: input_t, output: output_t) -> tuple:
    return compare(output, ref_kernel(data))
