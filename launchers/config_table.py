"""Kernel configs per arch and shape, as data: {arch: {(M, N, K): {GemmConfig field: value}}}.

launchers.configs turns each entry into a GemmConfig (fields left out take its defaults);
"note" says where the entry comes from. `python -m tools.tune --write` rewrites the entries of
the arch it runs on and keeps the others.
"""

CONFIG_TABLE = {
    'gfx950': {
        (8, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'test shape; aiter / rank-8 entry: split-K 14, one BK-512 tile per split, 238 WGs; Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 148/164 VGPRs (hardware/software quantizer), occupancy 1 (waves_per_eu 1), no scratch or spill'},
        (16, 3072, 1536): {'block_m': 16, 'block_n': 64, 'block_k': 512, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 169/185 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill, 48 WGs'},
        (64, 3072, 1536): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 151/158 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill, 96 WGs'},
        (256, 2880, 512): {'block_m': 32, 'block_n': 128, 'block_k': 512, 'waves_per_eu': 2, 'note': 'test shape, aiter-like; Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 168/184 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill, 184 WGs'},
        (4, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': "Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): the most WGs one launch can have with one K tile (90; BN 32 is the smallest tile); 137/153 VGPRs (hardware/software quantizer), occupancy 2 (90 WGs need 1), no scratch or spill; the 4 waves repeat each other's MFMAs (replication 4) but share the quantizer: 1338 instructions per wave, against 2371 with 2 warps (167 VGPRs); 1 warp spills and loses the scaled MFMA; split-K 2 would give 180 WGs but a second launch"},
        (16, 2112, 7168): {'block_m': 16, 'block_n': 128, 'block_k': 512, 'split_k': 14, 'cache_modifier': '.cg', 'waves_per_eu': 1, 'note': 'aiter tuned M<=16 config and the rank-8 entry: split-K 14, one BK-512 tile per split; Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 238 WGs (0.93 of 256 CUs; 17 without split-K), 148/164 VGPRs (hardware/software quantizer), occupancy 1 (waves_per_eu 1; one WG per CU needs no more), no scratch or spill'},
        (32, 4096, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': 'Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 256 WGs, one per CU, in one launch with one K tile; 137/153 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill; 2 warps: 167 VGPRs and 1.8x the instructions per wave (aiter M<=32 32x64x512 gives 64 WGs)'},
        (32, 2880, 512): {'block_m': 16, 'block_n': 32, 'block_k': 512, 'waves_per_eu': 2, 'note': 'Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 180 WGs (0.70 of the CUs), the most one launch can have with one K tile; 137/153 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill'},
        (64, 7168, 2048): {'block_m': 16, 'block_n': 128, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'BM/BN of aiter N=7168-K=2048 M<=64 (S=1); Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 224 WGs (0.875), 151/158 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill; BK 512 takes 222/234 VGPRs for the same instructions per K element; split-K would pass the CUs'},
        (256, 3072, 1536): {'block_m': 16, 'block_n': 256, 'block_k': 256, 'num_stages': 2, 'cache_modifier': '.cg', 'waves_per_eu': 2, 'note': 'Triton 3.6.0, kernels/quantize.py c442d44 (tools.isa): 192 WGs, one per CU (0.75), where 16x128 gives 384 (1.5: half the CUs run two); each A tile is quantized once per 256 columns instead of 128 (half the quantizer work in all) for 623 instructions per wave per K tile against 595; 196/203 VGPRs (hardware/software quantizer), occupancy 2, no scratch or spill'},
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
