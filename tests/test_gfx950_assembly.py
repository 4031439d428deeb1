"""tools.gfx950.assembly on hand-written gfx950 assembly."""

import pytest

from mxfp4_mm.tools.gfx950.assembly import k_loop, mfma_shape, parse, registers, source_files

KERNEL = """\
\t.text
\t.file\t1 "/src/kernels" "gemm.py"
\t.file\t2 "/lib/triton/language" "standard.py"
gemm_kernel:                            ; @gemm_kernel
; %bb.0:
\t.loc\t1 10 0 prologue_end           ; gemm.py:10:0
\ts_load_dwordx2 s[2:3], s[0:1], 0x0   ; a trailing comment
.LBB0_1:                                ; =>This Inner Loop Header: Depth=1
\t.loc\t2 43 17                         ; standard.py:43:17 @[ q.py:30:12 @[ gemm.py:24:63 ] ]
\tv_max_f32_e32 v1, v1, v2
\t; implicit-def: $vgpr3
\t;;#ASMSTART
\tv_cvt_scalef32_pk_fp4_bf16 v3, v4, v5 op_sel:[0,0,1,0]
\t;;#ASMEND
\t.loc\t1 0 0 is_stmt 0                 ; :0:0
\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v1, v2
\ts_cbranch_scc1 .LBB0_1
\ts_endpgm
.Lfunc_end0:
\t.size\tgemm_kernel, .Lfunc_end0-gemm_kernel
\t.section\t.AMDGPU.csdata
\t.amdhsa_next_free_vgpr 64
"""


def test_instructions_in_program_order_with_lines_operands_and_frames():
    program = parse(KERNEL)
    names = [i.mnemonic for i in program.instructions]
    assert names == ["s_load_dwordx2", "v_max_f32_e32", "v_cvt_scalef32_pk_fp4_bf16",
                     "v_mfma_scale_f32_16x16x128_f8f6f4", "s_cbranch_scc1", "s_endpgm"]
    load, maximum, conversion, mfma, branch, _ = program.instructions
    assert load.line == 7 and load.operands == ("s[2:3]", "s[0:1]", "0x0")
    assert conversion.operands == ("v3", "v4", "v5 op_sel:[0,0,1,0]")
    assert conversion.text == "v_cvt_scalef32_pk_fp4_bf16 v3, v4, v5 op_sel:[0,0,1,0]"
    assert load.frames == (("gemm.py", 10),)
    # Innermost first; the inline asm keeps the chain of the last .loc.
    assert maximum.frames == conversion.frames == (("standard.py", 43), ("q.py", 30),
                                                   ("gemm.py", 24))
    assert mfma.frames == ()
    assert branch.is_branch and branch.target == ".LBB0_1" and not mfma.is_branch


def test_labels_name_the_instruction_after_them_and_metadata_is_not_code():
    program = parse(KERNEL)
    assert program.labels["gemm_kernel"] == 0 and program.labels[".LBB0_1"] == 1
    assert ".Lfunc_end0" not in program.labels
    assert source_files(KERNEL) == {"gemm.py": {"/src/kernels/gemm.py"},
                                    "standard.py": {"/lib/triton/language/standard.py"}}


def test_the_k_loop_runs_from_its_label_to_the_last_backward_branch():
    assert k_loop(parse(KERNEL)) == (1, 4)
    straight = KERNEL.replace("\ts_cbranch_scc1 .LBB0_1\n", "")
    assert k_loop(parse(straight)) is None
    # A second backward branch to the same label widens the loop; the branch forward does not.
    text = KERNEL.replace("\ts_endpgm\n", "\ts_branch .LBB0_1\n\ts_endpgm\n")
    assert k_loop(parse(text)) == (1, 5)


def test_loops_that_are_not_a_k_loop_alone_are_refused():
    without_mfma = KERNEL.replace("\tv_mfma_scale_f32_16x16x128_f8f6f4", "\tv_add_f32")
    with pytest.raises(ValueError, match="loop at line 10 has no MFMA"):
        k_loop(parse(without_mfma))
    two = KERNEL.replace("\ts_endpgm\n", ".LBB0_2:\n\tv_mfma_f32_32x32x8_bf16 v[0:15], v[1:2], "
                         "v[3:4], v[0:15]\n\ts_cbranch_scc1 .LBB0_2\n\ts_endpgm\n")
    with pytest.raises(ValueError, match="more than one loop"):
        k_loop(parse(two))


def test_registers_and_mfma_shapes():
    assert registers("v[4:6]") == {4, 5, 6} and registers("v7") == {7}
    assert registers("s[0:1]") == set() and registers("vcc") == set()
    assert mfma_shape("v_mfma_scale_f32_16x16x128_f8f6f4") == (16, 16, 128)
    assert mfma_shape("v_mfma_f32_32x32x8_bf16") == (32, 32, 8)
    assert mfma_shape("v_max_f32_e32") is None


def test_a_backward_branch_that_closes_no_cycle_is_no_loop():
    # LLVM's layout of masked bodies (a cross-warp reduction's LDS writes): each body is laid
    # out after s_endpgm, entered by a forward branch and left by a branch back to the join.
    # Those backward branches close no cycle: no loop, so no K loop to refuse.
    text = ("\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execnz .LBB0_8\n"
            ".LBB0_1:\n\ts_or_b64 exec, exec, s[0:1]\n"
            "\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execnz .LBB0_9\n"
            ".LBB0_2:\n\ts_or_b64 exec, exec, s[0:1]\n\ts_endpgm\n"
            ".LBB0_8:\n\tds_write_b32 v1, v2\n\ts_or_b64 exec, exec, s[0:1]\n"
            "\ts_and_saveexec_b64 s[0:1], vcc\n\ts_cbranch_execz .LBB0_1\n"
            ".LBB0_9:\n\tds_write_b32 v1, v2 offset:16\n\ts_branch .LBB0_2\n")
    assert k_loop(parse(text)) is None
    # The same backward branch closing a cycle is a loop (and, without an MFMA, refused).
    cycle = text.replace("\ts_cbranch_execz .LBB0_1\n", "\ts_cbranch_execz .LBB0_8\n")
    with pytest.raises(ValueError, match="has no MFMA"):
        k_loop(parse(cycle))
