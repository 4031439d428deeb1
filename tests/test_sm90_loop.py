"""tools.sm90_loop and its face, `tools.isa --arch sm_90 --shapes ... --asm-dir DIR`.

- The main loop read from SASS (main_loop): of nested loops the innermost that holds an HGMMA;
  a loop without one is not it; every instruction of its body counted, predicated ones
  (`@P0`, `@!P0`, `@!UP0`) included; none where no backward branch closes a loop.
- The mode, its compiler faked (compile_for, cuobjdump and cubin_resources of handwritten
  SASS): each row's instructions a K tile and lane-instructions a weight element, its SASS
  written into DIR; it exits 0 where a GEMM has no main loop (one K tile a program) and 1 where
  one does not fit the chip's shared memory.
"""

import json
import os
from types import SimpleNamespace

import pytest
import triton

# Two loops, one inside the other, around the HGMMA, as cuobjdump -sass lists them; the outer
# one's back branch is negated, the inner one's is not, and inside the inner loop an
# instruction is under each predicate form.
NESTED_LOOPS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;                      /* 0x00000a0000017a02 */
        /*0010*/                   S2R R0, SR_TID.X ;                          /* 0x0000000000007919 */
        /*0020*/                   MOV R2, RZ ;                                /* 0x000000ff00027202 */
        /*0030*/                   LDG.E.128 R4, desc[UR4][R2.64] ;            /* 0x0000000402047981 */
        /*0040*/              @!P0 LDS R8, [R3] ;                              /* 0x0000000003088984 */
        /*0050*/             @!UP0 LOP3.LUT R9, R4, 0x81c081c0, RZ, 0xc0, !PT ; /* 0x81c081c004097812 */
        /*0060*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ; /* 0x0000000818187df0 */
        /*0070*/               @P1 HMUL2.BF16_V2 R10, R9, R11 ;                /* 0x0000000b090a1232 */
        /*0080*/                   IADD3 R3, R3, 0x1, RZ ;                     /* 0x0000000103037810 */
        /*0090*/                   ISETP.GE.AND P0, PT, R3, R6, PT ;           /* 0x000000060300720c */
        /*00a0*/               @P0 BRA 0x30 ;                                  /* 0xffffff8000000947 */
        /*00b0*/                   STS [R7], R24 ;                             /* 0x0000001807007388 */
        /*00c0*/                   IADD3 R2, R2, 0x1, RZ ;                     /* 0x0000000102027810 */
        /*00d0*/              @!P2 BRA 0x20 ;                                  /* 0xffffff4000008947 */
        /*00e0*/                   EXIT ;                                      /* 0x000000000000794d */
        /*00f0*/                   BRA 0xf0;                                   /* 0xfffffffc00fc7947 */
"""
INNER_LOOP = ["LDG", "LDS", "LOP3", "HGMMA", "HMUL2", "IADD3", "ISETP", "BRA"]   # without modifiers

# A loop without an HGMMA (an epilogue's) after the one with it.
TWO_LOOPS = """
        /*0000*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ;
        /*0010*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0020*/               @P0 BRA 0x0 ;
        /*0030*/                   STG.E [R4.64], R24 ;
        /*0040*/              @!P1 BRA 0x30 ;
        /*0050*/                   EXIT ;
"""

# One K tile a program: the HGMMA runs once, no branch goes back.
NO_LOOP = """
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0010*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ;
        /*0020*/              @!P0 BRA 0x40 ;
        /*0030*/                   STG.E [R4.64], R24 ;
        /*0040*/                   EXIT ;
        /*0050*/                   BRA 0x50;
"""


@pytest.fixture
def sm90_loop(monkeypatch):
    """tools.sm90_loop, imported as tools.isa imports it. Importing tools.isa takes
    TRITON_INTERPRET out of the environment (it compiles): here out of a copy, which the test's
    end puts back."""
    monkeypatch.setattr(os, "environ", os.environ.copy())
    from mxfp4_mm.tools import sm90_loop
    return sm90_loop


def test_of_nested_loops_the_main_loop_is_the_innermost_with_every_predicated_instruction(
        sm90_loop):
    assert [op.split(".")[0] for op in sm90_loop.main_loop(NESTED_LOOPS)] == INNER_LOOP


def test_a_loop_without_an_hgmma_is_not_the_main_loop(sm90_loop):
    assert [op.split(".")[0] for op in sm90_loop.main_loop(TWO_LOOPS)] == ["HGMMA", "IADD3",
                                                                           "BRA"]


def test_without_a_backward_branch_there_is_no_main_loop(sm90_loop):
    assert sm90_loop.main_loop(NO_LOOP) == []


@pytest.fixture
def faked_compiler(sm90_loop, monkeypatch):
    """compile_for, cuobjdump and cubin_resources faked: each GEMM compiles to `sass` (set the
    returned namespace's sass) with `shared` bytes of shared memory; what compile_for was
    given is recorded in `compiled`."""
    fake = SimpleNamespace(sass=NESTED_LOOPS, shared=1024, compiled=[])

    def compile_for(kernel, args, options, target):
        fake.compiled.append((kernel.__name__, target.arch))
        return SimpleNamespace(asm={"cubin": b"cubin"},
                               metadata=SimpleNamespace(shared=fake.shared))
    monkeypatch.setattr(sm90_loop, "compile_for", compile_for)
    monkeypatch.setattr(sm90_loop, "cuobjdump", lambda cubin, option: fake.sass)
    monkeypatch.setattr(sm90_loop, "cubin_resources",
                        lambda cubin: dict(registers=96, stack_bytes=0))
    return fake


def run_isa(tmp_path, *shapes) -> tuple:
    """`tools.isa --arch sm_90 --shapes SHAPES --asm-dir DIR --json FILE` with the running
    Triton (no side install): (exit code, rows)."""
    from mxfp4_mm.tools import isa
    rows_file = tmp_path / "rows.json"
    code = isa.main(["--arch", "sm_90", "--shapes", *shapes, "--asm-dir", str(tmp_path / "asm"),
                     "--json", str(rows_file), "--triton", triton.__version__])
    return code, json.loads(rows_file.read_text())


def test_the_mode_counts_each_gemms_main_loop_and_writes_its_sass(faked_compiler, tmp_path):
    code, rows = run_isa(tmp_path, "1,4096,4096")
    assert code == 0
    assert [row["path"] for row in rows] == ["prepared", "custom_kernel"]
    assert faked_compiler.compiled[0] == ("hopper_prepared_gemm_kernel", 90)
    assert len(faked_compiler.compiled) == 2 and faked_compiler.compiled[1][1] == 90
    prepared = rows[0]
    assert prepared["loop_sass_per_k_tile"] == len(INNER_LOOP)
    threads, elements = 32 * prepared["config"]["num_warps"], 64 * 256     # BLOCK_N x BLOCK_K
    assert prepared["config"]["block_n"] == 64
    assert prepared["lane_instructions_per_element"] == round(len(INNER_LOOP) * threads
                                                              / elements, 2)
    assert prepared["loop_mix"]["HGMMA"] == 1 and prepared["fits"]
    assert open(prepared["asm"]).read() == NESTED_LOOPS


def test_the_mode_exits_0_where_a_gemm_has_no_main_loop(faked_compiler, tmp_path, capsys):
    faked_compiler.sass = NO_LOOP
    code, rows = run_isa(tmp_path, "1,64,256")
    assert [row["note"] for row in rows] == ["no loop: one K tile a program"] * 2
    assert code == 0, capsys.readouterr().err


def test_the_mode_exits_1_where_a_gemm_does_not_fit_the_chips_shared_memory(faked_compiler,
                                                                             tmp_path):
    from mxfp4_mm.launchers.targets import SM90
    faked_compiler.shared = SM90.shared_memory_bytes + 1
    code, rows = run_isa(tmp_path, "1,4096,4096")
    assert code == 1 and not any(row["fits"] for row in rows)
    faked_compiler.shared = SM90.shared_memory_bytes
    assert run_isa(tmp_path, "1,4096,4096")[0] == 0
