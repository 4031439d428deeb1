"""What decides a gfx950 GEMM at large M: the MFMA clocks on the busiest SIMD, the quantizer's
work over all N tiles, and the MFMA bound of the product on an MI355X.

- MFMA clocks: each scaled MFMA occupies its SIMD's matrix pipe for PASSES[mnemonic] passes
  of CLOCKS_PER_PASS clocks. The passes are LLVM's gfx950 scheduling model's (SISchedule.td,
  as llvm-mca shows them in llvm/test/tools/llvm-mca/AMDGPU/gfx950.s: 4 for
  v_mfma_scale_f32_16x16x128_f8f6f4, 8 for v_mfma_scale_f32_32x32x64_f8f6f4, whatever the
  operand formats; that test's FIXME says the count should depend on whether an operand is
  fp8, i.e. FP4 operands take no longer than these). 4 passes of 4 clocks for the 16x16x128
  form are 2*16*16*128 / 16 = 4,096 FLOPs per clock per SIMD: x 4 SIMDs x 256 CUs x 2.4 GHz
  = 10.07 PFLOPS, AMD's published dense MXFP4 peak of the MI355X (10.1 PFLOPS), so the pass
  count and the chip's rate agree. `wave_mfma_clocks(amdgcn, k_tiles)` counts them on one
  wave's path (the K loop run for the program's K tiles, as tools.gfx950.critical_path walks
  it); `busiest_simd_mfma_clocks` multiplies by the waves the busiest SIMD runs.
- Quantizer work: the fused GEMM quantizes the rows of its M tile once per N tile (and per
  K split only its K range), so A is quantized cdiv(N, BLOCK_N) times over; quantized once,
  it is quantized once. `quantizer_wave_instructions` counts the wave instructions that takes
  from the quantizer's instructions per A element per lane (tools.gfx950.report's
  "fast_path_instructions_per_element"), and `per_simd` spreads them over the chip's SIMDs.
- The MFMA bound: `mfma_bound_us(m, n, k)` = 2*M*N*K / MXFP4_DENSE_TFLOPS.

Functions take the compiled kernel's assembly or figures read off it, so that any model of
time can use them.
"""

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import QUANTIZE_BLOCK_M
from .assembly import k_loop, parse
from .critical_path import CUS, SIMDS_PER_CU, busiest_simd_waves

PASSES = {"v_mfma_scale_f32_16x16x128_f8f6f4": 4, "v_mfma_scale_f32_32x32x64_f8f6f4": 8}
CLOCKS_PER_PASS = 4
ENGINE_CLOCK_GHZ = 2.4          # the MI355X's peak engine clock (AMD's specifications)
MXFP4_DENSE_TFLOPS = 10_100     # the MI355X's peak dense MXFP4 rate (AMD's specifications)
WAVE = 64
SIMDS = CUS * SIMDS_PER_CU


def _clocks(instructions) -> int:
    return sum(PASSES.get(i.mnemonic, 0) * CLOCKS_PER_PASS for i in instructions)


def wave_mfma_clocks(amdgcn: str, k_tiles: int) -> int:
    """Matrix-pipe clocks of the scaled MFMAs on one wave's path through a kernel whose
    program runs `k_tiles` K tiles: the K loop's MFMAs for the tiles the loop runs, plus those
    outside it (software pipelining peels whole tiles out of the loop)."""
    program = parse(amdgcn)
    loop = k_loop(program)
    if loop is None:    # straight-line code: its MFMAs are every K tile's
        return _clocks(program.instructions)
    body = _clocks(program.instructions[loop[0]:loop[1] + 1])
    outside = _clocks(program.instructions) - body
    peeled, rest = divmod(outside, body)
    if rest or peeled > k_tiles:
        raise ValueError(f"{outside} MFMA clocks outside the K loop of {body} per tile do not "
                         f"leave a whole number of its passes out of {k_tiles} K tiles")
    return body * (k_tiles - peeled) + outside


def busiest_simd_mfma_clocks(amdgcn: str, k_tiles: int, workgroups: int, num_warps: int,
                             occupancy: int) -> int:
    """wave_mfma_clocks times the waves the busiest SIMD runs (critical_path's deal)."""
    return wave_mfma_clocks(amdgcn, k_tiles) * busiest_simd_waves(workgroups, num_warps, occupancy)


def clocks_us(clocks: int) -> float:
    return clocks / (ENGINE_CLOCK_GHZ * 1e3)


def quantized_elements(m: int, n: int, k: int, block_m: int, block_n: int,
                       quantize_once: bool) -> int:
    """A elements the call quantizes: once (rows padded to the quantize kernel's tile), or
    fused, every M tile's rows once per N tile."""
    if quantize_once:
        return formats.pad_to(m, QUANTIZE_BLOCK_M) * k
    return formats.pad_to(m, block_m) * k * formats.cdiv(n, block_n)


def quantizer_wave_instructions(elements: int, per_element: float) -> float:
    """Wave instructions quantizing `elements` takes at `per_element` instructions per A
    element per lane (a wave's instruction covers 64 lanes)."""
    return elements * per_element / WAVE


def per_simd(wave_instructions: float) -> float:
    """Wave instructions per SIMD when spread evenly over the chip."""
    return wave_instructions / SIMDS


def mfma_bound_us(m: int, n: int, k: int) -> float:
    """2*M*N*K at the MI355X's dense MXFP4 rate."""
    return 2 * m * n * k / (MXFP4_DENSE_TFLOPS * 1e6)
