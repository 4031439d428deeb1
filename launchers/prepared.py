"""The prepared-weight path for NVIDIA Hopper: a weight turned once into the Hopper layout
(kernels.layouts.hopper) and multiplied by kernels.hopper_prepared_gemm.

    weight = hopper_weight(b_shuffle, b_scale_sh)    # or hopper_weight_from_mxfp4(codes, scales)
    c = torch.ops.mxfp4_mm.gemm_prepared(a, weight.values, weight.scales, weight.k,
                                         weight.wide_scales)   # = gemm_prepared(a, weight)

Importing this module (launchers.linear does) registers the op.

The op takes the layout's two tensors (values uint8 [N/16, Kp/64, 8, 4, 4, 4], scales uint8
[N/16, Kp/64, 8, 2, 2]) and returns a new bf16 [M, N] = quantize(A) @ dequant(B)^T, the
reference's result; a fake implementation gives torch.compile its shapes. It runs on CUDA
(sm_90 and up: mul.rn.bf16x2) and in Triton's interpreter; on another backend it refuses in one
line (the layout is Hopper's: `unswizzle` gives the plain codes and scales back, and
kernels.formats.shuffle_weight / e8m0_shuffle the op torch.ops.mxfp4_mm.gemm takes).

MXFP4Linear takes this path on a device it serves (`serves`: CUDA sm_90 and up): its
constructors, .to() and load_state_dict prepare the Hopper layout beside the portable buffers
(b_shuffle, b_scale_sh) that state_dict saves (`layer_weight`).

A call is one launch below A_DEQUANTIZED_MIN_M rows (A quantized in registers by each
program, kernels.quantize's recipe) and three from it on: kernels.quantize's quantize kernel
and kernels.dequantize's kernel write A's MXFP4 values in bf16 once (the dequant path's two
launches, launchers.dequant), then the GEMM loads them as they are.
"""

import functools
import itertools
from typing import NamedTuple

import torch
import triton

from ..kernels import formats
from ..kernels.dequantize import dequantize_kernel, dequantize_launch
from ..kernels.hopper_prepared_gemm import (hopper_prepared_gemm_kernel,
                                            prepared_arguments, weight_arguments)
from ..kernels.layouts import hopper as layout
from ..kernels.tiles import gemm_tiles
from ..kernels.quantize import quantized_outputs
from .bypass import aligned, backend_options
from .gemm import (LaunchSpec, bound_launch, counter_rows, quantize_spec,
                   split_plan, threads_per_program)
from .targets import SM90

A_DEQUANTIZED_MIN_M = 8
# Split K until the grid has this many programs (two per SM of sm_90): at M = 1 the weight's
# loads need programs on every SM, two deep. A split keeps two K tiles at least (the prefetch
# needs a next tile) and the splits stay at most MAX_SPLIT_K (the last program sums them, its
# loads unrolled: 16 at BLOCK_M 64 put 24 bytes a thread on the stack).
MIN_PROGRAMS = 2 * SM90.processors
MAX_SPLIT_K = 8
# BLOCK_N is 16 rows a warp (one warpgroup, wgmma's 64 rows, or two): 4 warps below
# A_DEQUANTIZED_MIN_M, 8 from it, where a program's fixed work (A's loads and stores into
# shared memory, the scale words' move) spreads over twice the weight.
ROWS_PER_WARP = 16


class PreparedConfig(NamedTuple):
    block_m: int
    block_n: int
    split_k: int
    num_warps: int
    num_stages: int
    a_dequantized: bool
    block_k: int = layout.K_ALIGN
    split_k_reduce = "last_program"    # what launchers.gemm.split_plan reads: not a field

    @property
    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} sk{self.split_k} w{self.num_warps}"
                f" s{self.num_stages}" + (" A once" if self.a_dequantized else ""))

    def splits_for(self, k: int) -> tuple:
        """(splits launched, K elements a split), over the weight's padded K."""
        k_tiles = formats.cdiv(layout.padded_k(k), self.block_k)
        size = formats.cdiv(k_tiles, self.split_k) * self.block_k
        return formats.cdiv(k_tiles * self.block_k, size), size


def prepared_config(m: int, n: int, k: int) -> PreparedConfig:
    """The rule: BLOCK_M the power of two at or above M from 16 to 64 (at 128 the accumulator
    and B's registers spill), BLOCK_N 64 (4 warps) below A_DEQUANTIZED_MIN_M and 128 (8 warps)
    from it, where A is quantized once by its own launches, one stage with B's next tile
    prefetched into registers (Triton's pipeliner costs a wait and a descriptor a wgmma:
    tools.isa --arch sm_90 --shapes), and K split in powers of two until the grid has
    MIN_PROGRAMS programs, a split would have fewer than two K tiles, or MAX_SPLIT_K."""
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    a_dequantized = m >= A_DEQUANTIZED_MIN_M
    warps = 8 if a_dequantized else 4
    block_n = ROWS_PER_WARP * warps
    tiles = gemm_tiles(m, n, block_m, block_n)
    k_tiles = formats.cdiv(layout.padded_k(k), layout.K_ALIGN)
    split_k = 1
    while (split_k * tiles < MIN_PROGRAMS and 4 * split_k <= k_tiles
           and split_k < MAX_SPLIT_K):
        split_k *= 2
    return PreparedConfig(block_m, block_n, split_k, warps, 1, a_dequantized)


def _weight_like(n: int, k: int, wide_scales: bool, device) -> layout.HopperWeight:
    units = layout.padded_k(k) // layout.UNIT_K
    return layout.HopperWeight(
        torch.empty((n // 16, units, 8, 4, 4, 4), dtype=torch.uint8, device=device),
        torch.empty((n // 16, units, 8, 2, 2), dtype=torch.uint8, device=device),
        n, k, wide_scales)


def prepared_launch_specs(config: PreparedConfig, backend: str, m: int, n: int, k: int,
                          a_strides: tuple, device, wide_scales: bool = False) -> list:
    """The Triton launches of one call, as launchers.gemm.LaunchSpec: with a_dequantized
    "quantize" and "dequantize_a" (A's MXFP4 values in bf16), then "gemm"."""
    specs = []
    a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    if config.a_dequantized:
        codes, scales = quantized_outputs(m, k, device)
        specs.append(quantize_spec(backend, m, k, a_strides, device, "software", codes, scales))
        a = torch.empty((m, k), dtype=torch.bfloat16, device=device)
        grid, arguments = dequantize_launch(codes, scales, a, False)
        specs.append(LaunchSpec("dequantize_a", dequantize_kernel, grid,
                                _options(backend, 4, 1), arguments,
                                per_call=3))    # dequantize_launch puts (codes, scales, out) first
    splits, split_size = config.splits_for(k)
    c = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    partials = torch.empty((splits, m, n), dtype=torch.float32, device=device) if splits > 1 else c
    rows = counter_rows(config, m, n, split_plan(config, k), device, rows=1)
    arguments = prepared_arguments(
        a, _weight_like(n, k, wide_scales, device), c, partials, c if rows is None else rows[0],
        m, block_m=config.block_m, block_n=config.block_n, splits=splits,
        split_size=split_size, reduce_in_gemm=splits > 1, a_dequantized=config.a_dequantized,
        threads=threads_per_program(config.num_warps, backend), prefetch=config.num_stages == 1)
    specs.append(LaunchSpec("gemm", hopper_prepared_gemm_kernel,
                            (splits * gemm_tiles(m, n, config.block_m, config.block_n), 1, 1),
                            _options(backend, config.num_warps, config.num_stages), arguments,
                            per_call=6))   # (a, b, b_scales, c, partials, counters) first
    return specs


def _options(backend: str, num_warps: int, num_stages: int) -> dict:
    return backend_options(backend, num_warps=num_warps, num_stages=num_stages, waves_per_eu=0,
                           matrix_instr_nonkdim=0)


class PreparedLauncher:
    """Call with (A bf16 [M, K] of the given strides, HopperWeight); returns a new bf16 [M, N]."""

    def __init__(self, config: PreparedConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, wide_scales: bool, allow_direct: bool = True):
        self.config, self.m, self.n, self.k, self.device = config, m, n, k, device
        self.splits, _ = config.splits_for(k)
        self.counter_rows = counter_rows(config, m, n, split_plan(config, k), device)
        self._calls = itertools.count()   # next() is atomic: threads never share a row
        specs = prepared_launch_specs(config, backend, m, n, k, a_strides, device, wide_scales)
        bound = {spec.name: bound_launch(spec, allow_direct) for spec in specs}
        self.launches = {name: launch for name, (launch, _) in bound.items()}
        self.constants = {name: constants for name, (_, constants) in bound.items()}

    def _launch(self, name: str, tensors: tuple) -> None:
        launch = self.launches[name]
        (launch if aligned(*tensors[:3]) else launch.standard)(*tensors, *self.constants[name])

    def __call__(self, a, weight: layout.HopperWeight):
        m, n, k = self.m, self.n, self.k
        if self.config.a_dequantized:
            codes, scales = quantized_outputs(m, k, self.device)
            self._launch("quantize", (a, codes, scales))
            a = torch.empty((m, k), dtype=torch.bfloat16, device=self.device)
            self._launch("dequantize_a", (codes, scales, a))
        out = torch.empty((m, n), dtype=torch.bfloat16, device=self.device)
        partials = (torch.empty((self.splits, m, n), dtype=torch.float32, device=self.device)
                    if self.splits > 1 else out)
        counters = out
        if self.counter_rows is not None:
            counters = self.counter_rows[next(self._calls) % len(self.counter_rows)]
        b, b_scales = weight_arguments(weight)
        self._launch("gemm", (a, b, b_scales, out, partials, counters))
        return out


def hopper_weight(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor) -> layout.HopperWeight:
    """The op torch.ops.mxfp4_mm.gemm's weight operands (B_shuffle [N, K/2], B_scale_sh) ->
    the Hopper layout, on their device."""
    n, k = b_shuffle.shape[0], 2 * b_shuffle.shape[1]
    return layout.from_shuffled(b_shuffle, b_scale_sh, n, k)


def hopper_weight_from_mxfp4(codes: torch.Tensor, scales: torch.Tensor) -> layout.HopperWeight:
    """Plain MXFP4 (codes uint8 [N, K/2], E8M0 scales [N, K/32]) -> the Hopper layout."""
    return layout.swizzle(codes.view(torch.uint8), scales.view(torch.uint8))


def serves(device) -> bool:
    """Whether MXFP4Linear on `device` takes this path: a CUDA device of sm_90 and up."""
    device = torch.device(device)
    if device.type != "cuda":
        return False
    from . import current_target
    backend, arch = current_target(device)
    return backend == "cuda" and int(arch.removeprefix("sm_")) >= 90


def layer_weight(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor):
    """MXFP4Linear's weight in the Hopper layout where its device takes this path (serves),
    else None."""
    return hopper_weight(b_shuffle, b_scale_sh) if serves(b_shuffle.device) else None


def _check_backend(device) -> str:
    from . import current_target
    backend, arch = current_target(device)
    if backend == "cuda" and int(arch.removeprefix("sm_")) >= 90 or backend == "interpreter":
        return backend
    raise ValueError(f"mxfp4_mm.gemm_prepared: a weight in the Hopper layout runs on NVIDIA "
                     f"sm_90 and up, not on {backend} {arch}; convert it with "
                     f"kernels.layouts.hopper.unswizzle and use torch.ops.mxfp4_mm.gemm")


@functools.lru_cache(maxsize=64)
def _cached_launcher(backend, device, m, n, k, a_strides, wide_scales) -> PreparedLauncher:
    return PreparedLauncher(prepared_config(m, n, k), backend, m, n, k, a_strides,
                            torch.device(device), wide_scales)


def gemm_prepared(a: torch.Tensor, weight: layout.HopperWeight) -> torch.Tensor:
    """A bf16 [M, K] and a HopperWeight [N, K] -> a new bf16 [M, N] = quantize(A) @ dequant(W)^T."""
    if a.dtype != torch.bfloat16 or a.dim() != 2 or a.shape[1] != weight.k:
        raise ValueError(f"mxfp4_mm.gemm_prepared: expected A bf16 [M, {weight.k}], got "
                         f"{a.dtype} {tuple(a.shape)}")
    m = a.shape[0]
    if m == 0:
        return torch.empty((0, weight.n), dtype=torch.bfloat16, device=a.device)
    backend = _check_backend(a.device)
    launcher = _cached_launcher(backend, str(a.device), m, weight.n, weight.k, a.stride(),
                                weight.wide_scales)
    return launcher(a, weight)


OP_NAME = "gemm_prepared"


def _op(a: torch.Tensor, values: torch.Tensor, scales: torch.Tensor, k: int,
        wide_scales: bool) -> torch.Tensor:
    return gemm_prepared(a, layout.HopperWeight(values, scales, 16 * values.shape[0], k,
                                                wide_scales))


def _register_op():
    """torch.ops.mxfp4_mm.gemm_prepared, once per process."""
    if hasattr(torch.ops.mxfp4_mm, OP_NAME):
        return
    op = torch.library.custom_op(f"mxfp4_mm::{OP_NAME}", _op, mutates_args=())

    @op.register_fake
    def _output_like(a, values, scales, k, wide_scales):
        return a.new_empty((a.shape[0], 16 * values.shape[0]), dtype=torch.bfloat16)


_register_op()
