"""The ladder's last rung and the config path "aiter": aiter's own path, as the runner's
reference computes C.

`AiterLauncher(m, n)` quantizes A with aiter's Triton `dynamic_mxfp4_quant`, shuffles its
scales with `e8m0_shuffle` and calls `gemm_a4w4` on the preshuffled weight; its config is
AITER_CONFIG (launchers.launcher's contract; no Triton kernel of ours). Only where aiter
imports (AMD); `available()` says whether it does. Two or more launches per call.
`build_aiter_launcher(config, ...)` is the launcher of a config whose path is "aiter"
(launchers.paths): where aiter does not import, or for an fp32 output (gemm_a4w4 rounds to
bf16), it raises one line.
"""

import functools

import torch

from .gemm_config import config_from_fields
from .launcher import Launcher

AITER_CONFIG = config_from_fields({"path": "aiter"})
_FP4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
_E8M0 = getattr(torch, "float8_e8m0fnu", torch.uint8)


@functools.lru_cache(maxsize=1)
def _aiter():
    """(dynamic_mxfp4_quant, e8m0_shuffle, gemm_a4w4), or None where aiter does not import."""
    try:
        import aiter
        from aiter.ops.triton.quant import dynamic_mxfp4_quant
        from aiter.utility.fp4_utils import e8m0_shuffle
    except Exception:   # ImportError, or an aiter built for another GPU failing at import
        return None
    return dynamic_mxfp4_quant, e8m0_shuffle, aiter.gemm_a4w4


def available() -> bool:
    return _aiter() is not None


class AiterLauncher(Launcher):
    """Call with (A bf16 [M, K], B_shuffle, B_scale_sh[, direct]); returns bf16 [M, N].
    quantizer: the one it was asked for (aiter quantizes A with its own)."""

    config = AITER_CONFIG
    launches_per_call = 3

    def __init__(self, m: int, n: int, quantizer: str = "software"):
        self.m, self.n, self.quantizer = m, n, quantizer

    def kernel_launches(self) -> dict:
        return {}

    def __call__(self, a, b_shuffle, b_scale_sh, direct=False):
        quantize, shuffle_scales, gemm_a4w4 = _aiter()
        codes, scales = quantize(a)
        return gemm_a4w4(codes.view(_FP4), b_shuffle.view(_FP4), shuffle_scales(scales.view(_E8M0)),
                         b_scale_sh.view(_E8M0), dtype=torch.bfloat16, bpreshuffle=True)[:self.m]


class AiterUnavailable(RuntimeError):
    """A config names the "aiter" path where aiter does not import."""


def build_aiter_launcher(config, backend, m, n, k, a_strides, device, quantizer="software",
                         allow_direct=True, out_dtype=torch.bfloat16) -> AiterLauncher:
    """The launcher of a config whose path is "aiter", AITER_CONFIG (the arguments of
    launchers.paths's launchers; aiter reads only M and N; its output is bf16 only)."""
    if out_dtype != torch.bfloat16:
        raise ValueError(f"path 'aiter' gives bf16 outputs only, not {out_dtype}")
    if not available():
        raise AiterUnavailable("path 'aiter' needs aiter, which does not import here")
    return AiterLauncher(m, n, quantizer)
