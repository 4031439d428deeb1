"""The hot path of a call whose launcher is cached (launchers.mxfp4_gemm, and the prepared
path's launchers.prepared.prepared_gemm): the first call's bytes again without the checks or
the cache being consulted twice, a new launcher for a new stride or device, the per-call
checks' one-line refusals once the cache is warm, torch.compile tracing the prepared op, a
captured step equal to the eager one (GPU), and tools.bench's stubbed host measurement
(interpreter)."""

import importlib.util
import json
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from mxfp4_mm import launchers, reference
from mxfp4_mm.launchers import prepared
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.submission import custom_kernel
from mxfp4_mm.tools import bench
from mxfp4_mm.tools import bench_model

SMALL = (4, 64, 256)
QUARK_EXPORT = Path(__file__).parent / "data" / "quark_tiny_llama"
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
NEEDS_TRANSFORMERS = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="building the model needs transformers (pip install -e '.[model]'), which the test "
           "extra leaves out")

# The three entries of a call: (A, B_shuffle, B_scale_sh) -> C
ENTRIES = {"custom_kernel": lambda a, b, s: custom_kernel((a, None, None, b, s)),
           "op": lambda a, b, s: torch.ops.mxfp4_mm.gemm(a, b, s),
           "mxfp4_gemm": lambda a, b, s: launchers.mxfp4_gemm(a, b, s)}


@pytest.fixture
def fresh_cache(monkeypatch):
    """An empty launcher cache and signature table for one test."""
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())
    monkeypatch.setattr(launchers, "_checked_signatures", {})


@pytest.fixture
def recorded(fresh_cache, monkeypatch):
    """proven_launcher recording each build and giving a launcher that fills C with the
    build's number (no kernel runs); gemm_problem counting its calls."""
    built, checked = [], []

    def proven_launcher(arch, backend, m, n, k, a_strides, device, out_dtype):
        built.append((m, n, k, a_strides, str(device)))
        number = len(built)
        return lambda a, b, s: torch.full((m, n), number, dtype=torch.bfloat16, device=a.device)
    gemm_problem = launchers.gemm_problem

    def counted(*tensors):
        checked.append(True)
        return gemm_problem(*tensors)
    monkeypatch.setattr(launchers, "proven_launcher", proven_launcher)
    monkeypatch.setattr(launchers, "gemm_problem", counted)
    return built, checked


def _tensors(device, shape=SMALL, seed=3):
    a, _, _, b_shuffle, b_scale_sh = reference.generate_input(*shape, seed=seed, device=device)
    return a, b_shuffle, b_scale_sh


def _forbid_checks_and_builds(monkeypatch):
    def refuse(*args):
        raise AssertionError("a cached call was checked or built again")
    for module, name in ((launchers, "gemm_problem"), (launchers, "proven_launcher"),
                         (prepared, "prepared_problem"), (prepared, "proven_prepared_launcher")):
        monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_the_cached_path_gives_the_first_calls_bytes(device, fresh_cache, monkeypatch, entry):
    data = reference.generate_input(*SMALL, seed=3, device=device)
    a, _, _, b_shuffle, b_scale_sh = data
    first = ENTRIES[entry](a, b_shuffle, b_scale_sh)
    _forbid_checks_and_builds(monkeypatch)
    again = ENTRIES[entry](a.clone(), b_shuffle, b_scale_sh)
    assert torch.equal(again.view(torch.int16), first.view(torch.int16))
    ok, message = reference.check_implementation(data, again)
    assert ok, message


def test_the_cached_layer_gives_the_first_calls_bytes(device, fresh_cache, monkeypatch):
    a, b_shuffle, b_scale_sh = _tensors(device)
    layer = MXFP4Linear(b_shuffle, b_scale_sh)
    first = layer(a[None])                       # [1, M, K]: the reshape and view
    flat = layer(a)
    _forbid_checks_and_builds(monkeypatch)
    assert torch.equal(layer(a[None]).view(torch.int16), first.view(torch.int16))
    assert torch.equal(layer(a).view(torch.int16), flat.view(torch.int16))
    assert torch.equal(flat.view(torch.int16), first[0].view(torch.int16))


def test_a_new_stride_or_device_takes_a_new_launcher(device, recorded):
    built, checked = recorded
    a, b_shuffle, b_scale_sh = _tensors(device)
    m, n, k = SMALL
    launchers.mxfp4_gemm(a, b_shuffle, b_scale_sh)
    launchers.mxfp4_gemm(a.clone(), b_shuffle.clone(), b_scale_sh.clone())     # a hit
    assert len(built) == 1 and len(checked) == 1
    k_major = a.t().contiguous().t()
    sliced = torch.empty((m, 2 * k), dtype=torch.bfloat16, device=device)[:, k:]
    meta = [torch.empty(t.shape, dtype=t.dtype, device="meta")
            for t in (a, b_shuffle, b_scale_sh)]
    assert launchers.mxfp4_gemm(k_major, b_shuffle, b_scale_sh)[0, 0] == 2
    assert launchers.mxfp4_gemm(sliced, b_shuffle, b_scale_sh)[0, 0] == 3
    assert launchers.mxfp4_gemm(*meta).device.type == "meta"
    assert built == [(m, n, k, (k, 1), str(a.device)), (m, n, k, (1, m), str(a.device)),
                     (m, n, k, (2 * k, 1), str(a.device)), (m, n, k, (k, 1), "meta")]
    # the same launcher key from weights of other dtypes: checked once more, not built again
    assert launchers.mxfp4_gemm(a, b_shuffle.view(torch.uint8), b_scale_sh.view(torch.uint8)
                                )[0, 0] == 1
    assert len(built) == 4 and len(checked) == 5
    for tensors in ((k_major, b_shuffle, b_scale_sh), (sliced, b_shuffle, b_scale_sh), meta):
        launchers.mxfp4_gemm(*tensors)
    assert len(built) == 4 and len(checked) == 5


def test_an_evicted_launcher_takes_its_signatures_with_it(device, recorded, monkeypatch):
    built, _ = recorded
    monkeypatch.setattr(launchers, "LAUNCHER_CACHE_CAPACITY", 2)
    _, b_shuffle, b_scale_sh = _tensors(device)
    for m in (1, 2, 3, 1):
        launchers.mxfp4_gemm(torch.zeros(m, 256, dtype=torch.bfloat16, device=device),
                             b_shuffle, b_scale_sh)
    assert [entry[0] for entry in built] == [1, 2, 3, 1]       # 1 was evicted, then rebuilt
    assert set(launchers._checked_signatures.values()) == set(launchers._launchers)
    assert len(launchers._checked_signatures) == 2


def _column_major(tensor):
    return tensor.view(torch.uint8).t().contiguous().t().view(tensor.dtype)


# (what goes wrong, (A, B_shuffle, B_scale_sh) -> the bad tensors, error type, message start)
BAD_CALLS = [
    ("A float32", lambda a, b, s: (a.float(), b, s), TypeError, "A: expected a 2-D tensor"),
    ("A 3-D", lambda a, b, s: (a[None], b, s), TypeError, "A: expected a 2-D tensor"),
    ("A no tensor", lambda a, b, s: (a.tolist(), b, s), TypeError, "A: expected a torch.Tensor"),
    ("A of another K", lambda a, b, s: (a[:, :192], b, s), ValueError, "A, B_shuffle: A of"),
    ("A transposed", lambda a, b, s: (a.t(), b, s), ValueError, "A: shape (256, 4) is [K, M]"),
    ("B_shuffle int8", lambda a, b, s: (a, b.view(torch.int8), s), TypeError,
     "B_shuffle: expected a 2-D tensor"),
    ("B_shuffle column-major", lambda a, b, s: (a, _column_major(b), s), ValueError,
     "B_shuffle: expected a contiguous tensor"),
    ("B_scale_sh short", lambda a, b, s: (a, b, s[:, :4].contiguous()), ValueError,
     "B_scale_sh: expected shape (256, 8)"),
    ("B_scale_sh column-major", lambda a, b, s: (a, b, _column_major(s)), ValueError,
     "B_scale_sh: expected a contiguous tensor"),
    ("B_scale_sh elsewhere", lambda a, b, s: (a, b, torch.empty(s.shape, dtype=s.dtype,
                                                                 device="meta")),
     ValueError, "A, B_shuffle, B_scale_sh: expected one device"),
]


# The op's dispatcher answers these before our code: a list where its schema says Tensor (its
# own RuntimeError), and a meta tensor, for which it calls the fake implementation.
DISPATCHER_CASES = ("A no tensor", "B_scale_sh elsewhere")
REFUSALS = [pytest.param(entry, *case, id=f"{entry}-{case[0]}") for entry in ("custom_kernel", "op")
            for case in BAD_CALLS if entry != "op" or case[0] not in DISPATCHER_CASES]


@pytest.mark.parametrize("entry, what, bad, error, message", REFUSALS)
def test_a_warm_cache_still_refuses_each_bad_input_in_one_line(device, recorded, entry, what,
                                                                bad, error, message):
    a, b_shuffle, b_scale_sh = _tensors(device)
    ENTRIES[entry](a, b_shuffle, b_scale_sh)                     # warm
    with pytest.raises(error) as refused:
        ENTRIES[entry](*bad(a, b_shuffle, b_scale_sh))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert ENTRIES[entry](a, b_shuffle, b_scale_sh).shape == (SMALL[0], SMALL[1])
    assert len(recorded[0]) == 1


def test_the_ops_schema_refuses_what_is_no_tensor(device, recorded):
    a, b_shuffle, b_scale_sh = _tensors(device)
    torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh)
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument "
                                           "'a'"):
        torch.ops.mxfp4_mm.gemm(a.tolist(), b_shuffle, b_scale_sh)


def test_a_warm_layer_still_refuses_a_bad_input_in_one_line(device, recorded):
    a, b_shuffle, b_scale_sh = _tensors(device)
    layer = MXFP4Linear(b_shuffle, b_scale_sh)
    layer(a)
    for bad, message in ((a.float(), "MXFP4Linear: expected a bfloat16 input"),
                         (a[:, :192], "MXFP4Linear: expected an input of last dim 256"),
                         (a.t(), "MXFP4Linear: expected an input of last dim 256")):
        with pytest.raises((TypeError, ValueError)) as refused:
            layer(bad)
        assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


# ---------------------------------------------------------------------------------------
# the prepared path (the interpreter serves it on the CPU)
# ---------------------------------------------------------------------------------------

def _prepared_operands(shape=SMALL, seed=3):
    """(A, the Hopper weight's values, scales, K, wide_scales), on the CPU."""
    a, b_shuffle, b_scale_sh = _tensors("cpu", shape, seed)
    weight = prepared.hopper_weight(b_shuffle, b_scale_sh)
    return a, weight.values, weight.scales, weight.k, weight.wide_scales


@pytest.fixture
def recorded_prepared(fresh_cache, monkeypatch):
    """proven_prepared_launcher recording each build and giving a launcher that fills C with
    the build's number (no kernel runs); prepared_problem counting its calls."""
    built, checked = [], []

    def proven_prepared_launcher(arch, backend, m, n, k, a_strides, device, wide_scales,
                                 out_dtype):
        built.append((m, n, k, a_strides, str(device), wide_scales))
        number = len(built)
        return lambda a, values, scales: torch.full((m, n), number, dtype=torch.bfloat16)
    prepared_problem = prepared.prepared_problem

    def counted(*operands):
        checked.append(True)
        return prepared_problem(*operands)
    monkeypatch.setattr(prepared, "proven_prepared_launcher", proven_prepared_launcher)
    monkeypatch.setattr(prepared, "prepared_problem", counted)
    return built, checked


@pytest.mark.interpreter
def test_the_cached_prepared_call_gives_the_first_calls_bytes(fresh_cache, monkeypatch):
    data = reference.generate_input(*SMALL, seed=3, device="cpu")
    a, values, scales, k, wide_scales = _prepared_operands()
    layer = MXFP4Linear(data[3], data[4])
    layer.use_hopper_layout(True)
    first = torch.ops.mxfp4_mm.gemm_prepared(a, values, scales, k, wide_scales)
    first_layer = layer(a[None])
    assert launchers.cached_launcher_count() == 1        # the op and the layer share it
    _forbid_checks_and_builds(monkeypatch)
    again = torch.ops.mxfp4_mm.gemm_prepared(a.clone(), values, scales, k, wide_scales)
    assert torch.equal(again.view(torch.int16), first.view(torch.int16))
    assert torch.equal(layer(a[None]).view(torch.int16), first_layer.view(torch.int16))
    assert torch.equal(first_layer[0].view(torch.int16), first.view(torch.int16))
    ok, message = reference.check_implementation(data, again)
    assert ok, message


@pytest.mark.interpreter
def test_a_new_prepared_stride_takes_a_new_launcher(recorded_prepared):
    built, checked = recorded_prepared
    a, values, scales, k, wide_scales = _prepared_operands()
    m, n, _ = SMALL

    def run(a, wide_scales=wide_scales):
        return torch.ops.mxfp4_mm.gemm_prepared(a, values, scales, k, wide_scales)[0, 0]
    assert run(a) == 1
    assert run(a.clone()) == 1 and len(built) == 1 and len(checked) == 1     # a hit
    k_major = a.t().contiguous().t()
    sliced = torch.empty((m, 2 * k), dtype=torch.bfloat16)[:, k:]
    assert (run(k_major), run(sliced), run(a, not wide_scales)) == (2, 3, 4)
    assert built == [(m, n, k, (k, 1), "cpu", wide_scales), (m, n, k, (1, m), "cpu", wide_scales),
                     (m, n, k, (2 * k, 1), "cpu", wide_scales),
                     (m, n, k, (k, 1), "cpu", not wide_scales)]
    for tensor in (k_major, sliced, a):
        run(tensor)
    assert len(built) == 4 and len(checked) == 4
    # the GEMM's op beside it: its own launcher and signature
    launchers.mxfp4_gemm(*_tensors("cpu"))
    assert launchers.cached_launcher_count() == 5 and len(launchers._checked_signatures) == 5


# (what goes wrong, (A, values, scales, K) -> the bad operands, message part)
BAD_PREPARED_CALLS = [
    ("A float32", lambda a, v, s, k: (a.float(), v, s, k), "expected A bf16 [M, 256], got "
                                                            "torch.float32 (4, 256)"),
    ("A 3-D", lambda a, v, s, k: (a[None], v, s, k), "expected A bf16 [M, 256], got "
                                                    "torch.bfloat16 (1, 4, 256)"),
    ("A of another K", lambda a, v, s, k: (a[:, :192], v, s, k), "expected A bf16 [M, 256]"),
    ("K of another weight", lambda a, v, s, k: (a, v, s, 512), "expected A bf16 [M, 512]"),
    ("values int8", lambda a, v, s, k: (a, v.view(torch.int8), s, k), "expected values "
                                                                       "contiguous uint8"),
    ("values of fewer K units", lambda a, v, s, k: (a, v[:, :2].contiguous(), s, k),
     "expected values contiguous uint8 (4, 4, 8, 4, 4, 4)"),
    ("values not contiguous", lambda a, v, s, k: (a, v.transpose(0, 1), s, k),
     "not contiguous"),
    ("scales of fewer rows", lambda a, v, s, k: (a, v, s[:2].contiguous(), k),
     "expected scales contiguous uint8 (4, 4, 8, 2, 2)"),
]


@pytest.mark.interpreter
@pytest.mark.parametrize("what, bad, message", BAD_PREPARED_CALLS,
                         ids=[case[0] for case in BAD_PREPARED_CALLS])
def test_a_warm_prepared_cache_still_refuses_each_bad_input_in_one_line(recorded_prepared, what,
                                                                         bad, message):
    a, values, scales, k, wide_scales = _prepared_operands()
    torch.ops.mxfp4_mm.gemm_prepared(a, values, scales, k, wide_scales)        # warm
    with pytest.raises(ValueError) as refused:
        torch.ops.mxfp4_mm.gemm_prepared(*bad(a, values, scales, k), wide_scales)
    text = str(refused.value)
    assert text.startswith("mxfp4_mm.gemm_prepared: ") and message in text and "\n" not in text
    assert torch.ops.mxfp4_mm.gemm_prepared(a, values, scales, k, wide_scales).shape == (4, 64)
    assert len(recorded_prepared[0]) == 1


@pytest.mark.interpreter
def test_prepared_operands_on_two_devices_or_no_tensor_are_refused_in_one_line(
        recorded_prepared):
    a, values, scales, k, wide_scales = _prepared_operands()
    prepared.prepared_gemm(a, values, scales, k, wide_scales)
    meta = torch.empty(scales.shape, dtype=scales.dtype, device="meta")
    for operands, error, message in (((a, values, meta), ValueError, "expected one device for "
                                      "A, values and scales, got cpu, cpu, meta"),
                                     ((a.tolist(), values, scales), TypeError,
                                      "expected A a torch.Tensor, got list")):
        with pytest.raises(error) as refused:
            prepared.prepared_gemm(*operands, k, wide_scales)
        assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.interpreter
@pytest.mark.parametrize("m", [2, 5])
def test_torch_compile_traces_the_prepared_op_and_layer_at_any_m(recorded_prepared, m):
    torch._dynamo.reset()
    a, values, scales, k, wide_scales = _prepared_operands()
    data = reference.generate_input(*SMALL, seed=3, device="cpu")
    layer = MXFP4Linear(data[3], data[4])
    layer.use_hopper_layout(True)
    compiled = torch.compile(lambda x: layer(x) * 2, backend="aot_eager", fullgraph=True,
                             dynamic=True)
    x = torch.randn(m, 3, k, dtype=torch.bfloat16)
    assert torch.equal(compiled(x), layer(x) * 2)
    assert compiled(x[:1]).shape == (1, 3, 64)


# ---------------------------------------------------------------------------------------
# a captured step (GPU)
# ---------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("m", [1, 8, 64])
def test_a_captured_step_gives_the_eager_bytes(m):
    generator = torch.Generator(device="cuda").manual_seed(m)
    up = MXFP4Linear.from_linear(torch.nn.Linear(512, 1024, dtype=torch.bfloat16, device="cuda"))
    down = MXFP4Linear.from_linear(torch.nn.Linear(1024, 512, bias=False,
                                                   dtype=torch.bfloat16, device="cuda"))
    model = torch.nn.Sequential(up, torch.nn.SiLU(), down)
    x = torch.randn(m, 1, 512, dtype=torch.bfloat16, device="cuda", generator=generator)
    replay = bench_model.captured_step(lambda input_ids, use_cache: _Logits(model(input_ids)), x)
    for _ in range(3):
        x.copy_(torch.randn(x.shape, dtype=x.dtype, device="cuda", generator=generator))
        captured = replay().clone()
        torch.cuda.synchronize()
        assert torch.equal(captured.view(torch.int16), model(x).view(torch.int16))


class _Logits:
    """What decode_step reads of a model's output."""

    def __init__(self, logits):
        self.logits = logits


@gpu
@NEEDS_TRANSFORMERS
def test_a_captured_llama_step_gives_the_eager_logits():
    config = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                  num_key_value_heads=2, num_hidden_layers=2, vocab_size=512)
    model = bench_model.mxfp4_llama(config, "cuda")
    input_ids = torch.tensor([[3], [5], [7], [11]], device="cuda")
    replay = bench_model.captured_step(model, input_ids)
    captured = replay().clone()
    torch.cuda.synchronize()
    assert torch.equal(captured, bench_model.decode_step(model, input_ids))


# ---------------------------------------------------------------------------------------
# tools.bench: the stubbed host measurement and the emulated model
# ---------------------------------------------------------------------------------------

@pytest.mark.interpreter
def test_the_stubbed_host_measurement_runs_on_the_cpu_and_leaves_the_cache(tmp_path, capsys):
    cache, signatures = launchers._launchers, launchers._checked_signatures
    out = tmp_path / "host.json"
    assert bench.main(["--host-only", "--stub-launches", "--shapes", "4,64,256", "1,2880,512",
                       "--host-calls", "20", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(row["m"], row["n"], row["k"]) for row in rows] == [(4, 64, 256), (1, 2880, 512)]
    for row in rows:
        us = row["host_us"]
        assert us["F.linear"] is None and us["direct"] is None
        assert all(us[key] > 0 for key in ("op", "MXFP4Linear", "prepared",
                                           "MXFP4Linear prepared", "custom_kernel"))
    printed = capsys.readouterr().out
    assert "the Python part alone" in printed and "custom_kernel <= op + 2 µs" in printed
    assert "prep op" in printed and "plyr-lin" in printed
    assert launchers._launchers is cache and launchers._checked_signatures is signatures


def test_the_stubbed_host_measurement_needs_the_interpreter(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert bench.main(["--host-only", "--stub-launches"]) == 2
    assert "set TRITON_INTERPRET=1" in capsys.readouterr().err


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_the_quark_model_is_within_tolerance_of_its_exact_emulation():
    from mxfp4_mm.launchers.linear import load_quark
    from mxfp4_mm.launchers.proof import compare
    model = load_quark(QUARK_EXPORT)
    twin = bench_model.bf16_twin(model)
    names = [name for name, module in model.named_modules() if isinstance(module, MXFP4Linear)]
    input_ids = torch.tensor([[3], [5], [7]])
    got = bench_model.decode_step(model, input_ids)
    with bench_model.emulating(twin, names):
        assert isinstance(twin.get_submodule(names[0]), bench_model.EmulatedMXFP4Linear)
        emulated = bench_model.decode_step(twin, input_ids)
    assert type(twin.get_submodule(names[0])) is torch.nn.Linear      # put back
    ok, message = compare(got, emulated)
    assert ok, message
    assert bench_model.relative_l2(got, emulated) < bench_model.relative_l2(got, bench_model.decode_step(
        twin, input_ids))


def test_the_model_targets_and_modes():
    assert bench_model.model_target("eager", 64) == 1.05
    assert (bench_model.model_target("captured", 1), bench_model.model_target("captured", 8)) == (0.5, 0.6)
    assert bench_model.model_target("reduce-overhead", 8) == 0.6
    assert bench_model.model_target("captured", 32) is None and bench_model.model_target("compiled", 1) is None
    assert bench.parse_modes("compiled,eager") == ("eager", "compiled")
    with pytest.raises(Exception, match="expected some of eager,captured,reduce-overhead,"):
        bench.parse_modes("eager,graphs")


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_a_model_row_compares_the_step_with_the_twin_the_eager_step_and_the_emulation(
        monkeypatch):
    """tools.bench's row of one mode and M, on the CPU (no device to synchronize, a fixed
    time per step): the eager MXFP4 step is its own eager reference, within tolerance of the
    emulated model."""
    from mxfp4_mm.launchers.linear import load_quark
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    model = load_quark(QUARK_EXPORT)
    twin = bench_model.bf16_twin(model)
    names = [name for name, module in model.named_modules() if isinstance(module, MXFP4Linear)]
    input_ids = torch.tensor([[3], [5]])
    eager_logits = {"mxfp4": bench_model.decode_step(model, input_ids)}
    with bench_model.emulating(twin, names):
        eager_logits["emulated"] = bench_model.decode_step(twin, input_ids)
    steps = bench_model.mode_steps("eager", {"mxfp4": model, "bf16": twin}, input_ids)
    times = iter([30.0, 20.0])
    row = bench_model.model_row("eager", 2, steps, lambda step: next(times), eager_logits)
    assert (row["mxfp4_us"], row["bf16_us"], row["ratio"]) == (30.0, 20.0, 1.5)
    assert row["target"] == 1.05 and row["met"] is False
    assert row["rel_eager"] == 0.0 and row["emulated_ok"], row["emulated_check"]
    assert 0 < row["rel_emulated"] < row["rel_bf16"]
    table = bench.format_model_table([row, {"mode": "captured", "m": 2, "error": "X: y"}])
    assert "MISS" in table and "within tolerance" in table and "failed: X: y" in table
