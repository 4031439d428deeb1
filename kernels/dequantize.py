"""MXFP4 to bf16: C[r, k] = E2M1(code[r, k]) * 2**(scale[r, k // 32] - 127), bit for bit.

Inputs, in one of two layouts (PRESHUFFLED):
  plain        codes  uint8 [ROWS, K/2]   two E2M1 codes a byte, element 2i in the low nibble
                                          (row stride stride_codes, unit column stride), as
                                          kernels.quantize.quantize_kernel writes A's
               scales uint8 [ROWS, >= K/32]  E8M0 (row stride stride_scales)
  preshuffled  codes  uint8 [ROWS/16, (K/2)*16]       shuffle_weight(B_q, (16, 16)) viewed 2-D
                                                      (kernels.layouts.cdna4.weight_view)
               scales uint8 [>= cdiv(ROWS,32), pad(K/32,8)*32]  e8m0_shuffle(B_scale) viewed 2-D
                                                      (kernels.layouts.cdna4.scales_view)
Output: out bf16 [ROWS, K] (row stride stride_out, unit column stride).

Grid (cdiv(ROWS, BLOCK_ROWS), cdiv(K, BLOCK_K)). A program loads BLOCK_ROWS rows and BLOCK_K
columns; preshuffled, it finds and unshuffles the bytes with the GEMMs' tile functions
(kernels.layouts.cdna4: BLOCK_ROWS a multiple of 32, BLOCK_K a power of two >= 256). Rows past
ROWS wrap onto valid rows and are not stored; a ragged last K tile (K % 64 == 0 only) is
masked. ROWS % 16 == 0 when PRESHUFFLED.

Why bf16 holds every value exactly: an E2M1 value has at most two significant bits, 0.5 to
6, and the scale is 2**e with e in [-127, 127] (byte 255 is NaN). So the product's lowest bit
is at least 2**-128, above bf16's smallest denormal (2**-133), and bf16 has fp32's exponent
range: every product is a bf16 value, or past bf16's (and fp32's) largest and so inf in both
(2 * 2**127 and up). The bits are built with integer arithmetic, so no multiply and no
conversion can flush a denormal on any backend. formats.dequantize_mxfp4 (fp32) converted to
bf16 gives the same bytes; a NaN scale gives the quiet NaN 0x7FC0 (the reference's NaN has
another payload).
"""

import torch
import triton
import triton.language as tl

from . import formats
from .layouts.cdna4 import (scale_columns, scales_view, unshuffle_scale_tile,
                            unshuffle_weight_tile, weight_tile_rows, weight_view)

BF16_INF_BITS = tl.constexpr(0x7F80)
BF16_NAN_BITS = tl.constexpr(0x7FC0)
E8M0_NAN = tl.constexpr(255)


@triton.jit
def mxfp4_bf16_bits(code, scale):
    """E2M1 codes (int32, 0..15) and their E8M0 scale bytes (int32, shapes that broadcast) ->
    the bf16 bits of E2M1(code) * 2**(scale - 127), int32."""
    magnitude = code & 7
    e2m1_exponent = magnitude >> 1
    # E2M1 value = 1.m * 2**(exponent - 1), the denormal code 1 being 1.0 * 2**-1.
    mantissa = tl.where(e2m1_exponent == 0, 0, magnitude & 1)
    biased = scale + tl.where(e2m1_exponent == 0, -1, e2m1_exponent - 1)   # bf16 exponent field
    normal = (biased << 7) | (mantissa << 6)
    # biased in {-1, 0}: the bf16 denormal 1.m * 2**(biased - 127) = (2 + m) << (biased + 5) ulps
    denormal = (2 + mantissa) << tl.minimum(biased + 5, 5)
    bits = tl.where(biased >= 255, BF16_INF_BITS, tl.where(biased >= 1, normal, denormal))
    bits = tl.where(magnitude == 0, 0, bits) | ((code & 8) << 12)
    return tl.where(scale == E8M0_NAN, BF16_NAN_BITS, bits)


@triton.jit
def tile_bf16_bits(codes, scales, BLOCK_ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """codes uint8 [R, BK/2], scales uint8 [R, BK/32] -> the products' bf16 bits, int32 [R, BK]."""
    low = (codes & 0xF).to(tl.int32)
    high = (codes >> 4).to(tl.int32)
    code = tl.join(low, high).reshape(BLOCK_ROWS, BLOCK_K // 32, 32)
    scale = scales.to(tl.int32).reshape(BLOCK_ROWS, BLOCK_K // 32, 1)
    return mxfp4_bf16_bits(code, scale).reshape(BLOCK_ROWS, BLOCK_K)


@triton.jit
def dequantize_kernel(codes_ptr, scales_ptr, out_ptr, ROWS, K,
                      stride_codes, stride_scales, stride_out,
                      BLOCK_ROWS: tl.constexpr, BLOCK_K: tl.constexpr,
                      PRESHUFFLED: tl.constexpr):
    pid_rows = tl.program_id(0)
    k0 = tl.program_id(1) * BLOCK_K
    if PRESHUFFLED:
        rows_c, rows_s = weight_tile_rows(pid_rows, ROWS, BLOCK_ROWS)
        cols_c = k0 * 8 + tl.arange(0, (BLOCK_K // 2) * 16)
        cols_s = tl.arange(0, BLOCK_K)
        groups = scale_columns(cols_s, k0 // 32)
        codes = tl.load(codes_ptr + rows_c[:, None] * stride_codes + cols_c[None, :],
                        mask=cols_c[None, :] < K * 8, other=0)
        scales = tl.load(scales_ptr + rows_s[:, None] * stride_scales + (k0 + cols_s)[None, :],
                         mask=groups[None, :] < K // 32, other=127)
        codes = unshuffle_weight_tile(codes, BLOCK_ROWS, BLOCK_K)
        scales = unshuffle_scale_tile(scales, BLOCK_ROWS, BLOCK_K)
    else:
        rows = (pid_rows * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)) % ROWS
        cols_c = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        cols_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        codes = tl.load(codes_ptr + rows[:, None] * stride_codes + cols_c[None, :],
                        mask=cols_c[None, :] < K // 2, other=0)
        scales = tl.load(scales_ptr + rows[:, None] * stride_scales + cols_s[None, :],
                         mask=cols_s[None, :] < K // 32, other=127)
    bits = tile_bf16_bits(codes, scales, BLOCK_ROWS, BLOCK_K)
    out_rows = pid_rows * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    out_cols = k0 + tl.arange(0, BLOCK_K)
    tl.store(out_ptr + out_rows[:, None].to(tl.int64) * stride_out + out_cols[None, :],
             bits.to(tl.uint16).to(tl.bfloat16, bitcast=True),
             mask=(out_rows[:, None] < ROWS) & (out_cols[None, :] < K))


def dequantize_launch(codes, scales, out, preshuffled: bool, block_rows: int = 64,
                      block_k: int = 256) -> tuple:
    """(grid, every argument of dequantize_kernel in signature order) for out bf16 [ROWS, K];
    codes and scales in the kernel's layout (preshuffled: weight_view and scales_view)."""
    rows, k = out.shape
    grid = (formats.cdiv(rows, block_rows), formats.cdiv(k, block_k), 1)
    return grid, (codes, scales, out, rows, k, codes.stride(0), scales.stride(0), out.stride(0),
                  block_rows, block_k, preshuffled)


def dequantize_to_bf16(codes, scales, k: int, preshuffled: bool = False, block_rows: int = 64,
                       block_k: int = 256):
    """A new bf16 [rows, K] = formats.dequantize_mxfp4(codes, scales) in bf16 (one standard
    launch). Plain: codes uint8 [rows, K/2], scales [rows, >= K/32]; preshuffled: B_shuffle
    [N, K/2] and B_scale_sh [pad(N,256), pad(K/32,8)] as the op takes them (fp4x2/e8m0 or
    uint8)."""
    rows = codes.shape[0]
    out = torch.empty((rows, k), dtype=torch.bfloat16, device=codes.device)
    if preshuffled:
        codes, scales = weight_view(codes), scales_view(scales)
    grid, arguments = dequantize_launch(codes.view(torch.uint8), scales.view(torch.uint8), out,
                                        preshuffled, block_rows, block_k)
    dequantize_kernel[grid](*arguments)
    return out
