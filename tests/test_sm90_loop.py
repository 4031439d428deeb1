"""tools.sm90_loop and its face, `tools.isa --arch sm_90 --shapes ... --asm-dir DIR`.

- The main loop read from SASS (main_loop): of nested loops the innermost that holds an HGMMA;
  a loop without one is not it; of two as short, the first; every instruction of its body
  counted, predicated ones (`@P0`, `@!P0`, `@!UP0`) included; none where no backward branch closes a loop; a loop read
  between its hex addresses, short ones and one at the program's start included.
- The mode, its compiler faked (compile_for, cuobjdump and cubin_resources of handwritten
  SASS): each row's instructions a K tile and lane-instructions a weight element, its SASS
  written into DIR; it exits 0 where a GEMM has no main loop (one K tile a program) and 1 where
  one does not fit the chip's shared memory.
- Which launch is compiled: of the prepared path, its rule's GEMM (prepared_config); of
  custom_kernel's, the GEMM of the config the lookup serves; a path whose launches hold no
  GEMM (the dequant path at large M) compiles nothing and says so.
- A row's figures: the loop's opcodes counted without their modifiers, lane-instructions a
  weight element, the code's resources, and whether its shared memory fits sm_90's; `rows`, a
  row per shape and path, the SASS written into asm_dir (made where missing); the table
  (format_rows): a line per row, a note where a row has no loop, DOES NOT FIT where its shared
  memory does not fit.
"""

import json
import os
from types import SimpleNamespace

import pytest
import triton

from mxfp4_mm.launchers.targets import SM90
from mxfp4_mm.tools import sm90_loop as loop_module

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

# Two loops as short, each with an HGMMA (a K loop split in two by the compiler).
TWIN_LOOPS = """
        /*0000*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ;
        /*0010*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0020*/               @P0 BRA 0x0 ;
        /*0030*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ;
        /*0040*/                   ISETP.GE.AND P1, PT, R3, R6, PT ;
        /*0050*/               @P1 BRA 0x30 ;
        /*0060*/                   EXIT ;
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


def test_of_two_loops_as_short_with_an_hgmma_the_first_is_the_main_loop(sm90_loop):
    assert [op.split(".")[0] for op in sm90_loop.main_loop(TWIN_LOOPS)] == ["HGMMA", "IADD3",
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


def sass(first: int, loop: list, before: int = 3) -> str:
    """SASS as cuobjdump -sass lists it: `before` instructions, then `loop` from address
    `first` on, closed by a branch back to `first`, then EXIT; addresses in hex, 16 apart."""
    lines, address = [], first - 16 * before
    for opcode in ["MOV R1, c[0x0][0x28]"] * before + loop + [f"@P0 BRA {first:#x}", "EXIT"]:
        lines.append(f"        /*{address:04x}*/                   {opcode} ;")
        address += 16
    return "\n".join(lines) + "\n"


# A loop of 200 instructions around one HGMMA (at 0x200), at addresses whose hex digits hold
# letters: HMUL2 with two different modifiers, and an immediate that is no branch target
LOOP_OPCODES = (["LDG.E.128 R4, desc[UR4][R2.64]",
                 "HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24"]
                + ["HMUL2.BF16_V2 R10, R9, R11", "HMUL2 R12, R9, R11"] * 98
                + ["IADD3 R3, R3, 0x200, RZ"])
LOOP = sass(0x1f0, LOOP_OPCODES)


def test_the_main_loop_is_read_between_its_hex_addresses():
    """Its first instruction the back branch's target, its last that branch: what comes
    before it is not counted."""
    found = loop_module.main_loop(LOOP)
    assert [op.split(".")[0] for op in found] == [
        line.split()[0].split(".")[0] for line in LOOP_OPCODES] + ["BRA"]


HGMMA = "HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24"


@pytest.mark.parametrize("first, before, loop", [
    (0x1f0, 3, [HGMMA, "IADD3 R3, R3, 0x1, RZ"]), (0x0, 0, [HGMMA])])
def test_a_short_loop_is_read_between_its_hex_addresses(first, before, loop):
    """Three instructions from 0x1f0, whose branch back sits two instructions on; and a loop
    of the HGMMA alone at the program's start, its branch back at 0x10."""
    assert [op.split(".")[0] for op in loop_module.main_loop(sass(first, loop, before))] == [
        line.split()[0].split(".")[0] for line in loop] + ["BRA"]


@pytest.fixture
def compiled(monkeypatch):
    """Every GEMM compiles to LOOP with `shared` bytes of shared memory (set it on the returned
    namespace); what compile_for, cuobjdump and cubin_resources were given is recorded in
    `kernels` (kernel name, its non-tensor arguments, A's strides, options, target arch) and
    `read`."""
    fake = SimpleNamespace(shared=2048, kernels=[], read=[])

    def compile_for(kernel, args, options, target):
        scalars = [a for a in args if not hasattr(a, "stride")]
        fake.kernels.append((kernel.__name__, scalars, args[0].stride(), options, target.arch))
        return SimpleNamespace(asm={"cubin": b"the cubin"},
                               metadata=SimpleNamespace(shared=fake.shared))

    def cuobjdump(cubin, option):
        fake.read.append((cubin, option))
        return LOOP

    def cubin_resources(cubin):
        fake.read.append((cubin, "resources"))
        return dict(registers=90, stack_bytes=8)
    monkeypatch.setattr(loop_module, "compile_for", compile_for)
    monkeypatch.setattr(loop_module, "cuobjdump", cuobjdump)
    monkeypatch.setattr(loop_module, "cubin_resources", cubin_resources)
    return fake


def test_the_prepared_row_compiles_its_rules_gemm_and_counts_its_loop(compiled):
    from mxfp4_mm.launchers.prepared import prepared_config, prepared_launch_specs
    row = loop_module.loop_row("prepared", (8, 28672, 4096))   # A once
    config = prepared_config(8, 28672, 4096)
    gemm = prepared_launch_specs(config, "cuda", 8, 28672, 4096, (4096, 1), "meta")[-1]
    assert compiled.kernels == [("hopper_prepared_gemm_kernel",
                                 [a for a in gemm.sample_args if not hasattr(a, "stride")],
                                 (4096, 1), gemm.options, 90)]
    assert compiled.read == [(b"the cubin", "-sass"), (b"the cubin", "resources")]
    assert (row["arch"], row["path"], row["shape"], row["triton"]) == (
        "sm_90", "prepared", [8, 28672, 4096], triton.__version__)
    assert row["config"]["label"] == config.label and row["config"]["block_n"] == config.block_n
    assert row["launches"] == ["quantize_a", "gemm"]
    assert row["loop_sass_per_k_tile"] == 200
    assert row["lane_instructions_per_element"] == round(
        200 * 32 * config.num_warps / (config.block_n * config.block_k), 2) == 1.56
    assert row["loop_mix"] == {"HMUL2": 196, "LDG": 1, "HGMMA": 1, "IADD3": 1, "BRA": 1}
    assert (row["registers"], row["stack_bytes"], row["shared_bytes"]) == (90, 8, 2048)


def test_custom_kernels_row_compiles_the_gemm_of_the_looked_up_config_as_cuda_launches_it(
        compiled):
    """The hopper path up to SM90.hopper_max_m, the preshuffle GEMM above, whose quantizer
    takes no fast path on CUDA (launchers.targets.Backend)."""
    from mxfp4_mm.launchers.configs import config_lookup
    from mxfp4_mm.launchers.paths import path_launch_specs
    for m, kernel in ((SM90.hopper_max_m, "hopper_gemm_kernel"),
                      (2 * SM90.hopper_max_m, "preshuffle_gemm_kernel")):
        config, _ = config_lookup("sm_90", m, 4096, 4096)
        gemm = [spec for spec in path_launch_specs(config, "cuda", m, 4096, 4096, (4096, 1),
                                                   "meta") if spec.name == "gemm"][0]
        compiled.kernels.clear()
        row = loop_module.loop_row("custom_kernel", (m, 4096, 4096))
        scalars = [a for a in gemm.sample_args if not hasattr(a, "stride")]
        assert compiled.kernels == [(kernel, scalars, (4096, 1), gemm.options, 90)]
        assert row["config"]["label"] == config.label
        assert row["layout"] == loop_module.LAYOUTS["custom_kernel"]


def test_a_path_without_a_gemm_compiles_nothing_and_says_so(compiled):
    row = loop_module.loop_row("custom_kernel", (1024, 4096, 4096))    # the dequant path
    assert compiled.kernels == []
    assert row["launches"] == ["quantize_a", "dequantize_b"]
    assert row["loop_sass_per_k_tile"] is None and row["note"] == "no Triton GEMM on this path"


def test_below_a_quantized_once_the_prepared_gemm_is_compiled_for_a_row_major_a(compiled):
    """At M = 1 the GEMM reads A as the call gives it: compiled for A [M, K] with strides
    (K, 1)."""
    loop_module.loop_row("prepared", (1, 4096, 4096))
    assert [(name, a_strides) for name, _, a_strides, _, _ in compiled.kernels] == [
        ("hopper_prepared_gemm_kernel", (4096, 1))]


def test_shared_memory_fits_up_to_sm90s_and_not_a_byte_more(compiled):
    compiled.shared = SM90.shared_memory_bytes
    assert loop_module.loop_row("prepared", (1, 4096, 4096))["fits"]
    compiled.shared = SM90.shared_memory_bytes + 1
    assert not loop_module.loop_row("prepared", (1, 4096, 4096))["fits"]


def test_rows_go_shape_by_shape_and_write_their_sass_into_a_new_folder(compiled, tmp_path):
    folder = tmp_path / "new" / "asm"
    found = loop_module.rows([(1, 4096, 4096), (8, 4096, 4096)], folder)
    assert [(row["shape"], row["path"]) for row in found] == [
        ([1, 4096, 4096], "prepared"), ([1, 4096, 4096], "custom_kernel"),
        ([8, 4096, 4096], "prepared"), ([8, 4096, 4096], "custom_kernel")]
    label = found[0]["config"]["label"]          # "16x64x256 sk8 w4 s1": spaces become _
    assert found[0]["asm"] == str(folder / f"prepared_1x4096x4096_{label.replace(' ', '_')}.sass")
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        row["asm"].rpartition("/")[2] for row in found)
    assert (folder / found[0]["asm"].rpartition("/")[2]).read_text() == LOOP
    again = loop_module.rows([(1, 4096, 4096)], folder, paths=("prepared",))   # the folder there
    assert again[0]["asm"] == found[0]["asm"]


def test_without_asm_dir_no_sass_is_written(compiled, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row = loop_module.rows([(1, 4096, 4096)], paths=("prepared",))[0]
    assert "asm" not in row and list(tmp_path.iterdir()) == []


def test_the_table_has_a_line_per_row_its_note_or_its_figures():
    row = dict(shape=[1, 4096, 4096], path="prepared", triton="3.6.0",
               config={"label": "16x64x256 sk8 w4 s1"}, loop_sass_per_k_tile=120,
               lane_instructions_per_element=3.75, registers=168, stack_bytes=0, fits=True,
               loop_mix={"LOP3": 40, "HMUL2": 32, "SHF": 16, "HGMMA": 16, "LDS": 8, "BAR": 4,
                         "BRA": 1})
    no_loop = dict(row, shape=[1, 64, 256], loop_sass_per_k_tile=None,
                   note="no loop: one K tile a program")
    lines = loop_module.format_rows([row, no_loop, dict(row, fits=False)]).splitlines()
    assert len(lines) == 4 and "(Triton 3.6.0)" in lines[0]
    assert lines[1].split() == ["1x4096x4096", "prepared", "16x64x256", "sk8", "w4", "s1", "120",
                                "3.75", "regs", "168", "stack", "0", "LOP3", "40,", "HMUL2",
                                "32,", "SHF", "16,", "HGMMA", "16,", "LDS", "8,", "BAR", "4"]
    assert lines[2].split() == ["1x64x256", "prepared", "16x64x256", "sk8", "w4", "s1", "no",
                                "loop:", "one", "K", "tile", "a", "program"]
    assert lines[3].replace(" DOES NOT FIT", "") == lines[1] and "DOES NOT FIT" in lines[3]
    assert "(Triton 3.9.0)" in loop_module.format_rows([dict(row, triton="3.9.0")])
    assert loop_module.format_rows([]) == ""
