"""The prepared-weight path for NVIDIA Hopper: the Hopper weight layout (kernels.layouts.hopper),
the GEMM that reads it (kernels.hopper_prepared_gemm) and its op and launcher
(launchers.prepared).

On the CPU: the layout's swizzle and unswizzle are inverses bit for bit, on every byte, from
plain MXFP4 and from the runner's aiter layouts; its word encoding decodes by the kernel's
rotations and masks. The rule (prepared_config): its tiles by M, and K split until the grid is
large enough, MAX_SPLIT_K, or a split would hold fewer than two K tiles, each limit where it is
the one that stops the split. On `device` (the interpreter on a CPU, compiled on an NVIDIA GPU of sm_90 and
up, where the PTX conversion runs that the interpreter replaces; skipped on any other GPU): the
op against the reference at odd shapes (M not a multiple of any tile, K a multiple of 64 only,
a ragged last K tile, strided A, split-K, A quantized in the kernel and once by its own
launches; compiled also at Llama-3-8B's decode shapes), each weight also with scales that take
the wide conversion; weights whose scales take it (scales above 2, zero and NaN); repeated calls
bit-identical; torch.compile tracing the op; the tile dequantization, folded and wide, bit for
bit against formats over every code byte and the edge scale bytes, bf16's denormals included
(in the interpreter its stand-in, which builds the values as bits). Through the interpreter:
the same tiles by the PTX in tests/test_hopper_gemm's CPU emulator of its instructions, and
the op by that PTX on a weight whose scales take the wide conversion (the launch given
WIDE_SCALES). The op refuses another backend in one line, and serves M up to the chip's record
(Target.prepared_max_m: any M on sm_90), refusing one row more in one line. Cross-compiled for
sm_90 with the runner's Triton: every served config of Llama-3-8B's decode shapes fits, every launch of its call
without a stack, and its main loop costs under the bounds below (tools.sm90_loop).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats, hopper_gemm, hopper_prepared_gemm
from mxfp4_mm.kernels.layouts import hopper as layout
from mxfp4_mm.launchers import current_target, interpreting, prepared
from mxfp4_mm.launchers.proof import reference_output
from mxfp4_mm.launchers.targets import SM90, target_facts
from mxfp4_mm.tools.prepared_check import strided_copy
from test_hopper_gemm import (EDGE_SCALE_BYTES, _emulated_inline_asm, as_fp32, assert_same_bits,
                              edge_scales)
from test_hopper_gemm import hopper_device  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[1]


def random_mxfp4(n, k, seed, high=256):
    generator = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 256, (n, k // 2), generator=generator, dtype=torch.uint8)
    scales = torch.randint(0, high, (n, k // 32), generator=generator, dtype=torch.uint8)
    return codes, scales


@pytest.mark.parametrize("n, k", [(16, 64), (48, 320), (32, 256), (64, 1088), (256, 4096)])
def test_swizzle_and_unswizzle_are_inverses_on_every_byte(n, k):
    codes, scales = random_mxfp4(n, k, seed=n + k)
    weight = layout.swizzle(codes, scales)
    kp = layout.padded_k(k)
    assert weight.values.shape == (n // 16, kp // 64, 8, 4, 4, 4)
    assert weight.scales.shape == (n // 16, kp // 64, 8, 2, 2)
    back_codes, back_scales = layout.unswizzle(weight)
    assert torch.equal(back_codes, codes) and torch.equal(back_scales, scales)
    runners = formats.weight_operands(codes, scales)
    from_runner = layout.from_shuffled(*runners, n, k)
    assert torch.equal(from_runner.values, weight.values)
    assert torch.equal(from_runner.scales, weight.scales)
    assert all(map(torch.equal, layout.to_shuffled(from_runner), runners))


def test_k_padding_is_zero_codes_under_unit_scales():
    codes, scales = random_mxfp4(16, 320, seed=1)
    weight = layout.swizzle(codes, scales)
    assert weight.values[:, 5:].eq(0).all()
    assert weight.scales[:, 5:].eq(layout.PAD_SCALE).all()


def test_the_word_encoding_decodes_by_the_kernels_rotations_and_masks():
    generator = torch.Generator().manual_seed(2)
    codes = torch.randint(0, 16, (4096, 4, 2), generator=generator, dtype=torch.uint8)
    codes[:16, 0, 0] = torch.arange(16)        # every code in every position
    codes[16:32, 3, 1] = torch.arange(16)
    words = layout.encode_words(codes)
    assert int(words.max()) < 2 ** 32
    assert torch.equal(layout.decode_words(words), codes)
    # pair 0 is already in place: the bf16 bits of the values times 2**-126
    low = (words & layout.PAIR_MASK & 0xFFFF).to(torch.int32) << 16
    expected = torch.tensor(formats.E2M1_VALUES)[codes[:, 0, 0].long()] * 2.0 ** -126
    assert torch.equal(low.view(torch.float32), expected)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("group", [0, 1])
def test_the_ptx_built_for_a_k_group_gives_its_rows_pairs_under_their_scales(wide, group):
    """hopper_prepared_gemm._pairs_asm(wide, group), built anew and run by tests/test_hopper_gemm's
    emulator on one word ($4) and its rows' scale words ($5: row g, $7: row g + 8; the low half
    K group 0's multiplier, the high half group 1's): pair p ($p) is the two values of the
    word's pair p times the scale of K group `group` of row g (p even) or g + 8 (p odd), the
    formats' values bit for bit. The folded conversion's multipliers are 2**(s - 1) (bytes up
    to FOLDED_SCALE_MAX_BYTE), the wide one's 2**(s - 127) (0 a denormal, 255 NaN)."""
    from test_hopper_gemm import _bf16_bits, run_ptx
    asm = hopper_prepared_gemm._pairs_asm(wide, group)
    scale_bytes = [b for b in EDGE_SCALE_BYTES if wide or b <= layout.FOLDED_SCALE_MAX_BYTE]

    def multiplier(byte):
        if not wide:
            return (byte + 126) << 7
        return {0: 0x0040, layout.NAN_SCALE: 0x7FC0}.get(byte, byte << 7)
    generator = torch.Generator().manual_seed(9)
    codes = torch.randint(0, 16, (len(scale_bytes) ** 2, 4, 2), generator=generator)
    codes[:16, 0, 0] = codes[16:32, 3, 1] = torch.arange(16)     # every code in two places
    for index, word in enumerate(layout.encode_words(codes).tolist()):
        # the scale bytes of K groups 0 and 1, row g then row g + 8; `group`'s differ by row
        row_g = (scale_bytes[index % len(scale_bytes)], scale_bytes[-1 - index % len(scale_bytes)])
        row_g8 = (row_g[1], scale_bytes[index // len(scale_bytes)])
        words = [multiplier(row[0]) | multiplier(row[1]) << 16 for row in (row_g, row_g8)]
        pairs = run_ptx(asm, [0, 0, 0, 0, word, words[0], words[0], words[1], words[1]])[:4]
        for p, bits in enumerate(pairs):
            byte = (row_g, row_g8)[p % 2][group]
            for e in range(2):
                got = bits >> 16 * e & 0xFFFF
                code = int(codes[index, p, e])
                if byte == layout.NAN_SCALE:
                    assert got & 0x7F80 == 0x7F80 and got & 0x7F, (index, p, e)
                    continue
                value = formats.E2M1_VALUES[code] * 2.0 ** (byte - 127)
                assert got == _bf16_bits(value), (index, p, e, code, byte)


def test_the_layout_refuses_n_or_k_off_its_unit_naming_both():
    codes, scales = random_mxfp4(32, 128, seed=6)
    for bad_codes, n, k in ((codes[:24], 24, 128), (codes[:, :48], 32, 96)):
        with pytest.raises(ValueError, match=rf"^the Hopper layout needs N % 16 == 0 and K % 64 "
                                             rf"== 0, got N={n}, K={k}$"):
            layout.swizzle(bad_codes, scales)
    assert layout.swizzle(codes[:16, :32], scales[:16]).k == 64


def test_decoded_words_are_uint8_codes_four_pairs_of_two_a_word():
    codes = torch.randint(0, 16, (3, 5, 4, 2), generator=torch.Generator().manual_seed(4),
                          dtype=torch.uint8)
    decoded = layout.decode_words(layout.encode_words(codes))
    assert decoded.dtype == torch.uint8 and decoded.shape == (3, 5, 4, 2)
    assert torch.equal(decoded, codes)


def test_a_weight_with_a_scale_above_2_or_nan_takes_the_wide_conversion():
    codes, scales = random_mxfp4(16, 64, seed=3, high=129)
    assert not layout.swizzle(codes, scales).wide_scales
    for byte in (129, 254, 255):
        wide = scales.clone()
        wide[3, 1] = byte
        assert layout.swizzle(codes, wide).wide_scales


@pytest.mark.parametrize("n, k, splits", [
    (64 * prepared.MIN_PROGRAMS // 2, 2048, 2),         # two splits make MIN_PROGRAMS programs
    (64 * (prepared.MIN_PROGRAMS // 2 - 1), 2048, 4),   # two splits make two fewer
    (64, 16384, prepared.MAX_SPLIT_K),                  # one tile, K tiles enough for 16 splits
])
def test_k_splits_until_the_grid_holds_min_programs_or_max_split_k(n, k, splits):
    """At M = 1 (BLOCK_N 64), K tiles enough for one more split in each case: the split stops
    where the grid reaches MIN_PROGRAMS programs, or at MAX_SPLIT_K."""
    config = prepared.prepared_config(1, n, k)
    assert config.split_k == splits
    assert config.splits_for(k)[0] == splits


def test_the_rule():
    for n, k in [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]:
        one = prepared.prepared_config(1, n, k)
        splits, size = one.splits_for(k)
        assert splits * (n // one.block_n) >= prepared.MIN_PROGRAMS or splits == 8
        assert size >= 2 * layout.K_ALIGN
        assert splits * size >= k and (splits - 1) * size < layout.padded_k(k)
        assert not one.a_dequantized
        eight = prepared.prepared_config(8, n, k)
        assert (eight.block_n, eight.num_warps) == (128, 8)
        assert (one.block_n, one.num_warps) == (64, 4)
        assert prepared.prepared_config(128, n, k).block_m == 64
        for m in (1, 7, 8, 16, 32, 64, 128):
            config = prepared.prepared_config(m, n, k)
            quantized_in_gemm = m * k * formats.cdiv(n, config.block_n)
            # A once from A_DEQUANTIZED_MIN_M where the GEMM would quantize A_ONCE_MIN_QUANTIZED
            # of A's elements or more, in three stages; else in registers, B prefetched
            assert config.a_dequantized == (m >= prepared.A_DEQUANTIZED_MIN_M and
                                            quantized_in_gemm >= prepared.A_ONCE_MIN_QUANTIZED)
            assert config.num_stages == (prepared.A_ONCE_STAGES if config.a_dequantized else 1)
    assert prepared.prepared_config(33, 64, 256).block_m == 64
    # on the boundary: 28672 / 128 N tiles of 8 x 4096 elements are A_ONCE_MIN_QUANTIZED
    assert prepared.prepared_config(8, 28672, 4096).a_dequantized
    assert not prepared.prepared_config(8, 28672 - 128, 4096).a_dequantized
    assert not prepared.prepared_config(32, 6144, 4096).a_dequantized


@pytest.mark.parametrize("m, n, k, splits, size", [
    (1, 4096, 512, 1, 512),       # two K tiles: a split of one would follow
    (1, 4096, 768, 1, 768),       # three
    (1, 4096, 1024, 2, 512),      # four: two splits of two
    (2, 64, 1088, 2, 768),        # five (K padded to 1280): the last split two tiles of three
    (1, 2048, 2048, 4, 512),      # eight: four splits of two
])
def test_a_split_keeps_two_k_tiles_where_the_grid_would_take_more(m, n, k, splits, size):
    """Shapes whose grid stays under MIN_PROGRAMS and whose splits stay under MAX_SPLIT_K: K
    splits as far as a split keeps two K tiles, no further."""
    config = prepared.prepared_config(m, n, k)
    assert config.splits_for(k) == (splits, size)
    tiles = formats.cdiv(m, config.block_m) * formats.cdiv(n, config.block_n)
    assert 2 * splits * tiles < prepared.MIN_PROGRAMS and 2 * splits <= prepared.MAX_SPLIT_K


CASES = [   # m, n, k, strided A, A once at any size; K split as prepared_config splits it
    (3, 64, 320, False, False),    # K = 5 * 64: a ragged K tile, one split (two tiles)
    (1, 48, 64, False, False),     # one row, K < one tile, N not a multiple of BLOCK_N
    (5, 128, 1024, True, False),   # strided A, two splits of two K tiles
    (12, 128, 512, False, False),  # 8 warps, A quantized in registers (under the threshold)
    (9, 128, 1024, False, True),   # A quantized once, two splits
    (20, 80, 576, True, True),     # A once, one split of three K tiles, the last ragged
    (2, 64, 1088, False, False),   # two splits, of three K tiles and of two, the last ragged
    (70, 64, 256, False, True),    # A once, two M tiles of 64
]
# Llama-3-8B's decode shapes, each form as the rule takes it: compiled only (model-sized, too
# slow to interpret).
DECODE_CASES = [(1, 4096, 4096, False, False), (8, 6144, 4096, False, False),
                (64, 4096, 14336, False, False)]
compiled_only = pytest.mark.skipif(interpreting(), reason="model-sized: compiled only, too slow "
                                                         "to interpret")


def run_op(a, weight):
    return torch.ops.mxfp4_mm.gemm_prepared(a, weight.values, weight.scales, weight.k,
                                            weight.wide_scales)


@pytest.fixture
def a_once_at_any_size(monkeypatch):
    """The rule quantizes A once from A_DEQUANTIZED_MIN_M at any size (its threshold on the
    GEMM's quantization work lowered to none): that form in shapes small enough to interpret."""
    monkeypatch.setattr(prepared, "A_ONCE_MIN_QUANTIZED", 0)


@pytest.mark.parametrize("m, n, k, strided, a_once",
                         CASES + [pytest.param(*case, marks=compiled_only)
                                  for case in DECODE_CASES])
def test_the_op_matches_the_reference_and_repeats_its_bits(hopper_device, fresh_cache, request,
                                                           m, n, k, strided, a_once):
    """Also a weight of the same shape whose scales (0 and 131 among 120) take the wide
    conversion."""
    if a_once:
        request.getfixturevalue("a_once_at_any_size")
    assert prepared.prepared_config(m, n, k).a_dequantized == (a_once or
                                                               (m, n, k) == (64, 4096, 14336))
    data = reference.generate_input(m, n, k, seed=m + n + k, device=hopper_device)
    a = strided_copy(data[0]) if strided else data[0]
    weight = prepared.hopper_weight(data[3], data[4])
    limit = target_facts(current_target(hopper_device)[1]).prepared_max_m
    if limit is not None and m > limit:     # a GPU; the interpreter has no limit
        with pytest.raises(ValueError, match=f"^mxfp4_mm.gemm_prepared: M={m} on sm_"):
            run_op(a, weight)
        return
    out = run_op(a, weight)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    assert torch.equal(out, run_op(a, weight))
    codes, scales = random_mxfp4(n, k, seed=m, high=1)
    scales = scales + 120
    scales[0, 0], scales[1, 0] = 0, 131
    codes, scales = codes.to(hopper_device), scales.to(hopper_device)
    wide_weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    assert wide_weight.wide_scales
    ok, message = reference.compare(run_op(a, wide_weight), reference_output(a, codes, scales))
    assert ok, message


def test_wide_scales_zero_and_nan_reach_the_output_as_the_reference_reads_them(hopper_device):
    m, n, k = 2, 64, 256
    a = reference.generate_input(m, n, k, seed=7, device=hopper_device)[0]
    codes, scales = random_mxfp4(n, k, seed=7, high=1)
    codes = codes.to(hopper_device)
    scales = scales + 120
    scales[0, 0], scales[1, 1], scales[2, 2], scales[3, 3] = 0, 255, 131, 128
    scales = scales.to(hopper_device)
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    assert weight.wide_scales
    out = run_op(a, weight)
    expected = reference_output(a, codes, scales)
    nan = torch.isnan(expected)
    assert nan[:, 1].all() and torch.equal(torch.isnan(out), nan)
    assert torch.allclose(out[~nan].float(), expected[~nan].float(), rtol=1e-2, atol=1e-2)
    narrow = scales.clone()
    narrow[1, 1], narrow[2, 2] = 127, 127
    weight = prepared.hopper_weight_from_mxfp4(codes, narrow)
    assert not weight.wide_scales
    ok, message = reference.compare(run_op(a, weight), reference_output(a, codes, narrow))
    assert ok, message


@triton.jit
def _dequantize_weight_tile_kernel(b_ptr, b_scales_ptr, out_ptr, BLOCK_N: tl.constexpr,
                                   BLOCK_K: tl.constexpr, WIDE_SCALES: tl.constexpr):
    """A weight of BLOCK_N rows and K = BLOCK_K (weight_arguments' views), loaded as the GEMM
    loads a tile's rows (kc, w, g), dequantized -> out fp32 [BLOCK_N, BLOCK_K]."""
    KC: tl.constexpr = BLOCK_K // 64
    W: tl.constexpr = BLOCK_N // 16
    r = tl.arange(0, KC * W * 8)
    unit = ((r // 8) % W) * KC + r // (8 * W)
    words = tl.load(b_ptr + (unit * 128 + (r % 8) * 16)[:, None] + tl.arange(0, 16)[None, :])
    scales = tl.load(b_scales_ptr + (unit * 8 + r % 8)[:, None] + 0 * tl.arange(0, 4)[None, :])
    values = hopper_prepared_gemm.dequantize_weight_tile(
        words, scales.to(tl.uint32, bitcast=True), BLOCK_N, BLOCK_K, WIDE_SCALES)
    tl.store(out_ptr + tl.arange(0, BLOCK_N)[:, None] * BLOCK_K
             + tl.arange(0, BLOCK_K)[None, :], as_fp32(values))


def dequantize_edge_weight_tile(device, wide: bool):
    """Runs dequantize_weight_tile on `device` over every code byte (each pair of rows all 256)
    under every edge scale byte (edge_scales, a pair of rows alike): those up to
    FOLDED_SCALE_MAX_BYTE for the folded conversion, all for the wide one. Returns (its
    values, formats.dequantize_mxfp4's), fp32 on the CPU."""
    block_n, block_k = 64, layout.K_ALIGN
    scale_bytes = [byte for byte in EDGE_SCALE_BYTES
                   if wide or byte <= layout.FOLDED_SCALE_MAX_BYTE]
    codes = torch.arange(256, dtype=torch.uint8).reshape(2, block_k // 2).repeat(block_n // 2, 1)
    scales = edge_scales(block_n // 2, block_k // 32, scale_bytes).repeat_interleave(2, dim=0)
    weight = layout.swizzle(codes.to(device), scales.to(device))
    assert weight.wide_scales == wide
    out = torch.empty(block_n, block_k, device=device)
    _dequantize_weight_tile_kernel[(1,)](*hopper_prepared_gemm.weight_arguments(weight), out,
                                         block_n, block_k, wide)
    return out.cpu(), formats.dequantize_mxfp4(codes, scales)


@pytest.mark.parametrize("wide", [False, True])
def test_a_tile_dequantizes_to_the_formats_values_bit_for_bit(hopper_device, wide):
    """As `device` runs it, bf16's denormals (values under scale bytes 0 and 1) included.
    Compiled: the PTX (PAIRS_ASM_*, WIDE_PAIRS_ASM_*). In the interpreter: its stand-in,
    which builds the values as bits."""
    assert_same_bits(*dequantize_edge_weight_tile(hopper_device, wide))


@pytest.mark.interpreter
@pytest.mark.parametrize("wide", [False, True])
def test_the_emulated_ptx_dequantizes_a_tile_to_the_formats_values_bit_for_bit(wide, monkeypatch):
    """The PTX's CPU twin: the interpreter takes the GPU branch, its asm run by run_ptx."""
    from triton.runtime import interpreter
    monkeypatch.setattr(hopper_prepared_gemm, "INTERPRETED", tl.constexpr(False))
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_inline_asm",
                        _emulated_inline_asm)
    assert_same_bits(*dequantize_edge_weight_tile("cpu", wide))


@pytest.fixture
def emulated_ptx(monkeypatch):
    """The interpreter taking the GPU's branches of the Hopper kernels (hopper_gemm's and this
    path's): their PTX run by tests/test_hopper_gemm's CPU emulator, and tl.dot reading bf16
    operands as bf16, as wgmma does (the interpreter holds bf16 as 16-bit integers, which its
    dot would multiply as integers)."""
    import numpy as np
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    dot = builder.create_dot

    def as_fp32(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        widened = (handle.data.astype(np.uint32) << 16).view(np.float32)
        return interpreter.TensorHandle(widened, tl.float32)

    monkeypatch.setattr(hopper_prepared_gemm, "INTERPRETED", tl.constexpr(False))
    monkeypatch.setattr(hopper_gemm, "INTERPRETED", tl.constexpr(False))
    monkeypatch.setattr(builder, "create_inline_asm", _emulated_inline_asm)
    monkeypatch.setattr(builder, "create_dot",
                        lambda self, a, b, *rest: dot(self, as_fp32(a), as_fp32(b), *rest))


@pytest.mark.interpreter
@pytest.mark.parametrize("m, call", [(3, run_op), (prepared.A_DEQUANTIZED_MIN_M, run_op),
                                     (3, prepared.gemm_prepared)])
def test_the_op_gives_a_weight_with_wide_scales_the_wide_conversion(fresh_cache, emulated_ptx,
                                                                    a_once_at_any_size, m,
                                                                    call):
    """Through the op, and gemm_prepared on the HopperWeight, with the PTX emulated (the
    interpreter's stand-in reads either conversion's scales alike): a scale byte above
    FOLDED_SCALE_MAX_BYTE, whose folded multiplier bf16 cannot hold, comes out as the
    reference reads it. A quantized by each program, and once by its own launches."""
    n, k = 64, 256
    a = reference.generate_input(m, n, k, seed=7, device="cpu")[0]
    codes, scales = random_mxfp4(n, k, seed=7, high=1)
    scales = scales + 120
    scales[1, 1] = layout.FOLDED_SCALE_MAX_BYTE + 3
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    assert weight.wide_scales
    ok, message = reference.compare(call(a, weight), reference_output(a, codes, scales))
    assert ok, message


def test_torch_compile_traces_the_op(hopper_device):
    m, n, k = 3, 64, 256
    data = reference.generate_input(m, n, k, seed=11, device=hopper_device)
    weight = prepared.hopper_weight(data[3], data[4])
    compiled = torch.compile(run_op, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(data[0], weight), run_op(data[0], weight))


@pytest.fixture
def fresh_cache(monkeypatch):
    """An empty launcher cache and signature table for one test."""
    from collections import OrderedDict

    import mxfp4_mm.launchers as launchers
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())
    monkeypatch.setattr(launchers, "_checked_signatures", {})


def test_the_ops_operands_are_checked_each_refusal_naming_what_was_expected_and_got():
    """prepared_problem: A bf16 [M, K]; values and scales uint8, contiguous, in the Hopper
    layout of an [N, K] weight; one device. (M, N, K) where they pass."""
    codes, scales = random_mxfp4(64, 256, seed=3)
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    a = torch.zeros(2, 256, dtype=torch.bfloat16)
    values, swizzled = weight.values, weight.scales
    assert prepared.prepared_problem(a, values, swizzled, 256) == (2, 64, 256)
    layout_of = "(the Hopper layout of a weight of K=256)"
    for operands, message in [
        ((a.half(), values, swizzled), "expected A bf16 [M, 256], got torch.float16 (2, 256)"),
        ((a[:, :128].contiguous(), values, swizzled),
         "expected A bf16 [M, 256], got torch.bfloat16 (2, 128)"),
        ((a[:, ::2], values, swizzled),
         "expected A bf16 [M, 256], got torch.bfloat16 (2, 128) not contiguous"),
        ((a, values.transpose(-1, -2), swizzled),
         f"expected values contiguous uint8 (4, 4, 8, 4, 4, 4) {layout_of}, got torch.uint8 "
         f"(4, 4, 8, 4, 4, 4) not contiguous"),
        ((a, torch.tensor(0, dtype=torch.uint8), swizzled),
         f"expected values contiguous uint8 (0, 4, 8, 4, 4, 4) {layout_of}, got torch.uint8 ()"),
        ((a, values, swizzled.view(torch.int8)),
         f"expected scales contiguous uint8 (4, 4, 8, 2, 2) {layout_of}, got torch.int8 "
         f"(4, 4, 8, 2, 2)"),
        ((a.to("meta"), values, swizzled),
         "expected one device for A, values and scales, got meta, cpu, cpu")]:
        with pytest.raises(ValueError) as error:
            prepared.prepared_problem(*operands, 256)
        assert str(error.value) == f"mxfp4_mm.gemm_prepared: {message}"


def test_the_backend_is_that_of_the_device_of_a(monkeypatch):
    """_checked_backend asks for the target of A's device (a GPU's index picks the chip)."""
    import mxfp4_mm.launchers as launchers
    asked = []
    monkeypatch.setattr(launchers, "current_target",
                        lambda device: asked.append(device) or ("cuda", "sm_90"))
    device = torch.device("cpu")
    assert prepared._checked_backend(device) == ("cuda", "sm_90") and asked == [device]


def test_a_signature_is_checked_once_and_each_device_builds_its_own_launcher_for_its_target(
        fresh_cache, monkeypatch):
    """The launcher built faked (recording what it was built for): a first call checks its
    operands and builds the launcher of its device's target; a second call of the same
    signature takes it from one lookup, unchecked; the same problem on another device (meta)
    builds its own. A is refused in one line where it is no tensor."""
    from mxfp4_mm import launchers
    built, checked = [], []
    monkeypatch.setattr(prepared, "proven_prepared_launcher", lambda *problem: built.append(
        problem) or (lambda a, values, scales: torch.zeros(a.shape[0], 64)))
    problem = prepared.prepared_problem
    monkeypatch.setattr(prepared, "prepared_problem",
                        lambda *operands: checked.append(1) or problem(*operands))
    codes, scales = random_mxfp4(64, 256, seed=3)
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    a = torch.zeros(2, 256, dtype=torch.bfloat16)
    for _ in range(2):
        prepared.gemm_prepared(a, weight)
    backend, arch = launchers.current_target(a.device)
    assert built == [(arch, backend, 2, 64, 256, (256, 1), a.device, weight.wide_scales,
                     torch.bfloat16)]
    assert checked == [1]
    meta = [t.to("meta") for t in (a, weight.values, weight.scales)]
    prepared.prepared_gemm(*meta, 256, weight.wide_scales)
    assert len(built) == 2 and built[1][6] == torch.device("meta")
    with pytest.raises(TypeError) as error:
        prepared.prepared_gemm([[0.0] * 256], weight.values, weight.scales, 256, False)
    assert str(error.value) == "mxfp4_mm.gemm_prepared: expected A a torch.Tensor, got list"


def test_a_first_call_inside_a_forbidding_capture_is_refused_naming_its_shape(fresh_cache,
                                                                               monkeypatch):
    from mxfp4_mm import launchers

    def capturing(*problem):
        raise RuntimeError(f"... {launchers.CAPTURE_IN_ERROR} ...")
    monkeypatch.setattr(prepared, "proven_prepared_launcher", capturing)
    codes, scales = random_mxfp4(64, 256, seed=3)
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    with pytest.raises(RuntimeError, match=r"^mxfp4_mm.gemm_prepared: the first call of shape "
                                           r"2x64x256 is inside a CUDA graph capture"):
        prepared.gemm_prepared(torch.zeros(2, 256, dtype=torch.bfloat16), weight)


def test_an_nvidia_chip_before_sm90_is_refused_in_one_line(fresh_cache, monkeypatch, device):
    """CUDA, but a chip without wgmma (no prepared_max_m in its record)."""
    import mxfp4_mm.launchers as launchers
    monkeypatch.setattr(launchers, "current_target", lambda device: ("cuda", "sm_89"))
    codes, scales = random_mxfp4(64, 256, seed=4, high=129)
    weight = prepared.hopper_weight_from_mxfp4(codes.to(device), scales.to(device))
    with pytest.raises(ValueError, match=r"^mxfp4_mm.gemm_prepared: a weight in the Hopper "
                                         r"layout runs on NVIDIA sm_90 and up, not on cuda "
                                         r"sm_89; convert it with [^\n]*unswizzle"):
        prepared.gemm_prepared(torch.zeros(2, 256, dtype=torch.bfloat16, device=device), weight)


def test_a_cpu_a_is_refused_where_the_kernels_were_compiled_for_a_gpu(fresh_cache, monkeypatch):
    monkeypatch.setattr(prepared, "KERNELS_NEED_A_GPU", True)
    codes, scales = random_mxfp4(64, 256, seed=4, high=129)
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    with pytest.raises(RuntimeError, match=r"^mxfp4_mm.gemm_prepared: A is a CPU tensor, but "
                                           r"the kernels were compiled for a GPU; "):
        prepared.gemm_prepared(torch.zeros(2, 256, dtype=torch.bfloat16), weight)


def test_another_backend_is_refused_in_one_line(fresh_cache, monkeypatch, device):
    import mxfp4_mm.launchers as launchers
    monkeypatch.setattr(launchers, "current_target", lambda device: ("hip", "gfx950"))
    codes, scales = random_mxfp4(64, 256, seed=4, high=129)
    weight = prepared.hopper_weight_from_mxfp4(codes.to(device), scales.to(device))
    with pytest.raises(ValueError) as error:
        prepared.gemm_prepared(torch.zeros(2, 256, dtype=torch.bfloat16, device=device), weight)
    assert "\n" not in str(error.value) and "unswizzle" in str(error.value)


def test_the_op_serves_m_up_to_the_chips_prepared_max_m(fresh_cache, monkeypatch, device):
    """The reach a chip's record gives (Target.prepared_max_m), at its boundary, through the
    op on a faked sm_90 whose record stops at M = 7, with the launcher's build faked: M = 7 is
    served, one row more refused in one line before anything is built. sm_90's own record
    serves any M."""
    import dataclasses

    import mxfp4_mm.launchers as launchers
    from mxfp4_mm.launchers import targets
    assert prepared.serves_rows("sm_90", 1 << 40)
    limit = 7
    monkeypatch.setitem(targets.TARGETS, "sm_90", dataclasses.replace(SM90, prepared_max_m=limit))
    monkeypatch.setattr(launchers, "current_target", lambda device: ("cuda", "sm_90"))
    built = []

    def build(arch, backend, m, n, k, a_strides, device, wide_scales, out_dtype):
        built.append(m)
        return lambda a, values, scales: torch.ones(m, n, dtype=torch.bfloat16, device=a.device)
    monkeypatch.setattr(prepared, "proven_prepared_launcher", build)
    codes, scales = random_mxfp4(64, 256, seed=4, high=129)
    weight = prepared.hopper_weight_from_mxfp4(codes.to(device), scales.to(device))
    rows = torch.zeros(limit + 1, 256, dtype=torch.bfloat16, device=device)
    assert torch.equal(run_op(rows[:limit], weight), torch.ones(limit, 64, dtype=torch.bfloat16,
                                                                 device=device))
    assert built == [limit]
    with pytest.raises(ValueError, match=rf"^mxfp4_mm.gemm_prepared: M={limit + 1} on sm_90: "
                                         rf"the prepared path serves M up to {limit} there;"):
        run_op(rows, weight)
    assert built == [limit]


@pytest.mark.interpreter
def test_a_first_call_is_proven_and_a_wrong_launcher_steps_down(fresh_cache, monkeypatch,
                                                                  capfd):
    """The prepared launcher is proven when built (launchers.ladder): its first rung's outputs
    corrupted (MXFP4_MM_FAULT's "wrong"), the proof refuses it and the standard launch serves."""
    m, n, k = 1, 48, 64
    data = reference.generate_input(m, n, k, seed=5, device="cpu")
    weight = prepared.hopper_weight(data[3], data[4])
    monkeypatch.setenv("MXFP4_MM_FAULT", f"wrong:{m},{n},{k}")
    out = run_op(data[0], weight)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    printed = capfd.readouterr().err
    assert f"{m}x{n}x{k}: prepared failed (ProofFailure: wrong output on proof case 1" in printed
    assert f"{m}x{n}x{k}: served by prepared, standard launch" in printed


# Regression bounds on the main loop's lane-instructions a weight element, by the form of A
# (quantized once or not) and the largest M they hold for: what the kernel reaches now. A
# quantized in registers costs each program its rows of A in every K tile; A quantized once
# takes Triton's pipeliner (a wait and a descriptor a wgmma), which costs more instructions
# than the register prefetch but measured faster on an H100 when that prefetch took B's
# tiles alone (launchers.prepared).
LOOP_BOUNDS = {False: {1: 3.4, 7: 4.55, 8: 4.35, 16: 5.8, 32: 9.15}, True: {128: 3.65}}

_CROSS_COMPILE = """
import json, os
os.environ.pop("TRITON_INTERPRET", None)
from mxfp4_mm.launchers.prepared import prepared_config, prepared_launch_specs
from mxfp4_mm.tools import sm90_loop
from mxfp4_mm.tools.fit import launch_resources
from mxfp4_mm.tools.model_shapes import model_pairs
shapes = [(m, n, k) for n, k in model_pairs(["llama-3-8b"]) for m in (1, 3, 8, 16, 32, 64, 128)]
launches = [dict(launch_resources("sm_90", spec), shape=[m, n, k]) for m, n, k in shapes
            for spec in prepared_launch_specs(prepared_config(m, n, k), "cuda", m, n, k, (k, 1),
                                              "meta")]
print(json.dumps(dict(loops=sm90_loop.rows(shapes, paths=("prepared",)), launches=launches)))
"""


def test_every_served_config_compiles_for_sm90_without_a_stack_within_its_loop_bound(
        runners_triton):
    import json
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT)])
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    compiled = json.loads(done.stdout.splitlines()[-1])
    for launch in compiled["launches"]:     # the quantize and dequantize launches of A too
        assert launch["fits"] and not launch["spills"], launch
    assert {launch["kernel"] for launch in compiled["launches"]} == {"quantize_a", "gemm"}
    rows = compiled["loops"]
    assert len(rows) == 4 * 7
    for row in rows:
        m = row["shape"][0]
        assert row["triton"] == "3.6.0"
        assert row["fits"] and row["stack_bytes"] == 0 and row["registers"] <= 255, row
        assert row["loop_mix"]["HGMMA"] == 16, row
        bounds = LOOP_BOUNDS[row["config"]["a_dequantized"]]
        bound = bounds[min(b for b in bounds if b >= m)]
        assert row["lane_instructions_per_element"] <= bound, row


def test_the_bench_modes_variants_and_table():
    from mxfp4_mm.tools.bench_prepared import (VARIANTS, format_prepared_table, prepared_bytes,
                                               variant_configs)
    configs = variant_configs(8, 4096, 4096)
    assert configs["s_flip"].num_stages == 3 and configs["prepared"].num_stages == 1
    assert variant_configs(64, 4096, 4096)["s_flip"].num_stages == 1
    assert configs["a_flip"].a_dequantized != configs["prepared"].a_dequantized
    assert configs["n_flip"].block_n == 64 and configs["n_flip"].num_warps == 4
    codes, scales = random_mxfp4(64, 320, seed=5, high=129)
    weight = layout.swizzle(codes, scales)
    assert prepared_bytes(2, 64, 320, weight) == 2 * 2 * 320 + 64 * 512 // 2 + 64 * 16 + 2 * 2 * 64
    row = dict(m=1, n=64, k=320, weight_mb=0.02, bytes_us=2.0, configs={"prepared": "x"},
               **{f"{v}_us": 4.0 for v in VARIANTS})
    assert "2.00" in format_prepared_table([row]).splitlines()[1]


@pytest.mark.parametrize("device_type, target, rows", [
    ("cpu", ("interpreter", "interpreter"), None),
    ("cuda", ("cuda", "sm_90"), prepared.SM90.prepared_max_m),
    ("cuda", ("cuda", "sm_120"), prepared.SM90.prepared_max_m),
    ("cuda", ("cuda", "sm_89"), None),
    ("cuda", ("hip", "gfx950"), None),        # ROCm's torch names its devices cuda too
])
def test_the_layer_takes_the_prepared_path_on_cuda_devices_of_sm90_and_up(monkeypatch,
                                                                           device_type, target,
                                                                           rows):
    """max_rows (up to which M MXFP4Linear takes the path) and serves, the device's target
    faked: only a CUDA device whose backend is CUDA and whose chip has a prepared_max_m."""
    import mxfp4_mm.launchers as launchers
    asked = []

    def current_target(device):
        asked.append(device)
        return target
    monkeypatch.setattr(launchers, "current_target", current_target)
    assert prepared.max_rows(device_type) == rows
    assert prepared.max_rows(torch.device(device_type)) == rows
    assert asked == ([] if device_type == "cpu" else [torch.device(device_type)] * 2)
    assert prepared.serves(device_type) == (rows is not None)


def test_the_prepared_launchers_contract(a_once_at_any_size):
    """What a PreparedLauncher states (launchers.launcher), built for the interpreter: its K
    splits, a proof repeated where it splits K, one launch a call or three where A is quantized
    once, its counter rows where it sums split K itself; the wrapper the ladder proves states
    the same."""
    def built(m, n, k):
        return prepared.PreparedLauncher(prepared.prepared_config(m, n, k), "interpreter", m, n,
                                         k, (k, 1), "cpu", False)
    from mxfp4_mm.launchers.proof import SPLIT_K_REPEATS
    split = built(9, 128, 1024)                     # A once, two splits
    assert (split.splits, split.proof_repeats, split.launches_per_call) == (
        2, SPLIT_K_REPEATS, 2)
    assert list(split.kernel_launches()) == ["quantize_a", "gemm"]
    assert split.counter_rows is not None and split.counter_rows[0].dtype == torch.int32
    whole = built(3, 64, 256)                       # one K tile: no split
    assert (whole.splits, whole.proof_repeats, whole.launches_per_call) == (1, 0, 1)
    assert list(whole.kernel_launches()) == ["gemm"] and whole.counter_rows is None
    assert (whole.quantizer, whole.config) == ("software", prepared.prepared_config(3, 64, 256))
    wrapped = prepared._OnShuffledWeights(split)
    assert (wrapped.config, wrapped.splits, wrapped.quantizer, wrapped.proof_repeats,
            wrapped.launches_per_call) == (split.config, 2, "software", SPLIT_K_REPEATS, 2)
    assert wrapped.kernel_launches() == split.kernel_launches()


def gemm_arguments(m, n, k, a_strides=None, backend="cuda"):
    """{name: value} of the non-tensor arguments of the prepared GEMM's launch of one call
    (prepared_launch_specs, the rule's config), on the meta device."""
    config = prepared.prepared_config(m, n, k)
    specs = prepared.prepared_launch_specs(config, backend, m, n, k, a_strides or (k, 1), "meta")
    gemm = specs[-1]
    assert gemm.name == "gemm" and gemm.kernel is hopper_prepared_gemm.hopper_prepared_gemm_kernel
    named = dict(zip(gemm.kernel.arg_names, gemm.sample_args))
    return {name: value for name, value in named.items() if not isinstance(value, torch.Tensor)}


def test_the_gemms_arguments_for_a_quantized_once_a_split_k_and_a_strided_a(a_once_at_any_size):
    """A quantized once (M = 8, BLOCK_M 16, three stages: no prefetch): A_ROWS all of BLOCK_M
    although M is fewer (its values are loaded into the MMA's operand as they are); A quantized
    by each program (M = 3):
    the power of two at or above M. EVEN_K where K is a multiple of the split's size. Split K
    with a strided A: the strides as A has them, the partials' of [splits, M, N]."""
    once = gemm_arguments(8, 128, 512)
    assert (once["M"], once["N"], once["K"], once["K_UNITS"]) == (8, 128, 512, 8)
    assert (once["BLOCK_M"], once["BLOCK_N"], once["A_ROWS"]) == (16, 128, 16)
    assert (once["A_DEQUANTIZED"], once["EVEN_K"], once["SPLIT_K"]) == (True, True, 1)
    assert (once["THREADS"], once["PREFETCH"], once["CACHE_MODIFIER"]) == (256, False, None)
    assert once["stride_am"] == 512 and once["stride_ak"] == 1   # A's values, bf16 [M, K]
    each = gemm_arguments(3, 64, 320)
    assert (each["A_ROWS"], each["A_DEQUANTIZED"], each["EVEN_K"], each["K_UNITS"]) == (
        4, False, False, 8)
    assert each["SPLIT_K_SIZE"] == 512 and each["THREADS"] == 128
    split = gemm_arguments(5, 128, 1024, a_strides=(2048, 1))
    assert (split["SPLIT_K"], split["SPLIT_K_SIZE"], split["REDUCE_IN_GEMM"], split["EVEN_K"]) == (
        2, 512, True, True)
    assert (split["stride_am"], split["stride_ak"], split["stride_cm"]) == (2048, 1, 128)
    assert (split["stride_ps"], split["stride_pm"]) == (5 * 128, 128)
    assert gemm_arguments(5, 128, 1024, a_strides=(1, 5))["stride_ak"] == 5


def test_the_gemm_is_launched_on_the_tensors_the_kernel_reads():
    """The sample tensors a launch is bound to, as the kernel takes them: A bf16 [M, K] of the
    call's strides, the weight's values as int32 words [N/16, Kp/64, 128] and scales as int32
    [N/16, Kp/64, 8], C bf16 [M, N]; with split K fp32 partials [splits, M, N] and an int32
    counter row, else C in their place."""
    def tensors(m, n, k, a_strides):
        config = prepared.prepared_config(m, n, k)
        gemm = prepared.prepared_launch_specs(config, "cuda", m, n, k, a_strides, "meta")[-1]
        named = dict(zip(gemm.kernel.arg_names, gemm.sample_args))
        return {name: named[name] for name in ("a_ptr", "b_ptr", "b_scales_ptr", "c_ptr",
                                                "partials_ptr", "counters_ptr")}
    split = tensors(5, 128, 1024, (1, 5))
    a, b, b_scales, c = (split[name] for name in ("a_ptr", "b_ptr", "b_scales_ptr", "c_ptr"))
    assert (a.dtype, tuple(a.shape), a.stride()) == (torch.bfloat16, (5, 1024), (1, 5))
    assert (b.dtype, tuple(b.shape)) == (torch.int32, (8, 16, 128))
    assert (b_scales.dtype, tuple(b_scales.shape)) == (torch.int32, (8, 16, 8))
    assert (c.dtype, tuple(c.shape)) == (torch.bfloat16, (5, 128))
    assert split["partials_ptr"].dtype == torch.float32
    assert tuple(split["partials_ptr"].shape) == (2, 5, 128)
    assert split["counters_ptr"].dtype == torch.int32
    assert all(tensor.device.type == "meta" for tensor in split.values())
    whole = tensors(3, 64, 320, (320, 1))
    assert tuple(whole["b_ptr"].shape) == (4, 8, 128)
    assert whole["partials_ptr"] is whole["c_ptr"] is whole["counters_ptr"]


def test_a_call_of_a_quantized_once_a_launches_the_quantized_values_then_the_gemm(
        a_once_at_any_size):
    """From A_DEQUANTIZED_MIN_M: kernels.quantized_values with the software quantizer over A as
    it is given (its strides) into a bf16 [M, K] that the GEMM reads; each launch passes its
    own tensors per call (A and its values; the GEMM its six)."""
    from mxfp4_mm.kernels import quantized_values
    m, n, k = prepared.A_DEQUANTIZED_MIN_M, 128, 512
    config = prepared.prepared_config(m, n, k)
    specs = prepared.prepared_launch_specs(config, "cuda", m, n, k, (1, m), "meta")
    assert [(spec.name, spec.per_call) for spec in specs] == [("quantize_a", 2), ("gemm", 6)]
    quantize, gemm = specs
    a, values = quantize.sample_args[:2]
    assert a.stride() == (1, m) and "software" in quantize.sample_args
    assert tuple(values.shape) == (m, k) and values.dtype == torch.bfloat16
    assert values.stride() == (k, 1) and gemm.sample_args[0].stride() == (k, 1)
    # a tile that fits sm_90's registers
    assert quantize.options == {"num_warps": quantized_values.VALUES_WARPS, "num_stages": 1}
    assert quantize.grid == (formats.cdiv(m, quantized_values.VALUES_BLOCK_M),
                             k // quantized_values.VALUES_MAX_BLOCK_K, 1)
    assert gemm.options == {
        "num_warps": config.num_warps, "num_stages": config.num_stages}
    assert gemm.grid == (config.splits_for(k)[0] * formats.cdiv(m, 16) * formats.cdiv(n, 128),
                         1, 1)


class RecordedLaunch:
    """A launch of a PreparedLauncher, faked: `is_direct` as given; each call recorded in
    `calls` as ("direct" or "standard", its arguments)."""

    def __init__(self, calls, name, is_direct):
        self.calls, self.name, self.is_direct = calls, name, is_direct

    def __call__(self, *arguments):
        self.calls.append((self.name, "direct", arguments))

    def direct(self, *arguments):
        self.calls.append((self.name, "direct", arguments))

    def standard(self, *arguments):
        self.calls.append((self.name, "standard", arguments))


def recorded_launcher(m, n, k, is_direct=True):
    """A PreparedLauncher built for the interpreter, its launches RecordedLaunch; (launcher,
    the calls)."""
    launcher = prepared.PreparedLauncher(prepared.prepared_config(m, n, k), "interpreter", m, n,
                                         k, (k, 1), "cpu", True)
    calls = []
    launcher.launches = {name: RecordedLaunch(calls, name, is_direct)
                         for name in launcher.launches}
    return launcher, calls


def test_a_call_takes_the_direct_launch_with_its_operands_as_they_come_and_a_counter_row_in_turn():
    """Split K (two splits): fp32 partials [splits, M, N] and the launcher's counter rows, one
    after the other call by call; the direct launch takes values and scales themselves, after
    the constants of the launch."""
    m, n, k = 5, 128, 1024
    launcher, calls = recorded_launcher(m, n, k)
    a = torch.zeros(m, k, dtype=torch.bfloat16)
    weight = layout.swizzle(*random_mxfp4(n, k, seed=2))
    outs = [launcher(a, weight.values, weight.scales) for _ in range(3)]
    assert [(name, how) for name, how, _ in calls] == [("gemm", "direct")] * 3
    rows = launcher.counter_rows
    for (_, _, arguments), out, row in zip(calls, outs, (0, 1, 2)):
        assert arguments[0] is a and arguments[1] is weight.values and arguments[2] is weight.scales
        assert arguments[3] is out and out.shape == (m, n) and out.dtype == torch.bfloat16
        assert arguments[4].shape == (2, m, n) and arguments[4].dtype == torch.float32
        assert arguments[5] is rows[row]
        assert arguments[6:] == tuple(launcher.constants["gemm"])
    assert outs[0] is not outs[1]


def test_a_call_takes_the_standard_launch_on_the_kernels_views_where_asked_or_misaligned():
    """direct=False, or a tensor 8 bytes off the alignment, or a launch without the direct
    launch: the standard launch, on weight_arguments' views of the weight; without split K the
    output stands in for partials and counters."""
    m, n, k = 3, 64, 256
    weight = layout.swizzle(*random_mxfp4(n, k, seed=2))
    views = hopper_prepared_gemm.weight_arguments(weight)
    a = torch.zeros(m, k + 4, dtype=torch.bfloat16)
    for launcher_direct, operand, direct in ((True, a[:, :k], False), (True, a[:, 4:], True),
                                             (False, a[:, :k], True)):
        launcher, calls = recorded_launcher(m, n, k, launcher_direct)
        out = launcher(operand, weight.values, weight.scales, direct)
        [(name, how, arguments)] = calls
        assert (name, how) == ("gemm", "standard")
        assert arguments[0] is operand
        assert all(torch.equal(got, view) and got.dtype == view.dtype
                   for got, view in zip(arguments[1:3], views))
        assert arguments[3] is arguments[4] is arguments[5] is out


def test_a_call_of_a_quantized_once_a_quantizes_then_multiplies_its_values(a_once_at_any_size):
    m, n, k = prepared.A_DEQUANTIZED_MIN_M, 128, 256
    launcher, calls = recorded_launcher(m, n, k)
    a = torch.zeros(m, k, dtype=torch.bfloat16)
    weight = layout.swizzle(*random_mxfp4(n, k, seed=2))
    launcher(a, weight.values, weight.scales)
    assert [(name, how) for name, how, _ in calls] == [("quantize_a", "direct"),
                                                        ("gemm", "direct")]
    (_, _, quantize), (_, _, gemm) = calls
    assert quantize[0] is a
    values = quantize[1]
    assert values.shape == (m, k) and values.dtype == torch.bfloat16 and gemm[0] is values
    launcher(a, weight.values, weight.scales, direct=False)
    assert [(name, how) for name, how, _ in calls[2:]] == [("quantize_a", "standard"),
                                                           ("gemm", "standard")]


def test_the_ops_fake_gives_a_bf16_m_by_n_on_as_device():
    """What torch.compile traces the op with (on meta tensors): a new bf16 [M, N], N 16 rows a
    weight tile."""
    a = torch.empty(3, 256, dtype=torch.bfloat16, device="meta")
    values = torch.empty(5, 4, 8, 4, 4, 4, dtype=torch.uint8, device="meta")
    scales = torch.empty(5, 4, 8, 2, 2, dtype=torch.uint8, device="meta")
    out = torch.ops.mxfp4_mm.gemm_prepared(a, values, scales, 256, False)
    assert (tuple(out.shape), out.dtype, out.device.type) == ((3, 80), torch.bfloat16, "meta")


def test_each_problem_takes_a_launcher_of_its_own_and_no_rows_none(fresh_cache, monkeypatch,
                                                                   device):
    """The launcher cache keyed by the problem (launchers.cached_launcher): another M, another
    weight (N or K) each build one, the same problem again none; M = 0 gives an empty bf16
    [0, N] without building any."""
    built = []

    def build(arch, backend, m, n, k, a_strides, device, wide_scales, out_dtype):
        built.append((m, n, k))
        number = len(built)
        return lambda a, values, scales: torch.full((m, n), number, dtype=torch.bfloat16,
                                                    device=a.device)
    monkeypatch.setattr(prepared, "proven_prepared_launcher", build)
    weights = {(n, k): prepared.hopper_weight_from_mxfp4(*(t.to(device) for t in random_mxfp4(
        n, k, seed=n + k))) for n, k in ((64, 256), (32, 256), (64, 320))}

    def call(m, n, k):
        return prepared.gemm_prepared(torch.zeros(m, k, dtype=torch.bfloat16, device=device),
                                      weights[n, k])
    empty = call(0, 64, 256)
    assert (tuple(empty.shape), empty.dtype, built) == ((0, 64), torch.bfloat16, [])
    assert [int(call(*shape)[0, 0]) for shape in ((2, 64, 256), (3, 64, 256), (2, 64, 256),
                                                   (2, 32, 256), (2, 64, 320))] == [1, 2, 1, 3, 4]
    assert built == [(2, 64, 256), (3, 64, 256), (2, 32, 256), (2, 64, 320)]


def test_the_ladder_of_the_prepared_path_is_the_direct_then_the_standard_launch(monkeypatch):
    """Both rungs the rule's config, for the call's problem; nothing below them."""
    built = []

    class Recorded:
        quantizer, splits, proof_repeats, launches_per_call = "software", 1, 0, 1
        out_dtype = torch.bfloat16

        def __init__(self, *arguments):
            built.append(arguments)
            self.config = arguments[0]
    monkeypatch.setattr(prepared, "PreparedLauncher", Recorded)
    rungs = prepared.prepared_rungs("cuda", 5, 128, 1024, (2048, 1), "meta", True)
    config = prepared.prepared_config(5, 128, 1024)
    assert [(rung.name, rung.config) for rung in rungs] == [
        ("prepared", config), ("prepared, standard launch", config)]
    for rung in rungs:
        wrapper = rung.build()
        assert isinstance(wrapper.launcher, Recorded)
    assert built == [(config, "cuda", 5, 128, 1024, (2048, 1), "meta", True, allow,
                      torch.bfloat16) for allow in (True, False)]


@pytest.mark.interpreter
@pytest.mark.parametrize("fault, rung", [(None, "prepared"),
                                         ("wrong", "prepared, standard launch")])
def test_the_proven_launcher_is_the_prepared_one_named_by_the_rung_that_proved_it(
        monkeypatch, fault, rung):
    m, n, k = 1, 48, 64
    if fault:
        monkeypatch.setenv("MXFP4_MM_FAULT", f"{fault}:{m},{n},{k}")
    launcher = prepared.proven_prepared_launcher("interpreter", "interpreter", m, n, k, (k, 1),
                                                 "cpu", False)
    assert isinstance(launcher, prepared.PreparedLauncher)
    assert launcher.rung == rung and launcher.config == prepared.prepared_config(m, n, k)

