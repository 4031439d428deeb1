"""The launcher of one problem: C[M, N] = quantize(A) @ dequant(B)^T for fixed M, N, K.

`GemmLauncher(config, backend, m, n, k, a_strides, device)` binds the GEMM kernel and, when
the config splits K, the split-K reduce kernel, each as a KernelLaunch; calling it with
(A, B_shuffle, B_scale_sh) allocates a fresh output and launches them in order.
"""

import torch

from kernels import formats
from kernels.preshuffle_gemm import (gemm_arguments, gemm_grid, preshuffle_gemm_kernel,
                                     scales_view, weight_view)
from kernels.splitk_reduce import reduce_arguments, reduce_grid, splitk_reduce_kernel
from launchers.bypass import KernelLaunch, aligned, backend_options
from launchers.configs import GemmConfig

_TENSOR_ARGS = 4  # gemm_arguments and reduce_arguments put their tensors first


class GemmLauncher:
    def __init__(self, config: GemmConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device):
        self.config = config
        self.m, self.n, self.k = m, n, k
        self.device = device
        self.splits, self.split_size = config.splits_for(k)
        sample_a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
        sample_b = torch.empty((n, k // 2), dtype=torch.uint8, device=device)
        sample_scales = torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8,
                                    device=device)
        sample_c = self._gemm_output()
        gemm_args = self._gemm_arguments(sample_a, weight_view(sample_b),
                                         scales_view(sample_scales), sample_c)
        self._gemm_constants = gemm_args[_TENSOR_ARGS:]
        options = backend_options(backend, num_warps=config.num_warps,
                                  num_stages=config.num_stages,
                                  waves_per_eu=config.waves_per_eu,
                                  matrix_instr_nonkdim=config.matrix_instr_nonkdim)
        self.gemm = KernelLaunch(preshuffle_gemm_kernel,
                                 gemm_grid(m, n, config.block_m, config.block_n, self.splits),
                                 options, gemm_args)
        self.reduce = None
        if self.splits > 1:
            reduce_args = reduce_arguments(sample_c, self._output(), m, n,
                                           block_m=config.reduce_block_m,
                                           block_n=config.reduce_block_n)
            self._reduce_constants = reduce_args[2:]
            self.reduce = KernelLaunch(splitk_reduce_kernel,
                                       reduce_grid(m, n, config.reduce_block_m,
                                                   config.reduce_block_n),
                                       backend_options(backend, num_warps=4, num_stages=1,
                                                       waves_per_eu=0,
                                                       matrix_instr_nonkdim=0),
                                       reduce_args)

    @property
    def is_direct(self) -> bool:
        return self.gemm.is_direct and (self.reduce is None or self.reduce.is_direct)

    def _gemm_arguments(self, a, b, b_scales, c):
        cfg = self.config
        return gemm_arguments(a, b, b_scales, c, self.m, self.n, self.k,
                              block_m=cfg.block_m, block_n=cfg.block_n, block_k=cfg.block_k,
                              group_m=cfg.group_m, splits=self.splits,
                              split_size=self.split_size, cache_modifier=cfg.cache_modifier)

    def _output(self):
        return torch.empty((self.m, self.n), dtype=torch.bfloat16, device=self.device)

    def _gemm_output(self):
        if self.splits == 1:
            return self._output()
        return torch.empty((self.splits, self.m, self.n), dtype=torch.float32, device=self.device)

    def __call__(self, a, b_shuffle, b_scale_sh):
        b, b_scales = weight_view(b_shuffle), scales_view(b_scale_sh)
        gemm_out = self._gemm_output()
        gemm_args = (a, b, b_scales, gemm_out) + self._gemm_constants
        if aligned(a, b, b_scales):
            self.gemm(*gemm_args)
        else:
            self.gemm.standard(*gemm_args)
        if self.reduce is None:
            return gemm_out
        out = self._output()
        self.reduce(gemm_out, out, *self._reduce_constants)
        return out
