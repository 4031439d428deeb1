"""tools.gfx950.hazards on hand-written gfx950 assembly whose answers are known."""

from tools.gfx950.hazards import conversion_hazards, read_registers

CHAINED = """\
\tv_cvt_scalef32_pk_fp4_bf16 v72, v38, v61
\tv_cvt_scalef32_pk_fp4_bf16 v72, v39, v61 op_sel:[0,0,1,0]
"""


def test_a_conversion_chained_into_its_own_word_is_flagged_with_both_lines():
    assert conversion_hazards(CHAINED) == [dict(
        line=1, instruction="v_cvt_scalef32_pk_fp4_bf16 v72, v38, v61", next_line=2,
        next_instruction="v_cvt_scalef32_pk_fp4_bf16 v72, v39, v61 op_sel:[0,0,1,0]")]


def test_an_s_nop_between_clears_it_and_labels_or_comments_do_not():
    lines = CHAINED.splitlines()
    assert conversion_hazards("\n".join([lines[0], "\ts_nop 0", lines[1]])) == []
    padded = "\n".join([lines[0], ".LBB0_3:", "\t; a comment", "\t.loc 1 2 3", lines[1]])
    assert [h["next_line"] for h in conversion_hazards(padded)] == [5]


def test_interleaved_words_are_not_flagged_but_the_last_conversion_before_a_reader_is():
    interleaved = ("\tv_cvt_scalef32_pk_fp4_bf16 v86, v88, v82\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v87, v78, v83\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v86, v89, v82 op_sel:[0,0,1,0]\n"
                   "\tv_cvt_scalef32_pk_fp4_bf16 v87, v80, v83 op_sel:[0,0,1,0]\n")
    assert conversion_hazards(interleaved) == []
    stored = interleaved + "\tds_write_b32 v81, v87 offset:1024\n"
    assert [h["line"] for h in conversion_hazards(stored)] == [4]


def test_a_range_holding_the_destination_counts_as_read():
    text = ("\tv_cvt_scalef32_pk_fp4_f32 v73, v10, v11, v12\n"
            "\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[72:79], v[20:27], v[0:3], v1, v2\n")
    assert [h["line"] for h in conversion_hazards(text)] == [1]


def test_a_write_of_the_same_register_that_reads_nothing_of_it_is_not_a_read():
    text = ("\tv_cvt_scalef32_pk_fp4_bf16 v72, v38, v61\n"
            "\tv_mov_b32_e32 v72, v5\n")
    assert conversion_hazards(text) == []


def test_reads():
    assert read_registers("v_add_u32_e32", ["v1", "v2", "v3"]) == {2, 3}
    assert read_registers("buffer_store_dword", ["v1", "v2", "s[0:3]", "0", "offen"]) == {1, 2}
    assert read_registers("v_cvt_scalef32_pk_fp4_bf16", ["v9", "v2", "v3"]) == {2, 3, 9}
