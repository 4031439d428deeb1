"""What only the compiled kernel shows, checked statically on Triton 3.6.0's gfx950 assembly of
one small GEMM per hardware quantizer form and of the bf16 conversion asm alone (compiled
once per module, offline; see tests/test_cross_compile.py for the whole table).

Decisions checked here:
- the conversion asm's register constraints: its outputs are early-clobber ("=&v"), so no
  register the asm block writes is read again, as a source, by a later instruction of the same
  block (a destination sharing a register with a later input would convert the wrong bytes);
- each form's assembly holds its own conversion (bf16 or f32 sources) and not the other's;
- K split across the waves (WAVE_SPLIT_K) at M = 4: the stacked product's off-diagonal blocks
  take the MFMAs that repeated rows take without it, no more, and its code has no hazard.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
FORMS = {"hardware": "v_cvt_scalef32_pk_fp4_bf16", "hardware-f32": "v_cvt_scalef32_pk_fp4_f32"}

PROBE = '''
import sys
from pathlib import Path
import torch, triton, triton.language as tl
from mxfp4_mm.kernels.quantize import CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS, CVT_WORDS
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.gemm import launch_specs
from mxfp4_mm.tools.gfx950.cross_compile import compile_for

out = Path(sys.argv[1])
config = GemmConfig(16, 64, 256, split_k=2)   # a K loop of two tiles per split, and a reduce
for quantizer in ("hardware", "hardware-f32"):
    spec = launch_specs(config, "hip", 16, 128, 1024, (1024, 1), "meta", quantizer)[0]
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options)
    (out / f"{quantizer}.s").write_text(compiled.asm["amdgcn"])

for wave_split_k in (1, 4):   # M = 4: four K slices fill the MFMA's 16 rows
    config = GemmConfig(16, 128, 512, wave_split_k=wave_split_k)
    spec = launch_specs(config, "hip", 4, 256, 1024, (1024, 1), "meta", "hardware")[0]
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options)
    (out / f"wave-split-{wave_split_k}.s").write_text(compiled.asm["amdgcn"])


@triton.jit
def lone_conversion(x_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    """The asm alone, its inputs dead after it: free registers for its outputs to share."""
    i = tl.arange(0, BLOCK)
    sources = [tl.load(x_ptr + 0 * BLOCK + i), tl.load(x_ptr + 1 * BLOCK + i),
               tl.load(x_ptr + 2 * BLOCK + i), tl.load(x_ptr + 3 * BLOCK + i)]
    words = tl.inline_asm_elementwise(CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS,
                                      sources + [tl.load(s_ptr + i)], dtype=tl.uint32,
                                      is_pure=True, pack=CVT_WORDS)
    tl.store(out_ptr + i, words)


x = torch.empty(4 * 512, dtype=torch.int32, device="meta")
s = torch.empty(512, dtype=torch.float32, device="meta")
compiled = compile_for(lone_conversion, (x, s, x, 512), dict(num_warps=4))
(out / "lone.s").write_text(compiled.asm["amdgcn"])
'''

_REGISTER = re.compile(r"\bv(?:(\d+)|\[(\d+):(\d+)\])")


def registers(operand: str) -> set:
    """VGPR numbers an operand names: "v7" -> {7}, "v[4:5]" -> {4, 5}."""
    found = set()
    for single, first, last in _REGISTER.findall(operand):
        found |= {int(single)} if single else set(range(int(first), int(last) + 1))
    return found


def asm_blocks(assembly: str) -> list:
    """[[instruction line]] of each inline asm block (;;#ASMSTART .. ;;#ASMEND)."""
    blocks, current = [], None
    for line in assembly.splitlines():
        text = line.split(";")[0].strip() if not line.strip().startswith(";;#ASM") else line.strip()
        if text == ";;#ASMSTART":
            current = []
        elif text == ";;#ASMEND":
            blocks.append(current)
            current = None
        elif current is not None and text:
            current.append(text)
    return blocks


def clobbered_reads(block: list) -> list:
    """(writer, reader) pairs: a later instruction of the block reads, as a source operand, a
    register an earlier one wrote (what early-clobber outputs rule out)."""
    pairs = []
    for index, writer in enumerate(block):
        mnemonic, _, operands = writer.partition(" ")
        if not operands or mnemonic.startswith("s_"):
            continue
        written = registers(operands.split(",")[0])
        for reader in block[index + 1:]:
            sources = ",".join(reader.partition(" ")[2].split(",")[1:])
            if written & registers(sources):
                pairs.append((writer, reader))
    return pairs


@pytest.fixture(scope="module")
def assembly(tmp_path_factory, runners_triton):
    folder = tmp_path_factory.mktemp("asm")
    (folder / "gemm_probe.py").write_text(PROBE)
    env = dict(ENV, PYTHONPATH=os.pathsep.join([*runners_triton, str(ROOT), str(folder)]))
    done = subprocess.run([sys.executable, "-m", "gemm_probe", str(folder)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return {form: (folder / f"{form}.s").read_text()
            for form in [*FORMS, "lone", "wave-split-1", "wave-split-4"]}


def test_the_block_parser_sees_a_clobbered_read():
    block = ["v_cvt_scalef32_pk_fp4_bf16 v4, v6, v9", "v_cvt_scalef32_pk_fp4_bf16 v5, v4, v9",
             "s_nop 0"]
    assert clobbered_reads(block) == [(block[0], block[1])]
    assert clobbered_reads(["v_cvt_scalef32_pk_fp4_f32 v[4:5], v6, v7, v9",
                            "v_cvt_scalef32_pk_fp4_f32 v8, v10, v5, v9"]) != []
    assert clobbered_reads(["v_cvt_scalef32_pk_fp4_bf16 v4, v6, v9",
                            "v_cvt_scalef32_pk_fp4_bf16 v4, v7, v9 op_sel:[0,0,1,0]"]) == []


@pytest.mark.parametrize("form", [*FORMS, "lone"])
def test_no_asm_output_shares_a_register_with_a_later_input(assembly, form):
    """In the GEMMs, and in a kernel of the bf16 asm alone whose inputs die with it (where
    registers are free to share, as the GEMMs' allocation happens not to)."""
    mnemonic = FORMS.get(form, FORMS["hardware"])
    blocks = [block for block in asm_blocks(assembly[form])
              if any(line.startswith(mnemonic) for line in block)]
    assert blocks, f"no {mnemonic} asm block in the {form} kernel"
    for block in blocks:
        assert clobbered_reads(block) == [], (form, block)


@pytest.mark.parametrize("form", FORMS)
def test_each_form_holds_its_own_conversion_only(assembly, form):
    other = next(name for name in FORMS if name != form)
    assert FORMS[form] in assembly[form]
    assert FORMS[other] not in assembly[form]


def test_k_split_across_the_waves_costs_no_mfma_where_rows_would_repeat(assembly):
    def scaled_mfmas(text):
        return len(re.findall(r"^\s*v_mfma_scale_", text, re.MULTILINE))
    assert scaled_mfmas(assembly["wave-split-4"]) == scaled_mfmas(assembly["wave-split-1"]) > 0


def test_k_split_across_the_waves_has_no_hazard(assembly):
    from mxfp4_mm.tools.gfx950.hazards import asm_hazards
    assert asm_hazards(assembly["wave-split-4"]) == []
