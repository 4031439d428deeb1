"""Import-time tuning candidates, as data: {arch: {(M, N, K): [GemmConfig fields, ...]}}, and
the quantizers the table's entry is also timed with, by the quantizer that serves it.

For each benchmark shape, at most 7 alternatives to the table's entry (launchers.config_table),
which the tuner times first; fields left out take GemmConfig's defaults. They are built with
the quantizer of the launcher the ladder chose for the table's entry; QUANTIZER_CANDIDATES
adds the table's entry with other quantizers (kernels.quantize.QUANTIZERS; on gfx950 the f32
form of the conversion instruction beside its bf16 form). Each is proven before it is timed
(launchers.tuner). gfx950: the single-launch split-K (last_program, release-ordered
there) beside the two-launch split and unsplit tiles, narrow tiles with 1 or 2 warps, the XCD
remap and .wt stores (the options winning MI355X entries used); none spills or needs scratch
under Triton 3.6.0 (python -m tools.isa --arch gfx950 --candidates); sm_90: the neighbours of the
tools.tune winners, and a later tools.tune winner.
"""

_K512 = {'block_m': 16, 'block_n': 32, 'block_k': 512}
_K512_WIDE = {'block_m': 32, 'block_n': 256, 'block_k': 512, 'num_warps': 8}

QUANTIZER_CANDIDATES = {'hardware': ('hardware-f32',)}

# gfx950: each shape's list starts with the configs that no other config of a Triton 3.6.0
# sweep beats on every component of the critical path (global round trips, LDS waits,
# barriers, busiest-SIMD issue; config_table's notes give the figures), then options.
CANDIDATES = {
    'gfx950': {
        (4, 2880, 512): [
            _K512, {'block_m': 16, 'block_n': 128, 'block_k': 512},
            dict(_K512_WIDE, num_xcds=8), dict(_K512_WIDE, store_modifier='.wt'),
            dict(_K512, split_k=2, block_k=256, split_k_reduce='last_program'),
            {'block_m': 16, 'block_n': 64, 'block_k': 512},
        ],
        (16, 2112, 7168): [
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 64, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 32, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 7, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg', 'num_xcds': 8},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg', 'store_modifier': '.wt'},
        ],
        (32, 4096, 512): [
            _K512, {'block_m': 16, 'block_n': 128, 'block_k': 512},
            dict(_K512_WIDE, num_xcds=8), dict(_K512_WIDE, store_modifier='.wt'),
            dict(_K512, num_xcds=8), {'block_m': 32, 'block_n': 64, 'block_k': 512},
        ],
        (32, 2880, 512): [
            _K512, {'block_m': 16, 'block_n': 128, 'block_k': 512},
            dict(_K512_WIDE, num_xcds=8), dict(_K512_WIDE, store_modifier='.wt'),
            dict(_K512, num_xcds=8), {'block_m': 32, 'block_n': 64, 'block_k': 512},
        ],
        (64, 7168, 2048): [
            {'block_m': 32, 'block_n': 256, 'block_k': 1024, 'num_warps': 8, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 1024, 'cache_modifier': '.cg', 'num_xcds': 8},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 2, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg'},
            {'block_m': 64, 'block_n': 128, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_stages': 2, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg'},
        ],
        (256, 3072, 1536): [
            {'block_m': 32, 'block_n': 256, 'block_k': 512, 'num_warps': 8, 'cache_modifier': '.cg'},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'num_xcds': 8},
            {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'store_modifier': '.wt'},
            {'block_m': 16, 'block_n': 256, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg'},
            {'block_m': 32, 'block_n': 64, 'block_k': 512, 'cache_modifier': '.cg'},
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
