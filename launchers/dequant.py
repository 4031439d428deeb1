"""The "dequant" path: C[M, N] = bf16(dequant(quantize(A)) @ dequant(B)^T), the product on the
vendor GEMM, for chips without FP4 MMA (NVIDIA before sm_100), where tl.dot_scaled is an
emulation and the fused GEMM is compute-bound on its upcasts at large M.

Per call: kernels.quantized_values writes A's MXFP4 values in bf16 [M, K] in one launch
(kernels.quantize's codes and scales, the same bits as the fused GEMM's, so bit-exact to the
reference's quantization, dequantized as kernels.dequantize does); then, chunk_n rows of B at
a time, kernels.dequantize's kernel turns the
preshuffled B_shuffle / B_scale_sh rows into bf16 [rows, K] and torch.matmul multiplies
(cuBLAS or hipBLASLt) into C's columns. Every dequantized value is exact in bf16
(kernels.dequantize says why), and a bf16 product is exact in fp32, so the GEMM computes the
reference's sums in another order.

fp32 accumulation: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction (True by
default) lets cuBLAS reduce split-K partials in bf16. The matmuls run with it False, set under
a lock and restored after, so every sum is accumulated in fp32 whatever the process chose.
The GEMM's sum order is cuBLAS's, fixed for a shape on one GPU and library, so calls give the
same bytes (the proof runs the first case PROOF_REPEATS more times and compares bytes).

fp32 output (out_dtype=torch.float32): the matmuls take A's and B's values in fp32 (converted
from bf16, exactly) into the fp32 C, unrounded. Each value has 8 significant bits, so it is
exact in TF32 too, and each product of two is exact in fp32: whatever TF32 setting the process
chose, the sums are of the reference's exact products in fp32, in the library's fp32 order,
which may not be its bf16 order (bf16 of the fp32 C need not be the bf16 C's bytes).

Transient memory per call, beside C: A in bf16 (2*M*K) and one chunk of B in bf16 (2*chunk_n*K,
chunk_n = chunk_rows(N, K): at most B_CHUNK_BYTES, however large N is); for an fp32 C, A and the chunk in fp32 as well (three
times those).

`dequant_launch_specs(config, backend, m, n, k, a_strides, device, quantizer, chunk_n)` lists
the Triton launches of a call (tools can compile them); `DequantLauncher` binds them.
"""

import threading

import torch

from ..kernels import formats
from ..kernels.dequantize import dequantize_kernel, dequantize_launch
from ..kernels.layouts.cdna4 import scales_view, weight_view
from ..kernels.quantize import checked_quantizer
from .bypass import aligned, backend_options
from .gemm import LaunchSpec, bound_launch, quantized_values_spec
from .gemm_config import GemmConfig
from .launcher import Launcher

# B in bf16 is 2*N*K bytes; a chunk of B's rows holds at most this many (128 MiB: N = 8,192
# rows at K = 8,192 in one chunk), so the transient buffer stays bounded for any N.
B_CHUNK_BYTES = 128 << 20
CHUNK_ROW_MULTIPLE = formats.SCALE_TILE_ROWS   # a chunk starts on a row of shuffled scale tiles
# Repeated calls of the first proof case, each compared byte for byte with the first.
PROOF_REPEATS = 2
DEQUANTIZE_TENSOR_ARGS = 3   # dequantize_launch puts (codes, scales, out) first
_reduced_precision_flag = threading.Lock()


def chunk_rows(n: int, k: int, chunk_bytes: int = B_CHUNK_BYTES) -> int:
    """B rows dequantized at a time: as many as chunk_bytes of bf16 hold, a multiple of
    CHUNK_ROW_MULTIPLE (at least one), at most N."""
    rows = chunk_bytes // (2 * k) // CHUNK_ROW_MULTIPLE * CHUNK_ROW_MULTIPLE
    return min(n, max(CHUNK_ROW_MULTIPLE, rows))


def _checked_chunk(n: int, k: int, chunk_n) -> int:
    if chunk_n is None:
        return chunk_rows(n, k)
    if chunk_n <= 0 or chunk_n % CHUNK_ROW_MULTIPLE:
        raise ValueError(f"chunk_n={chunk_n} must be a positive multiple of {CHUNK_ROW_MULTIPLE}")
    return min(n, chunk_n)


def _options(backend: str, num_warps: int) -> dict:
    return backend_options(backend, num_warps=num_warps, num_stages=1, waves_per_eu=0,
                           matrix_instr_nonkdim=0)


def dequant_launch_specs(config: GemmConfig, backend: str, m: int, n: int, k: int,
                         a_strides: tuple, device, quantizer: str = "software",
                         chunk_n: int = None) -> list:
    """The Triton launches of one call: "quantize_a" (A's MXFP4 values in bf16),
    "dequantize_b" (a chunk of chunk_n rows of B) and, where N is not a multiple of it,
    "dequantize_b_last"."""
    checked_quantizer(quantizer)
    chunk = _checked_chunk(n, k, chunk_n)
    a_values = torch.empty((m, k), dtype=torch.bfloat16, device=device)
    specs = [quantized_values_spec(backend, m, k, a_strides, device, quantizer, a_values)]
    b_codes = weight_view(torch.empty((n, k // 2), dtype=torch.uint8, device=device))
    b_scales = scales_view(torch.empty(formats.scales_padded_shape(n, k), dtype=torch.uint8,
                                       device=device))
    rows_of_chunks = {"dequantize_b": chunk}
    if n % chunk:
        rows_of_chunks["dequantize_b_last"] = n % chunk
    for name, rows in rows_of_chunks.items():
        b_values = torch.empty((rows, k), dtype=torch.bfloat16, device=device)
        grid, arguments = dequantize_launch(b_codes, b_scales, b_values, True, config.block_n,
                                            config.block_k)
        specs.append(LaunchSpec(name, dequantize_kernel, grid,
                                _options(backend, config.num_warps), arguments,
                                DEQUANTIZE_TENSOR_ARGS))
    return specs


class DequantLauncher(Launcher):
    """The "dequant" path's launcher (launchers.launcher). Call with (A bf16 [M, K] any
    strides, B_shuffle, B_scale_sh[, direct]); returns a new [M, N] of out_dtype (bf16 or
    float32). chunk_n: B rows dequantized at a time (default chunk_rows(N, K)), a multiple of
    CHUNK_ROW_MULTIPLE."""

    proof_repeats = PROOF_REPEATS

    def __init__(self, config: GemmConfig, backend: str, m: int, n: int, k: int,
                 a_strides: tuple, device, quantizer: str = "software",
                 allow_direct: bool = True, chunk_n: int = None,
                 out_dtype: torch.dtype = torch.bfloat16):
        self.config, self.quantizer, self.out_dtype = config, quantizer, out_dtype
        self.m, self.n, self.k, self.device = m, n, k, device
        self.chunk_n = _checked_chunk(n, k, chunk_n)
        specs = dequant_launch_specs(config, backend, m, n, k, a_strides, device, quantizer,
                                     chunk_n)
        bound = {spec.name: bound_launch(spec, allow_direct) for spec in specs}
        self.launches = {name: launch for name, (launch, _) in bound.items()}
        self.constants = {name: constants for name, (_, constants) in bound.items()}
        self.launches_per_call = 1 + 2 * formats.cdiv(n, self.chunk_n)

    def kernel_launches(self) -> dict:
        return self.launches

    def _launch(self, name: str, tensors: tuple, direct: bool) -> None:
        launch = self.launches[name]
        arguments = tensors + self.constants[name]
        (launch if direct and aligned(*tensors) else launch.standard)(*arguments)

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        m, n, k, chunk = self.m, self.n, self.k, self.chunk_n
        a_values = torch.empty((m, k), dtype=torch.bfloat16, device=self.device)
        self._launch("quantize_a", (a, a_values), direct)
        b_codes, b_scales = weight_view(b_shuffle), scales_view(b_scale_sh)
        b_values = torch.empty((chunk, k), dtype=torch.bfloat16, device=self.device)
        out = torch.empty((m, n), dtype=self.out_dtype, device=self.device)
        widen = self.out_dtype == torch.float32     # the matmul's operands in fp32 too
        if widen:
            a_values = a_values.float()
        with _reduced_precision_flag:
            saved = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            try:
                for start in range(0, n, chunk):
                    rows = min(chunk, n - start)
                    values = b_values[:rows]
                    self._launch("dequantize_b" if rows == chunk else "dequantize_b_last",
                                 (b_codes[start // formats.WEIGHT_TILE_N:],
                                  b_scales[start // formats.SCALE_TILE_ROWS:], values), direct)
                    torch.matmul(a_values, (values.float() if widen else values).t(),
                                 out=out[:, start:start + rows])
            finally:
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved
        return out
