"""One record per chip: what it has and the thresholds its configs turn on.

`target_facts(arch)` is the Target of a Triton arch name: "gfx950" (MI355X), "sm_90" (H100,
H200) and "interpreter" (the CPU tests, which run gfx950's table and rules) have records of
their own; any other arch takes its vendor's defaults (FP4 MMA on NVIDIA from FP4_MMA_FROM_SM,
sm_90's rules on NVIDIA, gfx950's elsewhere), with none of the facts measured on one chip.
Every module that decides by chip reads it here: the config lookup (launchers.configs), the
heuristics (launchers.heuristics), the ladder, the path candidates, the fit checks and the tools
that cross-compile or tune.

`backend_facts(backend)` is the Backend of a Triton backend ("hip", "cuda"; the interpreter
and any other take GENERIC_BACKEND): what the launches of every chip of that vendor share,
which launchers.gemm and launchers.bypass read.
"""

import re
from dataclasses import dataclass
from typing import Optional

FP4_MMA_FROM_SM = 100     # NVIDIA's FP4 MMA (tcgen05 block-scaled) starts with sm_100
QUANTIZE_ONCE_FROM_M = 1024   # both heuristics' (Target.quantize_once_from_m)
_NVIDIA_ARCH = re.compile(r"sm_(\d+)")
ANY_M = 1 << 62     # a limit on M that no tensor reaches


@dataclass(frozen=True)
class Target:
    arch: str
    vendor: str                      # "amd" or "nvidia"
    heuristic: str                   # the launchers.heuristics rules it takes: "gfx950", "sm_90"
    entries_of: Optional[str] = None   # the arch whose table entries it uses (None: its own)
    # What a program may ask for, in bytes: the LDS of a CU on AMD, the opt-in maximum shared
    # memory of a block on NVIDIA (the driver's "max_shared_mem"); None: not recorded.
    shared_memory_bytes: Optional[int] = None
    processors: Optional[int] = None   # CUs on AMD, SMs on NVIDIA
    registers: Optional[int] = None    # per thread at most: VGPRs of a lane on AMD
    # kernels.quantize's "hardware" quantizers (a conversion instruction of the chip)
    hardware_quantizer: bool = False
    # From this M on, config_lookup serves the "dequant" path (A and B dequantized, the vendor
    # GEMM): chips without FP4 MMA, where tl.dot_scaled is an emulation; None: never.
    vendor_gemm_from_m: Optional[int] = None
    # The thresholds of the chip's own rules (launchers.heuristics), None where it has none:
    # from quantize_once_from_m on, the heuristic quantizes A once (the fused GEMM quantizes
    # each row of A once per N tile, cdiv(N, BLOCK_N) times over, which outgrows the MMA work
    # as M grows); up to hopper_max_m it serves the hopper path (kernels.hopper_gemm); from
    # aiter_candidate_from_m on, aiter's path is timed beside ours (launchers.candidates).
    quantize_once_from_m: Optional[int] = None
    hopper_max_m: Optional[int] = None
    aiter_candidate_from_m: Optional[int] = None
    # Up to this M the prepared Hopper path (launchers.prepared, the layout MXFP4Linear makes
    # once) serves the chip's GPU; None: the chip has no such path (wgmma needs sm_90).
    prepared_max_m: Optional[int] = None
    # From this M on, the fused Hopper GEMMs take large pipelined tiles: the prepared path's
    # rule (launchers.prepared.large_tile_config) and, on custom_kernel's weight, the hopper
    # path's large tile timed beside the dequant path (launchers.candidates.path_candidates).
    # None: the chip has no such tiles (no wgmma, or an FP4 MMA of its own).
    large_tiles_from_m: Optional[int] = None

    @property
    def first_quantizer(self) -> str:
        """The quantizer of the ladder's first rung on this chip."""
        return "hardware" if self.hardware_quantizer else "software"


GFX950 = Target(
    "gfx950", "amd", "gfx950", shared_memory_bytes=160 * 1024, processors=256, registers=512,
    hardware_quantizer=True, quantize_once_from_m=QUANTIZE_ONCE_FROM_M,
    # aiter's gemm_a4w4 is an assembly GEMM tuned for large M: timed from the M from which
    # the heuristic quantizes A once. No task shape reaches it; not a measured crossover.
    aiter_candidate_from_m=QUANTIZE_ONCE_FROM_M)
SM90 = Target(
    "sm_90", "nvidia", "sm_90", shared_memory_bytes=232448, processors=132, registers=255,
    quantize_once_from_m=QUANTIZE_ONCE_FROM_M,
    # Measured on an H100 (`python -m tools.bench --vendor-gemm`, docs/results.md): the dequant
    # path won at M = 256 on N,K 4096,4096 and 6144,4096 and at every M from 512 to 2048 timed
    # on 4096,4096 and 7168,2048; at M = 64 and 128 the fused GEMM won.
    vendor_gemm_from_m=256,
    # On an H100 the hopper path measured faster than sm90_preshuffle's configs on each
    # Llama-3-8B decode shape at M = 1, 8, 32 and 64 (docs/results.md).
    hopper_max_m=64,
    # Every M: on an H100 (docs/results.md) the op and MXFP4Linear matched the reference at
    # M 1-16, 24, 32, 48, 64, 96, 128 and 256 on Llama-3-8B's weights and odd shapes
    # (tests/test_prepared.py, before the large tiles took M >= large_tiles_from_m, which have
    # not run on a GPU), and from M = 8 to 128 the rule's config or one of its neighbours was
    # faster than custom_kernel's path on each of Llama-3-8B's weights.
    prepared_max_m=ANY_M,
    # Where the dequant path starts (vendor_gemm_from_m): not a measured crossover of the fused
    # large tiles, which tools.bench --prepared and --vendor-gemm compare with it on a GPU.
    large_tiles_from_m=256)
INTERPRETER = Target("interpreter", "amd", "gfx950", entries_of="gfx950")
TARGETS = {target.arch: target for target in (GFX950, SM90, INTERPRETER)}


def target_facts(arch: str) -> Target:
    """The record of `arch`, or its vendor's defaults for an arch without one."""
    if arch in TARGETS:
        return TARGETS[arch]
    match = _NVIDIA_ARCH.fullmatch(arch)
    if match:
        sm = int(match.group(1))
        return Target(arch, "nvidia", "sm_90",
                      vendor_gemm_from_m=None if sm >= FP4_MMA_FROM_SM else SM90.vendor_gemm_from_m,
                      prepared_max_m=SM90.prepared_max_m if sm >= 90 else None,
                      large_tiles_from_m=(SM90.large_tiles_from_m
                                          if 90 <= sm < FP4_MMA_FROM_SM else None))
    return Target(arch, "amd", "gfx950")


@dataclass(frozen=True)
class Backend:
    name: str
    warp_size: int                 # threads of a warp (a wave on AMD)
    # The fused GEMM's quantizer takes the uniform fast path (kernels/quantize.py). Not on
    # CUDA: on the H200 it made the fused GEMM slower (tools.bench geomean 18.60 µs with it,
    # 17.32 without, 2026-12-04); the hardware quantizer always has it.
    quant_fast_path: bool
    # How an in-kernel split-K reduce hands the partials to the tile's last program
    # (kernels.preshuffle_gemm): written through on AMD, where a release/acquire pair writes
    # back and invalidates a whole L2; a release/acquire counter elsewhere.
    splitk_sync: str
    hip_options: bool              # waves_per_eu and matrix_instr_nonkdim are compile options
    # A prequantized A's loaded codes may be repeated to the MMA's rows (A_ROWS < BLOCK_M): not
    # on AMD, where Triton 3.6 cannot lower them (an assertion in its matmul lowering, seen
    # cross-compiling for gfx950).
    repeats_loaded_codes: bool


BACKENDS = {"hip": Backend("hip", 64, True, "write_through", True, False),
            "cuda": Backend("cuda", 32, False, "acq_rel", False, True)}
GENERIC_BACKEND = Backend("generic", 32, True, "acq_rel", False, True)


def backend_facts(backend: str) -> Backend:
    """The record of `backend`, GENERIC_BACKEND for the interpreter and any other."""
    return BACKENDS.get(backend, GENERIC_BACKEND)
