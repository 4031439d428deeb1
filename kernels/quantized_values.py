"""A's MXFP4 values in bf16 in one pass: out = dequantize(quantize(x)), bit for bit the bytes of
kernels.quantize's quantize_kernel followed by kernels.dequantize's dequantize_kernel, with no
codes or scales written between them.

Inputs:  x   bf16 [M, K] (strides stride_xm, stride_xk), K % 64 == 0
Output:  out bf16 [M, K] (row stride stride_out, unit column stride): each element the E2M1
         value of its code times its block's scale 2**(byte - 127) (exact in bf16:
         kernels.dequantize says why)

Grid (cdiv(M, BLOCK_M), K / BLOCK_K), BLOCK_K a power of two dividing K (at least 64). Rows
past M wrap onto valid rows and are not stored. The quantizer and FAST_PATH are
quantize_tile_mxfp4's; the values are the same whichever is taken.

Used where a GEMM takes A's quantized values as bf16 (launchers.prepared with A quantized once,
launchers.dequant): one launch where the codes and scales would take two.
"""

import triton
import triton.language as tl

from .dequantize import tile_bf16_bits
from .quantize import checked_quantizer, largest_power_of_two_dividing, quantize_tile_mxfp4

# 32 rows by 256 columns with 8 warps: no spill on sm_90 under Triton 3.6.0 (at 64 rows by 256
# with 4 warps, the dequantizing kernel alone spills about 1,000 registers a thread).
VALUES_BLOCK_M = 32
VALUES_MAX_BLOCK_K = 256
VALUES_WARPS = 8


@triton.jit
def quantized_values_kernel(x_ptr, out_ptr, M, K, stride_xm, stride_xk, stride_out,
                            BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                            QUANTIZER: tl.constexpr, FAST_PATH: tl.constexpr,
                            THREADS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + (rows % M)[:, None] * stride_xm + cols[None, :] * stride_xk)
    codes, scales = quantize_tile_mxfp4(x, BLOCK_M, BLOCK_K, QUANTIZER, FAST_PATH, THREADS)
    bits = tile_bf16_bits(codes, scales, BLOCK_M, BLOCK_K)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_out + cols[None, :],
             bits.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=(rows < M)[:, None])


def quantized_values_launch(x, out, quantizer: str, fast_path: bool, threads: int) -> tuple:
    """(grid, every argument of quantized_values_kernel in signature order) for x bf16 [M, K]
    (K % 64 == 0) into out bf16 [M, K]; threads: the program's (VALUES_WARPS warps)."""
    checked_quantizer(quantizer)
    rows, k = x.shape
    block_k = largest_power_of_two_dividing(k, VALUES_MAX_BLOCK_K)
    grid = (triton.cdiv(rows, VALUES_BLOCK_M), k // block_k, 1)
    return grid, (x, out, rows, k, x.stride(0), x.stride(1), out.stride(0), VALUES_BLOCK_M,
                  block_k, quantizer, fast_path, threads)
