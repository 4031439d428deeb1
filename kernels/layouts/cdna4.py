"""aiter's preshuffled MXFP4 weight layout for CDNA4 (gfx950), the one the op takes: B_shuffle,
the weight's E2M1 codes in aiter's shuffle_weight(x, layout=(16, 16)), and B_scale_sh, its E8M0
scales in aiter's e8m0_shuffle. The one home of their byte order (docs/formats.md draws both).

Host (torch, bit-exact with aiter):
  shuffle_weight / unshuffle_weight  codes uint8 [N, K/2] <-> B_shuffle uint8 [N, K/2]
  e8m0_shuffle / e8m0_unshuffle      scales uint8 [rows, K/32] <-> B_scale_sh uint8
                                     [pad(rows,256), pad(K/32,8)] (shuffled_scales_shape)
  weight_view / scales_view          B_shuffle / B_scale_sh -> the 2-D uint8 views the kernels
                                     read: [N/16, (K/2)*16] and [pad(N,256)/32, pad(K/32,8)*32]
Kernel (@triton.jit), a tile of BLOCK_N weight rows (tile index pid_n; BLOCK_N a multiple of 32)
by BLOCK_K elements of K (a power of two >= 256), in those views:
  weight_tile_rows, weight_tile_columns   its rows (past N wrapped) and columns in each view
  scale_columns         the logical scale column of each shuffled scale byte (masks ragged K)
  weight_tile_pointers  b_ptrs [BLOCK_N/16, (BLOCK_K/2)*16], bs_ptrs [BLOCK_N/32, BLOCK_K]
  load_weight_tile, load_scale_tile   a ragged last K tile masked (codes 0, scales 127: 1.0)
  next_k_tile           both pointer tiles moved on by BLOCK_K
  unshuffle_weight_tile, unshuffle_scale_tile   the loaded bytes -> W's codes
                        [BLOCK_N, BLOCK_K/2] and scales [BLOCK_N, BLOCK_K/32], row-major
"""

import torch
import triton
import triton.language as tl

# Tile sizes of aiter's shuffle_weight(layout=(16, 16)) for 1-byte elements.
WEIGHT_TILE_N = 16
WEIGHT_TILE_BYTES = 32
# e8m0_shuffle pads rows to 256 and scale columns to 8; the tile itself is 32 x 8.
SCALE_PAD_ROWS = 256
SCALE_PAD_COLS = 8
SCALE_TILE_ROWS = 32


def _check_weight_shape(n: int, kb: int):
    if n % WEIGHT_TILE_N or kb % WEIGHT_TILE_BYTES:
        raise ValueError(f"shuffle_weight needs N % {WEIGHT_TILE_N} == 0 and K/2 % "
                         f"{WEIGHT_TILE_BYTES} == 0 (K % 64 == 0), got N={n}, K/2={kb}")


def shuffle_weight(codes: torch.Tensor) -> torch.Tensor:
    """aiter shuffle_weight(x, layout=(16, 16)) for packed fp4 [N, K/2]; same shape and dtype.

    out_flat[n0*16*Kb + k0*512 + k1*256 + n1*16 + k2] = W[16*n0 + n1, 32*k0 + 16*k1 + k2].
    """
    n, kb = codes.shape
    _check_weight_shape(n, kb)
    u8 = codes.view(torch.uint8)
    out = (u8.view(n // 16, 16, kb // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous().view(n, kb))
    return out.view(codes.dtype)


def unshuffle_weight(shuffled: torch.Tensor) -> torch.Tensor:
    """Inverse of shuffle_weight."""
    n, kb = shuffled.shape
    _check_weight_shape(n, kb)
    u8 = shuffled.view(torch.uint8)
    out = u8.view(n // 16, kb // 32, 2, 16, 16).permute(0, 3, 1, 2, 4).contiguous().view(n, kb)
    return out.view(shuffled.dtype)


def shuffled_scales_shape(rows: int, cols: int) -> tuple:
    """e8m0_shuffle's output shape for scales [rows, cols]: rows padded to SCALE_PAD_ROWS, cols
    to SCALE_PAD_COLS."""
    return (triton.cdiv(rows, SCALE_PAD_ROWS) * SCALE_PAD_ROWS,
            triton.cdiv(cols, SCALE_PAD_COLS) * SCALE_PAD_COLS)


def e8m0_shuffle(scales: torch.Tensor, pad_value: int = 0) -> torch.Tensor:
    """aiter e8m0_shuffle: [rows, cols] -> [pad(rows,256), pad(cols,8)], same dtype.

    Row r = 32*r0 + 16*r1 + r2 and column c = 8*c0 + 4*c1 + c2 go to flat offset
    r0*32*sn + c0*256 + c2*64 + r2*4 + c1*2 + r1. aiter leaves the padding uninitialized;
    here it is `pad_value` (0xFF, a NaN scale, is the hardest choice for a consumer).
    """
    rows, cols = scales.shape
    sm, sn = shuffled_scales_shape(rows, cols)
    padded = torch.full((sm, sn), pad_value, dtype=torch.uint8, device=scales.device)
    padded[:rows, :cols] = scales.view(torch.uint8)
    out = padded.view(sm // 32, 2, 16, sn // 8, 2, 4).permute(0, 3, 5, 2, 4, 1).contiguous()
    return out.view(sm, sn).view(scales.dtype)


def e8m0_unshuffle(shuffled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of e8m0_shuffle, trimmed to the logical [rows, cols]."""
    sm, sn = shuffled.shape
    u8 = shuffled.view(torch.uint8).contiguous()
    out = u8.view(sm // 32, sn // 8, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2).contiguous()
    return out.view(sm, sn)[:rows, :cols].view(shuffled.dtype)


def weight_view(b_shuffle):
    """B_shuffle [N, K/2] (fp4x2 or uint8) -> the kernels' uint8 [N/16, (K/2)*16] view."""
    n, kb = b_shuffle.shape
    return b_shuffle.view(torch.uint8).view(n // WEIGHT_TILE_N, kb * WEIGHT_TILE_N)


def scales_view(b_scale_sh):
    """B_scale_sh [pad(N,256), pad(K/32,8)] -> the kernels' uint8 [rows/32, cols*32] view."""
    rows, cols = b_scale_sh.shape
    return b_scale_sh.view(torch.uint8).view(rows // SCALE_TILE_ROWS, cols * SCALE_TILE_ROWS)


@triton.jit
def weight_tile_rows(pid_n, N, BLOCK_N: tl.constexpr):
    """(rows of weight_view, rows of scales_view) that hold weight rows pid_n * BLOCK_N on;
    past N, wrapped onto valid rows."""
    rows_b = (pid_n * (BLOCK_N // 16) + tl.arange(0, BLOCK_N // 16)) % (N // 16)
    rows_bs = (pid_n * (BLOCK_N // 32) + tl.arange(0, BLOCK_N // 32)) % tl.cdiv(N, 32)
    return rows_b, rows_bs


@triton.jit
def weight_tile_columns(BLOCK_K: tl.constexpr):
    """(columns of weight_view, columns of scales_view) that hold a K tile, from its first."""
    return tl.arange(0, (BLOCK_K // 2) * 16), tl.arange(0, BLOCK_K)


@triton.jit
def scale_columns(cols, first):
    """first + the logical scale column, within its K tile, of the shuffled scale byte at each
    of `cols` (weight_tile_columns): 8*c0 + 4*c1 + c2, see e8m0_shuffle."""
    return first + 8 * (cols // 256) + 4 * ((cols // 2) % 2) + (cols // 64) % 4


@triton.jit
def weight_tile_pointers(b_ptr, b_scales_ptr, rows_b, rows_bs, cols_b, cols_bs, k_start,
                         stride_bn, stride_bsn):
    """(b_ptrs [BLOCK_N/16, (BLOCK_K/2)*16], bs_ptrs [BLOCK_N/32, BLOCK_K]): the codes and
    scales of the tile (weight_tile_rows, weight_tile_columns) at K element k_start."""
    b_ptrs = b_ptr + rows_b[:, None] * stride_bn + (k_start * 8 + cols_b)[None, :]
    bs_ptrs = b_scales_ptr + rows_bs[:, None] * stride_bsn + (k_start + cols_bs)[None, :]
    return b_ptrs, bs_ptrs


@triton.jit
def load_weight_tile(b_ptrs, k0, K, EVEN_K: tl.constexpr, CACHE_MODIFIER: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    """The K tile at k0 (weight_tile_pointers moved on to it); past K, with EVEN_K False, 0."""
    if EVEN_K:
        b = tl.load(b_ptrs, cache_modifier=CACHE_MODIFIER)
    else:
        cols = tl.arange(0, (BLOCK_K // 2) * 16)
        b = tl.load(b_ptrs, mask=(k0 * 8 + cols)[None, :] < K * 8, other=0,
                    cache_modifier=CACHE_MODIFIER)
    return b


@triton.jit
def load_scale_tile(bs_ptrs, groups, k0, K, EVEN_K: tl.constexpr, CACHE_MODIFIER: tl.constexpr):
    """The K tile at k0 (weight_tile_pointers moved on to it); with EVEN_K False, the bytes whose
    scale column (groups: scale_columns(cols_bs, 0)) is past K are 127, a scale of 1.0, so
    that padding cannot reach a sum."""
    if EVEN_K:
        bs = tl.load(bs_ptrs, cache_modifier=CACHE_MODIFIER)
    else:
        bs = tl.load(bs_ptrs, mask=(k0 // 32 + groups)[None, :] < K // 32, other=127,
                     cache_modifier=CACHE_MODIFIER)
    return bs


@triton.jit
def next_k_tile(b_ptrs, bs_ptrs, BLOCK_K: tl.constexpr):
    """(b_ptrs, bs_ptrs) moved on to the next K tile."""
    return b_ptrs + BLOCK_K * 8, bs_ptrs + BLOCK_K


@triton.jit
def unshuffle_weight_tile(b, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN/16, (BK/2)*16] shuffled bytes -> [BN, BK/2], W[n, kb] (shuffle_weight)."""
    b = b.reshape(BLOCK_N // 16, BLOCK_K // 64, 2, 16, 16).permute(0, 3, 1, 2, 4)
    return b.reshape(BLOCK_N, BLOCK_K // 2)


@triton.jit
def unshuffle_scale_tile(s, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN/32, BK] shuffled bytes -> [BN, BK/32] (e8m0_shuffle)."""
    s = s.reshape(BLOCK_N // 32, BLOCK_K // 256, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2)
    return s.reshape(BLOCK_N, BLOCK_K // 32)
