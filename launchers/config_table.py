"""Kernel configs per arch and shape, as data: {arch: {(M, N, K): {GemmConfig field: value}}}.

launchers.configs turns each entry into a GemmConfig (fields left out take its defaults);
"note" says where the entry comes from. `python -m tools.tune --write` rewrites the entries of
the arch it runs on and keeps the others.
"""

CONFIG_TABLE = {
    'gfx950': {
        (8, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'test shape (not timed by the runner); aiter / rank-8 entry: split-K 14, one BK-512 tile per split, 238 WGs, the sum in a second launch. The in-kernel sum would prove itself 33 times over, which through the interpreter (it uses this table) takes minutes'},
        (16, 3072, 1536): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; its registers: docs/design.md (python -m tools.isa --arch gfx950)'},
        (64, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; its registers: docs/design.md (python -m tools.isa --arch gfx950)'},
        (256, 2880, 512): {'block_m': 32, 'block_n': 128, 'block_k': 512, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; its registers: docs/design.md (python -m tools.isa --arch gfx950)'},
        (4, 2880, 512): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; a program quantizes only the 4 rows of A (kernels.preshuffle_gemm.a_rows); the issue and round-trip members prefer 16x32x512 (an import-time candidate)'},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'split_k_reduce': 'last_program', 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; every member prefers a single-launch split-K'},
        (32, 4096, 512): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; the issue and round-trip members prefer 16x32x512: an import-time candidate'},
        (32, 2880, 512): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'cache_modifier': '.cg', 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; the issue and round-trip members prefer 16x32x512: an import-time candidate'},
        (64, 7168, 2048): {'block_m': 16, 'block_n': 128, 'block_k': 1024, 'num_stages': 2, 'cache_modifier': '.cg', 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; no split: the split-K hand-over costs three serialized round trips, which the round-trip member prices; the issue member prefers the single-launch split-K 16x256x512 (an import-time candidate)'},
        (256, 3072, 1536): {'block_m': 16, 'block_n': 256, 'block_k': 512, 'num_stages': 3, 'cache_modifier': '.cg', 'note': 'the minimax of the config space (python -m tools.isa --sweep: Triton 3.6.0, hardware quantizer, ranked by the worst member of the tools.gfx950.model family, ties by the next worst); its figures: python -m tools.isa --arch gfx950; the best of every member'},
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
