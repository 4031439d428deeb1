"""The launcher of one problem: C[M, N] = quantize(A) @ dequant(B)^T for fixed M, N, K.

`launch_specs(config, backend, m, n, k, a_strides, device)` lists the kernels one call runs
(with quantize_a_once, first kernels.quantize's quantize kernel, which writes A's MXFP4 codes
and scales once; then the GEMM, on them; then the split-K reduce when the config splits K
with split_k_reduce "kernel") with their grids, compile options and sample arguments; tools
cross-compile these same specs on the "meta" device. `GemmLauncher` binds each spec as a
KernelLaunch; calling it with (A, B_shuffle, B_scale_sh) allocates a fresh output (and fresh
fp32 partials when K is split) and launches the kernels in order. quantizer names A's
quantizer (kernels.quantize.QUANTIZERS); allow_direct=False keeps every launch on Triton's
standard launch (launchers.ladder proves each choice before it is used).

With split_k_reduce "last_program" the GEMM counts each output tile's finished splits on an
int32 counter that its last program resets to zero. The launcher holds rows of such counters,
zeroed once when it is built, and gives each call the next row in turn, so calls that overlap
on the GPU (two queues, a graph replay beside an eager call) count on rows of their own while
fewer than `len(counter_rows)` calls of the launcher are in flight at once (IN_FLIGHT_CALLS,
fewer where the tiles are many), with no launch added to a call. Outputs and partials are new
each call.
"""

import itertools
from typing import NamedTuple

import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import (checked_quantizer, quantize_kernel, quantize_launch,
                              quantized_outputs)
from mxfp4_mm.kernels.layouts.cdna4 import scales_view, weight_view
from mxfp4_mm.kernels.preshuffle_gemm import a_rows, gemm_arguments, preshuffle_gemm_kernel
from mxfp4_mm.kernels.hopper_gemm import hopper_arguments, hopper_gemm_kernel
from mxfp4_mm.kernels.splitk_reduce import reduce_arguments, reduce_grid, splitk_reduce_kernel
from mxfp4_mm.kernels.tiles import gemm_grid, gemm_tiles
from mxfp4_mm.launchers.bypass import KernelLaunch, aligned, backend_options
from mxfp4_mm.launchers.configs import GemmConfig
from mxfp4_mm.launchers.proof import SPLIT_K_REPEATS

# gemm_arguments puts (a, a_scales, b, b_scales, c, partials, counters) first
GEMM_TENSOR_ARGS = 7
WARP_SIZE = {"hip": 64}   # 32 elsewhere
# Backends whose GEMM quantizes A without the uniform fast path (kernels/quantize.py): on the
# H200 it made the fused GEMM slower (tools.bench geomean 18.60 µs with it, 17.32 without,
# 2026-12-04); the hardware quantizer always has it.
WITHOUT_QUANT_FAST_PATH = ("cuda",)
REDUCE_TENSOR_ARGS = 2  # reduce_arguments puts (partials, c) first
QUANTIZE_TENSOR_ARGS = 3  # quantize_launch puts (x, codes, scales) first
QUANTIZE_THREADS = 256   # per program: 4 waves on AMD, 8 warps on NVIDIA


class LaunchSpec(NamedTuple):
    name: str
    kernel: object
    grid: tuple
    options: dict
    sample_args: tuple


def _output(m, n, device):
    return torch.empty((m, n), dtype=torch.bfloat16, device=device)


def _partials(m, n, splits, device):
    return torch.empty((splits, m, n), dtype=torch.float32, device=device)


def threads_per_program(num_warps: int, backend: str) -> int:
    return WARP_SIZE.get(backend, 32) * num_warps


def program_rows(config: GemmConfig, backend: str, m: int, a_prequantized: bool) -> int:
    """The GEMM's A_ROWS: kernels.preshuffle_gemm.a_rows, but BLOCK_M for a prequantized A on
    AMD, where Triton 3.6 cannot lower repeated loaded codes (an assertion in its matmul
    lowering, seen cross-compiling for gfx950)."""
    if a_prequantized and backend == "hip":
        return config.block_m
    return a_rows(m, config.block_m, config.wave_split_k)


def splitk_sync(backend: str) -> str:
    """How an in-kernel split-K reduce hands the partials to the tile's last program
    (kernels.preshuffle_gemm): written through on AMD, where a release/acquire pair writes back
    and invalidates a whole L2; a release/acquire counter elsewhere."""
    return "write_through" if backend == "hip" else "acq_rel"


IN_FLIGHT_CALLS = 1024          # counter rows per launcher, if they fit COUNTER_WORDS
COUNTER_WORDS = 1 << 18         # int32 counters per launcher at most (1 MiB)


def counter_rows(config: GemmConfig, m: int, n: int, k: int, device, rows: int = None):
    """The split-K counter rows where the GEMM sums split-K itself (split_k_reduce
    "last_program", more than one split launched), else None: `rows` (default:
    IN_FLIGHT_CALLS, fewer where they would pass COUNTER_WORDS) views int32 [tiles] of one
    zeroed buffer, each starting 16-byte aligned."""
    splits, _ = config.splits_for(k)
    if splits == 1 or config.split_k_reduce != "last_program":
        return None
    tiles = gemm_tiles(m, n, config.block_m, config.block_n)
    stride = formats.pad_to(tiles, 4)
    if rows is None:
        rows = max(1, min(IN_FLIGHT_CALLS, COUNTER_WORDS // stride))
    counters = torch.zeros((rows, stride), dtype=torch.int32, device=device)
    return [row[:tiles] for row in counters]


def quantize_spec(backend: str, m: int, k: int, a_strides: tuple, device, quantizer: str,
                  codes, scales) -> LaunchSpec:
    """The launch of kernels.quantize's kernel that writes A's MXFP4 codes and scales (uint8
    [M, K/2] and [M, K/32], given) from a bf16 A [M, K] of the given strides."""
    a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    grid, arguments = quantize_launch(a, codes, scales, quantizer,
                                      backend not in WITHOUT_QUANT_FAST_PATH, QUANTIZE_THREADS)
    warps = QUANTIZE_THREADS // threads_per_program(1, backend)
    return LaunchSpec("quantize", quantize_kernel, grid,
                      backend_options(backend, num_warps=warps, num_stages=1, waves_per_eu=0,
                                      matrix_instr_nonkdim=0),
                      arguments)


def launch_specs(config: GemmConfig, backend: str, m: int, n: int, k: int, a_strides: tuple,
                 device, quantizer: str = "software", a_prequantized: bool = False) -> list:
    checked_quantizer(quantizer)
    if config.path == "hopper" and (backend == "hip" or quantizer != "software"):
        raise ValueError(f"the hopper GEMM path runs on CUDA and the interpreter with the "
                         f"software quantizer, not on {backend} with {quantizer!r}")
    quant_fast_path = backend not in WITHOUT_QUANT_FAST_PATH
    specs = []
    if config.quantize_a_once and not a_prequantized:
        specs.append(quantize_spec(backend, m, k, a_strides, device, quantizer,
                                   *quantized_outputs(m, k, device)))
        a_prequantized = True
    splits, split_size = config.splits_for(k)
    reduce_in_gemm = splits > 1 and config.split_k_reduce == "last_program"
    a_scales = None
    if a_prequantized:
        a = torch.empty((m, k // 2), dtype=torch.uint8, device=device)
        a_scales = torch.empty((m, k // 32), dtype=torch.uint8, device=device)
    else:
        a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    b = torch.empty((n, k // 2), dtype=torch.uint8, device=device)
    b_scales = torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8, device=device)
    c = _output(m, n, device)
    partials = _partials(m, n, splits, device) if splits > 1 else c
    rows = counter_rows(config, m, n, k, device, rows=1)
    counters = c if rows is None else rows[0]
    threads = threads_per_program(config.num_warps, backend)
    if config.path == "hopper":
        kernel = hopper_gemm_kernel
        gemm_args = hopper_arguments(a, weight_view(b), scales_view(b_scales), c, partials,
                                     counters, m, n, k, block_m=config.block_m,
                                     block_n=config.block_n, block_k=config.block_k,
                                     group_m=config.group_m, splits=splits,
                                     split_size=split_size, reduce_in_gemm=reduce_in_gemm,
                                     cache_modifier=config.cache_modifier,
                                     store_modifier=config.store_modifier, a_scales=a_scales,
                                     swap_ab=config.swap_ab, threads=threads)
    else:
        kernel = preshuffle_gemm_kernel
        gemm_args = gemm_arguments(a, weight_view(b), scales_view(b_scales), c, partials,
                                   counters, m, n, k, block_m=config.block_m, block_n=config.block_n,
                                   block_k=config.block_k, group_m=config.group_m, splits=splits,
                                   split_size=split_size, reduce_in_gemm=reduce_in_gemm,
                                   cache_modifier=config.cache_modifier, quantizer=quantizer,
                                   quant_fast_path=quant_fast_path,
                                   a_scales=a_scales, num_xcds=config.num_xcds,
                                   store_modifier=config.store_modifier,
                                   splitk_sync=splitk_sync(backend),
                                   threads=threads,
                                   scales_first=config.loads_b_scales_first,
                                   rows=program_rows(config, backend, m, a_prequantized),
                                   wave_split_k=config.wave_split_k)
    specs.append(LaunchSpec("gemm", kernel,
                            gemm_grid(m, n, config.block_m, config.block_n, splits),
                            backend_options(backend, num_warps=config.num_warps,
                                            num_stages=config.num_stages,
                                            waves_per_eu=config.waves_per_eu,
                                            matrix_instr_nonkdim=config.matrix_instr_nonkdim),
                            gemm_args))
    if splits > 1 and not reduce_in_gemm:
        bm, bn = config.reduce_block_m, config.reduce_block_n
        specs.append(LaunchSpec("reduce", splitk_reduce_kernel, reduce_grid(m, n, bm, bn),
                                backend_options(backend, num_warps=4, num_stages=1,
                                                waves_per_eu=0, matrix_instr_nonkdim=0),
                                reduce_arguments(partials, c, m, n, block_m=bm, block_n=bn)))
    return specs


class GemmLauncher:
    """Call with (A, B_shuffle, B_scale_sh); with a_prequantized, with (A codes uint8 [M, K/2],
    B_shuffle, B_scale_sh, A scales uint8 [M, K/32]) from kernels.quantize.quantize_rows. A
    config with quantize_a_once (and not a_prequantized) quantizes A into fresh codes and
    scales first, by a launch of its own."""

    def __init__(self, config: GemmConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, quantizer: str = "software",
                 a_prequantized: bool = False, allow_direct: bool = True):
        self.config = config
        self.quantizer = quantizer
        self.m, self.n, self.k, self.device = m, n, k, device
        self.splits, _ = config.splits_for(k)
        self.counter_rows = counter_rows(config, m, n, k, device)
        self._calls = itertools.count()   # next() is atomic: threads never share a row
        specs = launch_specs(config, backend, m, n, k, a_strides, device, quantizer,
                             a_prequantized)
        by_name = {spec.name: spec for spec in specs}
        self.launches_per_call = len(specs)
        self.quantize = self.reduce = None
        if "quantize" in by_name:
            self.quantize = KernelLaunch(*by_name["quantize"][1:], allow_direct=allow_direct)
            self._quantize_constants = by_name["quantize"].sample_args[QUANTIZE_TENSOR_ARGS:]
        self.gemm = KernelLaunch(*by_name["gemm"][1:], allow_direct=allow_direct)
        self._gemm_constants = by_name["gemm"].sample_args[GEMM_TENSOR_ARGS:]
        # split_k_reduce "last_program" with more than one split: no reduce launch
        self.reduces_in_kernel = self.splits > 1 and "reduce" not in by_name
        # the ladder's proof repeats its first case, so that a racy sum shows
        self.proof_repeats = SPLIT_K_REPEATS if self.reduces_in_kernel else 0
        if "reduce" in by_name:
            self.reduce = KernelLaunch(*by_name["reduce"][1:], allow_direct=allow_direct)
            self._reduce_constants = by_name["reduce"].sample_args[REDUCE_TENSOR_ARGS:]

    @property
    def is_direct(self) -> bool:
        return all(launch is None or launch.is_direct
                   for launch in (self.quantize, self.gemm, self.reduce))

    def launch_resources(self) -> dict:
        """{launch name: {"n_regs", "n_spills"}} a thread, of each launch's loaded kernel
        (known for direct launches only, else None: launchers.bypass.KernelLaunch)."""
        launches = {"quantize": self.quantize, "gemm": self.gemm, "reduce": self.reduce}
        return {name: dict(n_regs=launch.registers, n_spills=launch.spilled_registers)
                for name, launch in launches.items() if launch is not None}

    def spilling_launches(self) -> dict:
        """{launch name: registers spilled a thread} of the launches whose kernel spills."""
        return {name: found["n_spills"] for name, found in self.launch_resources().items()
                if found["n_spills"]}

    def gemm_arguments(self, a, b_shuffle, b_scale_sh, a_scales=None) -> tuple:
        """(the GEMM kernel's arguments in signature order, its partials, the new output C);
        an in-kernel reduce counts on the next counter row (C stands in for what the kernel
        does not read, so that every call has the dtypes it was compiled for)."""
        return self._gemm_arguments(a, weight_view(b_shuffle), scales_view(b_scale_sh), a_scales)

    def _gemm_arguments(self, a, b, b_scales, a_scales) -> tuple:
        out = _output(self.m, self.n, self.device)
        partials = _partials(self.m, self.n, self.splits, self.device) if self.splits > 1 else out
        counters = out
        if self.counter_rows is not None:
            counters = self.counter_rows[next(self._calls) % len(self.counter_rows)]
        gemm_args = ((a, a if a_scales is None else a_scales, b, b_scales, out, partials,
                      counters) + self._gemm_constants)
        return gemm_args, partials, out

    def __call__(self, a, b_shuffle, b_scale_sh, a_scales=None, direct=True):
        """direct=False takes the standard launch even where the bypass is available. A direct
        launch reads only each tensor's address, so it takes B_shuffle and B_scale_sh as they
        come; the standard launch takes the kernel's uint8 views of them (gemm_arguments)."""
        if self.quantize is not None:
            codes, a_scales = quantized_outputs(self.m, self.k, self.device)
            quantize_args = (a, codes, a_scales) + self._quantize_constants
            (self.quantize if direct and aligned(a) else self.quantize.standard)(*quantize_args)
            a = codes
        direct = direct and self.gemm.is_direct and aligned(a, b_shuffle, b_scale_sh)
        if direct:
            gemm_args, partials, out = self._gemm_arguments(a, b_shuffle, b_scale_sh, a_scales)
            self.gemm(*gemm_args)
        else:
            gemm_args, partials, out = self.gemm_arguments(a, b_shuffle, b_scale_sh, a_scales)
            self.gemm.standard(*gemm_args)
        if self.reduce is not None:
            reduce_args = (partials, out) + self._reduce_constants
            (self.reduce if direct else self.reduce.standard)(*reduce_args)
        return out
