"""tools.sm90_loop, its compiler faked (compile_for, cuobjdump and cubin_resources of handwritten
SASS):

- which launch is compiled: of the prepared path, its rule's GEMM (prepared_config); of
  custom_kernel's, the GEMM of the config the lookup serves; a path whose launches hold no
  GEMM (the dequant path at large M) compiles nothing and says so;
- a row's figures: the loop's opcodes counted without their modifiers, lane-instructions a
  weight element (the loop's length times the program's threads over BLOCK_N x BLOCK_K), the
  code's resources, and whether its shared memory fits sm_90's;
- `rows`: a row per shape and path, shape by shape, the SASS written into asm_dir (made where
  missing) under a name of path, shape and config label;
- the table (format_rows): a line per row, a note where a row has no loop, DOES NOT FIT where
  its shared memory does not fit.
"""

from types import SimpleNamespace

import pytest
import triton

from mxfp4_mm.launchers.targets import SM90
from mxfp4_mm.tools import sm90_loop


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
    found = sm90_loop.main_loop(LOOP)
    assert [op.split(".")[0] for op in found] == [
        line.split()[0].split(".")[0] for line in LOOP_OPCODES] + ["BRA"]


HGMMA = "HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24"


@pytest.mark.parametrize("first, before, loop", [
    (0x1f0, 3, [HGMMA, "IADD3 R3, R3, 0x1, RZ"]), (0x0, 0, [HGMMA])])
def test_a_short_loop_is_read_between_its_hex_addresses(first, before, loop):
    """Three instructions from 0x1f0, whose branch back sits two instructions on; and a loop
    of the HGMMA alone at the program's start, its branch back at 0x10."""
    assert [op.split(".")[0] for op in sm90_loop.main_loop(sass(first, loop, before))] == [
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
    monkeypatch.setattr(sm90_loop, "compile_for", compile_for)
    monkeypatch.setattr(sm90_loop, "cuobjdump", cuobjdump)
    monkeypatch.setattr(sm90_loop, "cubin_resources", cubin_resources)
    return fake


def test_the_prepared_row_compiles_its_rules_gemm_and_counts_its_loop(compiled):
    from mxfp4_mm.launchers.prepared import prepared_config, prepared_launch_specs
    row = sm90_loop.loop_row("prepared", (8, 4096, 4096))
    config = prepared_config(8, 4096, 4096)
    gemm = prepared_launch_specs(config, "cuda", 8, 4096, 4096, (4096, 1), "meta")[-1]
    assert compiled.kernels == [("hopper_prepared_gemm_kernel",
                                 [a for a in gemm.sample_args if not hasattr(a, "stride")],
                                 (4096, 1), gemm.options, 90)]
    assert compiled.read == [(b"the cubin", "-sass"), (b"the cubin", "resources")]
    assert (row["arch"], row["path"], row["shape"], row["triton"]) == (
        "sm_90", "prepared", [8, 4096, 4096], triton.__version__)
    assert row["config"]["label"] == config.label and row["config"]["block_n"] == config.block_n
    assert row["launches"] == ["quantize", "dequantize_a", "gemm"]
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
        row = sm90_loop.loop_row("custom_kernel", (m, 4096, 4096))
        scalars = [a for a in gemm.sample_args if not hasattr(a, "stride")]
        assert compiled.kernels == [(kernel, scalars, (4096, 1), gemm.options, 90)]
        assert row["config"]["label"] == config.label
        assert row["layout"] == sm90_loop.LAYOUTS["custom_kernel"]


def test_a_path_without_a_gemm_compiles_nothing_and_says_so(compiled):
    row = sm90_loop.loop_row("custom_kernel", (1024, 4096, 4096))    # the dequant path
    assert compiled.kernels == []
    assert row["launches"] == ["quantize", "dequantize_a", "dequantize_b"]
    assert row["loop_sass_per_k_tile"] is None and row["note"] == "no Triton GEMM on this path"


def test_below_a_quantized_once_the_prepared_gemm_is_compiled_for_a_row_major_a(compiled):
    """At M = 1 the GEMM reads A as the call gives it: compiled for A [M, K] with strides
    (K, 1)."""
    sm90_loop.loop_row("prepared", (1, 4096, 4096))
    assert [(name, a_strides) for name, _, a_strides, _, _ in compiled.kernels] == [
        ("hopper_prepared_gemm_kernel", (4096, 1))]


def test_shared_memory_fits_up_to_sm90s_and_not_a_byte_more(compiled):
    compiled.shared = SM90.shared_memory_bytes
    assert sm90_loop.loop_row("prepared", (1, 4096, 4096))["fits"]
    compiled.shared = SM90.shared_memory_bytes + 1
    assert not sm90_loop.loop_row("prepared", (1, 4096, 4096))["fits"]


def test_rows_go_shape_by_shape_and_write_their_sass_into_a_new_folder(compiled, tmp_path):
    folder = tmp_path / "new" / "asm"
    found = sm90_loop.rows([(1, 4096, 4096), (8, 4096, 4096)], folder)
    assert [(row["shape"], row["path"]) for row in found] == [
        ([1, 4096, 4096], "prepared"), ([1, 4096, 4096], "custom_kernel"),
        ([8, 4096, 4096], "prepared"), ([8, 4096, 4096], "custom_kernel")]
    label = found[0]["config"]["label"]          # "16x64x256 sk8 w4 s1": spaces become _
    assert found[0]["asm"] == str(folder / f"prepared_1x4096x4096_{label.replace(' ', '_')}.sass")
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        row["asm"].rpartition("/")[2] for row in found)
    assert (folder / found[0]["asm"].rpartition("/")[2]).read_text() == LOOP
    again = sm90_loop.rows([(1, 4096, 4096)], folder, paths=("prepared",))   # the folder there
    assert again[0]["asm"] == found[0]["asm"]


def test_without_asm_dir_no_sass_is_written(compiled, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row = sm90_loop.rows([(1, 4096, 4096)], paths=("prepared",))[0]
    assert "asm" not in row and list(tmp_path.iterdir()) == []


def test_the_table_has_a_line_per_row_its_note_or_its_figures():
    row = dict(shape=[1, 4096, 4096], path="prepared", triton="3.6.0",
               config={"label": "16x64x256 sk8 w4 s1"}, loop_sass_per_k_tile=120,
               lane_instructions_per_element=3.75, registers=168, stack_bytes=0, fits=True,
               loop_mix={"LOP3": 40, "HMUL2": 32, "SHF": 16, "HGMMA": 16, "LDS": 8, "BAR": 4,
                         "BRA": 1})
    no_loop = dict(row, shape=[1, 64, 256], loop_sass_per_k_tile=None,
                   note="no loop: one K tile a program")
    lines = sm90_loop.format_rows([row, no_loop, dict(row, fits=False)]).splitlines()
    assert len(lines) == 4 and "(Triton 3.6.0)" in lines[0]
    assert lines[1].split() == ["1x4096x4096", "prepared", "16x64x256", "sk8", "w4", "s1", "120",
                                "3.75", "regs", "168", "stack", "0", "LOP3", "40,", "HMUL2",
                                "32,", "SHF", "16,", "HGMMA", "16,", "LDS", "8,", "BAR", "4"]
    assert lines[2].split() == ["1x64x256", "prepared", "16x64x256", "sk8", "w4", "s1", "no",
                                "loop:", "one", "K", "tile", "a", "program"]
    assert lines[3].replace(" DOES NOT FIT", "") == lines[1] and "DOES NOT FIT" in lines[3]
    assert "(Triton 3.9.0)" in sm90_loop.format_rows([dict(row, triton="3.9.0")])
    assert sm90_loop.format_rows([]) == ""
