"""Stand-in for the runner's reference.py: inputs, the reference GEMM and the checker.

generate_input(m, n, k, seed) -> (A, B, B_q, B_shuffle, B_scale_sh), as the runner makes them:
  A bf16 [m, k] and B bf16 [n, k] from torch.randn with a seeded generator (on the GPU when
  there is one, else on the CPU); B_q the MXFP4 codes of B [n, k/2]; B_shuffle =
  shuffle_weight(B_q); B_scale_sh = e8m0_shuffle(B's scales) [pad(n,256), pad(k/32,8)].
  The runner leaves the scale padding uninitialized; here it is 0xFF (a NaN scale), so a
  kernel that reads it shows up as wrong.
ref_kernel(data) -> bf16 [m, n] = bf16(dequant(quantize(A)) @ dequant(B)^T) in fp32.
check_implementation(data, output) -> (ok, message), rtol = atol = 1e-2 per element.

With aiter importable (AMD), quantization, shuffles and the GEMM are aiter's own, as in the
runner; otherwise kernels.formats, which is bit-exact with aiter's Triton quantizer.
"""

import torch

from kernels import formats
from task import input_t, output_t

try:
    import aiter
    from aiter.ops.shuffle import shuffle_weight as aiter_shuffle_weight
    from aiter.ops.triton.quant import dynamic_mxfp4_quant as aiter_quant
    from aiter.utility.fp4_utils import e8m0_shuffle as aiter_e8m0_shuffle
except ImportError:
    aiter = None

RTOL = ATOL = 1e-2
SCALE_PAD_BYTE = 0xFF
_FP4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
_E8M0 = getattr(torch, "float8_e8m0fnu", torch.uint8)
_WORST_SHOWN = 5


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
    a = formats.dequantize_mxfp4(*formats.quantize_mxfp4(A))
    b = formats.dequantize_mxfp4(*formats.quantize_mxfp4(B))
    return (a @ b.T).to(torch.bfloat16)


def compare(output, expected, rtol=RTOL, atol=ATOL) -> tuple:
    """(ok, message): every element within atol + rtol*|expected|, NaN and Inf where expected."""
    if output.shape != expected.shape:
        return False, f"shape mismatch: expected {tuple(expected.shape)}, got {tuple(output.shape)}"
    got, want = output.float(), expected.float()
    error = (got - want).abs()
    bad = ~(error <= atol + rtol * want.abs())
    bad = torch.where(torch.isinf(want), got != want, bad)
    bad &= ~(torch.isnan(got) & torch.isnan(want))
    count = int(bad.sum())
    if count == 0:
        return True, ""
    error = torch.where(bad, torch.nan_to_num(error, nan=float("inf")), -1.0)
    worst = torch.topk(error.flatten(), min(_WORST_SHOWN, count)).indices
    rows = [f"[{i // got.shape[-1]}, {i % got.shape[-1]}]: got {got.flatten()[i].item():.6g}, "
            f"expected {want.flatten()[i].item():.6g}" for i in worst.tolist()]
    return False, f"{count} of {bad.numel()} elements mismatch; worst: " + "; ".join(rows)


def check_implementation(data: input_t, output: output_t) -> tuple:
    return compare(output, ref_kernel(data))
