"""Kernel configs per arch and shape, as data: {arch: {(M, N, K): {GemmConfig field: value}}}.

launchers.configs turns each entry into a GemmConfig (fields left out take its defaults);
"note" says where the entry comes from. `python -m tools.tune --write` rewrites the entries of
the arch it runs on and keeps the others.
"""

CONFIG_TABLE = {
    'gfx950': {
        (8, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'aiter / rank-8 entry: split-K 14, one BK-512 tile per split, 238 WGs'},
        (16, 3072, 1536): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (64, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (256, 2880, 512): {'block_m': 32, 'block_n': 128, 'block_k': 512, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (4, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': 'tools.isa sweep: the most workgroups one launch can have (90; BN 32 is the smallest tile) with one K tile, 105 VGPRs (4 waves/SIMD), no scratch; split-K 2 would give 180 WGs but a second launch for a single-tile K loop'},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'aiter tuned M<=16 config and the rank-8 entry: split-K 14, one BK-512 tile per split; tools.isa: 238 WGs (0.93 of 256 CUs; without split-K only 17), 104 VGPRs, no scratch'},
        (32, 4096, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': 'tools.isa sweep: 256 WGs, one per CU, in one launch with one K tile; 105 VGPRs (4 waves/SIMD), no scratch (aiter M<=32 32x64x512 gives 64 WGs)'},
        (32, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': 'tools.isa sweep: 180 WGs (0.70 of the CUs), the most one launch can have with one K tile; 105 VGPRs, no scratch'},
        (64, 7168, 2048): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'BM/BN of aiter N=7168-K=2048 M<=64 (S=1); tools.isa: 224 WGs (0.875), 130 VGPRs (3 waves/SIMD), no scratch; BK 512 took about twice the VGPRs in the sweep (2 waves/SIMD)'},
        (256, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'tools.isa: 384 WGs (1.5 of the CUs), 130 VGPRs (3 waves/SIMD), no scratch or spill with either quantizer; 32x64x256 (B read from L2 8 times instead of 16) spills a VGPR with the software quantizer and drops to 2 waves/SIMD'},
    },
    'sm_90': {
        (8, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'note': 'copy of gfx950, untuned'},
        (16, 3072, 1536): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'note': 'copy of gfx950, untuned'},
        (64, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'note': 'copy of gfx950, untuned'},
        (256, 2880, 512): {'block_m': 32, 'block_n': 128, 'block_k': 512, 'note': 'copy of gfx950, untuned'},
        (4, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'num_warps': 8, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 8.64 µs, mean 8.69 µs over 30 runner-loop calls; best of 18 candidates'},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'split_k': 7, 'split_k_reduce': 'last_program', 'num_warps': 8, 'num_stages': 3, 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 21.70 µs, mean 21.73 µs over 30 runner-loop calls; best of 61 candidates'},
        (32, 4096, 512): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 8, 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 9.68 µs, mean 9.75 µs over 30 runner-loop calls; best of 31 candidates'},
        (32, 2880, 512): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'num_warps': 8, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 9.50 µs, mean 9.56 µs over 30 runner-loop calls; best of 50 candidates'},
        (64, 7168, 2048): {'block_m': 64, 'block_n': 128, 'block_k': 256, 'split_k': 2, 'split_k_reduce': 'last_program', 'num_warps': 8, 'num_stages': 3, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 33.31 µs, mean 33.36 µs over 30 runner-loop calls; best of 132 candidates'},
        (256, 3072, 1536): {'block_m': 64, 'block_n': 128, 'block_k': 256, 'num_warps': 8, 'num_stages': 3, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 40.61 µs, mean 40.62 µs over 30 runner-loop calls; best of 83 candidates'},
    },
}
