"""The launcher that serves a config, by its path (launchers.gemm_config.GEMM_PATHS), and the
kernels it compiles: one entry per path in each table. Every launcher is a
launchers.launcher.Launcher, the one contract its readers rely on."""

import torch

from .aiter_path import build_aiter_launcher
from .gemm_config import GemmConfig
from .dequant import DequantLauncher, dequant_launch_specs
from .gemm import GemmLauncher, launch_specs

# GemmLauncher builds either fused GEMM by config.path (launchers.gemm.GEMM_KERNELS).
LAUNCHERS = {"preshuffle": GemmLauncher, "dequant": DequantLauncher, "aiter": build_aiter_launcher,
             "hopper": GemmLauncher}


def no_triton_launches(*problem) -> list:
    """aiter's path compiles no Triton kernel of ours."""
    return []


# Each path's Triton launches as launchers.gemm.LaunchSpec lists, for the tools that compile
# them on a CPU for another target (tools.fit: shared memory, registers, spills).
LAUNCH_SPECS = {"preshuffle": launch_specs, "dequant": dequant_launch_specs,
                "aiter": no_triton_launches, "hopper": launch_specs}


def build_launcher(config: GemmConfig, backend: str, m: int, n: int, k: int, a_strides: tuple,
                   device, quantizer: str = "software", allow_direct: bool = True,
                   out_dtype: torch.dtype = torch.bfloat16):
    """The launcher of config.path for one problem, its output of out_dtype (bf16 or
    float32); call it with (A, B_shuffle, B_scale_sh)."""
    return LAUNCHERS[config.path](config, backend, m, n, k, a_strides, device, quantizer,
                                  allow_direct=allow_direct, out_dtype=out_dtype)


def path_launch_specs(config: GemmConfig, backend: str, m: int, n: int, k: int,
                      a_strides: tuple, device, quantizer: str = "software") -> list:
    """The Triton launches one call of config.path's launcher makes (LAUNCH_SPECS)."""
    return LAUNCH_SPECS[config.path](config, backend, m, n, k, a_strides, device, quantizer)
