"""Tests for seeded bugs that the rest of the suite let through (issue 15's mutation testing;
/work/notes/mutation-report.md lists them):

- the gfx950 instruction's operands: the interpreter runs `_cvt_model`, never the asm call, so
  the asm call's operand list and its template are checked against the model's contract here;
- the ladder's proof of a direct launcher: `prove_rung` must check the direct launch too;
- the import-time tuner: every candidate but the served table entry is proven before it is
  timed, so a wrong but fast candidate never wins;
The single-launch split-K's release order (the interpreter runs programs one after another,
so no order bug shows there) is checked in the gfx950 code of Triton 3.6.0 by
tests/test_cross_compile.py (every import-time candidate, "release_ordered").
"""

import ast
import re
from pathlib import Path

import pytest
import torch

from kernels import formats
from kernels.quantize import CVT_FP4_BF16_ASM
from launchers import ladder, proof, tuner
from launchers.configs import config_for

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------
# the gfx950 instruction's operands
# ---------------------------------------------------------------------------------------

def _function(tree, name):
    return next(node for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name == name)


def _calls(function, name):
    return [node for node in ast.walk(function) if isinstance(node, ast.Call)
            and ast.unparse(node.func) == name]


def test_the_asm_call_gets_the_operands_the_model_gets():
    """In _hardware_words the interpreter's model and the gfx950 asm take one operand list
    (p0..p3, scale): a swap in the asm call alone would only show on the hardware."""
    tree = ast.parse((ROOT / "kernels" / "quantize.py").read_text())
    function = _function(tree, "_hardware_words")
    (model,) = _calls(function, "_cvt_model")
    (asm,) = _calls(function, "tl.inline_asm_elementwise")
    model_operands = [ast.unparse(arg) for arg in model.args]
    asm_operands = [ast.unparse(arg) for arg in asm.args[2].elts]
    assert model_operands == ["p0", "p1", "p2", "p3", "scale"]
    assert asm_operands == model_operands


def test_the_asm_template_puts_pair_j_into_byte_j():
    """The model's contract: pair j (operand $(j+1)) -> byte j of the word ($0), scale $5.
    The destination byte of v_cvt_scalef32_pk_fp4_bf16 is op_sel[2] + 2 * op_sel[3]."""
    lines = [line.strip() for line in CVT_FP4_BF16_ASM.value.split("\n")]
    assert len(lines) == 4
    for j, line in enumerate(lines):
        match = re.fullmatch(r"v_cvt_scalef32_pk_fp4_bf16 \$0, \$(\d), \$5"
                             r"(?: op_sel:\[0,0,([01]),([01])\])?", line)
        assert match, line
        source, sel2, sel3 = match.groups()
        assert int(source) == j + 1, line
        assert int(sel2 or 0) + 2 * int(sel3 or 0) == j, line


# ---------------------------------------------------------------------------------------
# the proof of a direct launcher, through the ladder
# ---------------------------------------------------------------------------------------

class ReferenceLauncher:
    """The reference output; with direct_differs, the direct launch's last element is one
    bit off."""

    def __init__(self, is_direct=True, direct_differs=False):
        self.is_direct = is_direct
        self.direct_differs = direct_differs

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        k = a.shape[1]
        b_codes = formats.unshuffle_weight(b_shuffle.view(torch.uint8))
        b_scales = formats.e8m0_unshuffle(b_scale_sh.view(torch.uint8), b_codes.shape[0],
                                          k // 32)
        out = proof.reference_output(a, b_codes, b_scales)
        if direct and self.direct_differs:
            out.view(torch.int16)[-1, -1] ^= 1
        return out


def test_the_ladder_proves_the_direct_launch_of_a_direct_launcher(capsys):
    m, n, k = 4, 64, 512
    differing = ladder.Rung("direct differs", lambda: ReferenceLauncher(direct_differs=True))
    with pytest.raises(proof.ProofFailure, match="direct launch differs"):
        ladder.prove_rung(differing, m, n, k, (k, 1), "cpu")
    rungs = [differing, ladder.Rung("right", ReferenceLauncher)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", m, n, k, (k, 1), "cpu",
                                      rungs)
    assert launcher.rung == "right"
    err = capsys.readouterr().err
    assert "direct differs failed (ProofFailure: the direct launch differs" in err


# ---------------------------------------------------------------------------------------
# the import-time tuner proves its candidates
# ---------------------------------------------------------------------------------------

class WrongLauncher:
    is_direct = False

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        return torch.zeros((a.shape[0], b_shuffle.shape[0]), dtype=torch.bfloat16)


class FakeLoop:
    """Times the table's entry (the first launcher) at 9 µs, every other at 1 µs."""

    def __init__(self, *args, **kwargs):
        pass

    def time_interleaved(self, calls, count):
        return [[9.0 + 0.1 * (-1) ** i if index == 0 else 1.0 + 0.1 * (-1) ** i
                 for i in range(count)] for index, _ in enumerate(calls)]


class Served:
    def __init__(self, config):
        self.config = config
        self.rung = "software quantizer"
        self.hw_cvt = False


def test_tune_never_times_or_chooses_a_candidate_that_fails_its_proof(monkeypatch, capsys):
    """tune() end to end on the CPU: every candidate builds a launcher with wrong outputs and
    would time fastest; each must fail its proof, so the table's entry stays."""
    shape = (4, 2880, 512)
    assert len(tuner.candidate_configs("gfx950", shape)) > 1
    monkeypatch.setattr(tuner, "GemmLauncher", WrongLauncher)
    monkeypatch.setattr(tuner, "RunnerLoop", FakeLoop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Served(config_for("gfx950", *shape))
    replacements = tuner.tune([shape], lambda s: served, "cpu", "gfx950", "interpreter")
    assert replacements == {}
    block = capsys.readouterr().err
    rows = [line for line in block.splitlines() if line.startswith("  4x2880x512 ")]
    assert len(rows) == len(tuner.candidate_configs("gfx950", shape))
    assert rows[0].startswith("  4x2880x512 * table")
    assert all("ProofFailure" in line for line in rows[1:])
