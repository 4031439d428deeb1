"""gfx950's rules (launchers.heuristics): the config of a shape no table or file names, on
gfx950, on any AMD chip without a record of its own, and in the interpreter."""

import triton

from ...kernels import formats
from ..gemm_config import GemmConfig
from ..targets import GFX950

# Split K while the grid is under half of this many workgroups, up to about this many.
TARGET_WORKGROUPS = 128


def gfx950_heuristic(m: int, n: int, k: int) -> GemmConfig:
    """gfx950 (and AMD): small M tiles, wide N tiles, split-K when the grid is small, BLOCK_K
    256 for 64-row tiles (512 spills there under the fused quantizer); from
    GFX950.quantize_once_from_m on, A quantized once and large tiles."""
    block_k = 512 if k % 512 == 0 else 256
    if m >= GFX950.quantize_once_from_m:
        # The tiles the gfx950 sweep of public model shapes chose most (docs/results.md).
        wide = n >= 256
        if m >= 4096:
            block_m, block_n, block_k, warps = 256, 256 if wide else 128, 256, 8
        elif wide and k % 512 == 0:
            block_m, block_n, block_k, warps = 128, 256, 512, 8
        else:
            block_m, block_n, block_k, warps = 128, 128, 256, 4
        return GemmConfig(block_m, block_n, block_k, num_warps=warps,
                          num_stages=2 if k > block_k else 1, quantize_a_once=True)
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    block_n = 128 if n >= 2048 else 64
    if block_m == 64:
        block_k = 256
    tiles = formats.cdiv(m, block_m) * formats.cdiv(n, block_n)
    k_tiles = formats.cdiv(k, block_k)
    split_k = 1
    if tiles < TARGET_WORKGROUPS // 2 and k_tiles >= 4:
        split_k = min(k_tiles, formats.cdiv(TARGET_WORKGROUPS, tiles), 16)
    return GemmConfig(block_m, block_n, block_k, split_k=split_k,
                      num_stages=1 if k_tiles // split_k <= 1 else 2)
