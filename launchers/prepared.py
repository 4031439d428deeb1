"""The prepared-weight path for NVIDIA Hopper: a weight turned once into the Hopper layout
(kernels.layouts.hopper) and multiplied by kernels.hopper_prepared_gemm.

    weight = hopper_weight(b_shuffle, b_scale_sh)    # or hopper_weight_from_mxfp4(codes, scales)
    c = torch.ops.mxfp4_mm.gemm_prepared(a, weight.values, weight.scales, weight.k,
                                         weight.wide_scales)   # = gemm_prepared(a, weight)
    c32 = torch.ops.mxfp4_mm.gemm_prepared(a, weight.values, weight.scales, weight.k,
                                           weight.wide_scales, torch.float32)   # fp32 sums

Importing this module (launchers.linear does) defines the op (launchers.define_op, as the op
torch.ops.mxfp4_mm.gemm is defined). A call whose signature (its three tensors' shapes,
strides, dtypes and devices, out_dtype, K and wide_scales) passed prepared_problem's checks
before takes its launcher from one lookup in the launcher cache the GEMM's op uses (launchers);
a new signature is checked in full (one-line errors: A's dtype, shape or device, a weight not
in the layout, out_dtype, a backend other than NVIDIA sm_90 and up or the interpreter), and a
new problem (M, N, K, A's strides, wide_scales, out_dtype) has its launcher built and proven
first, as every launcher is (launchers.ladder: the rule's config, direct, then through the
standard launch, and below a large tile the small tiles' rule the same two ways; the proof's
weights put into the Hopper layout).

The op takes the layout's two tensors (values uint8 [N/16, Kp/64, 8, 4, 4, 4], scales uint8
[N/16, Kp/64, 8, 2, 2]) and returns a new bf16 [M, N] = quantize(A) @ dequant(B)^T, the
reference's result (out_dtype=torch.float32: its fp32 sums unrounded, as the op
torch.ops.mxfp4_mm.gemm gives them); a fake implementation gives torch.compile its shapes. It
runs on CUDA (sm_90 and up: mul.rn.bf16x2) and in Triton's interpreter; on another backend it
refuses in one line (the layout is Hopper's: `unswizzle` gives the plain codes and scales back,
and kernels.formats.shuffle_weight / e8m0_shuffle the op torch.ops.mxfp4_mm.gemm takes).

MXFP4Linear takes this path on a device it serves (`serves`: CUDA sm_90 and up): there it
holds its weight in the Hopper layout alone, made by its constructors, .to() and
load_state_dict, and state_dict saves the portable form (b_shuffle, b_scale_sh) made back from
it (launchers.linear).

A call is one launch where each program quantizes its rows of A in registers (kernels.quantize's
recipe), and two where A is quantized once (the rule's choice from A_DEQUANTIZED_MIN_M rows on,
A_ONCE_MIN_QUANTIZED): kernels.quantized_values writes A's MXFP4 values in bf16, then the GEMM
loads them as they are.
"""

import itertools
from typing import NamedTuple, Optional

import torch
import triton

from ..kernels import formats
from ..kernels.hopper_prepared_gemm import (hopper_prepared_gemm_kernel,
                                            prepared_arguments, weight_arguments)
from ..kernels.layouts import hopper as layout
from ..kernels.tiles import gemm_tiles
from . import (cached_launcher, call_signature, checked_signature, define_op, empty_output,
               launcher_of_signature)
from .bypass import aligned, backend_options
from .gemm import (LaunchSpec, bound_launch, counter_rows, quantized_values_spec,
                   split_plan, threads_per_program)
from .inputs import CPU_HOWTO, KERNELS_NEED_A_GPU, output_dtype
from .ladder import Rung, proven_launcher
from .launcher import Launcher
from .proof import SPLIT_K_REPEATS
from .targets import SM90, target_facts

A_DEQUANTIZED_MIN_M = 8
# From A_DEQUANTIZED_MIN_M on, A is quantized once by a launch of its own where the GEMM would
# quantize at least this many elements of A (each row once per N tile: M * K * cdiv(N,
# BLOCK_N)), else in registers by each program. On an H100 (tools.bench --prepared, Llama-3-8B's
# decode weights at M = 8 and 32) the in-register form was faster up to 6.3 M of them (6144x4096
# at M = 32) and slower from 7.3 M (28672x4096 at M = 8); at M = 128 (16.8 M and up) A once won
# on every weight. A quantized once is staged by Triton's pipeliner (three stages), which was
# faster than the register prefetch on all twelve of those shapes. Those runs quantized A once
# in two launches (codes and scales, then their values) and prefetched B's tiles alone; A's
# values now take one launch (kernels.quantized_values) and the prefetch takes A's next tile
# too, neither timed yet.
A_ONCE_MIN_QUANTIZED = 7 << 20
A_ONCE_STAGES = 3
# Split K until the grid has this many programs (two per SM of sm_90): at M = 1 the weight's
# loads need programs on every SM, two deep. A split keeps two K tiles at least (the prefetch
# needs a next tile) and the splits stay at most MAX_SPLIT_K (the last program sums them, its
# loads unrolled: 16 at BLOCK_M 64 put 24 bytes a thread on the stack).
MIN_PROGRAMS = 2 * SM90.processors
MAX_SPLIT_K = 8
# BLOCK_N is 16 rows a warp (one warpgroup, wgmma's 64 rows, or two): 4 warps below
# A_DEQUANTIZED_MIN_M, 8 from it, where a program's fixed work (A's quantization or loads and
# stores into shared memory, the scale words' move) spreads over twice the weight. 8 warps below it too
# cost fewer instructions a weight element (tools.isa --arch sm_90 --shapes) but fit one
# program an SM by their registers, with less of the weight in flight; not measured on a GPU.
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


# The large tiles (Target.large_tiles_from_m on), largest first, as (BLOCK_M, BLOCK_N, BLOCK_K,
# warps, stages): A once, no split, Triton's pipeliner staging A and B in shared memory (no
# register prefetch). Under Triton 3.6.0 for sm_90 (tools.isa --arch sm_90 --shapes, at
# 4096x4096x4096), none with a stack; registers a thread, shared bytes, main-loop SASS a K
# tile and lane-instructions a weight element:
#   256x128x128 w8 s3: 240, 217088, 289, 4.52 (8 HGMMA.64x256x16 a warp)
#   128x128x64  w8 s4: 120,  80896, 146, 4.56 (4 HGMMA.64x128x16; two programs an SM)
#   64x128x128  w8 s3: 108,  69632, 246, 3.84 (8 HGMMA.64x64x16; two programs an SM)
# A weight element feeds BLOCK_M FMAs: at 2048 bf16 FMAs and 128 lane-instructions a clock an
# SM (H100), the dequantization takes 16 * lane-instructions / BLOCK_M of the MMA's time
# (0.28, 0.57, 0.96). BLOCK_K 256 spills at BLOCK_M 256 (the dequantized B's 64 registers
# beside the accumulator's 128) and takes 237568 bytes in three stages at BLOCK_M 128.
LARGE_TILES = ((256, 128, 128, 8, 3), (128, 128, 64, 8, 4), (64, 128, 128, 8, 3))


def large_tiles() -> list:
    """LARGE_TILES as PreparedConfigs, in their order."""
    return [PreparedConfig(block_m, block_n, 1, warps, stages, True, block_k)
            for block_m, block_n, block_k, warps, stages in LARGE_TILES]


def large_tile_config(m: int, n: int, k: int) -> PreparedConfig:
    """The first of LARGE_TILES whose grid has a program for every SM of sm_90, else the last."""
    configs = large_tiles()
    return next((config for config in configs
                 if gemm_tiles(m, n, config.block_m, config.block_n) >= SM90.processors),
                configs[-1])


def prepared_config(m: int, n: int, k: int) -> PreparedConfig:
    """The rule: from sm_90's Target.large_tiles_from_m on, large_tile_config; below it,
    small_tile_config."""
    if m >= SM90.large_tiles_from_m:
        return large_tile_config(m, n, k)
    return small_tile_config(m, n, k)


def small_tile_config(m: int, n: int, k: int) -> PreparedConfig:
    """The small tiles' rule, at any M: BLOCK_M the power of two at or above M from 16 to 64, BLOCK_N 64 (4 warps) below
    A_DEQUANTIZED_MIN_M and 128 (8 warps) from it; A quantized in registers, BLOCK_K 256 in
    one stage with B's next tile prefetched into registers (Triton's pipeliner costs a wait
    and a descriptor a wgmma: tools.isa --arch sm_90 --shapes), or from A_DEQUANTIZED_MIN_M,
    where the GEMM would quantize A_ONCE_MIN_QUANTIZED elements of A or more, A quantized once
    by its own launches in A_ONCE_STAGES stages; K split in powers of two until the grid has
    MIN_PROGRAMS programs, a split would have fewer than two K tiles, or MAX_SPLIT_K."""
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    warps = 8 if m >= A_DEQUANTIZED_MIN_M else 4
    block_n = ROWS_PER_WARP * warps
    a_dequantized = (m >= A_DEQUANTIZED_MIN_M
                     and m * k * formats.cdiv(n, block_n) >= A_ONCE_MIN_QUANTIZED)
    tiles = gemm_tiles(m, n, block_m, block_n)
    k_tiles = formats.cdiv(layout.padded_k(k), layout.K_ALIGN)
    split_k = 1
    while (split_k * tiles < MIN_PROGRAMS and 4 * split_k <= k_tiles
           and split_k < MAX_SPLIT_K):
        split_k *= 2
    return PreparedConfig(block_m, block_n, split_k, warps,
                          A_ONCE_STAGES if a_dequantized else 1, a_dequantized)


def _weight_like(n: int, k: int, wide_scales: bool, device) -> layout.HopperWeight:
    units = layout.padded_k(k) // layout.UNIT_K
    return layout.HopperWeight(
        torch.empty((n // 16, units, 8, 4, 4, 4), dtype=torch.uint8, device=device),
        torch.empty((n // 16, units, 8, 2, 2), dtype=torch.uint8, device=device),
        n, k, wide_scales)


def prepared_launch_specs(config: PreparedConfig, backend: str, m: int, n: int, k: int,
                          a_strides: tuple, device, wide_scales: bool = False,
                          out_dtype: torch.dtype = torch.bfloat16) -> list:
    """The Triton launches of one call, as launchers.gemm.LaunchSpec: with a_dequantized
    "quantize_a" (A's MXFP4 values in bf16), then "gemm" (its C of out_dtype, bf16 or
    float32)."""
    specs = []
    a = torch.empty_strided((m, k), a_strides, dtype=torch.bfloat16, device=device)
    if config.a_dequantized:
        a = torch.empty((m, k), dtype=torch.bfloat16, device=device)
        specs.append(quantized_values_spec(backend, m, k, a_strides, device, "software", a))
    splits, split_size = config.splits_for(k)
    c = torch.empty((m, n), dtype=out_dtype, device=device)
    partials = torch.empty((splits, m, n), dtype=torch.float32, device=device) if splits > 1 else c
    rows = counter_rows(config, m, n, split_plan(config, k), device, rows=1)
    arguments = prepared_arguments(
        a, _weight_like(n, k, wide_scales, device), c, partials, c if rows is None else rows[0],
        m, block_m=config.block_m, block_n=config.block_n, block_k=config.block_k, splits=splits,
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


class PreparedLauncher(Launcher):
    """The prepared path's launcher (launchers.launcher's contract, but for its operands): call
    with (A bf16 [M, K] of the given strides, the Hopper layout's values and scales[, direct]);
    returns a new [M, N] of out_dtype (bf16 or float32)."""

    quantizer = "software"

    def __init__(self, config: PreparedConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, wide_scales: bool, allow_direct: bool = True,
                 out_dtype: torch.dtype = torch.bfloat16):
        self.config, self.m, self.n, self.k, self.device = config, m, n, k, device
        self.out_dtype = out_dtype
        self.wide_scales = wide_scales
        self.splits, _ = config.splits_for(k)
        self.proof_repeats = SPLIT_K_REPEATS if self.splits > 1 else 0
        self.launches_per_call = 2 if config.a_dequantized else 1
        self.counter_rows = counter_rows(config, m, n, split_plan(config, k), device)
        self._calls = itertools.count()   # next() is atomic: threads never share a row
        specs = prepared_launch_specs(config, backend, m, n, k, a_strides, device, wide_scales,
                                      out_dtype)
        bound = {spec.name: bound_launch(spec, allow_direct) for spec in specs}
        self.launches = {name: launch for name, (launch, _) in bound.items()}
        self.constants = {name: constants for name, (_, constants) in bound.items()}

    def kernel_launches(self) -> dict:
        return self.launches

    def _launch(self, name: str, tensors: tuple, direct: bool) -> None:
        launch = self.launches[name]
        (launch if direct and aligned(*tensors[:3]) else launch.standard)(
            *tensors, *self.constants[name])

    def __call__(self, a, values, scales, direct=True):
        """direct=False takes the standard launch even where the bypass is available. A direct
        launch reads only each tensor's address, so it takes values and scales as they come;
        the standard launch takes the kernel's views of them (weight_arguments)."""
        m, n, k = self.m, self.n, self.k
        if self.config.a_dequantized:
            a_values = a.new_empty(m, k, dtype=torch.bfloat16)
            self._launch("quantize_a", (a, a_values), direct)
            a = a_values
        # a.new_empty with the sizes as arguments: as launchers.gemm.GemmLauncher's outputs
        out = a.new_empty(m, n, dtype=self.out_dtype)
        partials = a.new_empty(self.splits, m, n, dtype=torch.float32) if self.splits > 1 else out
        counters = out
        if self.counter_rows is not None:
            counters = self.counter_rows[next(self._calls) % len(self.counter_rows)]
        gemm, constants = self.launches["gemm"], self.constants["gemm"]
        if direct and gemm.is_direct and aligned(a, values, scales):
            gemm.direct(a, values, scales, out, partials, counters, *constants)
        else:
            b, b_scales = weight_arguments(layout.HopperWeight(values, scales, n, k,
                                                               self.wide_scales))
            gemm.standard(a, b, b_scales, out, partials, counters, *constants)
        return out


class _OnShuffledWeights(Launcher):
    """A PreparedLauncher called as the ladder's proof calls every launcher, with the op
    torch.ops.mxfp4_mm.gemm's weight operands (B_shuffle, B_scale_sh): each weight put into the
    Hopper layout once, then the prepared launcher called on it."""

    def __init__(self, launcher: PreparedLauncher):
        self.launcher = launcher
        self.config, self.splits = launcher.config, launcher.splits
        self.out_dtype = launcher.out_dtype
        self.quantizer, self.proof_repeats = launcher.quantizer, launcher.proof_repeats
        self.launches_per_call = launcher.launches_per_call
        self._weight = (None, None)     # (B_shuffle, its HopperWeight) of the last call

    def kernel_launches(self) -> dict:
        return self.launcher.kernel_launches()

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        if self._weight[0] is not b_shuffle:
            self._weight = (b_shuffle, hopper_weight(b_shuffle, b_scale_sh))
        weight = self._weight[1]
        return self.launcher(a, weight.values, weight.scales, direct)


def prepared_rungs(backend: str, m: int, n: int, k: int, a_strides: tuple, device,
                   wide_scales: bool, out_dtype: torch.dtype = torch.bfloat16) -> list:
    """The prepared launcher's ladder (launchers.ladder): the rule's config with the direct
    launch, then the same through Triton's standard launch only; where the rule takes a large
    tile, then the small tiles' rule at this M the same two ways (small_tile_config, which
    serves any M). The other paths take the weight in another layout: no rung goes there."""
    rule = prepared_config(m, n, k)
    configs = {"prepared": rule}
    if m >= SM90.large_tiles_from_m:
        configs["prepared, small tiles"] = small_tile_config(m, n, k)

    def rung(name, config, allow_direct):
        return Rung(name, lambda: _OnShuffledWeights(PreparedLauncher(
            config, backend, m, n, k, a_strides, device, wide_scales, allow_direct, out_dtype)),
                    config)
    return [rung(f"{name}{launch}", config, allow_direct) for name, config in configs.items()
            for launch, allow_direct in (("", True), (", standard launch", False))]


def proven_prepared_launcher(arch, backend, m, n, k, a_strides, device, wide_scales,
                             out_dtype=torch.bfloat16) -> PreparedLauncher:
    """The prepared launcher of this problem, proven against the reference as every launcher
    is (launchers.ladder, launchers.proof: the proof's weights put into the Hopper layout)."""
    proven = proven_launcher(arch, backend, m, n, k, a_strides, device,
                             prepared_rungs(backend, m, n, k, a_strides, device, wide_scales,
                                            out_dtype))
    proven.launcher.rung = proven.rung
    return proven.launcher


def hopper_weight(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor) -> layout.HopperWeight:
    """The op torch.ops.mxfp4_mm.gemm's weight operands (B_shuffle [N, K/2], B_scale_sh) ->
    the Hopper layout, on their device."""
    n, k = b_shuffle.shape[0], 2 * b_shuffle.shape[1]
    return layout.from_shuffled(b_shuffle, b_scale_sh, n, k)


def hopper_weight_from_mxfp4(codes: torch.Tensor, scales: torch.Tensor) -> layout.HopperWeight:
    """Plain MXFP4 (codes uint8 [N, K/2], E8M0 scales [N, K/32]) -> the Hopper layout."""
    return layout.swizzle(codes.view(torch.uint8), scales.view(torch.uint8))


def max_rows(device) -> Optional[int]:
    """Up to which M MXFP4Linear on `device` takes this path (its chip's prepared_max_m,
    launchers.targets); None where it does not: not a CUDA device, or one without wgmma."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    from . import current_target
    backend, arch = current_target(device)
    return target_facts(arch).prepared_max_m if backend == "cuda" else None


def serves(device) -> bool:
    """Whether MXFP4Linear on `device` takes this path at all (max_rows)."""
    return max_rows(device) is not None


def _checked_backend(device) -> tuple:
    """(backend, arch) of `device` where it runs this path; else one line naming the way out."""
    from . import current_target
    if device.type == "cpu" and KERNELS_NEED_A_GPU:
        raise RuntimeError(f"mxfp4_mm.{OP_NAME}: A is a CPU tensor, but the kernels were "
                           f"compiled for a GPU; {CPU_HOWTO}")
    backend, arch = current_target(device)
    if backend == "interpreter" or (backend == "cuda"
                                    and target_facts(arch).prepared_max_m is not None):
        return backend, arch
    raise ValueError(f"mxfp4_mm.{OP_NAME}: a weight in the Hopper layout runs on NVIDIA "
                     f"sm_90 and up, not on {backend} {arch}; convert it with "
                     f"kernels.layouts.hopper.unswizzle and use torch.ops.mxfp4_mm.gemm")


def _require(what: str, ok: bool, expected: str, got) -> None:
    if not ok:
        raise ValueError(f"mxfp4_mm.{OP_NAME}: expected {what} {expected}, got {got}")


def prepared_problem(a, values, scales, k: int) -> tuple:
    """(M, N, K) of the op's operands, checked: A bf16 [M, K]; values and scales uint8 in the
    Hopper layout of an [N, K] weight, contiguous; one device. One-line ValueError otherwise."""
    def described(t):
        return f"{t.dtype} {tuple(t.shape)}" + ("" if t.is_contiguous() else " not contiguous")
    _require("A", a.dtype == torch.bfloat16 and a.dim() == 2 and a.shape[1] == k,
             f"bf16 [M, {k}]", described(a))
    units = layout.padded_k(k) // layout.UNIT_K
    n_tiles = values.shape[0] if values.dim() else 0
    for name, tensor, tail in (("values", values, (8, 4, 4, 4)), ("scales", scales, (8, 2, 2))):
        expected = (n_tiles, units) + tail
        _require(name, tensor.dtype == torch.uint8 and tuple(tensor.shape) == expected
                 and tensor.is_contiguous(), f"contiguous uint8 {expected} (the Hopper layout "
                 f"of a weight of K={k})", described(tensor))
    _require("one device", a.device == values.device == scales.device, "for A, values and scales",
             f"{a.device}, {values.device}, {scales.device}")
    return a.shape[0], 16 * n_tiles, k


def prepared_signature(a, values, scales, k: int, wide_scales: bool, out_dtype) -> tuple:
    """All that prepared_problem's checks and the launcher's choice read of the operands."""
    return call_signature(a, values, scales, out_dtype) + (k, wide_scales)


def serves_rows(arch: str, m: int) -> bool:
    """Whether the op serves M rows on `arch`: up to its prepared_max_m (launchers.targets)
    on a GPU, any M in the interpreter."""
    limit = target_facts(arch).prepared_max_m
    return arch == "interpreter" or (limit is not None and m <= limit)


def _checked_launcher(a, values, scales, k: int, wide_scales: bool, out_dtype):
    """The launcher of a call not seen before, after prepared_problem's full checks."""
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"mxfp4_mm.{OP_NAME}: expected A a torch.Tensor, got "
                        f"{type(a).__name__}")
    dtype = output_dtype(f"mxfp4_mm.{OP_NAME}", out_dtype)
    m, n, k = prepared_problem(a, values, scales, k)
    backend, arch = _checked_backend(a.device)
    if not serves_rows(arch, m):
        raise ValueError(f"mxfp4_mm.{OP_NAME}: M={m} on {arch}: the prepared path serves M up to "
                         f"{target_facts(arch).prepared_max_m} there; torch.ops.mxfp4_mm.gemm "
                         f"takes the weight's b_shuffle and b_scale_sh at any M")
    if m == 0:
        return empty_output(n, dtype)
    key = (OP_NAME, arch, str(a.device), m, n, k, a.stride(), wide_scales, dtype)
    cached_launcher(key, OP_NAME, (m, n, k), a.device, lambda: proven_prepared_launcher(
        arch, backend, m, n, k, a.stride(), a.device, wide_scales, dtype))
    return checked_signature(prepared_signature(a, values, scales, k, wide_scales, out_dtype),
                             key)


def prepared_gemm(a: torch.Tensor, values: torch.Tensor, scales: torch.Tensor, k: int,
                  wide_scales: bool, out_dtype=None) -> torch.Tensor:
    """The op's implementation: A bf16 [M, K], a weight [N, K] in the Hopper layout (values
    uint8 [N/16, Kp/64, 8, 4, 4, 4], scales uint8 [N/16, Kp/64, 8, 2, 2], K, wide_scales) ->
    a new [M, N] = quantize(A) @ dequant(W)^T, bf16 (out_dtype None or torch.bfloat16) or its
    fp32 sums unrounded (torch.float32). A call whose signature passed the checks before takes
    its launcher from one lookup (launchers.launcher_of_signature)."""
    try:
        launcher = launcher_of_signature(prepared_signature(a, values, scales, k, wide_scales,
                                                            out_dtype))
    except (AttributeError, KeyError):  # no tensor, a new signature, or its launcher evicted
        launcher = _checked_launcher(a, values, scales, k, wide_scales, out_dtype)
    return launcher(a, values, scales)


def gemm_prepared(a: torch.Tensor, weight: layout.HopperWeight, out_dtype=None) -> torch.Tensor:
    """A bf16 [M, K] and a HopperWeight [N, K] -> a new [M, N] = quantize(A) @ dequant(W)^T,
    bf16 or (out_dtype torch.float32) its fp32 sums unrounded."""
    return prepared_gemm(a, weight.values, weight.scales, weight.k, weight.wide_scales,
                         out_dtype)


OP_NAME = "gemm_prepared"


def _output_like(a, values, scales, k, wide_scales, out_dtype=None):
    return a.new_empty((a.shape[0], 16 * values.shape[0]),
                       dtype=output_dtype(f"mxfp4_mm.{OP_NAME}", out_dtype))


define_op(OP_NAME, "Tensor a, Tensor values, Tensor scales, int k, bool wide_scales, "
          "ScalarType? out_dtype=None", prepared_gemm, _output_like)
