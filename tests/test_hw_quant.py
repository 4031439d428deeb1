"""The gfx950 hardware quantizer, proven equal to the software one on a model of the instruction.

No AMD GPU runs here. The instruction is modelled in torch from its ISA definition
(formats.cvt_scalef32_pk_fp4_bf16_model); the kernel's fast path gives it raw bf16 pairs with
the scale operand 2^(byte - 127) for every tile whose block amaxes all lie in
[FAST_AMAX_MIN, FAST_AMAX_MAX], and the proof below covers every bf16 value in every such block.
Everything else takes the software recipe (tests/test_quantize_kernel.py). The interpreter runs
the kernel's hardware quantizer with a Triton model in place of the asm
(tests/test_quantize_kernel.py, below for GEMMs), and on the chip every launcher is proven
against the reference when it is built (launchers/proof.py), the hardware quantizer's first
(launchers/ladder.py). The asm template itself is checked below: its operands against the
model's, and no conversion's result read by the next instruction (gfx950 does not forward it).
"""

import ast
import math
import re
from pathlib import Path

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import (CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS, CVT_FP4_F32_ASM,
                                       CVT_FP4_F32_CONSTRAINTS, CVT_WORDS, FAST_AMAX_MAX, FAST_AMAX_MIN)
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.gemm import GemmLauncher

ROOT = Path(__file__).resolve().parents[1]


def scale_of_byte(byte):
    """The instruction's scale operand for an E8M0 byte: the fp32 whose bits are byte << 23."""
    return torch.tensor([byte << 23], dtype=torch.int32).view(torch.float32)


# The instruction's two forms: their source dtype and model.
FORMS = {"bf16": (torch.bfloat16, formats.cvt_scalef32_pk_fp4_bf16_model),
         "f32": (torch.float32, formats.cvt_scalef32_pk_fp4_f32_model)}


def model(values, byte=127, form="bf16"):
    """Per-value code through the model of the instruction's form (the value as the low
    nibble's source, +0 as the high one's)."""
    dtype, instruction = FORMS[form]
    values = values.to(dtype).flatten()
    scale = scale_of_byte(byte).expand_as(values.float())
    return instruction(values, torch.zeros_like(values), scale) & 0xF


def all_bf16_values():
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def rounded_exponent(amax_bits: int) -> int:
    """The block exponent the "even" rule reads from a bf16 amax (formats.scale_byte_and_multiplier)."""
    return (amax_bits + 0x20) >> 7


# ------------------------------------------------------------------ the model itself

@pytest.mark.parametrize("value, code", [
    (0.0, 0), (0.25, 0), (0.2578125, 1), (0.75, 2), (1.25, 2), (1.2578125, 3), (1.75, 4),
    (2.5, 4), (2.515625, 5), (3.5, 6), (5.0, 6), (5.03125, 7), (6.0, 7), (100.0, 7),
    (-0.75, 10), (-5.0, 14), (-0.1, 8), (-100.0, 15), (-0.0, 8)])
@pytest.mark.parametrize("form", FORMS)
def test_model_rounds_to_nearest_even_and_saturates(value, code, form):
    assert int(model(torch.tensor([value]), form=form)) == code


@pytest.mark.parametrize("form", FORMS)
def test_model_divides_by_the_scale_exponent_only(form):
    dtype, instruction = FORMS[form]
    scale = torch.tensor([4.0 * 1.9])       # exponent 2**2; the mantissa must be ignored
    values = torch.tensor([6.0, 10.0, 13.0], dtype=dtype)
    codes = instruction(values, torch.zeros_like(values), scale.expand(3)) & 0xF
    assert codes.tolist() == [3, 4, 5]


@pytest.mark.parametrize("form", FORMS)
def test_model_packs_the_low_source_into_the_low_nibble(form):
    dtype, instruction = FORMS[form]
    low, high = torch.tensor([1.0], dtype=dtype), torch.tensor([-3.0], dtype=dtype)
    assert int(instruction(low, high, scale_of_byte(127))) == 2 | (13 << 4)


@pytest.mark.parametrize("value, byte", [(math.nan, 127), (math.inf, 127), (-math.inf, 127),
                                         (1e-40, 2), (-9.2e-41, 1), (1.0, 0), (1.0, 255)])
@pytest.mark.parametrize("form", FORMS)
def test_model_refuses_undocumented_inputs(value, byte, form):
    name = "v_" + FORMS[form][1].__name__.removesuffix("_model")
    with pytest.raises(ValueError, match=f"^{name} model: .*undocumented"):
        model(torch.tensor([value]), byte, form)


@pytest.mark.parametrize("form", FORMS)
def test_model_gives_zero_codes_to_denormals_and_signed_zeros_at_scales_from_2_to_the_minus_124(
        form):
    tiny = torch.tensor([1e-40, -1e-40, 0.0, -0.0, 1.1754942e-38, -1.1754942e-38])
    assert model(tiny, 3, form).tolist() == [0, 8, 0, 8, 0, 8]


@pytest.mark.parametrize("form, wrong", [("bf16", torch.float32), ("f32", torch.bfloat16)])
def test_model_refuses_sources_of_the_other_form(form, wrong):
    values = torch.ones(2, dtype=wrong)
    with pytest.raises(ValueError, match="sources must be"):
        FORMS[form][1](values, values, scale_of_byte(127).expand(2))


def test_f32_model_reads_every_mantissa_bit():
    """fp32 sources just past a tie round away from it (a bf16 source cannot hold them)."""
    ties = torch.tensor([0.25, 1.25, 2.5, 5.0])
    past = torch.nextafter(ties, torch.tensor(7.0))
    assert model(ties, form="f32").tolist() == [0, 2, 4, 6]
    assert model(past, form="f32").tolist() == [1, 3, 5, 7]


# ------------------------------------------------------------------ the fast path's inputs

def test_fast_range_is_the_block_exponents_5_to_254():
    lo, hi = FAST_AMAX_MIN.value, FAST_AMAX_MAX.value
    assert rounded_exponent(lo) == 5 and rounded_exponent(lo - 1) == 4
    assert rounded_exponent(hi) == 254 and rounded_exponent(hi + 1) == 255
    assert hi < 0x7F80        # no inf or NaN (magnitude bits >= 0x7F80) in a fast block


def test_fast_range_scale_bytes_agree_with_the_even_rule():
    """Byte e_r - 2 (fast path) == formats.scale_byte_and_multiplier's byte for every amax."""
    amax_bits = torch.arange(FAST_AMAX_MIN.value, FAST_AMAX_MAX.value + 1, dtype=torch.int32)
    amax = (amax_bits << 16).view(torch.float32)
    byte, multiplier = formats.scale_byte_and_multiplier(amax)
    want = (amax_bits + 0x20) // 128 - 2
    assert torch.equal(byte.to(torch.int32), want)
    assert torch.equal(multiplier, torch.pow(2.0, 127.0 - want.float()))


@pytest.mark.parametrize("form", FORMS)
def test_every_bf16_value_in_every_fast_block_converts_as_the_software_recipe(form):
    """For each fast block exponent e_r (byte e_r - 2) and each bf16 x that a block with that
    exponent can hold (magnitude bits up to the largest amax rounding to e_r), the instruction
    model (either form: raw x, or x widened to fp32) with scale 2^(byte - 127) gives the
    software code of x * 2^(127 - byte) exactly (the model keeps the sign of zero; the chip
    may give +0 there, see formats)."""
    x = all_bf16_values()
    magnitude = x.view(torch.int16).to(torch.int32) & 0x7FFF
    compared = 0
    for e_r in range(rounded_exponent(FAST_AMAX_MIN.value), rounded_exponent(FAST_AMAX_MAX.value) + 1):
        byte = e_r - 2
        largest_amax = min((e_r << 7) + 0x5F, FAST_AMAX_MAX.value)
        in_block = x[magnitude <= largest_amax]
        multiplier = torch.pow(2.0, torch.tensor(127.0 - byte))
        software = formats.e2m1_codes(formats.scaled_block(in_block.float(), multiplier))
        hardware = model(in_block, byte, form)
        same = software == hardware
        assert bool(same.all()), f"e_r={e_r}: x={in_block[~same][:4].float().tolist()}"
        compared += in_block.numel()
    assert compared > 250 * 30000


# ------------------------------------------------------------------ GEMMs in the interpreter

@pytest.mark.parametrize("m, n, k, config", [
    (16, 64, 1024, GemmConfig(16, 64, 512)),                # a fast tile, then a slow one
    (20, 128, 1024, GemmConfig(16, 64, 256)),                 # a K loop, rows past M wrapped
    (8, 64, 1024, GemmConfig(16, 32, 256, split_k=2)),
])
@pytest.mark.parametrize("quantizer", ["hardware", "hardware-f32"])
@pytest.mark.interpreter      # the asm's models; compiled, the asm is gfx950's alone
def test_gemm_with_a_hardware_quantizer_matches_the_software_one_and_the_reference(
        m, n, k, config, quantizer):
    data = reference.generate_input(m, n, k, seed=m * n + k, device="cpu")
    a, _, _, b_shuffle, b_scale_sh = data
    a = a.clone()
    a[1, k - 5] = float("nan")         # tiles with special values take the slow path,
    a[min(3, m - 1), k - 64:] = 0.0     # and those with all-zero blocks too
    data = (a,) + data[1:]
    outs = [GemmLauncher(config, "interpreter", m, n, k, (k, 1), "cpu", quantizer=name)(
        a, b_shuffle, b_scale_sh) for name in (quantizer, "software")]
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
    finite = torch.isfinite(outs[1]).all(dim=1)
    want = reference.ref_kernel(data)
    assert reference.compare(outs[0][finite], want[finite])[0]


# ------------------------------------------------------------------ the asm call's operands
# The interpreter runs _cvt_model and _cvt_f32_model, never the asm calls: their operand lists
# and templates are checked against the models' contract here (seeded swaps in either passed
# every other test).

def _function(tree, name):
    return next(node for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name == name)


def _calls(function, name):
    return [node for node in ast.walk(function) if isinstance(node, ast.Call)
            and ast.unparse(node.func) == name]


@pytest.mark.parametrize("function, model_name, operands, constants", [
    ("_bf16_form_words", "_cvt_model", ["p0", "p1", "p2", "p3", "scale"],
     ["CVT_FP4_BF16_ASM", "CVT_FP4_BF16_CONSTRAINTS"]),
    ("_f32_form_words", "_cvt_f32_model", [f"x{i}" for i in range(8)] + ["scale"],
     ["CVT_FP4_F32_ASM", "CVT_FP4_F32_CONSTRAINTS"]),
])
def test_the_asm_call_gets_the_operands_the_model_gets(function, model_name, operands,
                                                        constants):
    """In each form's function the interpreter's model and the gfx950 asm take one operand
    list: a swap in the asm call alone would only show on the hardware. The asm converts
    CVT_WORDS words per call (its pack), with the template and constraints of its form."""
    tree = ast.parse((ROOT / "kernels" / "quantize.py").read_text())
    function = _function(tree, function)
    (model,) = _calls(function, model_name)
    (asm,) = _calls(function, "tl.inline_asm_elementwise")
    model_operands = [ast.unparse(arg) for arg in model.args]
    asm_operands = [ast.unparse(arg) for arg in asm.args[2].elts]
    assert model_operands == operands
    assert asm_operands == model_operands
    assert [ast.unparse(arg) for arg in asm.args[:2]] == constants
    assert {k.arg: ast.unparse(k.value) for k in asm.keywords}["pack"] == "CVT_WORDS"


# Each asm template: (template, constraints, sources per byte).
TEMPLATES = [pytest.param((CVT_FP4_BF16_ASM.value, CVT_FP4_BF16_CONSTRAINTS.value, 1), id="bf16"),
             pytest.param((CVT_FP4_F32_ASM.value, CVT_FP4_F32_CONSTRAINTS.value, 2), id="f32")]
_CONVERSION = re.compile(r"(v_cvt_scalef32_pk_fp4_\w+) \$(\d+), ((?:\$\d+, )+)\$(\d+)"
                         r"(?: op_sel:\[0,0,([01]),([01])\])?")


def _lines(template):
    return [line.strip() for line in template.split("\n")]


def _operands(line):
    return {int(number) for number in re.findall(r"\$(\d+)", line)}


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_asm_template_puts_input_group_j_into_byte_j_of_its_own_word(template):
    """The model's contract, for each word w of a call (Triton's pack: output $w is the word
    of element w, input i of element w is operand $(CVT_WORDS * (i + 1) + w)): the sources
    of byte j are inputs j*n .. (j+1)*n - 1 (n per byte), the scale is input 4n, and the
    destination byte is op_sel[2] + 2 * op_sel[3]."""
    text, constraints, n = template
    words = CVT_WORDS.value
    assert constraints.split(",") == ["=&v"] * words + ["v"] * words * (4 * n + 1)
    written = []
    for line in _lines(text):
        match = _CONVERSION.fullmatch(line)
        assert match, line
        word = int(match.group(2))
        sources = [int(x) for x in re.findall(r"\d+", match.group(3))]
        byte = int(match.group(5) or 0) + 2 * int(match.group(6) or 0)
        assert word < words, line
        assert sources == [words * (byte * n + s + 1) + word for s in range(n)], line
        assert int(match.group(4)) == words * (4 * n + 1) + word, line
        written.append((word, byte))
    assert sorted(written) == [(w, j) for w in range(words) for j in range(4)]


@pytest.mark.parametrize("template", TEMPLATES)
def test_no_conversion_result_is_touched_by_the_next_instruction(template):
    """gfx950 does not forward a conversion's result to the very next instruction (and a
    byte write reads the other bytes of its word): the instruction after each conversion
    inside the template must not name its destination (after the asm, LLVM pads a reader:
    tests/test_gfx950_hazards.py)."""
    lines = _lines(template[0])
    for line, following in zip(lines, lines[1:]):
        if line.startswith("v_cvt_scalef32"):
            destination = int(_CONVERSION.fullmatch(line).group(2))
            assert destination not in _operands(following), (line, following)


def test_the_hazard_check_can_fail():
    chained = "v_cvt_scalef32_pk_fp4_bf16 $0, $2, $10\n\tv_cvt_scalef32_pk_fp4_bf16 $0, $4, $10 " \
              "op_sel:[0,0,1,0]"
    with pytest.raises(AssertionError):
        test_no_conversion_result_is_touched_by_the_next_instruction((chained, "", 1))
