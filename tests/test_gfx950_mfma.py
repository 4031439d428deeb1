"""tools.gfx950.mfma on hand-written gfx950 assembly whose answers are known, the quantizer's
work over N tiles, the MFMA bound, and tools.gfx950.paths' choice between the fused and the
quantize-once path by its one modelled time."""

import pytest

from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.tools.gfx950 import mfma, model, paths

MFMA16 = "\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:11], v[12:19], v[0:3], v1, v2\n"
MFMA32 = "\tv_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[4:11], v[12:19], v[0:15], v1, v2\n"
LOAD = "\tbuffer_load_dwordx4 v[4:7], v20, s[8:11], 0 offen\n"


def loop(body: str, peeled: str = "") -> str:
    return ("\ts_mov_b32 s0, 0\n.LBB0_1:\n" + LOAD + "\ts_waitcnt vmcnt(0)\n" + body
            + "\ts_add_u32 s0, s0, 1\n\ts_cmp_lg_u32 s0, s1\n\ts_cbranch_scc1 .LBB0_1\n"
            + peeled + "\ts_endpgm\n")


def test_each_form_takes_its_passes_of_four_clocks():
    assert mfma.wave_mfma_clocks(MFMA16 + MFMA32 + "\ts_endpgm\n", k_tiles=1) == 4 * 4 + 8 * 4


@pytest.mark.parametrize("k_tiles", [1, 3, 8])
def test_the_k_loop_runs_its_mfmas_once_per_k_tile(k_tiles):
    assert mfma.wave_mfma_clocks(loop(2 * MFMA16), k_tiles) == k_tiles * 2 * 16


def test_a_tile_peeled_out_of_the_loop_is_counted_once_not_twice():
    assert mfma.wave_mfma_clocks(loop(MFMA32, peeled=MFMA32), k_tiles=5) == 5 * 32
    with pytest.raises(ValueError, match="whole number"):
        mfma.wave_mfma_clocks(loop(MFMA32, peeled=MFMA16), k_tiles=5)


def test_the_busiest_simd_runs_its_waves_mfmas_one_after_another():
    # 512 workgroups of 4 waves on 256 CUs, occupancy 2: 2 workgroups per CU, 2 waves per SIMD
    assert mfma.busiest_simd_mfma_clocks(loop(MFMA16), 4, 512, 4, 2) == 2 * 4 * 16


def test_the_pass_count_and_the_published_rate_agree():
    flops_per_clock = 2 * 16 * 16 * 128 / (4 * mfma.CLOCKS_PER_PASS)
    chip_tflops = flops_per_clock * mfma.SIMDS * mfma.ENGINE_CLOCK_GHZ / 1e3
    assert chip_tflops == pytest.approx(mfma.MXFP4_DENSE_TFLOPS, rel=0.01)
    assert mfma.mfma_bound_us(8192, 8192, 8192) == pytest.approx(
        2 * 8192 ** 3 / (mfma.MXFP4_DENSE_TFLOPS * 1e6))


def test_the_fused_gemm_quantizes_a_once_per_n_tile_the_other_path_once():
    assert mfma.quantized_elements(100, 1000, 512, 64, 128, False) == 128 * 512 * 8
    assert mfma.quantized_elements(100, 1000, 512, 64, 128, True) == 128 * 512   # 64-row tiles
    assert mfma.per_simd(mfma.quantizer_wave_instructions(64 * 1024, 7.0)) == 7.0


def call(path, shape, issue, mfma_clocks, eligible=True, launches=1):
    config = GemmConfig(16, 128, 512, quantize_a_once=path == "quantize-once")
    gemm = {"kernel": "gemm", "workgroups": 256, "busiest_simd_issue": issue,
            "global_round_trips": 2, "busiest_simd_cycles": [4 * issue + 1728] * 2,
            "busiest_simd_mfma_clocks": mfma_clocks}
    extra = [{"kernel": "quantize", "workgroups": 64, "busiest_simd_issue": 100,
              "global_round_trips": 1, "busiest_simd_cycles": [1264] * 2,
              "busiest_simd_mfma_clocks": 0}] * (launches - 1)
    return {"shape": list(shape), "config": dict(vars(config)), "path": path,
            "eligible": eligible, "launches": extra + [gemm]}


def test_the_modelled_time_is_the_familys_worst_or_the_mfma_clocks_above_the_floor_where_more():
    data, family = model.calibrated()
    shape = (4096, 4096, 4096)
    few = call("fused", shape, 1000, 0)
    assert paths.modelled_us(few) == round(
        family.worst(model.Call(shape, 1000, 1, 256, 2, (5728, 5728)), data), 2)
    clocks = 10 ** 7
    busy = call("fused", shape, 1000, clocks)
    assert paths.modelled_us(busy) == round(
        model.floor_us(shape, data) + mfma.clocks_us(clocks), 2)


def test_each_shape_takes_its_fastest_eligible_call_of_either_path():
    shape = (2048, 4096, 4096)
    calls = [call("fused", shape, 90_000, 0), call("fused", shape, 10_000, 0, eligible=False),
             call("quantize-once", shape, 30_000, 0, launches=2),
             call("quantize-once", shape, 40_000, 0, launches=2)]
    chosen = paths.best(calls)[shape]
    assert chosen["fused"] is calls[0] and chosen["quantize-once"] is calls[2]
    assert chosen["chosen"] is calls[2]
    (row,) = paths.path_rows(calls)
    assert row[1] == "quantize-once" and row[-1] == pytest.approx(
        paths.modelled_us(calls[2]) / mfma.mfma_bound_us(*shape))


def test_the_sweep_tries_quantize_once_only_from_its_m_with_tiles_up_to_256_rows():
    small = paths.candidate_configs((32, 4096, 4096))
    large = paths.candidate_configs((8192, 4096, 4096))
    assert not any(c.quantize_a_once for c in small)
    assert max(c.block_m for c in large if c.quantize_a_once) == 256
    assert all(c.block_m <= 32 for c in small)


def test_the_table_names_each_large_m_shape_modelled_past_the_target():
    near, far, small = (8192, 57344, 8192), (2048, 4096, 512), (8, 1024, 512)
    bound_clocks = int(mfma.mfma_bound_us(*near) * mfma.ENGINE_CLOCK_GHZ * 1e3)
    calls = [call("quantize-once", near, 0, bound_clocks, launches=2),
             call("quantize-once", far, 10 ** 6, 0, launches=2), call("fused", small, 500, 0)]
    text = paths.paths_markdown(calls)
    rows = [line for line in text.splitlines() if line.startswith("| 8192×57344×8192")]
    assert len(rows) == 1 and "llama-3-70b gate_up_proj" in rows[0]
    summary = next(line for line in text.splitlines() if line.startswith("From M = 2048"))
    assert summary.startswith("From M = 2048 on, 1 of 2 shapes")
    assert "2048×4096×512" in summary and "8192×57344×8192" not in summary
    assert "8×1024×512" not in summary


def test_the_modelled_range_spans_the_familys_members_and_its_high_end_decides():
    data, family = model.calibrated()
    shape = (2048, 4096, 4096)
    few = call("quantize-once", shape, 30_000, 0, launches=2)
    low, high = paths.modelled_range(few)
    found = family.range(model.Call(shape, 30_100, 2, 256, 3, (121_728, 121_728)), data)
    assert (low, high) == (round(found.low, 2), round(found.high, 2))
    assert low < high == paths.modelled_us(few)
    (row,) = paths.path_rows([few])
    assert row[4:6] == (high, low)


def test_decoder_step_sums_each_layers_chosen_call_over_the_decode_batches():
    """The decode-step figures (docs/results.md): per dense model and M up to 256, each layer's
    range is its chosen call's (path_rows), one layer their sum, one step that times the
    model's decoder layers."""
    import json

    from mxfp4_mm.tools.docs import MODEL_SHAPES_FIGURES
    from mxfp4_mm.tools.model_shapes import MODEL_DECODER_LAYERS, MODEL_LAYERS
    calls = json.loads(MODEL_SHAPES_FIGURES.read_text())
    chosen = {row[0]: (row[5], row[4]) for row in paths.path_rows(calls)}
    rows = paths.decoder_step_rows(calls)
    assert [(name, m) for name, m, *_ in rows] == [
        (name, m) for name in MODEL_DECODER_LAYERS for m in (1, 8, 32, 128)]
    for name, m, ranges, layer, step in rows:
        assert list(ranges) == list(MODEL_LAYERS[name])
        for layer_name, (n, k) in MODEL_LAYERS[name].items():
            assert ranges[layer_name] == pytest.approx(chosen[(m, n, k)])
        for end in (0, 1):
            assert layer[end] == pytest.approx(sum(pair[end] for pair in ranges.values()))
            assert step[end] == pytest.approx(MODEL_DECODER_LAYERS[name] * layer[end], abs=0.1)
    name, m, ranges, layer, step = rows[0]
    low, high = next(iter(ranges.values()))
    assert (f"| {m} | {low:.2f}–**{high:.2f}** |" in paths.decoder_step_markdown(calls)
            and f"| {layer[0]:.2f}–**{layer[1]:.2f}** | {step[0]:.0f}–**{step[1]:.0f}** |"
            in paths.decoder_step_markdown(calls))
