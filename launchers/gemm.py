"""The launcher of the fused GEMM paths for one problem: C[M, N] = quantize(A) @ dequant(B)^T
for fixed M, N, K, by kernels.preshuffle_gemm ("preshuffle") or kernels.hopper_gemm ("hopper").

`launch_specs(config, backend, m, n, k, a_strides, device)` lists the kernels one call runs
(with quantize_a_once, first kernels.quantize's quantize kernel, which writes A's MXFP4 codes
and scales once; then the GEMM of config.path, on them, with the arguments its own builder
gives (GEMM_KERNELS); then the split-K reduce when the config splits K with split_k_reduce
"kernel": SplitPlan) with their grids, compile options and sample arguments; tools
cross-compile these same specs on the "meta" device. `GemmLauncher` binds each spec as a
KernelLaunch; calling it with (A, B_shuffle, B_scale_sh) allocates a fresh output (and fresh
fp32 partials when K is split) and launches the kernels in order. The output is bf16, or with
out_dtype=torch.float32 the GEMM's fp32 sums unrounded: every kernel stores its fp32 sums as
C's dtype (kernels.splitk_reduce), so the kernels are compiled for C's dtype and nothing else
changes (a split K's partials are summed straight into the fp32 C). quantizer names A's
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

from ..kernels import formats
from ..kernels.quantize import (checked_quantizer, quantize_kernel, quantize_launch,
                                quantized_outputs)
from ..kernels.quantized_values import (VALUES_WARPS, quantized_values_kernel,
                                        quantized_values_launch)
from ..kernels.layouts.cdna4 import scales_view, weight_view
from ..kernels.preshuffle_gemm import a_rows, gemm_arguments, preshuffle_gemm_kernel
from ..kernels.hopper_gemm import hopper_arguments, hopper_gemm_kernel
from ..kernels.splitk_reduce import reduce_arguments, reduce_grid, splitk_reduce_kernel
from ..kernels.tiles import gemm_grid, gemm_tiles
from .bypass import KernelLaunch, aligned, backend_options
from .gemm_config import GemmConfig
from .launcher import Launcher
from .proof import SPLIT_K_REPEATS
from .targets import backend_facts

QUANTIZE_THREADS = 256   # per program: 4 waves on AMD, 8 warps on NVIDIA


class LaunchSpec(NamedTuple):
    name: str
    kernel: object
    grid: tuple
    options: dict
    sample_args: tuple
    # how many leading arguments each call passes anew (its tensors); the rest are constants
    per_call: int


def bound_launch(spec: LaunchSpec, allow_direct: bool) -> tuple:
    """(spec's KernelLaunch, the constant arguments that follow each call's own)."""
    launch = KernelLaunch(spec.kernel, spec.grid, spec.options, spec.sample_args,
                          allow_direct=allow_direct)
    return launch, spec.sample_args[spec.per_call:]


class SplitPlan(NamedTuple):
    """How a fused GEMM call splits K (GemmConfig.splits_for) and who sums the splits."""
    splits: int              # launched
    split_size: int          # K elements a split
    reduce_in_gemm: bool     # each tile's last program sums them (a counter row per call)
    reduce_launch: bool      # a launch of kernels.splitk_reduce sums them


def split_plan(config: GemmConfig, k: int) -> SplitPlan:
    splits, split_size = config.splits_for(k)
    reduce_in_gemm = splits > 1 and config.split_k_reduce == "last_program"
    return SplitPlan(splits, split_size, reduce_in_gemm, splits > 1 and not reduce_in_gemm)


def _output(m, n, device, dtype):
    return torch.empty((m, n), dtype=dtype, device=device)


def _partials(m, n, splits, device):
    return torch.empty((splits, m, n), dtype=torch.float32, device=device)


def threads_per_program(num_warps: int, backend: str) -> int:
    return backend_facts(backend).warp_size * num_warps


def program_rows(config: GemmConfig, backend: str, m: int, a_prequantized: bool) -> int:
    """The GEMM's A_ROWS: kernels.preshuffle_gemm.a_rows, but BLOCK_M for a prequantized A
    where the backend cannot repeat its loaded codes (Backend.repeats_loaded_codes)."""
    if a_prequantized and not backend_facts(backend).repeats_loaded_codes:
        return config.block_m
    return a_rows(m, config.block_m, config.wave_split_k)


def splitk_sync(backend: str) -> str:
    """How an in-kernel split-K reduce hands the partials over (Backend.splitk_sync)."""
    return backend_facts(backend).splitk_sync


IN_FLIGHT_CALLS = 1024          # counter rows per launcher, if they fit COUNTER_WORDS
COUNTER_WORDS = 1 << 18         # int32 counters per launcher at most (1 MiB)


def counter_rows(config: GemmConfig, m: int, n: int, plan: SplitPlan, device, rows: int = None):
    """The split-K counter rows where the GEMM sums split-K itself (plan.reduce_in_gemm), else
    None: `rows` (default: IN_FLIGHT_CALLS, fewer where they would pass COUNTER_WORDS) views
    int32 [tiles] of one zeroed buffer, each starting 16-byte aligned."""
    if not plan.reduce_in_gemm:
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
                                      backend_facts(backend).quant_fast_path, QUANTIZE_THREADS)
    warps = QUANTIZE_THREADS // threads_per_program(1, backend)
    return LaunchSpec("quantize", quantize_kernel, grid,
                      backend_options(backend, num_warps=warps, num_stages=1, waves_per_eu=0,
                                      matrix_instr_nonkdim=0),
                      arguments, per_call=3)   # quantize_launch puts (x, codes, scales) first


def quantized_values_spec(backend: str, m: int, k: int, a_strides: tuple, device,
                          quantizer: str, out) -> LaunchSpec:
    """The launch of kernels.quantized_values's kernel that writes A's MXFP4 values in bf16
    (out, bf16 [M, K], given) from a bf16 A [M, K] of the given strides: kernels.quantize's
    codes and scales dequantized, in one pass."""
    a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    grid, arguments = quantized_values_launch(a, out, quantizer,
                                              backend_facts(backend).quant_fast_path,
                                              threads_per_program(VALUES_WARPS, backend))
    return LaunchSpec("quantize_a", quantized_values_kernel, grid,
                      backend_options(backend, num_warps=VALUES_WARPS, num_stages=1,
                                      waves_per_eu=0, matrix_instr_nonkdim=0),
                      arguments, per_call=2)   # quantized_values_launch puts (x, out) first


class GemmOperands(NamedTuple):
    """Sample operands of one fused GEMM launch, in the order both GEMM kernels take them
    first (kernels.preshuffle_gemm, kernels.hopper_gemm)."""
    a: object            # bf16 [M, K], or its codes uint8 [M, K/2] where prequantized
    a_scales: object     # uint8 [M, K/32] where prequantized, else None
    b: object
    b_scales: object
    c: object
    partials: object     # fp32 [splits, M, N] where K is split, else C
    counters: object     # a counter row where the GEMM sums split-K, else C


def gemm_operands(m, n, k, a_strides, device, plan: SplitPlan, a_prequantized: bool,
                  counters=None, out_dtype=torch.bfloat16) -> GemmOperands:
    a_scales = None
    if a_prequantized:
        a = torch.empty((m, k // 2), dtype=torch.uint8, device=device)
        a_scales = torch.empty((m, k // 32), dtype=torch.uint8, device=device)
    else:
        a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    b = weight_view(torch.empty((n, k // 2), dtype=torch.uint8, device=device))
    b_scales = scales_view(torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8,
                                       device=device))
    c = _output(m, n, device, out_dtype)
    partials = _partials(m, n, plan.splits, device) if plan.splits > 1 else c
    return GemmOperands(a, a_scales, b, b_scales, c, partials, c if counters is None else counters)


# The GEMM kernels take these first (A in place of a_scales where A comes unquantized); their
# argument builders take a_scales by keyword (_builder_tensors).
GEMM_TENSOR_ARGS = len(GemmOperands._fields)


def _builder_tensors(operands: GemmOperands) -> tuple:
    return (operands.a, operands.b, operands.b_scales, operands.c, operands.partials,
            operands.counters)


def preshuffle_gemm_arguments(config, backend, m, n, k, operands, plan, quantizer) -> tuple:
    """kernels.preshuffle_gemm's arguments: any backend, any quantizer."""
    return gemm_arguments(*_builder_tensors(operands), m, n, k,
                          block_m=config.block_m, block_n=config.block_n,
                          block_k=config.block_k, group_m=config.group_m, splits=plan.splits,
                          split_size=plan.split_size, reduce_in_gemm=plan.reduce_in_gemm,
                          cache_modifier=config.cache_modifier, quantizer=quantizer,
                          quant_fast_path=backend_facts(backend).quant_fast_path,
                          a_scales=operands.a_scales, num_xcds=config.num_xcds,
                          store_modifier=config.store_modifier,
                          splitk_sync=splitk_sync(backend),
                          threads=threads_per_program(config.num_warps, backend),
                          scales_first=config.loads_b_scales_first,
                          rows=program_rows(config, backend, m, operands.a_scales is not None),
                          wave_split_k=config.wave_split_k)


def hopper_gemm_arguments(config, backend, m, n, k, operands, plan, quantizer) -> tuple:
    """kernels.hopper_gemm's arguments: CUDA and the interpreter, the software quantizer."""
    if backend == "hip" or quantizer != "software":
        raise ValueError(f"the hopper GEMM path runs on CUDA and the interpreter with the "
                         f"software quantizer, not on {backend} with {quantizer!r}")
    return hopper_arguments(*_builder_tensors(operands), m, n, k,
                            block_m=config.block_m, block_n=config.block_n,
                            block_k=config.block_k, group_m=config.group_m,
                            splits=plan.splits, split_size=plan.split_size,
                            reduce_in_gemm=plan.reduce_in_gemm,
                            cache_modifier=config.cache_modifier,
                            store_modifier=config.store_modifier, a_scales=operands.a_scales,
                            swap_ab=config.swap_ab,
                            threads=threads_per_program(config.num_warps, backend))


# Each fused GEMM path's kernel and the builder of its arguments, called with (config, backend,
# m, n, k, GemmOperands, SplitPlan, quantizer).
GEMM_KERNELS = {"preshuffle": (preshuffle_gemm_kernel, preshuffle_gemm_arguments),
                "hopper": (hopper_gemm_kernel, hopper_gemm_arguments)}


def launch_specs(config: GemmConfig, backend: str, m: int, n: int, k: int, a_strides: tuple,
                 device, quantizer: str = "software", a_prequantized: bool = False,
                 plan: SplitPlan = None, counters=None, out_dtype=torch.bfloat16) -> list:
    """The launches of one call of a fused GEMM path ("preshuffle", "hopper": GEMM_KERNELS):
    A's quantize kernel with quantize_a_once, the GEMM, and the split-K reduce where
    plan.reduce_launch. plan: split_plan(config, k) unless given; counters: the GEMM's sample
    counter row (a new one unless given); out_dtype: C's dtype, bf16 or float32."""
    checked_quantizer(quantizer)
    kernel, arguments = GEMM_KERNELS[config.path]
    plan = split_plan(config, k) if plan is None else plan
    if counters is None and plan.reduce_in_gemm:
        counters = counter_rows(config, m, n, plan, device, rows=1)[0]
    specs = []
    if config.quantize_a_once and not a_prequantized:
        specs.append(quantize_spec(backend, m, k, a_strides, device, quantizer,
                                   *quantized_outputs(m, k, device)))
        a_prequantized = True
    operands = gemm_operands(m, n, k, a_strides, device, plan, a_prequantized, counters,
                             out_dtype)
    specs.append(LaunchSpec("gemm", kernel,
                            gemm_grid(m, n, config.block_m, config.block_n, plan.splits),
                            backend_options(backend, num_warps=config.num_warps,
                                            num_stages=config.num_stages,
                                            waves_per_eu=config.waves_per_eu,
                                            matrix_instr_nonkdim=config.matrix_instr_nonkdim),
                            arguments(config, backend, m, n, k, operands, plan, quantizer),
                            per_call=GEMM_TENSOR_ARGS))
    if plan.reduce_launch:
        bm, bn = config.reduce_block_m, config.reduce_block_n
        specs.append(LaunchSpec("reduce", splitk_reduce_kernel, reduce_grid(m, n, bm, bn),
                                backend_options(backend, num_warps=4, num_stages=1,
                                                waves_per_eu=0, matrix_instr_nonkdim=0),
                                reduce_arguments(operands.partials, operands.c, m, n,
                                                 block_m=bm, block_n=bn),
                                per_call=2))   # reduce_arguments puts (partials, c) first
    return specs


class GemmLauncher(Launcher):
    """The launcher of the fused GEMM paths ("preshuffle", "hopper"; launchers.launcher).
    Call with (A, B_shuffle, B_scale_sh); with a_prequantized, with (A codes uint8 [M, K/2],
    B_shuffle, B_scale_sh, A scales uint8 [M, K/32]) from kernels.quantize.quantize_rows. A
    config with quantize_a_once (and not a_prequantized) quantizes A into fresh codes and
    scales first, by a launch of its own. out_dtype: the output's, bf16 or float32."""

    def __init__(self, config: GemmConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, quantizer: str = "software",
                 a_prequantized: bool = False, allow_direct: bool = True,
                 out_dtype: torch.dtype = torch.bfloat16):
        self.config = config
        self.quantizer, self.out_dtype = quantizer, out_dtype
        self.m, self.n, self.k, self.device = m, n, k, device
        plan = split_plan(config, k)
        self.splits = plan.splits
        self.reduces_in_kernel = plan.reduce_in_gemm
        # the ladder's proof repeats its first case, so that a racy sum shows
        self.proof_repeats = SPLIT_K_REPEATS if plan.reduce_in_gemm else 0
        self.counter_rows = counter_rows(config, m, n, plan, device)
        # next() is atomic: threads never share a row
        self._rows = None if self.counter_rows is None else itertools.cycle(self.counter_rows)
        specs = launch_specs(config, backend, m, n, k, a_strides, device, quantizer,
                             a_prequantized, plan,
                             None if self.counter_rows is None else self.counter_rows[0],
                             out_dtype)
        self.launches_per_call = len(specs)
        bound = {spec.name: bound_launch(spec, allow_direct) for spec in specs}
        self.quantize, self._quantize_constants = bound.get("quantize", (None, ()))
        self.gemm, self._gemm_constants = bound["gemm"]
        self.reduce, self._reduce_constants = bound.get("reduce", (None, ()))

    def kernel_launches(self) -> dict:
        launches = {"quantize": self.quantize, "gemm": self.gemm, "reduce": self.reduce}
        return {name: launch for name, launch in launches.items() if launch is not None}

    def gemm_arguments(self, a, b_shuffle, b_scale_sh, a_scales=None) -> tuple:
        """(the GEMM kernel's arguments in signature order, its partials, the new output C);
        an in-kernel reduce counts on the next counter row (C stands in for what the kernel
        does not read, so that every call has the dtypes it was compiled for)."""
        out, partials, counters = self._outputs(a)
        gemm_args = ((a, a if a_scales is None else a_scales, weight_view(b_shuffle),
                      scales_view(b_scale_sh), out, partials, counters) + self._gemm_constants)
        return gemm_args, partials, out

    def _outputs(self, a) -> tuple:
        """A call's new output C, its partials (C where K is not split) and its counter row
        (the next one; C where the GEMM does not sum split-K), on A's device."""
        # a.new_empty with the sizes as arguments parses in about half torch.empty's time
        # with a shape tuple and a device
        out = a.new_empty(self.m, self.n, dtype=self.out_dtype)
        partials = (a.new_empty(self.splits, self.m, self.n, dtype=torch.float32)
                    if self.splits > 1 else out)
        return out, partials, out if self._rows is None else next(self._rows)

    def __call__(self, a, b_shuffle, b_scale_sh, a_scales=None, direct=True):
        """direct=False takes the standard launch even where the bypass is available. A direct
        launch reads only each tensor's address, so it takes B_shuffle and B_scale_sh as they
        come; the standard launch takes the kernel's uint8 views of them (gemm_arguments)."""
        if self.quantize is not None:
            codes, a_scales = quantized_outputs(self.m, self.k, self.device)
            quantize_args = (a, codes, a_scales) + self._quantize_constants
            (self.quantize if direct and aligned(a) else self.quantize.standard)(*quantize_args)
            a = codes
        gemm = self.gemm.direct
        if not (direct and gemm is not None and aligned(a, b_shuffle, b_scale_sh)):
            gemm_args, partials, out = self.gemm_arguments(a, b_shuffle, b_scale_sh, a_scales)
            self.gemm.standard(*gemm_args)
            if self.reduce is not None:
                self.reduce.standard(partials, out, *self._reduce_constants)
            return out
        out, partials, counters = self._outputs(a)
        gemm(a, a if a_scales is None else a_scales, b_shuffle, b_scale_sh, out, partials,
             counters, *self._gemm_constants)
        if self.reduce is not None:
            self.reduce(partials, out, *self._reduce_constants)
        return out
