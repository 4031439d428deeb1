"""The launcher of one problem: C[M, N] = quantize(A) @ dequant(B)^T for fixed M, N, K.

`launch_specs(config, backend, m, n, k, a_strides, device)` lists the kernels one call runs
(the GEMM, then the split-K reduce when the config splits K) with their grids, compile
options and sample arguments; tools cross-compile these same specs on the "meta" device.
`GemmLauncher` binds each spec as a KernelLaunch; calling it with (A, B_shuffle, B_scale_sh)
allocates a fresh output and launches the kernels in order. hw_cvt selects the gfx950
hardware quantizer (launchers.selfcheck decides whether it may be used).
"""

from typing import NamedTuple

import torch

from kernels import formats
from kernels.preshuffle_gemm import (gemm_arguments, gemm_grid, preshuffle_gemm_kernel,
                                     scales_view, weight_view)
from kernels.splitk_reduce import reduce_arguments, reduce_grid, splitk_reduce_kernel
from launchers.bypass import KernelLaunch, aligned, backend_options
from launchers.configs import GemmConfig

GEMM_TENSOR_ARGS = 4    # gemm_arguments puts (a, b, b_scales, c) first
REDUCE_TENSOR_ARGS = 2  # reduce_arguments puts (partials, c) first


class LaunchSpec(NamedTuple):
    name: str
    kernel: object
    grid: tuple
    options: dict
    sample_args: tuple


def _output(m, n, device):
    return torch.empty((m, n), dtype=torch.bfloat16, device=device)


def _gemm_output(m, n, splits, device):
    if splits == 1:
        return _output(m, n, device)
    return torch.empty((splits, m, n), dtype=torch.float32, device=device)


def launch_specs(config: GemmConfig, backend: str, m: int, n: int, k: int, a_strides: tuple,
                 device, hw_cvt: bool = False) -> list:
    splits, split_size = config.splits_for(k)
    a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    b = torch.empty((n, k // 2), dtype=torch.uint8, device=device)
    b_scales = torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8, device=device)
    c = _gemm_output(m, n, splits, device)
    gemm_args = gemm_arguments(a, weight_view(b), scales_view(b_scales), c, m, n, k,
                               block_m=config.block_m, block_n=config.block_n,
                               block_k=config.block_k, group_m=config.group_m, splits=splits,
                               split_size=split_size, cache_modifier=config.cache_modifier,
                               hw_cvt=hw_cvt)
    specs = [LaunchSpec("gemm", preshuffle_gemm_kernel,
                        gemm_grid(m, n, config.block_m, config.block_n, splits),
                        backend_options(backend, num_warps=config.num_warps,
                                        num_stages=config.num_stages,
                                        waves_per_eu=config.waves_per_eu,
                                        matrix_instr_nonkdim=config.matrix_instr_nonkdim),
                        gemm_args)]
    if splits > 1:
        bm, bn = config.reduce_block_m, config.reduce_block_n
        specs.append(LaunchSpec("reduce", splitk_reduce_kernel, reduce_grid(m, n, bm, bn),
                                backend_options(backend, num_warps=4, num_stages=1,
                                                waves_per_eu=0, matrix_instr_nonkdim=0),
                                reduce_arguments(c, _output(m, n, device), m, n,
                                                 block_m=bm, block_n=bn)))
    return specs


class GemmLauncher:
    def __init__(self, config: GemmConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, hw_cvt: bool = False):
        self.config = config
        self.m, self.n, self.device = m, n, device
        self.splits, _ = config.splits_for(k)
        specs = launch_specs(config, backend, m, n, k, a_strides, device, hw_cvt)
        gemm_spec = specs[0]
        self.gemm = KernelLaunch(*gemm_spec[1:])
        self._gemm_constants = gemm_spec.sample_args[GEMM_TENSOR_ARGS:]
        self.reduce = None
        if len(specs) > 1:
            self.reduce = KernelLaunch(*specs[1][1:])
            self._reduce_constants = specs[1].sample_args[REDUCE_TENSOR_ARGS:]

    @property
    def is_direct(self) -> bool:
        return self.gemm.is_direct and (self.reduce is None or self.reduce.is_direct)

    def __call__(self, a, b_shuffle, b_scale_sh):
        b, b_scales = weight_view(b_shuffle), scales_view(b_scale_sh)
        gemm_out = _gemm_output(self.m, self.n, self.splits, self.device)
        gemm_args = (a, b, b_scales, gemm_out) + self._gemm_constants
        if aligned(a, b, b_scales):
            self.gemm(*gemm_args)
        else:
            self.gemm.standard(*gemm_args)
        if self.reduce is None:
            return gemm_out
        out = _output(self.m, self.n, self.device)
        self.reduce(gemm_out, out, *self._reduce_constants)
        return out
