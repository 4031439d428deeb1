"""Import-time tuning candidates, as data: {arch: {(M, N, K): [GemmConfig fields, ...]}}, and
the quantizers the table's entry is also timed with, by the quantizer that serves it.

For each benchmark shape, at most 7 alternatives to the table's entry (launchers.config_table),
which the tuner times first; fields left out take GemmConfig's defaults. They are built with
the quantizer of the launcher the ladder chose for the table's entry; QUANTIZER_CANDIDATES
adds the table's entry with other quantizers (kernels.quantize.QUANTIZERS; on gfx950 the f32
form of the conversion instruction beside its bf16 form). Each is proven before it is timed
(launchers.tuner). gfx950: each member's own best in the config space where it is not the
table's minimax entry (`python -m tools.isa --sweep`, tools.gfx950.model's family: the tuner on
the chip decides where the models disagree), then other kinds close behind (other tiles, split
or not, two waves per SIMD where the registers allow them: no member sees latency that a
second wave hides, nor bytes per CU); none spills, needs scratch or has a hazard under Triton
3.6.0, each in-kernel split-K reduce is release-ordered (`python -m tools.isa --arch gfx950
--candidates`). sm_90: the neighbours of
the tools.tune winners, and a later tools.tune winner.

`path_candidates(arch, m)`: the other launchers (launchers.gemm_config.GEMM_PATHS) that the
import-time tuner and tools.tune time beside ours at M, as config fields: the dequant path, aiter's
and, from Target.large_tiles_from_m on, the hopper path's large tile (HOPPER_LARGE_TILE).
"""

from . import aiter_path
from .targets import target_facts


# kernels.hopper_gemm on custom_kernel's B_shuffle at large M: A quantized once (its codes
# dequantized in each tile), Triton's pipeliner in two stages. Under Triton 3.6.0 for sm_90
# (4096x4096x4096): 245 registers, no stack, 100352 shared bytes, 1501 SASS a K tile, 11.73
# lane-instructions a weight element (B's unshuffle and both operands' conversion), so the
# ALU takes about 1.5 times the MMA's time (16 * 11.73 / BLOCK_M 128); 256x128 spills.
HOPPER_LARGE_TILE = {'block_m': 128, 'block_n': 128, 'block_k': 256, 'num_warps': 8,
                     'num_stages': 2, 'quantize_a_once': True, 'swap_ab': True,
                     'path': 'hopper'}


def path_candidates(arch: str, m: int) -> list:
    """[config fields]: {"path": "dequant"} from the target's vendor_gemm_from_m on (chips
    without FP4 MMA), HOPPER_LARGE_TILE from its large_tiles_from_m on, {"path": "aiter"} from
    its aiter_candidate_from_m on (gfx950) where aiter imports (launchers.targets)."""
    found = []
    target = target_facts(arch)
    if target.vendor_gemm_from_m is not None and m >= target.vendor_gemm_from_m:
        found.append({"path": "dequant"})
    if target.large_tiles_from_m is not None and m >= target.large_tiles_from_m:
        found.append(dict(HOPPER_LARGE_TILE))
    if (target.aiter_candidate_from_m is not None and m >= target.aiter_candidate_from_m
            and aiter_path.available()):
        found.append({"path": "aiter"})
    return found

QUANTIZER_CANDIDATES = {'hardware': ('hardware-f32',)}

_K512_NARROW = {'block_m': 16, 'block_n': 32, 'cache_modifier': '.cg'}
_K512_CANDIDATES = [
    dict(_K512_NARROW, block_k=512, waves_per_eu=2),     # the issue member's best
    dict(_K512_NARROW, block_k=512),                     # the round-trip member's best
    dict(_K512_NARROW, block_k=256, waves_per_eu=2),
    {'block_m': 32, 'block_n': 32, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
    {'block_m': 16, 'block_n': 64, 'block_k': 512, 'cache_modifier': '.cg'},
    {'block_m': 16, 'block_n': 64, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_warps': 2, 'cache_modifier': '.cg'},
]
_SPLIT_K14 = {'block_m': 16, 'block_n': 128, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'}

CANDIDATES = {
    'gfx950': {
        (4, 2880, 512): [
            dict(_K512_NARROW, block_k=512, waves_per_eu=2),                # the issue and round-trip members' best
            dict(_K512_NARROW, block_k=512, num_warps=2, waves_per_eu=2),
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2},
            {'block_m': 16, 'block_n': 32, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_warps': 2},
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'cache_modifier': '.cg'},
        ],
        (16, 2112, 7168): [
            dict(_SPLIT_K14, block_k=512, waves_per_eu=1),       # the latency, sync 2x member's best
            dict(_SPLIT_K14, block_k=512),                       # the issue and round-trip members' best
            dict(_SPLIT_K14, block_k=512, b_scales_first=False), # the entry before the family
            dict(_SPLIT_K14, block_k=256),
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 7, 'split_k_reduce': 'last_program', 'num_stages': 2},
            {'block_m': 16, 'block_n': 64, 'block_k': 1024, 'split_k': 7, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1},
        ],
        (32, 4096, 512): _K512_CANDIDATES,
        (32, 2880, 512): _K512_CANDIDATES,
        (64, 7168, 2048): [
            # the issue member's best
            {'block_m': 16, 'block_n': 256, 'block_k': 512, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'b_scales_first': False},
            # the round-trip member's best
            {'block_m': 16, 'block_n': 128, 'block_k': 1024, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'b_scales_first': False},
            {'block_m': 16, 'block_n': 256, 'block_k': 512, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'b_scales_first': False},
            {'block_m': 32, 'block_n': 128, 'block_k': 512, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_stages': 2, 'cache_modifier': '.cg', 'b_scales_first': False},
            {'block_m': 16, 'block_n': 128, 'block_k': 1024, 'cache_modifier': '.cg', 'waves_per_eu': 1},
        ],
        (256, 3072, 1536): [
            {'block_m': 16, 'block_n': 256, 'block_k': 512, 'cache_modifier': '.cg', 'b_scales_first': False},
            {'block_m': 32, 'block_n': 128, 'block_k': 512, 'num_stages': 3, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'waves_per_eu': 2},
        ],
    },
    'sm_90': {
        (4, 2880, 512): [
            {'block_m': 16, 'block_n': 32, 'block_k': 512, 'num_warps': 4, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 8},
            # tools.tune's winner on the H200, 2026-12-04: 9.50 µs against the table's 10.10.
            {'block_m': 16, 'block_n': 64, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_warps': 4},
        ],
        (16, 2112, 7168): [
            {'block_m': 16, 'block_n': 128, 'block_k': 256, 'split_k': 7, 'num_warps': 8, 'num_stages': 3},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'num_warps': 8},
        ],
        (32, 4096, 512): [
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 8, 'cache_modifier': '.cg'},
            {'block_m': 32, 'block_n': 64, 'block_k': 512, 'num_warps': 8},
        ],
        (32, 2880, 512): [
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 8},
            {'block_m': 16, 'block_n': 32, 'block_k': 512, 'num_warps': 8, 'cache_modifier': '.cg'},
        ],
        (64, 7168, 2048): [
            {'block_m': 64, 'block_n': 128, 'block_k': 256, 'split_k': 2, 'num_warps': 8, 'num_stages': 3, 'cache_modifier': '.cg'},
            {'block_m': 64, 'block_n': 128, 'block_k': 256, 'num_warps': 8, 'num_stages': 3, 'cache_modifier': '.cg'},
        ],
        (256, 3072, 1536): [
            {'block_m': 64, 'block_n': 128, 'block_k': 256, 'num_warps': 8, 'num_stages': 2, 'cache_modifier': '.cg'},
            {'block_m': 64, 'block_n': 64, 'block_k': 256, 'num_warps': 8, 'num_stages': 3},
        ],
    },
}
