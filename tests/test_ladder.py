"""The proof of a launcher and the fallback ladder (launchers.proof, launchers.ladder).

Verdicts are tested with launchers that are right, wrong in one element of one case, or whose
direct launch differs from the standard one in one bit; the ladder with the real GEMM through
MXFP4_MM_FAULT and with rungs that fail on purpose: when every rung before it does not fit, the
small-tiles rung serves the shape and matches the reference (interpreter).
"""

from collections import OrderedDict

import pytest
import torch
from triton.runtime.autotuner import OutOfResources

from mxfp4_mm import launchers
from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.quantize import fast_path_blocks
from mxfp4_mm.launchers import configs, ladder, proof
from mxfp4_mm.launchers.configs import QUIET_VARIABLE, config_for
from mxfp4_mm.launchers.gemm_config import FITTING_CONFIG, GemmConfig
from mxfp4_mm.launchers.launcher import Launcher
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.fit import DoesNotFit
from mxfp4_mm.submission import custom_kernel

SHAPE = (4, 96, 512)           # in no table: its heuristic config is the table's
TABLE_SHAPE = (4, 2880, 512)   # a benchmark shape: its heuristic config differs


class FakeLauncher(Launcher):
    """Returns the reference output, optionally with one element changed in one case, or with
    one bit of one element flipped (within any tolerance) in call number wrong_call (1 the
    first) whatever its case."""

    is_direct = False

    def __init__(self, is_direct=False, wrong_case=None, direct_differs=False,
                 reduces_in_kernel=False, wrong_call=None):
        self.is_direct = is_direct
        self.wrong_case = wrong_case
        self.direct_differs = direct_differs
        self.proof_repeats = proof.SPLIT_K_REPEATS if reduces_in_kernel else 0
        self.wrong_call = wrong_call
        self.calls = 0
        self.cases = {}

    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        self.calls += 1
        m, k = a.shape
        b_codes = formats.unshuffle_weight(b_shuffle.view(torch.uint8))
        b_scales = formats.e8m0_unshuffle(b_scale_sh.view(torch.uint8), b_codes.shape[0],
                                          k // 32)
        out = proof.reference_output(a, b_codes, b_scales)
        case = self.cases.setdefault(a.data_ptr(), len(self.cases))
        if case == self.wrong_case:
            out[0, 0] = out[0, 0] * 2 + 1
        if self.calls == self.wrong_call:
            out.view(torch.int16)[0, 0] ^= 1
        if direct and self.direct_differs:
            out.view(torch.int16)[-1, -1] ^= 1
        return out

    def kernel_launches(self):
        return {}


interpreter_only = pytest.mark.interpreter     # drives gfx950's rungs through the interpreter


@pytest.fixture
def empty_cache(monkeypatch):
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())


# ---------------------------------------------------------------------------------------
# proof inputs
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, want_cases", [(1, 7), (2, 4), (4, 2), (6, 2), (16, 2)])
def test_proof_cases_cover_every_kind_at_the_launchers_shape(m, want_cases):
    n, k = 64, 512
    cases = proof.proof_cases(m, n, k, (k, 1), "cpu")
    assert len(cases) == want_cases
    for a, b_shuffle, b_scale_sh, b_codes, b_scales in cases:
        assert a.shape == (m, k) and a.dtype == torch.bfloat16 and a.stride() == (k, 1)
        assert b_shuffle.shape == (n, k // 2)
        assert b_scale_sh.shape == formats.scales_padded_shape(n, k)
    special = torch.cat([case[0] for case in cases]).float()
    assert torch.isnan(special).any() and torch.isposinf(special).any() | torch.isneginf(special).any()
    assert (special == 0).all(dim=1).any()                                # a row of +-0
    assert ((special != 0) & (special.abs() < 2.0 ** -126)).any()          # bf16 denormals
    assert (special.abs() > 2.0 ** 100).any()                              # a large block scale
    assert (special.abs() == 2.5).any() and (special.abs() == 0.25).any()  # rounding ties


@pytest.mark.parametrize("m", [1, 3, 4, 16, 64])
def test_proof_cases_reach_both_quantizer_paths(m):
    """The first cases hold ordinary rows only, so every tile of theirs takes the fast path;
    every tile of the later ones holds a special row (from M = 4 on), so takes the slow one."""
    k = 1024
    cases = proof.proof_cases(m, 64, k, (k, 1), "cpu")
    ordinary = -(-len(proof.ORDINARY_KINDS) // m)
    for a, *_ in cases[:ordinary]:
        assert fast_path_blocks(a).all()
    for a, *_ in cases[ordinary:]:
        if m >= len(proof.SPECIAL_KINDS):
            # Every K tile of 256 columns (the smallest BLOCK_K) has a block off the fast path.
            off = ~fast_path_blocks(a)
            assert off.view(m, k // 256, 8).any(dim=2).any(dim=0).all()
        else:
            assert not fast_path_blocks(a).all()


def test_proof_cases_keep_the_a_strides_of_the_launcher():
    (a, *_), *_ = proof.proof_cases(8, 64, 256, (512, 1), "cpu")
    assert a.stride() == (512, 1)


def test_proof_b_has_no_zero_code_and_one_inf_per_row():
    cases = proof.proof_cases(6, 64, 512, (512, 1), "cpu")
    b_codes = cases[0][3]
    assert (formats.unpack_nibbles(b_codes) % 8 != 0).all()
    for a, *_ in cases:
        assert (torch.isinf(a.float()).sum(dim=1) <= 1).all()


def test_the_proofs_reference_is_the_reference_stand_in():
    data = reference.generate_input(8, 64, 512, seed=3, device="cpu")
    a, b = data[0], data[1]
    assert torch.equal(proof.reference_output(a, *formats.quantize_mxfp4(b)),
                       reference.ref_kernel(data))


# ---------------------------------------------------------------------------------------
# the verdict
# ---------------------------------------------------------------------------------------

def cases_for(shape=(4, 64, 512)):
    m, n, k = shape
    return proof.proof_cases(m, n, k, (k, 1), "cpu")


def test_a_right_launcher_passes():
    proof.prove(FakeLauncher(), cases_for(), has_direct=False)
    proof.prove(FakeLauncher(is_direct=True), cases_for(), has_direct=True)


@pytest.mark.parametrize("wrong_case", [0, 1])
def test_one_wrong_element_in_any_case_fails(wrong_case):
    with pytest.raises(proof.ProofFailure, match="wrong output"):
        proof.prove(FakeLauncher(wrong_case=wrong_case), cases_for(), has_direct=False)


def test_a_direct_launch_that_differs_by_one_bit_fails():
    with pytest.raises(proof.ProofFailure, match="direct launch differs .* in 1 of"):
        proof.prove(FakeLauncher(is_direct=True, direct_differs=True), cases_for(),
                    has_direct=True)


def test_both_launches_run_when_there_is_a_direct_one():
    launcher = FakeLauncher(is_direct=True)
    cases = cases_for()
    proof.prove(launcher, cases, has_direct=True)
    assert launcher.calls == 2 * len(cases)


@pytest.mark.parametrize("is_direct", [False, True])
def test_a_launcher_reducing_in_the_kernel_runs_the_first_case_32_more_times(is_direct):
    m, n, k = 4, 64, 512
    launcher = ladder.prove_rung(ladder.Rung("in-kernel reduce", lambda: FakeLauncher(
        is_direct=is_direct, reduces_in_kernel=True)), m, n, k, (k, 1), "cpu")
    launches = 2 if is_direct else 1
    assert proof.SPLIT_K_REPEATS >= 32
    assert launcher.calls == launches * len(cases_for((m, n, k))) + proof.SPLIT_K_REPEATS


def test_a_launcher_without_an_in_kernel_reduce_runs_each_case_once():
    m, n, k = 4, 64, 512
    launcher = ladder.prove_rung(ladder.Rung("plain", FakeLauncher), m, n, k, (k, 1), "cpu")
    assert launcher.calls == len(cases_for((m, n, k)))


@pytest.mark.parametrize("wrong_call", [2, 17, proof.SPLIT_K_REPEATS + 1])
def test_one_differing_repeated_call_fails_the_proof(wrong_call):
    """A result that changes by one bit on one call of the first case (a race in the in-kernel
    reduce shows only sometimes) fails, though every output is within the reference's
    tolerance."""
    m, n, k = 4, 64, 512
    rung = ladder.Rung("racy", lambda: FakeLauncher(reduces_in_kernel=True,
                                                    wrong_call=wrong_call))
    with pytest.raises(proof.ProofFailure, match=f"repeated call {wrong_call - 1} of "
                                                 f"{proof.SPLIT_K_REPEATS} differs"):
        ladder.prove_rung(rung, m, n, k, (k, 1), "cpu")


# ---------------------------------------------------------------------------------------
# faults and rungs
# ---------------------------------------------------------------------------------------

def test_parse_faults():
    assert ladder.parse_faults("") == {}
    assert ladder.parse_faults("wrong:16,2112,7168; compile:4,2880,512;") == {
        (16, 2112, 7168): "wrong", (4, 2880, 512): "compile"}


@pytest.mark.parametrize("text", ["wrong", "slow:1,2,3", "wrong:1,2", "compile:a,b,c"])
def test_parse_faults_rejects_bad_text(text):
    with pytest.raises(ValueError, match="MXFP4_MM_FAULT: expected KIND:M,N,K"):
        ladder.parse_faults(text)


def rung_names(arch, shape):
    m, n, k = shape
    return [r.name for r in ladder.rungs_for(arch, "interpreter", m, n, k, (k, 1), "cpu")]


def test_the_ladder_order():
    assert rung_names("gfx950", TABLE_SHAPE) == [
        "hardware quantizer (bf16)", "hardware quantizer (f32)", "software quantizer",
        "standard launch", "heuristic config", "small tiles"]
    assert rung_names("sm_90", TABLE_SHAPE) == [
        "software quantizer", "standard launch", "heuristic config", "small tiles"]
    # Where the table has no entry the heuristic config is the config: no rung of its own.
    assert config_for("gfx950", *SHAPE) == heuristic_config("gfx950", *SHAPE)
    assert rung_names("gfx950", SHAPE) == [
        "hardware quantizer (bf16)", "hardware quantizer (f32)", "software quantizer",
        "standard launch", "small tiles"]


def test_the_small_tiles_rung_is_left_out_where_it_is_the_config(monkeypatch):
    monkeypatch.setitem(configs.GEMM_CONFIGS, "gfx950",
                        {TABLE_SHAPE: FITTING_CONFIG})
    assert rung_names("gfx950", TABLE_SHAPE)[-2:] == ["standard launch", "heuristic config"]


def failing_rung(name, error):
    def build():
        raise error
    return ladder.Rung(name, build)


def test_every_rung_failing_raises_an_error_naming_the_shape_and_each_reason(capsys):
    rungs = [failing_rung("first", ValueError("no good")),
             ladder.Rung("second", lambda: FakeLauncher(wrong_case=1))]
    with pytest.raises(RuntimeError) as raised:
        ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1), "cpu", rungs)
    message = str(raised.value)
    assert "4x64x512" in message
    assert "first: ValueError: no good" in message and "second: ProofFailure: wrong output" in message
    lines = capsys.readouterr().err.splitlines()
    assert lines == [line for line in lines if line.startswith("mxfp4-mm: 4x64x512: ")]
    assert len(lines) == 2 and "stepping down to second" in lines[0]
    assert "stepping down to no rung left" in lines[1]


BIG, SMALL = GemmConfig(128, 256, 512), GemmConfig(16, 32, 256)


class SpillingLauncher(FakeLauncher):
    def launch_resources(self):
        return {"gemm": dict(n_regs=255, n_spills=42)}


def test_a_rung_that_does_not_fit_steps_down_past_its_config_in_one_line(capsys):
    """Its config's other rungs would build the same kernels: the next config is tried."""
    built = []

    def does_not_fit():
        built.append("big")
        raise DoesNotFit("preshuffle_gemm_kernel needs 366,592 bytes of shared memory (LDS on "
                         "AMD) a program, over the 232,448 the device grants")
    rungs = [ladder.Rung("first", does_not_fit, BIG),
             ladder.Rung("same config", lambda: built.append("again"), BIG),
             ladder.Rung("small", FakeLauncher, SMALL)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1),
                                      "cpu", rungs)
    assert launcher.rung == "small" and built == ["big"]
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "mxfp4-mm: 4x64x512: first failed (DoesNotFit: preshuffle_gemm_kernel needs 366,592 "
        "bytes of shared memory (LDS on AMD) a program, over the 232,448 the device grants); "
        "stepping down to small",
        "mxfp4-mm: 4x64x512: served by small"]


def test_a_rung_triton_finds_out_of_resources_steps_down_past_its_config():
    built = []

    def out_of_resources():
        built.append("big")
        raise OutOfResources(366592, 232448, "shared memory")
    rungs = [ladder.Rung("first", out_of_resources, BIG),
             ladder.Rung("same config", lambda: built.append("again"), BIG),
             ladder.Rung("small", FakeLauncher, SMALL)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1),
                                      "cpu", rungs)
    assert launcher.rung == "small" and built == ["big"]


def test_other_failures_try_the_same_config_again(capsys):
    rungs = [ladder.Rung("first", lambda: FakeLauncher(wrong_case=0), BIG),
             ladder.Rung("same config", FakeLauncher, BIG)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1),
                                      "cpu", rungs)
    assert launcher.rung == "same config"


def test_a_spilling_rung_steps_down_unless_it_is_the_last_of_ours(capsys):
    rungs = [ladder.Rung("spills", SpillingLauncher, BIG),
             ladder.Rung("same config", FakeLauncher, BIG),
             ladder.Rung("last", SpillingLauncher, SMALL, refuses_spills=False)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1),
                                      "cpu", rungs)
    assert launcher.rung == "last"
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("mxfp4-mm: 4x64x512: spills failed (DoesNotFit: the gemm kernel spills "
                        "42 registers a thread); stepping down to last")


def test_a_passing_first_rung_prints_nothing(capsys):
    rungs = [ladder.Rung("only", FakeLauncher)]
    launcher = ladder.proven_launcher("interpreter", "interpreter", 4, 64, 512, (512, 1),
                                      "cpu", rungs)
    assert launcher.rung == "only"
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------
# the ladder end to end, with the real GEMM
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["compile", "wrong"])
def test_a_faulted_shape_steps_down_and_still_gives_the_reference(kind, monkeypatch, capsys,
                                                                  empty_cache, device):
    m, n, k = SHAPE
    monkeypatch.setenv("MXFP4_MM_FAULT", f"{kind}:{m},{n},{k}")
    monkeypatch.setenv(QUIET_VARIABLE, "1")     # the untuned-shape notice is not a step down
    data = reference.generate_input(m, n, k, seed=5, device=device)
    output = custom_kernel(data)
    assert reference.check_implementation(data, output) == (True, "")
    lines = capsys.readouterr().err.splitlines()
    reason = "InjectedFault" if kind == "compile" else "ProofFailure: wrong output"
    assert len(lines) == 2
    assert lines[0].startswith(f"mxfp4-mm: {m}x{n}x{k}: software quantizer failed ({reason}")
    assert lines[0].endswith("stepping down to standard launch")
    assert lines[1] == f"mxfp4-mm: {m}x{n}x{k}: served by standard launch"


def test_an_unfaulted_shape_is_served_by_its_first_rung_silently(monkeypatch, capsys,
                                                                 empty_cache, device):
    monkeypatch.setenv("MXFP4_MM_FAULT", "wrong:8,8,64")
    monkeypatch.setenv(QUIET_VARIABLE, "1")     # the untuned-shape notice is not a step down
    m, n, k = SHAPE
    data = reference.generate_input(m, n, k, seed=6, device=device)
    assert reference.check_implementation(data, custom_kernel(data)) == (True, "")
    assert launchers.launcher_for(data[0], n).rung == "software quantizer"
    assert "mxfp4-mm" not in capsys.readouterr().err


@interpreter_only
def test_the_hardware_rung_runs_first_on_gfx950(capsys, monkeypatch):
    """gfx950's branch, driven in the interpreter: the hardware quantizer's launcher (the
    instruction's bf16 form) is proven there (the interpreter stands a model in for the
    instruction) and serves, with no notice (the untuned shape's silenced: it comes only for
    the first test that meets the shape)."""
    monkeypatch.setenv(QUIET_VARIABLE, "1")
    m, n, k = SHAPE
    launcher = ladder.proven_launcher("gfx950", "interpreter", m, n, k, (k, 1), "cpu")
    assert launcher.rung == "hardware quantizer (bf16)" and launcher.quantizer == "hardware"
    assert "mxfp4-mm" not in capsys.readouterr().err


@interpreter_only
def test_a_wrong_bf16_hardware_rung_falls_to_the_f32_one(monkeypatch, capsys):
    m, n, k = SHAPE
    monkeypatch.setenv("MXFP4_MM_FAULT", f"wrong:{m},{n},{k}")
    launcher = ladder.proven_launcher("gfx950", "interpreter", m, n, k, (k, 1), "cpu")
    assert launcher.rung == "hardware quantizer (f32)" and launcher.quantizer == "hardware-f32"
    err = capsys.readouterr().err
    assert f"{m}x{n}x{k}: hardware quantizer (bf16) failed (ProofFailure" in err
    assert f"{m}x{n}x{k}: served by hardware quantizer (f32)" in err


@interpreter_only
def test_both_hardware_rungs_failing_fall_to_the_software_quantizer(monkeypatch, capsys):
    m, n, k = SHAPE
    rungs = ladder.rungs_for("gfx950", "interpreter", m, n, k, (k, 1), "cpu")
    rungs[:2] = [failing_rung(rung.name, RuntimeError("miscompiled")) for rung in rungs[:2]]
    launcher = ladder.proven_launcher("gfx950", "interpreter", m, n, k, (k, 1), "cpu", rungs)
    assert launcher.rung == "software quantizer" and launcher.quantizer == "software"
    assert f"{m}x{n}x{k}: served by software quantizer" in capsys.readouterr().err


def test_the_ladder_proves_the_direct_launch_of_a_direct_launcher(capsys):
    m, n, k = 4, 64, 512
    differing = ladder.Rung("direct differs",
                            lambda: FakeLauncher(is_direct=True, direct_differs=True))
    with pytest.raises(proof.ProofFailure, match="direct launch differs"):
        ladder.prove_rung(differing, m, n, k, (k, 1), "cpu")
    rungs = [differing, ladder.Rung("right", lambda: FakeLauncher(is_direct=True))]
    launcher = ladder.proven_launcher("interpreter", "interpreter", m, n, k, (k, 1), "cpu",
                                      rungs)
    assert launcher.rung == "right"
    err = capsys.readouterr().err
    assert "direct differs failed (ProofFailure: the direct launch differs" in err


# ---------------------------------------------------------------------------------------
# launchers.ladder's decisions, with a recording launcher (no kernel runs):
# - which options each rung builds: the quantizer rungs the table's config with their
#   quantizer (the hardware ones on gfx950 only) and the direct launch allowed; "standard
#   launch" the same config, software quantizer, direct launch not allowed; "heuristic config"
#   the heuristic's config, no direct launch, only when it differs; "aiter" only where aiter
#   imports, for (M, N);
# - every rung built with the ladder's backend, shape, A strides and device;
# - a fault applies to the first rung of its own shape only; "compile" raises InjectedFault,
#   "wrong" flips bit 14 of every output element;
# - the proof: has_direct from the launcher, SPLIT_K_REPEATS only for an in-kernel reduce; the
#   served launcher is named by its rung; a reason is cut to 300 characters on one line.
# ---------------------------------------------------------------------------------------

class RecordingGemm:
    built = []

    def __init__(self, config, backend, m, n, k, a_strides, device, quantizer,
                 allow_direct=True, out_dtype=torch.bfloat16):
        self.args = (config, quantizer, allow_direct)
        self.where = (backend, m, n, k, a_strides, device)
        RecordingGemm.built.append(self)


def built_rungs(monkeypatch, arch, shape, aiter=False):
    monkeypatch.setattr(ladder, "build_launcher", RecordingGemm)
    monkeypatch.setattr(ladder.aiter_path, "available", lambda: aiter)
    m, n, k = shape
    rungs = ladder.rungs_for(arch, "hip", m, n, k, (1, m), "meta")
    return {rung.name: rung.build() for rung in rungs}


def test_which_options_each_rung_builds(monkeypatch):
    table, heuristic = config_for("gfx950", *TABLE_SHAPE), heuristic_config("gfx950", *TABLE_SHAPE)
    built = built_rungs(monkeypatch, "gfx950", TABLE_SHAPE)
    assert {name: launcher.args for name, launcher in built.items()} == {
        "hardware quantizer (bf16)": (table, "hardware", True),
        "hardware quantizer (f32)": (table, "hardware-f32", True),
        "software quantizer": (table, "software", True),
        "standard launch": (table, "software", False),
        "heuristic config": (heuristic, "software", False),
        "small tiles": (FITTING_CONFIG, "software", False)}
    m, n, k = TABLE_SHAPE
    assert {launcher.where for launcher in built.values()} == {("hip", m, n, k, (1, m), "meta")}


def test_no_hardware_rung_off_gfx950_and_aiter_only_where_it_imports(monkeypatch):
    built = built_rungs(monkeypatch, "sm_90", TABLE_SHAPE, aiter=True)
    assert list(built) == ["software quantizer", "standard launch", "heuristic config",
                           "small tiles", "aiter"]
    assert isinstance(built["aiter"], ladder.aiter_path.AiterLauncher)
    assert (built["aiter"].m, built["aiter"].n) == TABLE_SHAPE[:2]


def test_a_compile_fault_raises_and_a_wrong_fault_flips_bit_14(monkeypatch):
    rung = ladder.Rung("r", lambda: (lambda *args, **kwargs: torch.zeros(2, 2,
                                                                         dtype=torch.bfloat16)))
    with pytest.raises(ladder.InjectedFault, match="MXFP4_MM_FAULT"):
        ladder._with_fault(rung, "compile").build()
    out = ladder._with_fault(rung, "wrong").build()(1, 2, direct=True)
    assert out.view(torch.int16).eq(0x4000).all()
    assert ladder._with_fault(rung, "wrong").name == "r"


def test_a_fault_hits_the_first_rung_of_its_own_shape_only(monkeypatch, capsys):
    m, n, k = 4, 64, 512
    other = f"compile:{m},{n},{k + 64}"
    for text, served in ((f"compile:{m},{n},{k}", "second"), (other, "first"),
                         (f"{other};wrong:{m},{n},{k}", "second")):
        monkeypatch.setenv("MXFP4_MM_FAULT", text)
        rungs = [ladder.Rung("first", FakeLauncher), ladder.Rung("second", FakeLauncher)]
        launcher = ladder.proven_launcher("interpreter", "interpreter", m, n, k, (k, 1), "cpu",
                                          rungs)
        assert launcher.rung == served
    err = capsys.readouterr().err
    assert err.count("served by second") == 2 and "served by first" not in err


def test_a_long_reason_is_cut_to_one_line_of_300_characters():
    text = ladder._one_line(ValueError("x" * 400 + "\nmore"))
    assert len(text) == 300 and text.endswith("...") and "\n" not in text
    assert ladder._one_line(ValueError("a\n  b")) == "ValueError: a b"
    short = ladder._one_line(ValueError("y" * (300 - len("ValueError: "))))
    assert len(short) == 300 and not short.endswith("...")


@pytest.mark.parametrize("is_direct", [False, True])
def test_prove_rung_proves_the_direct_launch_only_where_there_is_one(monkeypatch, is_direct):
    seen = {}

    def prove(run, cases, has_direct, repeats):
        seen.update(has_direct=has_direct, repeats=repeats, cases=len(cases))
    monkeypatch.setattr(ladder, "prove", prove)
    launcher = ladder.prove_rung(ladder.Rung("r", lambda: FakeLauncher(is_direct=is_direct)),
                                 4, 64, 512, (512, 1), "cpu")
    assert seen == dict(has_direct=is_direct, repeats=0, cases=2) and launcher.rung == "r"
    ladder.prove_rung(ladder.Rung("r", lambda: FakeLauncher(reduces_in_kernel=True)),
                      4, 64, 512, (512, 1), "cpu")
    assert seen["repeats"] == proof.SPLIT_K_REPEATS

@pytest.mark.parametrize("m, n, k", [(33, 80, 320), (1, 16, 64)])
def test_the_small_tiles_rung_serves_a_shape_whose_other_rungs_do_not_fit(m, n, k, capsys,
                                                                           device):
    def does_not_fit():
        raise DoesNotFit("too big")
    backend, arch = launchers.current_target(device)
    rungs = [rung if rung.name == "small tiles" else rung._replace(build=does_not_fit)
             for rung in ladder.rungs_for(arch, backend, m, n, k, (k, 1), device)]
    assert rungs[-1].name == "small tiles" and rungs[-1].config == FITTING_CONFIG
    launcher = ladder.proven_launcher(arch, backend, m, n, k, (k, 1), device, rungs)
    assert launcher.rung == "small tiles"
    data = reference.generate_input(m, n, k, seed=m, device=device)
    a, _, _, b_shuffle, b_scale_sh = data
    assert reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh)) == (True, "")
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"mxfp4-mm: {m}x{n}x{k}: served by small tiles"
