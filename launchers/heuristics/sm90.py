"""sm_90's rules (launchers.heuristics): the config of a shape no table or file names, on
sm_90 and on any NVIDIA chip without a record of its own: the hopper path up to
Target.hopper_max_m (where hopper_config's tiles end), the preshuffle GEMM above; from
Target.vendor_gemm_from_m on, launchers.configs serves the dequant path before these rules."""

import triton

from ...kernels import formats
from ..gemm_config import GemmConfig
from ..targets import SM90

K_TILES_PER_SPLIT = 4      # about as many K tiles a split as the tuned sm_90 configs
# Split K (powers of two) while the grid stays within this many programs: about three per SM
# of an H100 or H200 (132 SMs), where the decode shapes measured fastest.
HOPPER_MAX_PROGRAMS = 400


def hopper_config(m: int, n: int, k: int) -> GemmConfig:
    """The sm_90 rule of the hopper path (kernels.hopper_gemm) for M up to 64, from the
    measurements in docs/results.md: up to 64 rows of A a tile, the tile transposed (N fills
    the MMA's 64 rows), BLOCK_K 256, three stages at BLOCK_M 16 (one above: two spilled), and
    K split, summed by the last program, while the grid stays within HOPPER_MAX_PROGRAMS."""
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    block_n = 128 if block_m == 64 else 64
    tiles = formats.cdiv(m, block_m) * formats.cdiv(n, block_n)
    k_tiles = formats.cdiv(k, 256)
    split_k = 1
    while 2 * split_k <= k_tiles and 2 * split_k * tiles <= HOPPER_MAX_PROGRAMS:
        split_k *= 2
    return GemmConfig(block_m, block_n, 256, split_k=split_k, split_k_reduce="last_program",
                      num_warps=8 if block_m == 64 else 4, num_stages=3 if block_m == 16 else 1,
                      swap_ab=True, path="hopper")


def sm90_heuristic(m: int, n: int, k: int) -> GemmConfig:
    """sm_90 (and NVIDIA): the hopper path up to M = SM90.hopper_max_m, else sm90_preshuffle."""
    if m <= SM90.hopper_max_m:
        return hopper_config(m, n, k)
    return sm90_preshuffle(m, n, k)


def sm90_preshuffle(m: int, n: int, k: int) -> GemmConfig:
    """The preshuffle GEMM on sm_90: BLOCK_K 256 and tiles that compile without spilling under Triton
    3.6.0 (255 registers a thread; tools.tune's sm_90 winners, or their nearest neighbour
    that does not spill): 16x64 with 4 warps up to M = 16, 32x64 with 8 warps up to 32,
    64x64 with 8 warps below SM90.quantize_once_from_m, then A quantized once and 128x64 tiles.
    Split-K, summed by the last program, gives each split about K_TILES_PER_SPLIT K
    tiles, as the tuned configs do, while the fp32 partials (8 bytes an element of C, written
    and read) stay under the weight's bytes (half a byte an element): splits <= K / (16 M)."""
    if m >= SM90.quantize_once_from_m:
        return GemmConfig(128, 64, 256, num_warps=8, num_stages=3, quantize_a_once=True)
    if m <= 16:
        block_m, block_n, warps, stages = 16, 64, 4, 1
    elif m <= 32:
        block_m, block_n, warps, stages = 32, 64, 8, 2
    else:
        block_m, block_n, warps, stages = 64, 64, 8, 2
    k_tiles = formats.cdiv(k, 256)
    split_k = max(1, min(formats.cdiv(k_tiles, K_TILES_PER_SPLIT), 16, k // (16 * m)))
    return GemmConfig(block_m, block_n, 256, split_k=split_k,
                      split_k_reduce="last_program" if split_k > 1 else "kernel",
                      num_warps=warps, num_stages=stages, cache_modifier=".cg")
