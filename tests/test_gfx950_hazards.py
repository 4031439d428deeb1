"""tools.gfx950.hazards on hand-written gfx950 assembly whose answers are known, on one
compiled kernel whose quantizer asm lacks a wait state, and on the conversion asm followed
straight away by a reader of its last result: which readers LLVM pads, and that the check
flags the one it does not."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxfp4_mm.tools.gfx950.hazards import CLASSES, asm_hazards, operation
from mxfp4_mm.tools.gfx950.assembly import parse

ROOT = Path(__file__).resolve().parents[1]
START, END = "\t;;#ASMSTART\n", "\t;;#ASMEND\n"
MFMA = "v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v20, v21"
CMPX = "v_cmpx_gt_u32_e32 vcc, s0, v1"

# class: (producer, consumer, wait states required between them)
CASES = {
    "conversion forwarding": ("v_cvt_scalef32_pk_fp4_bf16 v72, v38, v61",
                              "ds_write_b32 v81, v72", 1),
    "dst-sel forwarding": ("v_mov_b32_sdwa v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE "
                           "src0_sel:DWORD", "v_add_u32_e32 v3, v1, v4", 1),
    "transcendental forwarding": ("v_exp_f32_e32 v1, v2", "v_add_f32_e32 v3, v1, v4", 1),
    "VALU SGPR write, VALU read": ("v_readfirstlane_b32 s4, v1", "v_add_u32_e32 v2, s4, v3", 2),
    "VALU SGPR write, VMEM read": ("v_readfirstlane_b32 s4, v1",
                                   "buffer_load_dword v2, v3, s[8:11], s4 offen", 5),
    "VALU SGPR write, lane select": ("v_readfirstlane_b32 s4, v1", "v_readlane_b32 s5, v2, s4",
                                     4),
    "VALU VGPR write, readlane": ("v_max_u32_e32 v96, v96, v97", "v_readfirstlane_b32 s6, v96",
                                  1),
    "VALU EXEC write, lane access": (CMPX, "v_readfirstlane_b32 s6, v2", 4),
    "VALU EXEC write, DPP": (CMPX, "v_mov_b32_dpp v2, v3 quad_perm:[1,0,3,2] row_mask:0xf "
                                  "bank_mask:0xf", 5),
    "VGPR write, DPP read": ("v_add_u32_e32 v3, v4, v5", "v_mov_b32_dpp v2, v3 "
                             "quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf", 2),
    "VALU EXEC write, MFMA": (CMPX, MFMA, 4),
    "VALU VGPR write, MFMA read": ("v_mov_b32_e32 v20, v1", MFMA, 2),
    # fp8 A and B: 8 passes.
    "MFMA result read": (MFMA, "v_add_f32_e32 v30, v0, v31", 12),
    "MFMA result overwritten": (MFMA.replace("v[0:3], v20", "v[40:43], v20"),
                                "v_mov_b32_e32 v1, 0", 12),
    "MFMA SrcC overwritten": (MFMA.replace("v[0:3], v[4", "v[40:43], v[4"),
                              "v_mov_b32_e32 v1, 0", 7),
    "MFMA result, MFMA SrcC": (MFMA, MFMA.replace("v[0:3], v[4", "v[40:43], v[4")
                               .replace("v[0:3], v20", "v[2:5], v20"), 10),
    "MFMA result, MFMA SrcA/B": (MFMA, "v_mfma_scale_f32_16x16x128_f8f6f4 v[40:43], v[0:7], "
                                 "v[12:19], v[44:47], v20, v21", 12),
    "dot result": ("v_dot2_f32_bf16 v1, v2, v3, v4", "v_add_f32_e32 v5, v1, v6", 3),
    "wide store data overwritten": ("buffer_store_dwordx4 v[0:3], v4, s[8:11], 0 offen",
                                    "v_mov_b32_e32 v1, 0", 2),
    "permlane source": ("v_mov_b32_e32 v1, v2", "v_permlane32_swap_b32_e32 v1, v3", 2),
    "v_cmpx, permlane": (CMPX, "v_permlane32_swap_b32_e32 v4, v5", 4),
    "VALU VCC write, v_div_fmas": ("v_cmp_gt_f32_e32 vcc, v1, v2",
                                   "v_div_fmas_f32 v3, v4, v5, v6", 4),
    "M0 write, M0 read": ("s_mov_b32 m0, s4", "buffer_load_dword v1, s[8:11], 0 offen lds", 1),
    "s_setreg, s_getreg/s_setreg/s_rfe": ("s_setreg_b32 hwreg(HW_REG_MODE, 0, 4), s0",
                                          "s_getreg_b32 s1, hwreg(HW_REG_MODE, 0, 4)", 2),
}


def test_every_class_has_a_case():
    assert set(CASES) == set(CLASSES)


def snippet(producer: str, consumer: str, waits: int, in_asm: str) -> str:
    """producer, `waits` wait states of s_nop, consumer; the one named by in_asm inside an asm
    region."""
    pad = "" if waits == 0 else f"\ts_nop {waits - 1}\n"
    first, last = f"\t{producer}\n", f"\t{consumer}\n"
    if in_asm == "producer":
        first = START + first + END
    elif in_asm == "consumer":
        last = START + last + END
    return first + pad + last


@pytest.mark.parametrize("in_asm", ["producer", "consumer"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_wait_state_short_is_flagged_and_enough_is_clean(name, in_asm):
    producer, consumer, required = CASES[name]
    short = asm_hazards(snippet(producer, consumer, required - 1, in_asm))
    assert [(h["instruction"], h["next_instruction"], h["wait_states"], h["required"])
            for h in short if h["hazard"] == name] == [(producer, consumer, required - 1,
                                                        required)], short
    assert asm_hazards(snippet(producer, consumer, required, in_asm)) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pair_outside_every_asm_region_is_llvms_and_not_reported(name):
    producer, consumer, _ = CASES[name]
    assert asm_hazards(START + END + snippet(producer, consumer, 0, "neither")) == []


def test_the_wait_states_between_count_each_instruction_once_and_an_s_nop_n_n_plus_1():
    producer, consumer, _ = CASES["MFMA result read"]   # 12 required
    filler = "\tv_mov_b32_e32 v50, v51\n\ts_nop 7\n\ts_waitcnt vmcnt(0)\n"   # 1 + 8 + 1
    text = START + f"\t{producer}\n" + END + filler + f"\t{consumer}\n"
    assert [h["wait_states"] for h in asm_hazards(text)] == [10]
    assert asm_hazards(text.replace("s_nop 7", "s_nop 9")) == []


def test_labels_directives_and_comments_are_no_wait_states():
    producer, consumer, _ = CASES["VALU VGPR write, readlane"]
    text = (f"\t{producer}\n.LBB0_3:\n\t; a comment\n\t.loc 1 2 3\n" + START + f"\t{consumer}\n"
            + END)
    assert [h["wait_states"] for h in asm_hazards(text)] == [0]


def test_every_predecessor_is_followed_and_the_shortest_path_counts():
    """Falling through, the DPP read is two wait states after the write; taking the branch to
    its label, one: too few."""
    producer, consumer, _ = CASES["VGPR write, DPP read"]
    text = (f"\t{producer}\n"
            "\ts_cbranch_scc1 .LBB0_2\n"
            "\ts_nop 0\n"
            ".LBB0_2:\n" + START + f"\t{consumer}\n" + END)
    assert [(h["instruction"], h["wait_states"]) for h in asm_hazards(text)] == [(producer, 1)]
    assert asm_hazards(text.replace("\ts_cbranch", "\ts_nop 0\n\ts_cbranch")) == []


def test_an_unconditional_branch_or_the_end_does_not_fall_through():
    producer, consumer, _ = CASES["VALU VGPR write, readlane"]
    for stop in ("\ts_branch .LBB0_9\n", "\ts_endpgm\n"):
        text = f"\t{producer}\n{stop}" + START + f"\t{consumer}\n" + END + ".LBB0_9:\n\ts_endpgm\n"
        assert asm_hazards(text) == [], stop


def test_a_loop_carries_a_hazard_round_its_back_edge():
    producer, consumer, _ = CASES["VGPR write, DPP read"]
    text = (".LBB0_1:\n" + START + f"\t{consumer}\n" + END
            + f"\t{producer}\n\ts_cbranch_scc1 .LBB0_1\n\ts_endpgm\n")
    assert [(h["hazard"], h["wait_states"]) for h in asm_hazards(text)] == [
        ("VGPR write, DPP read", 1)]


def test_a_conversion_writing_the_same_vgpr_next_is_a_hazard_and_interleaved_words_are_not():
    interleaved = ("\tv_cvt_scalef32_pk_fp4_bf16 v86, v88, v82\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v87, v78, v83\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v86, v89, v82 op_sel:[0,0,1,0]\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v87, v80, v83 op_sel:[0,0,1,0]\n")
    assert asm_hazards(START + interleaved + "\ts_nop 0\n" + END) == []
    stored = START + interleaved + END + "\tds_write_b32 v81, v87 offset:1024\n"
    assert [(h["line"], h["next_line"]) for h in asm_hazards(stored)] == [(5, 7)]
    # LLVM's dst-sel check counts a write of the register as consuming it.
    written = START + interleaved + END + "\tv_mov_b32_e32 v87, v5\n"
    assert [h["hazard"] for h in asm_hazards(written)] == ["conversion forwarding"]


def test_a_range_holding_the_destination_counts_as_read():
    text = (START + "\tv_cvt_scalef32_pk_fp4_f32 v73, v10, v11, v12\n" + END
            + "\tds_write_b64 v1, v[72:73]\n")
    assert [h["hazard"] for h in asm_hazards(text)] == ["conversion forwarding"]


def test_an_mfma_accumulating_into_its_own_result_and_fp4_passes():
    same = CASES["MFMA result, MFMA SrcC"][0]
    assert asm_hazards(START + f"\t{same}\n" + END + f"\t{same}\n") == []
    fp4 = MFMA + " cbsz:4 blgp:4"            # 4 passes: a reader needs 4 + 3 + 1
    text = START + f"\t{fp4}\n" + END + "\ts_nop 6\n\tv_add_f32_e32 v30, v0, v31\n"
    assert [h["required"] for h in asm_hazards(text)] == [8]


def test_a_buffer_store_with_an_sgpr_soffset_needs_one_wait_state():
    store = "buffer_store_dwordx4 v[0:3], v4, s[8:11], s5 offen"
    text = START + f"\t{store}\n" + END + "\tv_mov_b32_e32 v1, 0\n"
    assert [(h["wait_states"], h["required"]) for h in asm_hazards(text)] == [(0, 1)]
    assert asm_hazards(text.replace("dwordx4 v[0:3]", "dwordx2 v[0:1]")) == []


def test_operations_read_and_write():
    def regs(text):
        op = operation(parse(f"\t{text}\n").instructions[0])
        return sorted(op.defs), sorted(op.uses)
    assert regs("v_add_u32_e32 v1, v2, v3") == (["v1"], ["v2", "v3"])
    assert regs("buffer_store_dword v1, v2, s[0:1], 0 offen") == ([], ["s0", "s1", "v1", "v2"])
    assert regs("v_cvt_scalef32_pk_fp4_bf16 v9, v2, v3") == (["v9"], ["v2", "v3", "v9"])
    assert regs("v_add_co_u32_e32 v1, vcc, v2, v3") == (["v1", "vcc_hi", "vcc_lo"], ["v2", "v3"])
    assert regs("v_cmpx_gt_u32_e32 vcc, s0, v1") == (
        ["exec_hi", "exec_lo", "vcc_hi", "vcc_lo"], ["s0", "v1"])
    assert regs("global_load_dwordx2 v[4:5], v[0:1], off") == (["v4", "v5"], ["v0", "v1"])


QUANTIZER_PROBE = '''
import torch, triton, triton.language as tl
from mxfp4_mm.tools.gfx950.cross_compile import compile_for
from quantize_probe import quantize_tile_mxfp4

@triton.jit
def probe(x_ptr, codes_ptr, scales_ptr, BM: tl.constexpr, BK: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    x = tl.load(x_ptr + rows * BK + tl.arange(0, BK)[None, :])
    codes, scales = quantize_tile_mxfp4(x, BM, BK, QUANTIZER="hardware", THREADS=256)
    tl.store(codes_ptr + rows * (BK // 2) + tl.arange(0, BK // 2)[None, :], codes)
    tl.store(scales_ptr + rows * (BK // 32) + tl.arange(0, BK // 32)[None, :], scales)

x = torch.empty(16 * 256, dtype=torch.bfloat16, device="meta")
out = torch.empty(16 * 128, dtype=torch.uint8, device="meta")
print(compile_for(probe, (x, out, out, 16, 256), dict(num_warps=4)).asm["amdgcn"])
'''


def test_the_quantizer_without_the_s_nop_before_its_readfirstlane_is_flagged(tmp_path,
                                                                              runners_triton):
    """kernels/quantize.py with the asm's `s_nop 0` removed, compiled by Triton 3.6.0 for
    gfx950: the VALU writing the fast-path test's VGPR comes right before v_readfirstlane."""
    source = (ROOT / "kernels" / "quantize.py").read_text()
    nop = '"s_nop 0\\n\\tv_readfirstlane_b32 $0, $1"'
    assert source.count(nop) == 1
    (tmp_path / "quantize_probe.py").write_text(
        source.replace(nop, '"v_readfirstlane_b32 $0, $1"'))
    (tmp_path / "hazard_probe.py").write_text(QUANTIZER_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT), str(tmp_path)])
    done = subprocess.run([sys.executable, "-m", "hazard_probe"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = asm_hazards(done.stdout)
    assert [(h["hazard"], h["wait_states"]) for h in found
            if h["next_instruction"].startswith("v_readfirstlane")] == [
        ("VALU VGPR write, readlane", 0)], found


CONVERSION_PROBE = '''
import sys, torch, triton, triton.language as tl
from mxfp4_mm.tools.gfx950.cross_compile import compile_for
from mxfp4_mm.kernels.quantize import CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS, CVT_WORDS

@triton.jit
def probe(pairs_ptr, out_ptr, READER: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    p0 = tl.load(pairs_ptr + offs).to(tl.uint32, bitcast=True)
    p1 = tl.load(pairs_ptr + N + offs).to(tl.uint32, bitcast=True)
    p2 = tl.load(pairs_ptr + 2 * N + offs).to(tl.uint32, bitcast=True)
    p3 = tl.load(pairs_ptr + 3 * N + offs).to(tl.uint32, bitcast=True)
    scale = tl.load(pairs_ptr + 4 * N + offs).to(tl.uint32, bitcast=True)
    words = tl.inline_asm_elementwise(CVT_FP4_BF16_ASM, CVT_FP4_BF16_CONSTRAINTS,
                                      [p0, p1, p2, p3, scale], dtype=tl.uint32, is_pure=True,
                                      pack=CVT_WORDS)
    if READER == "valu":
        words = words ^ 0x5A5A5A5A
    tl.store(out_ptr + offs, words.to(tl.int32, bitcast=True))

pairs = torch.empty(5 * 512, dtype=torch.int32, device="meta")
out = torch.empty(512, dtype=torch.int32, device="meta")
print(compile_for(probe, (pairs, out, sys.argv[1], 512), dict(num_warps=4)).asm["amdgcn"])
'''


def _after_the_conversion_asm(reader, tmp_path, runners_triton):
    """(the first instruction after the conversion asm, asm_hazards) of the probe compiled by
    Triton 3.6.0 for gfx950 with `reader` ("valu" or "store") reading both words next."""
    (tmp_path / "conversion_probe.py").write_text(CONVERSION_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT), str(tmp_path)])
    done = subprocess.run([sys.executable, "-m", "conversion_probe", reader], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.strip() for line in done.stdout.split("\n")]
    after = lines[lines.index(";;#ASMEND") + 1:]
    following = next(line for line in after
                     if line and not line.startswith((".", ";")) and not line.endswith(":"))
    return following, asm_hazards(done.stdout)


def test_llvm_pads_a_valu_reading_the_conversion_asms_result_next(tmp_path, runners_triton):
    """Why the conversion asm needs no trailing s_nop before a VALU: LLVM takes the asm for a
    producer of the forwarding hazard and puts its own s_nop 0 there."""
    following, hazards = _after_the_conversion_asm("valu", tmp_path, runners_triton)
    assert following == "s_nop 0" and hazards == []


def test_a_store_reading_the_conversion_asms_result_next_is_flagged(tmp_path, runners_triton):
    """LLVM leaves a memory instruction reading the asm's last result next unpadded; the check
    of every compiled kernel reports it."""
    following, hazards = _after_the_conversion_asm("store", tmp_path, runners_triton)
    assert following.startswith("buffer_store_dwordx2")
    assert [(h["hazard"], h["wait_states"], h["next_instruction"]) for h in hazards] == [
        ("conversion forwarding", 0, following)]
