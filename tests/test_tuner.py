"""The import-time tuner's decisions, on the CPU with fake launchers, timers and clocks
(no timing is measured or asserted here).

Decisions of launchers.tuner, each tested by what it changes:
- whether to tune: MXFP4_MM_TUNE ("0" or "" off), the budget MXFP4_MM_TUNE_S (>= 0, else an
  error), the arch (only those with candidates), the served rung (quantizer rungs only);
- which candidates: the table's entry first, the other quantizers of the served one, the
  listed alternatives without duplicates, at most MAX_CANDIDATES; each built with its own
  config and quantizer, the served launcher reused, not rebuilt; at large M the other paths
  (launchers.candidates: "dequant" from the threshold with the fused heuristic beside it,
  "aiter" on gfx950 where it imports), and on an arch without listed candidates the fused
  GEMM timed against a served "dequant";
- which are timed: the proven ones only, and only when two or more are and the deadline (the
  deadline itself included) is not passed;
- the winner: the fastest whose mean beats the table's by strictly more than the noise (twice
  the standard error of the difference, from both sides' variances and counts); an untimed
  table keeps the table;
- where the winner goes: under the key launcher_for looks up (end to end through
  launchers.tune_launchers);
- what is printed: every row, the winner marked, and a pin line in the table's syntax with
  defaults left out and the quantizer named when it differs.
"""

import ast
import dataclasses

import pytest

from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers import aiter_path, candidates, ladder, tuner
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.configs import config_for, config_lookup
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GemmConfig
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.targets import GFX950, SM90
from mxfp4_mm.launchers.launcher import Launcher
from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES

SHAPE = (4, 2880, 512)
CONFIGS = [GemmConfig(16, 32, 512), GemmConfig(16, 64, 512), GemmConfig(16, 32, 256, split_k=2)]
CANDIDATES = [tuner.Candidate(config, "software") for config in CONFIGS]


def steady(mean, spread=0.1, calls=20):
    return [mean + spread * ((-1) ** i) for i in range(calls)]


def row(config, times):
    return tuner.Timed(config, times)


def test_select_keeps_the_table_when_it_is_fastest():
    assert tuner.select([row(CONFIGS[0], steady(9.0)), row(CONFIGS[1], steady(9.5))]) == 0


def test_select_takes_the_fastest_candidate_beyond_the_noise():
    rows = [row(CONFIGS[0], steady(9.0)), row(CONFIGS[1], steady(8.0)), row(CONFIGS[2], steady(7.0))]
    assert tuner.select(rows) == 2


def test_a_gain_within_the_noise_does_not_replace_the_table():
    table, candidate = steady(9.0, spread=2.0), steady(8.9, spread=2.0)
    assert 9.0 - 8.9 < tuner.noise_us(table, candidate)
    assert tuner.select([row(CONFIGS[0], table), row(CONFIGS[1], candidate)]) == 0


def test_noise_is_twice_the_standard_error_of_the_difference():
    a = [1.0, 3.0] * 10           # variance 20/19
    b = [2.0] * 20                # variance 0
    assert tuner.noise_us(a, b) == pytest.approx(2 * (20 / 19 / 20) ** 0.5)


def test_untimed_candidates_never_win():
    rows = [row(CONFIGS[0], steady(9.0)), tuner.Timed(CONFIGS[1], None, "failed")]
    assert tuner.select(rows) == 0
    # and do not stop the candidates after them
    assert tuner.select(rows + [row(CONFIGS[2], steady(7.0))]) == 2


class FakeClock:
    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def fake_timer(means):
    """time_calls giving each launcher (a config) the mean listed for it."""
    def time_calls(launchers):
        return [steady(means[launcher]) for launcher in launchers]
    return time_calls


def test_a_failing_or_wrong_candidate_is_never_timed_and_never_wins():
    wrong = CONFIGS[2]

    def build(candidate):
        config = candidate.config
        if config == CONFIGS[1]:
            raise RuntimeError("compiler error")
        if config == wrong:
            rung = ladder.Rung("software quantizer", lambda: WrongLauncher())
            return ladder.prove_rung(rung, 4, 64, 512, (512, 1), "cpu")
        return config

    means = {CONFIGS[0]: 9.0, CONFIGS[1]: 1.0, wrong: 1.0}
    result, winner = tuner.tune_shape(SHAPE, CANDIDATES, build, fake_timer(means),
                                      FakeClock(0), deadline=1.0)
    assert result.winner == 0 and winner == CONFIGS[0]
    assert result.rows[1].times is None and "compiler error" in result.rows[1].reason
    assert result.rows[2].times is None and "ProofFailure" in result.rows[2].reason


class WrongLauncher(Launcher):
    def __init__(self, *args, **kwargs):   # also stands in for build_launcher(config, ...)
        pass

    def kernel_launches(self):
        return {}

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        import torch
        return torch.zeros((a.shape[0], b_shuffle.shape[0]), dtype=torch.bfloat16)


def test_the_budget_stops_building_and_timing():
    built = []

    def build(candidate):
        built.append(candidate.config)
        return candidate.config

    timed = []

    def time_calls(launchers):
        timed.append(launchers)
        return [steady(1.0) for _ in launchers]

    # The clock reads 1, 2, 3, ...: with a deadline of 2.5 two configs are built, no timing.
    result, winner = tuner.tune_shape(SHAPE, CANDIDATES, build, time_calls, FakeClock(1.0),
                                      deadline=2.5)
    assert built == CONFIGS[:2] and timed == []
    assert result.rows[2].reason == "budget spent" and result.winner == 0


def test_the_winner_is_timed_against_the_table():
    means = {CONFIGS[0]: 9.0, CONFIGS[1]: 7.0, CONFIGS[2]: 8.0}
    result, winner = tuner.tune_shape(SHAPE, CANDIDATES, lambda c: c.config, fake_timer(means),
                                      FakeClock(0), deadline=1.0)
    assert result.winner == 1 and winner == CONFIGS[1]


def test_the_printed_block_reads_back_as_a_table_entry():
    means = {CONFIGS[0]: 9.0, CONFIGS[1]: 9.5, CONFIGS[2]: 7.0}
    result, _ = tuner.tune_shape(SHAPE, CANDIDATES, lambda c: c.config, fake_timer(means),
                                 FakeClock(0), deadline=1.0)
    block = tuner.report([result], "gfx950")
    pins = [line.split("pin: ", 1)[1] for line in block.splitlines() if "pin: " in line]
    assert len(pins) == 1
    entry = ast.literal_eval("{" + pins[0].rstrip(",") + "}")
    (shape, fields), = entry.items()
    assert shape == SHAPE and "import-time tuner" in fields.pop("note")
    assert GemmConfig(**fields) == CONFIGS[2]
    rows = [line for line in block.splitlines() if line.startswith("  4x2880x512 ")]
    assert len(rows) == 3 and all(line.count(" µs") == 1 for line in rows)
    assert rows[2].startswith("  4x2880x512 * cand 2")


def test_opt_out_and_budget_variables(monkeypatch):
    monkeypatch.delenv("MXFP4_MM_TUNE", raising=False)
    monkeypatch.delenv("MXFP4_MM_TUNE_S", raising=False)
    assert tuner.tuning_enabled() and tuner.budget_s() == tuner.DEFAULT_BUDGET_S
    monkeypatch.setenv("MXFP4_MM_TUNE", "0")
    assert not tuner.tuning_enabled()
    monkeypatch.setenv("MXFP4_MM_TUNE_S", "12.5")
    assert tuner.budget_s() == 12.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("MXFP4_MM_TUNE_S", bad)
        with pytest.raises(ValueError, match="MXFP4_MM_TUNE_S"):
            tuner.budget_s()


@pytest.mark.parametrize("arch", sorted(candidates.CANDIDATES))
@pytest.mark.parametrize("shape", BENCHMARK_SHAPES)
def test_candidate_lists_start_with_the_table_entry_and_hold_at_most_eight(arch, shape):
    configs = tuner.candidate_configs(arch, shape)
    assert configs[0] == config_for(arch, *shape)
    assert 2 <= len(configs) <= 8 and len(set(configs)) == len(configs)
    assert len(candidates.CANDIDATES[arch][shape]) <= 7


class FakeLoop:
    """Times the table's entry (the first launcher) at 9 µs, every other at 1 µs; records the
    device of each loop made."""
    devices = []

    def __init__(self, *args, device=None, **kwargs):
        FakeLoop.devices.append(device)

    def time_interleaved(self, calls, count):
        return [[9.0 + 0.1 * (-1) ** i if index == 0 else 1.0 + 0.1 * (-1) ** i
                 for i in range(count)] for index, _ in enumerate(calls)]


class Served:
    def __init__(self, config, quantizer="software"):
        self.config = config
        self.quantizer = quantizer
        self.rung = ladder.QUANTIZER_RUNGS[quantizer]


def test_tune_never_times_or_chooses_a_candidate_that_fails_its_proof(monkeypatch, capsys):
    """tune() end to end on the CPU: every candidate builds a launcher with wrong outputs and
    would time fastest; each must fail its proof, so the table's entry stays."""
    shape = SHAPE
    assert len(tuner.candidate_configs("gfx950", shape)) > 1
    monkeypatch.setattr(tuner, "build_launcher", WrongLauncher)
    monkeypatch.setattr(tuner, "RunnerLoop", FakeLoop)
    monkeypatch.setattr(FakeLoop, "devices", [])
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Served(config_for("gfx950", *shape))
    replacements = tuner.tune([shape], lambda s: served, "cpu", "gfx950", "interpreter")
    assert replacements == {}
    assert FakeLoop.devices == ["cpu"]        # its cache clear on the tuned device
    block = capsys.readouterr().err
    rows = [line for line in block.splitlines() if line.startswith("  4x2880x512 ")]
    assert len(rows) == len(tuner.candidate_configs("gfx950", shape))
    assert rows[0].startswith("  4x2880x512 * table")
    assert all("ProofFailure" in line for line in rows[1:])


@pytest.mark.parametrize("shape", BENCHMARK_SHAPES)
def test_the_bf16_hardware_form_is_timed_against_the_f32_form_of_the_table_entry(shape):
    table = config_for("gfx950", *shape)
    found = tuner.candidates("gfx950", shape, "hardware")
    assert found[:2] == [tuner.Candidate(table, "hardware"), tuner.Candidate(table, "hardware-f32")]
    assert all(c.quantizer == "hardware" for c in found[2:])
    assert len(found) <= tuner.MAX_CANDIDATES and len(set(found)) == len(found)
    assert [c.config for c in tuner.candidates("gfx950", shape, "software")] == \
        tuner.candidate_configs("gfx950", shape)


def test_tune_times_on_a_row_major_a_of_the_shape(monkeypatch):
    """Every candidate proves right; the calls the loop times see A of (M, K), strides (K, 1)."""
    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers.proof import reference_output
    timed = []

    class RightLauncher(WrongLauncher):
        def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
            timed.append((tuple(a.shape), a.stride()))
            codes = formats.unshuffle_weight(b_shuffle)
            scales = formats.e8m0_unshuffle(b_scale_sh, codes.shape[0], a.shape[1] // 32)
            return reference_output(a, codes, scales)

    class CallingLoop(FakeLoop):
        def time_interleaved(self, calls, count):
            timed.clear()
            for call in calls:
                call()
            assert len(timed) == len(calls) > 1
            seen.update(timed)
            return super().time_interleaved(calls, count)

    seen = set()
    monkeypatch.setattr(tuner, "build_launcher", RightLauncher)
    monkeypatch.setattr(tuner, "RunnerLoop", CallingLoop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = RightLauncher()
    served.config, served.quantizer = config_for("gfx950", *SHAPE), "software"
    served.rung = ladder.QUANTIZER_RUNGS["software"]
    tuner.tune([SHAPE], lambda s: served, "cpu", "gfx950", "interpreter")
    m, _, k = SHAPE
    assert seen == {((m, k), (k, 1))}


def test_tune_builds_each_candidate_with_its_own_quantizer(monkeypatch, capsys):
    built = []

    class RecordingLauncher(WrongLauncher):
        def __init__(self, config, backend, m, n, k, a_strides, device, quantizer):
            built.append((config, quantizer))

    monkeypatch.setattr(tuner, "build_launcher", RecordingLauncher)
    monkeypatch.setattr(tuner, "RunnerLoop", FakeLoop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Served(config_for("gfx950", *SHAPE), "hardware")
    assert tuner.tune([SHAPE], lambda s: served, "cpu", "gfx950", "interpreter") == {}
    wanted = tuner.candidates("gfx950", SHAPE, "hardware")[1:]   # the first is the served one
    assert built == [(c.config, c.quantizer) for c in wanted]
    assert built[0] == (served.config, "hardware-f32")
    assert "hardware-f32" in capsys.readouterr().err


def test_a_winner_with_another_quantizer_says_so_in_its_pin():
    table = CANDIDATES[0]._replace(quantizer="hardware")
    f32 = CANDIDATES[0]._replace(quantizer="hardware-f32")
    rows = [tuner.Timed(table, steady(9.0)), tuner.Timed(f32, steady(7.0))]
    block = tuner.report([tuner.ShapeResult(SHAPE, rows, tuner.select(rows))], "gfx950")
    (pin,) = [line for line in block.splitlines() if "pin: " in line]
    assert "with the hardware-f32 quantizer" in pin and "import-time tuner on gfx950: " in pin
    assert "cand 1" in block and block.count("hardware-f32") == 2


@pytest.mark.interpreter
def test_tune_launchers_end_to_end_serves_the_winner_through_launcher_for(monkeypatch, capsys):
    """launchers.tune_launchers on the CPU (interpreter kernels, proofs real, timing faked: the
    table's entry 9 µs, the alternative 1 µs): the winner is what launcher_for then returns for
    a contiguous A of that shape, under the key it looks up."""
    import collections
    import torch
    from mxfp4_mm import launchers
    shape, alternative = (4, 64, 512), {"block_m": 16, "block_n": 32, "block_k": 512}
    monkeypatch.setattr(launchers, "_launchers", collections.OrderedDict())
    monkeypatch.setattr(launchers, "_gpu", torch.device)   # the CPU has no current device
    monkeypatch.setattr(tuner, "CANDIDATES", {"interpreter": {shape: [alternative]}})
    monkeypatch.setattr(tuner, "RunnerLoop", FakeLoop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    m, n, k = shape
    a = torch.randn((m, k)).to(torch.bfloat16)
    served = launchers.launcher_for(a, n)
    assert served.config == config_for("interpreter", *shape)
    launchers.tune_launchers([shape], device="cpu")
    winner = launchers.launcher_for(a, n)
    assert winner is not served and winner.config == GemmConfig(**alternative)
    assert winner.quantizer == served.quantizer and launchers.cached_launcher_count() == 1
    assert "* cand 1" in capsys.readouterr().err


def test_a_gain_equal_to_the_noise_does_not_replace_the_table():
    table, candidate = [1.0, 3.0] * 10, [1.0, 3.0] * 10
    candidate = [t - tuner.noise_us(table, table) for t in candidate]
    assert tuner.select([row(CONFIGS[0], table), row(CONFIGS[1], candidate)]) == 0
    nudged = [t - 1e-9 for t in candidate]
    assert tuner.select([row(CONFIGS[0], table), row(CONFIGS[1], nudged)]) == 1


def test_of_two_close_candidates_beyond_the_noise_the_faster_wins():
    rows = [row(CONFIGS[0], steady(9.0)), row(CONFIGS[1], steady(7.01)),
            row(CONFIGS[2], steady(7.0)), row(CONFIGS[1], steady(7.02))]
    assert tuner.select(rows) == 2
    assert tuner.select(rows[:2] + [row(CONFIGS[2], steady(7.02))]) == 1


def test_an_untimed_table_entry_keeps_the_table():
    rows = [tuner.Timed(CONFIGS[0], None, "budget spent"), row(CONFIGS[1], steady(1.0))]
    assert tuner.select(rows) == 0


def test_the_noise_uses_each_sides_own_variance_and_count():
    a, b = [1.0, 3.0] * 10, [0.0, 4.0] * 5          # variances 20/19 and 40/9
    want = 2 * ((20 / 19) / 20 + (40 / 9) / 10) ** 0.5
    assert tuner.noise_us(a, b) == pytest.approx(want)
    assert tuner.noise_us(b, a) == pytest.approx(want)


def test_the_deadline_itself_still_builds_and_times():
    timed = []

    def time_calls(launchers):
        timed.append(list(launchers))
        return [steady(9.0 - index) for index, _ in enumerate(launchers)]

    result, winner = tuner.tune_shape(SHAPE, CANDIDATES[:2], lambda c: c.config, time_calls,
                                      lambda: 5.0, deadline=5.0)
    assert timed == [CONFIGS[:2]] and result.winner == 1 and winner == CONFIGS[1]


def test_one_built_candidate_alone_is_not_timed():
    def build(candidate):
        if candidate.config != CONFIGS[0]:
            raise RuntimeError("no")
        return candidate.config

    def time_calls(launchers):
        raise AssertionError("timed")

    result, winner = tuner.tune_shape(SHAPE, CANDIDATES, build, time_calls, FakeClock(0), 1.0)
    assert result.winner == 0 and winner == CONFIGS[0]
    assert result.rows[0].reason.startswith("proven, not timed")


def test_the_served_candidate_is_reused_not_rebuilt(monkeypatch, capsys):
    built = []

    class Recording(WrongLauncher):
        def __init__(self, config, *args):
            built.append(config)

    monkeypatch.setattr(tuner, "build_launcher", Recording)
    monkeypatch.setattr(tuner, "RunnerLoop", FakeLoop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Served(config_for("gfx950", *SHAPE))
    tuner.tune([SHAPE], lambda s: served, "cpu", "gfx950", "interpreter")
    assert served.config not in built and len(built) == len(tuner.candidates("gfx950", SHAPE,
                                                                             "software")) - 1


@pytest.mark.parametrize("rung", ["standard launch", "heuristic config", "aiter", None])
def test_shapes_served_below_the_quantizer_rungs_are_not_tuned(monkeypatch, rung):
    served = Served(config_for("gfx950", *SHAPE))
    served.rung = rung
    monkeypatch.setattr(tuner, "RunnerLoop", None)   # any timing would fail
    assert tuner.tune([SHAPE], lambda s: served, "cpu", "gfx950", "interpreter") == {}


def test_an_arch_without_candidates_is_not_tuned(monkeypatch):
    monkeypatch.setattr(tuner, "RunnerLoop", None)
    served = Served(config_for("gfx950", *SHAPE))
    assert tuner.tune([SHAPE], lambda s: served, "cpu", "gfx942", "hip") == {}


def test_tuning_is_on_unless_the_variable_is_0_or_empty(monkeypatch):
    for text, on in (("0", False), ("", False), ("1", True), ("yes", True)):
        monkeypatch.setenv(tuner.TUNE_VARIABLE, text)
        assert tuner.tuning_enabled() is on
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "0")
    assert tuner.budget_s() == 0.0


def test_candidate_configs_drop_duplicates_and_stop_at_the_cap(monkeypatch):
    table = config_for("gfx950", *SHAPE)
    many = [dict(block_m=16, block_n=32, block_k=256 * 2 ** (i % 2), split_k=1 + i)
            for i in range(12)]
    fields = dataclasses.asdict(table)
    monkeypatch.setattr(tuner, "CANDIDATES", {"gfx950": {SHAPE: [fields] * 3 + many}})
    configs = tuner.candidate_configs("gfx950", SHAPE)
    assert len(configs) == tuner.MAX_CANDIDATES and len(set(configs)) == len(configs)
    assert configs[0] == table
    assert configs[1:] == [GemmConfig(**f) for f in many[:tuner.MAX_CANDIDATES - 1]]


def test_the_table_line_leaves_out_defaults_only():
    config = GemmConfig(16, 32, 512, num_warps=2, split_k=1, cache_modifier=".cg")
    line = tuner.table_line(SHAPE, config, "why")
    entry = ast.literal_eval("{" + line.rstrip(",") + "}")[SHAPE]
    assert entry == {"block_m": 16, "block_n": 32, "block_k": 512, "num_warps": 2,
                     "cache_modifier": ".cg", "note": "why"}


def test_the_report_notes_the_table_when_nothing_was_timed():
    rows = [tuner.Timed(CANDIDATES[0], None, "budget spent")]
    block = tuner.report([tuner.ShapeResult(SHAPE, rows, 0)], "gfx950")
    assert "not timed: budget spent" in block and "the table's entry" in block
    assert block.splitlines()[1].startswith("  4x2880x512 * table")

@pytest.mark.usefixtures("fresh_lookup")
def test_the_import_time_tuner_offers_dequant_from_the_threshold_and_the_fused_gemm_beside_it():
    m, n, k = SM90.vendor_gemm_from_m, 2048, 512
    found = tuner.candidate_configs("sm_90", (m, n, k))
    assert found[0] == DEQUANT_CONFIG and heuristic_config("sm_90", m, n, k) in found
    assert all(c.path == "preshuffle" for c in tuner.candidate_configs("sm_90", (m - 1, n, k)))
    assert all(c.path == "preshuffle" for c in tuner.candidate_configs("sm_100", (m, n, k)))


@pytest.mark.usefixtures("fresh_lookup")
@pytest.mark.parametrize("imports", [True, False])
def test_aiter_is_a_candidate_on_gfx950_at_large_m_where_it_imports(monkeypatch, imports):
    monkeypatch.setattr(aiter_path, "available", lambda: imports)
    m = GFX950.aiter_candidate_from_m
    assert (AITER_CONFIG in tuner.candidate_configs("gfx950", (m, 4096, 4096))) == imports
    assert AITER_CONFIG not in tuner.candidate_configs("gfx950", (m - 1, 4096, 4096))
    assert AITER_CONFIG not in tuner.candidate_configs("sm_90", (m, 4096, 4096))


@pytest.mark.usefixtures("fresh_lookup")
def test_tune_times_dequant_against_the_fused_gemm_on_an_arch_without_listed_candidates(
        monkeypatch, capsys):
    """tune() on sm_89 (no listed candidates): at the threshold it builds the fused heuristic
    beside the served dequant launcher and times both; below it, it tunes nothing."""
    from mxfp4_mm.launchers.proof import reference_output
    shape = (SM90.vendor_gemm_from_m, 32, 64)
    built = []

    class Right(Launcher):
        def __init__(self, config, *args, **kwargs):
            self.config, self.quantizer = config, "software"
            self.rung = ladder.QUANTIZER_RUNGS["software"]
            built.append(config)

        def kernel_launches(self):
            return {}

        def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
            codes = formats.unshuffle_weight(b_shuffle)
            scales = formats.e8m0_unshuffle(b_scale_sh, codes.shape[0], a.shape[1] // 32)
            return reference_output(a, codes, scales)

    class Loop:
        def __init__(self, *args, **kwargs):
            pass

        def time_interleaved(self, calls, count):
            return [[5.0 + 0.1 * (-1) ** i if index == 0 else 1.0 + 0.1 * (-1) ** i
                     for i in range(count)] for index, _ in enumerate(calls)]

    monkeypatch.setattr(tuner, "build_launcher", Right)
    monkeypatch.setattr(tuner, "RunnerLoop", Loop)
    monkeypatch.setenv(tuner.BUDGET_VARIABLE, "1000")
    served = Right(config_lookup("sm_89", *shape)[0])
    assert served.config == DEQUANT_CONFIG
    built.clear()
    replacements = tuner.tune([shape], lambda s: served, "cpu", "sm_89", "cuda")
    assert built == [heuristic_config("sm_89", *shape)] and list(replacements) == [shape]
    assert "dequant 32x32x256 w8" in capsys.readouterr().err
    below = (SM90.vendor_gemm_from_m - 1, 32, 64)
    served_below = Right(config_lookup("sm_89", *below)[0])
    assert tuner.tune([below], lambda s: served_below, "cpu", "sm_89", "cuda") == {}
    assert capsys.readouterr().err == ""
