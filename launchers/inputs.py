"""Validation of custom_kernel's input tuple: clear errors instead of wrong answers.

`problem_of(data) -> (A, B_shuffle, B_scale_sh, M, N, K)` (and `gemm_problem(A, B_shuffle,
B_scale_sh) -> (M, N, K)` for the three tensors the GEMM reads) checks, cheaply (shapes, dtypes,
contiguity, devices; no data is read), what the kernels rely on, and raises TypeError or
ValueError naming the argument, what was expected and what came. CPU tensors need the kernels
built for the Triton interpreter (TRITON_INTERPRET=1 set before the import): otherwise a
RuntimeError says so, instead of Triton's "0 active drivers".

`output_dtype(where, out_dtype)` checks the ops' out_dtype (OUT_DTYPES; None: bf16).
"""

import torch
import triton

from ..kernels import formats
from ..kernels.preshuffle_gemm import preshuffle_gemm_kernel

_FP4_DTYPES = tuple(d for d in (getattr(torch, "float4_e2m1fn_x2", None), torch.uint8) if d)
_E8M0_DTYPES = tuple(d for d in (getattr(torch, "float8_e8m0fnu", None), torch.uint8) if d)
DATA_FIELDS = ("A", "B", "B_q", "B_shuffle", "B_scale_sh")
K_MULTIPLE = 2 * formats.WEIGHT_TILE_BYTES      # fp4 values in one row of a (16, 16) shuffle tile
# triton.jit gives a JITFunction (compiled for a GPU) unless TRITON_INTERPRET was set at import.
KERNELS_NEED_A_GPU = isinstance(preshuffle_gemm_kernel, triton.runtime.JITFunction)
# What the ops' out_dtype may ask for: bf16 (the default), or float32, the GEMM's fp32 sums
# unrounded (the same sums: bf16 of it is the bf16 output wherever the path rounds once).
OUT_DTYPES = (torch.bfloat16, torch.float32)
CPU_HOWTO = ("set TRITON_INTERPRET=1 before importing the submission to run it on a CPU "
             "through the Triton interpreter, e.g. `TRITON_INTERPRET=1 python your_script.py`")


def _require_tensor(name, value, dims, dtypes):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dim() != dims or value.dtype not in dtypes:
        raise TypeError(f"{name}: expected a {dims}-D tensor of dtype "
                        f"{' or '.join(map(str, dtypes))}, got {value.dim()}-D {value.dtype}")


def _require_contiguous(name, value):
    if not value.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor (row-major, the layout the "
                         f"kernel reads), got one of shape {tuple(value.shape)} with strides "
                         f"{value.stride()}; pass {name}.contiguous()")


def output_dtype(where: str, out_dtype) -> torch.dtype:
    """The output's dtype an op's out_dtype asks for (None: bf16); one-line ValueError naming
    `where` for any other than OUT_DTYPES."""
    if out_dtype is None:
        return torch.bfloat16
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"{where}: expected out_dtype torch.bfloat16 or torch.float32, got "
                         f"{out_dtype!r}")
    return out_dtype


def gemm_tensors(data):
    """data -> (A, B_shuffle, B_scale_sh), the three tensors the GEMM reads (not yet checked)."""
    if not isinstance(data, (tuple, list)) or len(data) != len(DATA_FIELDS):
        got = f"{type(data).__name__} of length {len(data)}" if isinstance(data, (tuple, list)) \
            else type(data).__name__
        raise TypeError(f"data: expected a tuple ({', '.join(DATA_FIELDS)}), got {got}")
    a, _, _, b_shuffle, b_scale_sh = data
    return a, b_shuffle, b_scale_sh


def problem_of(data):
    tensors = gemm_tensors(data)
    return tensors + gemm_problem(*tensors)


def gemm_problem(a, b_shuffle, b_scale_sh):
    """(M, N, K) of the GEMM's three tensors, checked as problem_of checks them."""
    _require_tensor("A", a, 2, (torch.bfloat16,))
    _require_tensor("B_shuffle", b_shuffle, 2, _FP4_DTYPES)
    _require_tensor("B_scale_sh", b_scale_sh, 2, _E8M0_DTYPES)
    m, k = a.shape
    n, weight_k = b_shuffle.shape[0], 2 * b_shuffle.shape[1]
    if k != weight_k and a.shape[0] == weight_k:
        raise ValueError(f"A: shape {tuple(a.shape)} is [K, M] (B_shuffle holds K={weight_k}): "
                         f"A must be [M, K]; a K-major A is the view a.t() of its [K, M] "
                         f"tensor, which is read through its strides as it is")
    if k != weight_k:
        raise ValueError(f"A, B_shuffle: A of shape {tuple(a.shape)} has K={k}, B_shuffle of "
                         f"shape {tuple(b_shuffle.shape)} holds K={weight_k} (K/2 bytes a row)")
    if k % K_MULTIPLE:
        raise ValueError(f"A: K must be a multiple of {K_MULTIPLE}, got A of shape "
                         f"{tuple(a.shape)}")
    if n % formats.WEIGHT_TILE_N:
        raise ValueError(f"B_shuffle: N must be a multiple of {formats.WEIGHT_TILE_N} for the "
                         f"(16, 16) shuffle, got N={n}")
    _require_contiguous("B_shuffle", b_shuffle)
    want_scales = formats.scales_padded_shape(n, k)
    if tuple(b_scale_sh.shape) != want_scales:
        raise ValueError(f"B_scale_sh: expected shape {want_scales} (pad(N,256), pad(K/32,8)) "
                         f"for N={n}, K={k}, got {tuple(b_scale_sh.shape)}")
    _require_contiguous("B_scale_sh", b_scale_sh)
    if not (a.device == b_shuffle.device == b_scale_sh.device):
        raise ValueError(f"A, B_shuffle, B_scale_sh: expected one device, got {a.device}, "
                         f"{b_shuffle.device}, {b_scale_sh.device}")
    if a.device.type == "cpu" and KERNELS_NEED_A_GPU:
        raise RuntimeError(f"A: a CPU tensor, but the kernels were compiled for a GPU; "
                           f"{CPU_HOWTO}")
    return m, n, k
