"""In-register MXFP4 quantization of a tile, bit-exact with kernels.formats.quantize_mxfp4.

`quantize_tile_mxfp4(x[BLOCK_M, BLOCK_K], QUANTIZER, FAST_PATH, THREADS) -> (codes uint8
[BLOCK_M, BLOCK_K/2], scales uint8 [BLOCK_M, BLOCK_K/32])`: per row, each run of 32 elements
along K is one MX block. THREADS, the program's thread count, only shapes the cross-thread
steps of the uniform test below (_largest_outside); any value gives the same result.
QUANTIZER is one of QUANTIZERS: "hardware" and "hardware-f32" (gfx950's conversion
instruction, its bf16 and its f32 form), or "software". With a hardware quantizer
or FAST_PATH, two paths, chosen once per tile by a uniform branch:
  - fast (a bf16 tile whose every block amax, as bf16 magnitude bits M, lies in
    [FAST_AMAX_MIN, FAST_AMAX_MAX]): no NaN, no inf, and a block exponent e_r = (M + 0x20) >> 7
    in [5, 254], so the scale byte is e_r - 2 with no clamp. The block amax is an integer max
    of the magnitude bits. The codes come from `v_cvt_scalef32_pk_fp4_bf16` on the raw bf16
    pairs ("hardware") or `v_cvt_scalef32_pk_fp4_f32` on the elements widened to fp32
    ("hardware-f32"), with the scale operand 2^(byte - 127), or from the software recipe on
    x * 2^(127 - byte);
  - slow (any other tile, and every fp32 tile): the software recipe with its special-value
    work (NaN-ignoring amax, NaN payload quieting, the clamped scale), as aiter's
    _mxfp4_quant_op, for both quantizers.
Without either (the software quantizer on NVIDIA, where the branch costs more than it saves),
every tile takes the software recipe, its pairs packed directly.
Why the fast range is enough for the instruction: see formats.cvt_scalef32_pk_fp4_bf16_model
and cvt_scalef32_pk_fp4_f32_model (inputs they document) and tests/test_hw_quant.py (every
bf16 value in every accepted block, both forms). The asm converts two words per call with
their conversions alternating (see _cvt_template: gfx950 does not forward a conversion's
result to the next instruction). Under the interpreter (no inline asm) `_cvt_model` and
`_cvt_f32_model` stand in for the two forms.
`quantize_kernel` runs the quantizer on a plain [rows, K] tensor: the first launch of a
quantize-once launcher (launchers.gemm, `quantize_launch` gives its arguments) and, through its
host wrapper `quantize_rows`, the separate quantization step of the unfused baseline in
tools.bench.
"""

import os

import torch
import triton
import triton.language as tl

# The quantizers by name: the kernels' QUANTIZER constexpr and the launchers' quantizer argument.
QUANTIZERS = ("hardware", "hardware-f32", "software")
INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0").lower()
                           in ("1", "true", "on", "yes"))
# Block amax range of the fast path, as bf16 magnitude bits: from the smallest amax whose
# rounded exponent is 5 (a bf16 denormal then scales below 0.25 whatever the instruction does
# with it) to the largest whose rounded exponent is 254 (255 is the clamped u = 127 case).
FAST_AMAX_MIN = tl.constexpr(0x0260)
FAST_AMAX_MAX = tl.constexpr(0x7F5F)
# Words per call of the conversion asm (its pack): the outputs $0 .. $(CVT_WORDS - 1) are the
# words of neighbouring elements, and input i of element w is operand $(CVT_WORDS * (i + 1) + w).
CVT_WORDS = tl.constexpr(2)


def _cvt_template(mnemonic: str, sources: int) -> str:
    """The asm that converts CVT_WORDS words: byte j of each from the `sources` inputs
    j*sources .. (j+1)*sources - 1 of its element, with the scale, input 4*sources.

    gfx950 does not forward a conversion's result to the very next instruction, and a
    conversion writing one byte of a word reads the word's other bytes. So the conversions
    alternate between the words (each result is next touched two instructions later). The asm
    ends with its last conversion: LLVM's hazard recognizer takes every inline asm for a
    producer of this hazard and puts a wait state before a VALU or an asm that reads or writes
    one of its outputs next; a memory instruction doing so it leaves, and tools.gfx950.hazards
    reports that on every compiled kernel (tests/test_gfx950_hazards.py shows both).
    """
    words = CVT_WORDS.value

    def operand(word, index):
        return f"${words * (index + 1) + word}"
    lines = []
    for byte in range(4):
        op_sel = f" op_sel:[0,0,{byte & 1},{byte >> 1}]" if byte else ""
        for word in range(words):
            inputs = [operand(word, byte * sources + s) for s in range(sources)]
            lines.append(f"{mnemonic} ${word}, {', '.join(inputs)}, "
                         f"{operand(word, 4 * sources)}{op_sel}")
    return "\n\t".join(lines)


def _cvt_constraints(sources: int) -> str:
    """Early-clobber outputs: no input may share a register with a word written before the
    input is read."""
    words = CVT_WORDS.value
    return ",".join(["=&v"] * words + ["v"] * words * (4 * sources + 1))


# v_cvt_scalef32_pk_fp4_bf16: byte j <- the bf16 pair j (input j), scale input 4.
CVT_FP4_BF16_ASM = tl.constexpr(_cvt_template("v_cvt_scalef32_pk_fp4_bf16", 1))
CVT_FP4_BF16_CONSTRAINTS = tl.constexpr(_cvt_constraints(1))
# v_cvt_scalef32_pk_fp4_f32: byte j <- the fp32 elements 2j (src0) and 2j + 1 (inputs 2j and
# 2j + 1), scale input 8.
CVT_FP4_F32_ASM = tl.constexpr(_cvt_template("v_cvt_scalef32_pk_fp4_f32", 2))
CVT_FP4_F32_CONSTRAINTS = tl.constexpr(_cvt_constraints(2))


@triton.jit
def _block_scale(amax):
    """fp32 amax >= 0 -> (scale byte int32, fp32 multiplier): the "even" rule, see formats.py."""
    rounded = (amax.to(tl.int32, bitcast=True) + 0x200000) & -0x800000
    exponent = (rounded >> 23) & 0xFF
    u = tl.where(exponent == 255, 127, tl.minimum(tl.maximum(exponent - 129, -127), 127))
    multiplier_bits = tl.where(u == 127, 0x00400000, (127 - u) << 23)
    return u + 127, multiplier_bits.to(tl.float32, bitcast=True)


@triton.jit
def _e2m1_codes(q):
    """fp32 -> E2M1 code in the low 4 bits of a uint32 (RNE, saturating at 6, sign kept)."""
    bits = q.to(tl.uint32, bitcast=True)
    sign = bits & 0x80000000
    magnitude_bits = bits ^ sign
    magnitude = magnitude_bits.to(tl.float32, bitcast=True)
    # Adding 2**22 (fp32 ulp 0.5) rounds |q| < 1 to 0, 0.5 or 1.0 with the FPU's RNE.
    denormal_code = (magnitude + 4194304.0).to(tl.uint32, bitcast=True) - (149 << 23)
    # Rebias the exponent from 127 to 1, add half an ulp of the kept mantissa bit minus one,
    # plus that bit itself so that ties go to even.
    normal_code = (magnitude_bits + 0xC11FFFFF + ((magnitude_bits >> 22) & 1)) >> 22
    code = tl.where(magnitude >= 6.0, 7, tl.where(magnitude < 1.0, denormal_code, normal_code))
    return (code & 0xF) | (sign >> 28)


@triton.jit
def _as_f32(x):
    """bf16 or fp32 -> fp32. A shift is the exact bf16 -> fp32 conversion; the Triton 3.9
    interpreter's cast mangles denormals, and the quantizer must be bit-exact everywhere."""
    if x.dtype == tl.bfloat16:
        return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    else:
        return x.to(tl.float32)


@triton.jit
def _prescaled_blocks(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """x [BLOCK_M, BLOCK_K] -> (q fp32 [BLOCK_M, BLOCK_K/32, 32], scale byte int32 [.., .., 1]).

    q is each block divided by its scale (an exact power of two), ready for rounding to E2M1.
    """
    x = _as_f32(x).reshape(BLOCK_M, BLOCK_K // 32, 32)
    # NaN is ignored in the block maximum unless the whole block is NaN (maxnum semantics, as
    # formats.nan_ignoring_amax), written out because the interpreter's max keeps NaN.
    magnitude = tl.abs(x)
    amax = tl.max(tl.where(magnitude == magnitude, magnitude, -1.0), axis=2, keep_dims=True)
    amax = tl.where(amax < 0.0, float("inf"), amax)
    scale, multiplier = _block_scale(amax)
    q = x * multiplier
    # A NaN keeps its own payload, quieted, as AMD's multiply does; NVIDIA's would not.
    x_bits = x.to(tl.uint32, bitcast=True)
    q = tl.where(x != x, (x_bits | 0x400000).to(tl.float32, bitcast=True), q)
    return q, scale


@triton.jit
def _words(codes, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """E2M1 codes uint32 [BM, NB, 32] -> uint32 [BM, NB, 4]: word g holds element pairs
    4g .. 4g+3 of its block, pair 4g + j in byte j, the even element in the low nibble."""
    low, high = tl.split(codes.reshape(BLOCK_M, NUM_BLOCKS, 4, 2, 2, 2))
    low, high = tl.split(low | (high << 4))
    low, high = tl.split(low | (high << 8))
    return low | (high << 16)


@triton.jit
def _bytes(words):
    """uint32 [..., n] -> uint8 [..., n, 2, 2], byte j of each word at index [.., j // 2, j % 2]."""
    b0 = words.to(tl.uint8)
    b1 = (words >> 8).to(tl.uint8)
    b2 = (words >> 16).to(tl.uint8)
    b3 = (words >> 24).to(tl.uint8)
    return tl.join(tl.join(b0, b2), tl.join(b1, b3))


@triton.jit
def _by_byte(t):
    """[BM, NB, 4, 2, 2] (word g, byte j = 2a + b) -> the four [BM, NB, 4] tensors of bytes 0..3."""
    t0, t1 = tl.split(t)
    b0, b2 = tl.split(t0)
    b1, b3 = tl.split(t1)
    return b0, b1, b2, b3


@triton.jit
def _pairs(bits, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """bf16 bits uint16 [BM, NB, 32] -> four uint32 [BM, NB, 4]: tensor j holds the pairs
    (8g + 2j, 8g + 2j + 1) of each block, the even element in the low half (src's order)."""
    low, high = tl.split(bits.reshape(BLOCK_M, NUM_BLOCKS, 4, 2, 2, 2))
    return _by_byte(low.to(tl.uint32) | (high.to(tl.uint32) << 16))


@triton.jit
def _f32_sources(bits, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """bf16 bits uint16 [BM, NB, 32] -> eight fp32 [BM, NB, 4]: tensor 2j + h holds element
    8g + 2j + h of each block (src0 of byte j for h = 0, src1 for h = 1)."""
    even, odd = tl.split(bits.reshape(BLOCK_M, NUM_BLOCKS, 4, 2, 2, 2))
    e0, e1, e2, e3 = _by_byte((even.to(tl.uint32) << 16).to(tl.float32, bitcast=True))
    o0, o1, o2, o3 = _by_byte((odd.to(tl.uint32) << 16).to(tl.float32, bitcast=True))
    return e0, o0, e1, o1, e2, o2, e3, o3


@triton.jit
def _cvt_model_codes(bits, scale_exponent):
    """One fp32 (its bits, uint32) -> the E2M1 code the instruction documents, from its
    definition E2M1(x / 2^(scale_exponent - 127)): the nearest of the eight magnitudes, ties
    to the even code, saturating at 6, sign kept. -1 where the ISA leaves the result
    undocumented: NaN, inf, or a denormal that could round away from zero."""
    magnitude = (bits & 0x7FFFFFFF).to(tl.float32, bitcast=True).to(tl.float64)
    y = magnitude * ((1150 - scale_exponent).to(tl.uint64) << 52).to(tl.float64, bitcast=True)
    code = ((y > 0.25).to(tl.uint32) + (y >= 0.75).to(tl.uint32) + (y > 1.25).to(tl.uint32)
            + (y >= 1.75).to(tl.uint32) + (y > 2.5).to(tl.uint32) + (y >= 3.5).to(tl.uint32)
            + (y > 5.0).to(tl.uint32))
    code = code | ((bits >> 28) & 8)
    exponent = (bits >> 23) & 0xFF
    denormal = (exponent == 0) & ((bits & 0x7FFFFF) != 0)
    undocumented = (exponent == 0xFF) | (denormal & (scale_exponent < 3))
    return tl.where(undocumented, -1, code.to(tl.int32))


@triton.jit
def _cvt_model_word(sources, scale, INSTRUCTION: tl.constexpr):
    """fp32 bits (low, high) of byte 0, then of bytes 1..3, and the scale operand -> the word
    that four conversions write, low into the low nibble. Raises on an input whose conversion
    the ISA does not document, so that a test reaching it fails."""
    scale_exponent = (scale.to(tl.uint32, bitcast=True) >> 23) & 0xFF
    word = tl.zeros(scale.shape, tl.uint32)
    undocumented = (scale_exponent == 0) | (scale_exponent == 0xFF)
    for j in range(4):
        low = _cvt_model_codes(sources[2 * j], scale_exponent)
        high = _cvt_model_codes(sources[2 * j + 1], scale_exponent)
        undocumented = undocumented | (low < 0) | (high < 0)
        word = word | ((low.to(tl.uint32) | (high.to(tl.uint32) << 4)) & 0xFF) << (8 * j)
    if tl.max(undocumented.to(tl.int32)) != 0:
        raise ValueError(f"{INSTRUCTION} model: undocumented input "
                         "(NaN, inf, a denormal at a scale below 2^-124, or a bad scale)")
    return word


@triton.jit
def _cvt_model(p0, p1, p2, p3, scale):
    """Interpreter stand-in for CVT_FP4_BF16_ASM (the same operands, the same word)."""
    return _cvt_model_word((p0 << 16, p0 & 0xFFFF0000, p1 << 16, p1 & 0xFFFF0000,
                            p2 << 16, p2 & 0xFFFF0000, p3 << 16, p3 & 0xFFFF0000), scale,
                           "v_cvt_scalef32_pk_fp4_bf16")


@triton.jit
def _cvt_f32_model(x0, x1, x2, x3, x4, x5, x6, x7, scale):
    """Interpreter stand-in for CVT_FP4_F32_ASM (the same operands, the same word)."""
    return _cvt_model_word(tuple(x.to(tl.uint32, bitcast=True)
                                 for x in (x0, x1, x2, x3, x4, x5, x6, x7)), scale,
                           "v_cvt_scalef32_pk_fp4_f32")


@triton.jit
def _bf16_form_words(bits, scale, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """v_cvt_scalef32_pk_fp4_bf16 on the raw bf16 pairs."""
    p0, p1, p2, p3 = _pairs(bits, BLOCK_M, NUM_BLOCKS)
    if INTERPRETED:
        return _cvt_model(p0, p1, p2, p3, scale)
    else:
        return tl.inline_asm_elementwise(CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS,
                                         [p0, p1, p2, p3, scale], dtype=tl.uint32,
                                         is_pure=True, pack=CVT_WORDS)


@triton.jit
def _f32_form_words(bits, scale, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """v_cvt_scalef32_pk_fp4_f32 on the elements widened to fp32 (exact: a 16-bit shift)."""
    x0, x1, x2, x3, x4, x5, x6, x7 = _f32_sources(bits, BLOCK_M, NUM_BLOCKS)
    if INTERPRETED:
        return _cvt_f32_model(x0, x1, x2, x3, x4, x5, x6, x7, scale)
    else:
        return tl.inline_asm_elementwise(CVT_FP4_F32_ASM, CVT_FP4_F32_CONSTRAINTS,
                                         [x0, x1, x2, x3, x4, x5, x6, x7, scale],
                                         dtype=tl.uint32, is_pure=True, pack=CVT_WORDS)


@triton.jit
def _hardware_words(bits, exponent, QUANTIZER: tl.constexpr, BLOCK_M: tl.constexpr,
                    NUM_BLOCKS: tl.constexpr):
    """bf16 bits uint16 [BM, NB, 32] and rounded block exponents [BM, NB, 1] of a fast tile ->
    words [BM, NB, 4] by the gfx950 instruction with the scale operand 2^(byte - 127): its
    bf16 form ("hardware") or its f32 form ("hardware-f32")."""
    scale = ((exponent - 2) << 23).to(tl.float32, bitcast=True)
    # Split like the data, so that both land in one layout.
    scale, _ = tl.split(tl.broadcast_to(scale, (BLOCK_M, NUM_BLOCKS, 32)).reshape(
        BLOCK_M, NUM_BLOCKS, 4, 2, 2, 2))
    scale, _, _, _ = _by_byte(scale)
    if QUANTIZER == "hardware-f32":
        return _f32_form_words(bits, scale, BLOCK_M, NUM_BLOCKS)
    else:
        return _bf16_form_words(bits, scale, BLOCK_M, NUM_BLOCKS)


@triton.jit
def _software_words(bits, exponent, BLOCK_M: tl.constexpr, NUM_BLOCKS: tl.constexpr):
    """The same words by the software recipe on x * 2^(127 - byte) (exact: a power of two)."""
    x = (bits.to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    multiplier = ((256 - exponent) << 23).to(tl.float32, bitcast=True)
    return _words(_e2m1_codes(x * multiplier), BLOCK_M, NUM_BLOCKS)


@triton.jit
def _largest_outside(outside, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                     THREADS: tl.constexpr, HARDWARE: tl.constexpr):
    """The maximum of outside [BM, NB, 1] (uint32, one value per MX block), the same scalar in
    every thread, through one LDS round trip (tl.max over the tile takes two, and more
    barriers).

    Triton lays a bf16 [BM, BK] tile loaded with 16-byte vectors out as 8 elements per thread
    along K, 64-lane waves along K first (LANES_K lanes) then M, the waves along K first
    (WAVES_K) then M, and repeats that pattern in registers. Split along those lines, the
    maximum is taken in registers, then over each wave's lanes along K (DPP), leaving
    PASS_ROWS * WAVES_K values spread over lanes along M and the waves; tl.gather hands all of
    them to every thread (one store, barrier and load), which reduces them itself. Any other
    layout only moves work between these steps: the result is the same."""
    NUM_BLOCKS: tl.constexpr = BLOCK_K // 32
    WAVES: tl.constexpr = max(1, THREADS // 64)
    LANES_K: tl.constexpr = min(64, BLOCK_K // 8)
    WAVES_K: tl.constexpr = max(1, min(WAVES, BLOCK_K // (8 * LANES_K)))
    PASS_ROWS: tl.constexpr = max(1, min(BLOCK_M, (64 // LANES_K) * (WAVES // WAVES_K)))
    per_element = tl.broadcast_to(outside, (BLOCK_M, NUM_BLOCKS, 32)).reshape(
        BLOCK_M // PASS_ROWS, PASS_ROWS, BLOCK_K // (8 * LANES_K * WAVES_K), WAVES_K,
        8 * LANES_K)
    per_wave = tl.max(tl.max(tl.max(per_element, axis=0), axis=1), axis=2)
    spread = per_wave.reshape(PASS_ROWS * WAVES_K)
    largest = tl.max(tl.gather(spread, tl.arange(0, PASS_ROWS * WAVES_K), 0))
    if HARDWARE and not INTERPRETED:
        # Equal in every lane; v_readfirstlane says so to LLVM (a scalar register), which
        # then branches on it with a scalar branch, not under an exec mask. gfx940+ needs a
        # wait state between a VALU write of a VGPR and v_readfirstlane reading it; LLVM adds
        # one before its own readfirstlane but not inside an asm string: hence the s_nop 0.
        largest = tl.inline_asm_elementwise("s_nop 0\n\tv_readfirstlane_b32 $0, $1", "=s,v",
                                            [largest], dtype=tl.uint32, is_pure=True, pack=1)
    return largest


@triton.jit
def quantize_tile_mxfp4(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                        QUANTIZER: tl.constexpr = "software", FAST_PATH: tl.constexpr = True,
                        THREADS: tl.constexpr = 256):
    NUM_BLOCKS: tl.constexpr = BLOCK_K // 32
    HARDWARE: tl.constexpr = QUANTIZER != "software"
    if (HARDWARE or FAST_PATH) and x.dtype == tl.bfloat16:
        bits = x.to(tl.uint16, bitcast=True).reshape(BLOCK_M, NUM_BLOCKS, 32)
        # Twice the block amax's magnitude bits: the shift drops the sign (cheaper than a mask
        # in LLVM's packed 16-bit code on gfx950).
        amax2 = tl.max(bits << 1, axis=2, keep_dims=True).to(tl.uint32)
        # One uniform test for the whole tile: every block amax in the fast range.
        fast = _largest_outside(amax2 - 2 * FAST_AMAX_MIN, BLOCK_M, BLOCK_K, THREADS,
                                HARDWARE) <= 2 * (FAST_AMAX_MAX - FAST_AMAX_MIN)
        if fast:
            exponent = (amax2 + 0x40) >> 8     # (amax + 0x20) >> 7
            if HARDWARE:
                words = _hardware_words(bits, exponent, QUANTIZER, BLOCK_M, NUM_BLOCKS)
            else:
                words = _software_words(bits, exponent, BLOCK_M, NUM_BLOCKS)
            scale = (exponent - 2).to(tl.int32).reshape(BLOCK_M, NUM_BLOCKS)
        else:
            q, scale = _prescaled_blocks(x, BLOCK_M, BLOCK_K)
            words = _words(_e2m1_codes(q), BLOCK_M, NUM_BLOCKS)
            scale = scale.reshape(BLOCK_M, NUM_BLOCKS)
        if HARDWARE and not INTERPRETED:
            # An empty asm (no instruction) hides the words from LLVM's vectorizer at the branch
            # join; vectorized there, they cost a byte-by-byte repack before the LDS store.
            words = tl.inline_asm_elementwise("", "=v,0", [words], dtype=tl.uint32,
                                              is_pure=True, pack=1)
        codes = _bytes(words).reshape(BLOCK_M, BLOCK_K // 2)
    else:
        # The software recipe on every tile, its pairs packed directly (no branch join).
        q, scale = _prescaled_blocks(x, BLOCK_M, BLOCK_K)
        low, high = tl.split(_e2m1_codes(q).reshape(BLOCK_M, BLOCK_K // 2, 2))
        codes = (low | (high << 4)).to(tl.uint8)
        scale = scale.reshape(BLOCK_M, NUM_BLOCKS)
    return codes, scale.to(tl.uint8)


@triton.jit
def quantize_kernel(x_ptr, codes_ptr, scales_ptr, M, K, stride_xm, stride_xk,
                    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                    QUANTIZER: tl.constexpr = "software", FAST_PATH: tl.constexpr = True,
                    THREADS: tl.constexpr = 256):
    """x fp32/bf16 [M, K] (strides stride_xm, stride_xk) -> codes uint8 [M, K/2], scales uint8
    [M, K/32], both contiguous. K % BLOCK_K == 0; grid (cdiv(M, BLOCK_M), K / BLOCK_K). Rows
    past M wrap onto valid rows, as in the GEMM, and are not stored."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + (rows % M)[:, None] * stride_xm + cols[None, :] * stride_xk)
    codes, scales = quantize_tile_mxfp4(x, BLOCK_M, BLOCK_K, QUANTIZER, FAST_PATH, THREADS)
    code_cols = tl.program_id(1) * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)
    scale_cols = tl.program_id(1) * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
    in_m = (rows < M)[:, None]
    tl.store(codes_ptr + rows[:, None] * (K // 2) + code_cols[None, :], codes, mask=in_m)
    tl.store(scales_ptr + rows[:, None] * (K // 32) + scale_cols[None, :], scales, mask=in_m)


def fast_path_blocks(x):
    """bf16 [..., 32 * NB] -> bool [..., NB]: whether each MX block's amax (as bf16 magnitude
    bits) lies in [FAST_AMAX_MIN, FAST_AMAX_MAX], the test of quantize_tile_mxfp4, which takes
    the fast path for a tile when all its blocks pass (the host's model of it, for tests)."""
    magnitude = x.view(torch.int16).to(torch.int32) & 0x7FFF
    amax = magnitude.unflatten(-1, (-1, 32)).amax(dim=-1)
    return (amax >= FAST_AMAX_MIN.value) & (amax <= FAST_AMAX_MAX.value)


def largest_power_of_two_dividing(x: int, at_most: int) -> int:
    block = at_most
    while x % block:
        block //= 2
    return block


def checked_quantizer(name: str) -> str:
    """name if it is one of QUANTIZERS; ValueError otherwise."""
    if name not in QUANTIZERS:
        raise ValueError(f"quantizer must be one of {', '.join(QUANTIZERS)}; got {name!r}")
    return name


# 64 rows spread the tile's fixed costs (the uniform test's LDS round trip, its barriers) over
# four times the elements of 16 (gfx950: 4,092 against 5,376 busiest-SIMD instructions at
# M = 8192, K = 4096, python -m tools.isa --sweep).
QUANTIZE_BLOCK_M = 64
QUANTIZE_MAX_BLOCK_K = 512


def quantized_outputs(rows: int, k: int, device) -> tuple:
    """Fresh (codes uint8 [rows, K/2], scales uint8 [rows, K/32]) for quantize_kernel."""
    return (torch.empty(rows, k // 2, dtype=torch.uint8, device=device),
            torch.empty(rows, k // 32, dtype=torch.uint8, device=device))


def quantize_launch(x, codes, scales, quantizer: str = "software", fast_path: bool = True,
                    threads: int = 256) -> tuple:
    """(grid, every argument of quantize_kernel in signature order) for x [M, K] (K % 64 == 0)
    into codes and scales (quantized_outputs)."""
    checked_quantizer(quantizer)
    rows, k = x.shape
    block_k = largest_power_of_two_dividing(k, QUANTIZE_MAX_BLOCK_K)
    grid = (-(-rows // QUANTIZE_BLOCK_M), k // block_k, 1)
    return grid, (x, codes, scales, rows, k, x.stride(0), x.stride(1), QUANTIZE_BLOCK_M, block_k,
                  quantizer, fast_path, threads)


def quantize_rows(x, quantizer: str = "software"):
    """x bf16 [M, K] (K % 64 == 0) -> (codes uint8 [M, K/2], scales uint8 [M, K/32]), as
    kernels.formats.quantize_mxfp4. One standard Triton launch."""
    codes, scales = quantized_outputs(*x.shape, x.device)
    grid, arguments = quantize_launch(x, codes, scales, quantizer)
    quantize_kernel[grid](*arguments)
    return codes, scales
