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
        (4, 2880, 512): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'aiter / rank-8 entry: split-K 14, one BK-512 tile per split, 238 WGs'},
        (32, 4096, 512): {'block_m': 32, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (32, 2880, 512): {'block_m': 32, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'aiter-like'},
        (64, 7168, 2048): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'aiter-like'},
        (256, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'aiter-like'},
    },
    'sm_90': {
        (8, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'note': 'copy of gfx950, untuned'},
        (16, 3072, 1536): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'note': 'copy of gfx950, untuned'},
        (64, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'note': 'copy of gfx950, untuned'},
        (256, 2880, 512): {'block_m': 32, 'block_n': 128, 'block_k': 512, 'note': 'copy of gfx950, untuned'},
        (4, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 9.18 µs, mean 9.21 µs over 30 runner-loop calls; best of 20 candidates'},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 29.57 µs, mean 29.79 µs over 30 runner-loop calls; best of 43 candidates'},
        (32, 4096, 512): {'block_m': 16, 'block_n': 64, 'block_k': 256, 'num_stages': 2, 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 10.48 µs, mean 10.55 µs over 30 runner-loop calls; best of 29 candidates'},
        (32, 2880, 512): {'block_m': 16, 'block_n': 64, 'block_k': 256, 'num_warps': 8, 'num_stages': 3, 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 9.95 µs, mean 9.98 µs over 30 runner-loop calls; best of 62 candidates'},
        (64, 7168, 2048): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 56.34 µs, mean 60.41 µs over 30 runner-loop calls; best of 29 candidates'},
        (256, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'note': 'tools.tune 2026-12-03 on NVIDIA H200: median 77.28 µs, mean 76.41 µs over 30 runner-loop calls; best of 15 candidates'},
    },
}
