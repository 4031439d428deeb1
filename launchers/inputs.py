"""Validation of custom_kernel's input tuple: clear errors instead of wrong answers.

`problem_of(data) -> (A, B_shuffle, B_scale_sh, M, N, K)` checks, cheaply (shapes, dtypes,
devices; no data is read), what the kernels rely on, and raises TypeError or ValueError
naming the argument, what was expected and what came.
"""

import torch

from kernels import formats

_FP4_DTYPES = tuple(d for d in (getattr(torch, "float4_e2m1fn_x2", None), torch.uint8) if d)
_E8M0_DTYPES = tuple(d for d in (getattr(torch, "float8_e8m0fnu", None), torch.uint8) if d)
DATA_FIELDS = ("A", "B", "B_q", "B_shuffle", "B_scale_sh")


def _require_tensor(name, value, dims, dtypes):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dim() != dims or value.dtype not in dtypes:
        raise TypeError(f"{name}: expected a {dims}-D tensor of dtype "
                        f"{' or '.join(map(str, dtypes))}, got {value.dim()}-D {value.dtype}")


def problem_of(data):
    if not isinstance(data, (tuple, list)) or len(data) != len(DATA_FIELDS):
        got = f"{type(data).__name__} of length {len(data)}" if isinstance(data, (tuple, list)) \
            else type(data).__name__
        raise TypeError(f"data: expected a tuple ({', '.join(DATA_FIELDS)}), got {got}")
    a, _, _, b_shuffle, b_scale_sh = data
    _require_tensor("A", a, 2, (torch.bfloat16,))
    _require_tensor("B_shuffle", b_shuffle, 2, _FP4_DTYPES)
    _require_tensor("B_scale_sh", b_scale_sh, 2, _E8M0_DTYPES)
    m, k = a.shape
    n = b_shuffle.shape[0]
    if k % 64:
        raise ValueError(f"A: K must be a multiple of 64, got A of shape {tuple(a.shape)}")
    if n % formats.WEIGHT_TILE_N:
        raise ValueError(f"B_shuffle: N must be a multiple of {formats.WEIGHT_TILE_N} for the "
                         f"(16, 16) shuffle, got N={n}")
    if tuple(b_shuffle.shape) != (n, k // 2):
        raise ValueError(f"B_shuffle: expected shape ({n}, {k // 2}) for K={k}, "
                         f"got {tuple(b_shuffle.shape)}")
    if not b_shuffle.is_contiguous():
        raise ValueError("B_shuffle: expected a contiguous tensor")
    want_scales = formats.scales_padded_shape(n, k)
    if tuple(b_scale_sh.shape) != want_scales or not b_scale_sh.is_contiguous():
        raise ValueError(f"B_scale_sh: expected a contiguous tensor of shape {want_scales} "
                         f"(pad(N,256), pad(K/32,8)) for N={n}, K={k}, "
                         f"got {tuple(b_scale_sh.shape)}")
    if not (a.device == b_shuffle.device == b_scale_sh.device):
        raise ValueError(f"A, B_shuffle, B_scale_sh: expected one device, got {a.device}, "
                         f"{b_shuffle.device}, {b_scale_sh.device}")
    return a, b_shuffle, b_scale_sh, m, n, k
