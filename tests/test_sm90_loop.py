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

from mxfp4_mm.launchers.targets import SM90
from mxfp4_mm.tools import sm90_loop

# A loop of five instructions around one HGMMA: two HMUL2 with different modifiers.
LOOP = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/                   HMUL2.BF16_V2 R10, R9, R11 ;
        /*0030*/                   HMUL2 R12, R9, R11 ;
        /*0040*/                   HGMMA.64x16x16.F32.BF16 R24, R8, gdesc[UR8], R24 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   EXIT ;
"""


@pytest.fixture
def compiled(monkeypatch):
    """Every GEMM compiles to LOOP with `shared` bytes of shared memory (set it on the returned
    namespace); the kernels compiled are recorded in `kernels`."""
    fake = SimpleNamespace(shared=2048, kernels=[])

    def compile_for(kernel, args, options, target):
        fake.kernels.append((kernel.__name__, options["num_warps"], target.arch))
        return SimpleNamespace(asm={"cubin": b"cubin"}, metadata=SimpleNamespace(shared=fake.shared))
    monkeypatch.setattr(sm90_loop, "compile_for", compile_for)
    monkeypatch.setattr(sm90_loop, "cuobjdump", lambda cubin, option: LOOP)
    monkeypatch.setattr(sm90_loop, "cubin_resources",
                        lambda cubin: dict(registers=90, stack_bytes=8))
    return fake


def test_the_prepared_row_compiles_its_rules_gemm_and_counts_its_loop(compiled):
    from mxfp4_mm.launchers.prepared import prepared_config
    row = sm90_loop.loop_row("prepared", (8, 4096, 4096))
    config = prepared_config(8, 4096, 4096)
    assert compiled.kernels == [("hopper_prepared_gemm_kernel", config.num_warps, 90)]
    assert row["config"]["label"] == config.label and row["config"]["block_n"] == config.block_n
    assert row["launches"] == ["quantize", "dequantize_a", "gemm"]
    assert row["loop_sass_per_k_tile"] == 5
    assert row["lane_instructions_per_element"] == round(
        5 * 32 * config.num_warps / (config.block_n * config.block_k), 2)
    assert row["loop_mix"] == {"HMUL2": 2, "LDG": 1, "HGMMA": 1, "BRA": 1}
    assert (row["registers"], row["stack_bytes"], row["shared_bytes"]) == (90, 8, 2048)


def test_custom_kernels_row_compiles_the_gemm_of_the_looked_up_config(compiled):
    """The hopper path up to SM90.hopper_max_m, the preshuffle GEMM above."""
    from mxfp4_mm.launchers.configs import config_lookup
    for m, kernel in ((SM90.hopper_max_m, "hopper_gemm_kernel"),
                      (2 * SM90.hopper_max_m, "preshuffle_gemm_kernel")):
        config, _ = config_lookup("sm_90", m, 4096, 4096)
        compiled.kernels.clear()
        row = sm90_loop.loop_row("custom_kernel", (m, 4096, 4096))
        assert compiled.kernels == [(kernel, config.num_warps, 90)]
        assert row["config"]["label"] == config.label
        assert row["layout"] == sm90_loop.LAYOUTS["custom_kernel"]


def test_a_path_without_a_gemm_compiles_nothing_and_says_so(compiled):
    row = sm90_loop.loop_row("custom_kernel", (1024, 4096, 4096))    # the dequant path
    assert compiled.kernels == []
    assert row["launches"] == ["quantize", "dequantize_a", "dequantize_b"]
    assert row["loop_sass_per_k_tile"] is None and row["note"] == "no Triton GEMM on this path"


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
    lines = sm90_loop.format_rows([row, dict(row, fits=False), no_loop]).splitlines()
    assert len(lines) == 4 and "Triton 3.6.0" in lines[0]
    assert lines[1].split() == ["1x4096x4096", "prepared", "16x64x256", "sk8", "w4", "s1", "120",
                                "3.75", "regs", "168", "stack", "0", "LOP3", "40,", "HMUL2",
                                "32,", "SHF", "16,", "HGMMA", "16,", "LDS", "8,", "BAR", "4"]
    assert lines[2].replace(" DOES NOT FIT", "") == lines[1] and "DOES NOT FIT" in lines[2]
    assert lines[3].split() == ["1x64x256", "prepared", "16x64x256", "sk8", "w4", "s1", "no",
                                "loop:", "one", "K", "tile", "a", "program"]
    assert sm90_loop.format_rows([]) == ""
