"""tools.bench on the CPU: shape parsing, bytes and floor math, rows, geomeans, the table, and
the exit without a GPU; the progress line of a shape another path serves (no unfused variant);
--vendor-gemm: its threshold from its rows, a row proving, checking and timing both paths and
bf16, its fused column where the lookup serves dequant; --model: its arguments, the bf16 twin
(each layer's bias, or none) and the named Llamas; --host-only: its table's margins (each entry
less its reference) and medians, the targets' counts at their bounds, the M of --m, and the
prepared path's entries timed only at the M it serves (elsewhere marked not served, out of the
medians and targets)."""

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES, TASK_SHAPES, TEST_SHAPES
from mxfp4_mm.tools import bench
from mxfp4_mm.tools import bench_host
from mxfp4_mm.tools import bench_model
from mxfp4_mm.tools import bench_vendor
from mxfp4_mm.tools import timing as timing_module
from mxfp4_mm.tools.cli import UsageError, parse_shapes

ROOT = Path(__file__).resolve().parents[1]


def timing(mean_us):
    return {"mean_us": mean_us, "median_us": mean_us, "min_us": mean_us, "calls": 3}


def fake_row(m, n, k, fused, floor, bf16=2.0, direct=3.0, failures=None, config="16x64x512"):
    timings = {"fused": timing(fused), "unfused": timing(2 * fused), "reference": timing(100.0),
               "bf16_linear": timing(bf16)}
    host = {"direct": direct, "standard": 20.0, "custom_kernel": 5.0}
    return bench.make_row({"m": m, "n": n, "k": k, "seed": 1}, timings, floor, 2, config, host,
                          failures or {})


# ----------------------------------------------------------------------------- shapes

def test_default_shapes_are_the_benchmark_shapes():
    specs = parse_shapes(bench.build_parser().parse_args([]).shapes)
    assert [(s["m"], s["n"], s["k"]) for s in specs] == list(BENCHMARK_SHAPES)
    assert [s["seed"] for s in specs] == [4565, 15, 457, 54, 687, 7856]   # task.yml's


def test_named_sets_and_explicit_shapes_mix():
    specs = parse_shapes(bench.build_parser().parse_args(["--shapes", "tests", "4,64,256"]).shapes)
    assert [(s["m"], s["n"], s["k"]) for s in specs] == list(TEST_SHAPES) + [(4, 64, 256)]
    assert specs[-1]["seed"] == 4242 + len(TEST_SHAPES)
    assert len(parse_shapes(["all"])) == len(TASK_SHAPES)


@pytest.mark.parametrize("word", ["4,64", "4x64x256", "4,64,100", "0,64,256", "bench", "",
                                  "4,64,256,", "8,250,512"])
def test_bad_shapes_are_refused(word):
    with pytest.raises(UsageError):
        parse_shapes([word])


# ----------------------------------------------------------------------------- floor math

def test_gemm_bytes_counts_a_weight_scales_and_output():
    # A 16*7168*2, B_shuffle 2112*7168/2, scales 2112*7168/32, C 16*2112*2
    assert bench.gemm_bytes(16, 2112, 7168) == 229376 + 7569408 + 473088 + 67584
    assert bench.gemm_bytes(1, 16, 64) == 128 + 512 + 32 + 32


def test_copy_bandwidth_counts_read_and_write():
    assert bench.copy_bandwidth(1 << 30, 0.5e-3) == pytest.approx(2 * (1 << 30) / 0.5e-3)


def test_floor_is_empty_launch_plus_bytes_at_bandwidth():
    assert bench.floor_us(4_000_000, 2.5, 4e12) == pytest.approx(3.5)
    assert bench.floor_us(0, 2.5, 4e12) == pytest.approx(2.5)


# ----------------------------------------------------------------------------- rows and geomeans

def test_row_means_and_ratios():
    row = fake_row(4, 2880, 512, fused=8.0, floor=4.0, bf16=16.0)
    assert row["us"] == {"fused": 8.0, "unfused": 16.0, "reference": 100.0,
                         "bf16_linear": 16.0, "floor": 4.0}
    assert row["ratios"] == {"fused/bf16_linear": 0.5, "fused/floor": 2.0}
    assert row["bytes"] == bench.gemm_bytes(4, 2880, 512)
    assert row["ok"] and bench.check_text(row) == "ok"


def test_a_failed_check_marks_the_row():
    row = fake_row(4, 64, 256, 1.0, 1.0, failures={"unfused": "3 of 256 elements mismatch"})
    assert not row["ok"]
    assert bench.check_text(row) == "FAIL unfused"


def test_summary_takes_geomeans_and_skips_missing_host_figures():
    rows = [fake_row(4, 64, 256, fused=2.0, floor=1.0, direct=None),
            fake_row(8, 64, 256, fused=8.0, floor=1.0, direct=4.0)]
    totals = bench.summarize(rows)
    assert totals["us"]["fused"] == pytest.approx(4.0)
    assert totals["ratios"]["fused/floor"] == pytest.approx(4.0)
    assert totals["host_us"]["direct"] == pytest.approx(4.0)
    assert totals["host_us"]["standard"] == pytest.approx(20.0)
    only_missing = bench.summarize(rows[:1])
    assert only_missing["host_us"]["direct"] is None


# ----------------------------------------------------------------------------- table

def test_table_has_a_line_per_row_and_a_geomean_line():
    rows = [fake_row(4, 2880, 512, fused=8.0, floor=4.0, direct=None, config="16x64x512 wpe2"),
            fake_row(16, 2112, 7168, fused=18.0, floor=9.0,
                     failures={"fused": "bad"}, config="16x128x512 sk14 .cg")]
    lines = bench.format_table(rows, bench.summarize(rows)).splitlines()
    assert len(lines) == 4
    header, first, second, last = lines
    for label in ("a fused", "b unfused", "c ref", "d bf16", "e floor", "a/d", "a/e",
                  "launches", "config", "host dir", "host std", "host ck", "check"):
        assert label in header
    assert first.split()[:5] == ["4", "2880", "512", "8.00", "16.00"]
    assert "16x64x512 wpe2" in first and first.endswith("ok")
    assert "16x128x512 sk14 .cg" in second and second.endswith("FAIL fused")
    assert last.startswith("geomean")
    assert f"{math.sqrt(8.0 * 18.0):.2f}" in last.split()
    assert "2.00" in last.split()          # a/e: 2.0 in both rows
    # columns line up: every value ends where its header ends
    assert header.index("config") == first.index("16x64x512")


def test_missing_host_direct_is_a_dash_in_its_column():
    row = fake_row(4, 64, 256, fused=1.0, floor=1.0, direct=None)
    _, line, _ = bench.format_table([row], bench.summarize([row])).splitlines()
    assert line.split()[-4:] == ["-", "20.0", "5.0", "ok"]


# ----------------------------------------------------------------------------- command line

def test_without_a_gpu_it_exits_2_with_a_message():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="")
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run([sys.executable, "-m", "tools.bench", "--shapes", "4,64,256"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "tools.bench: needs a GPU" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_shapes_exit_2_before_looking_for_a_gpu(capsys):
    assert bench.main(["--shapes", "4,64,100"]) == 2
    assert "K must be a multiple of 64" in capsys.readouterr().err


# ----------------------------------------------------------------------------- host timing

@pytest.mark.parametrize("split_k", [1, 2])
def test_the_host_timed_launch_gets_the_launchers_own_arguments(device, split_k):
    """tools.bench times `launcher.gemm.standard(*launcher.gemm_arguments(...)[0])`: the same
    arguments the launcher's call builds, so the GEMM it launches writes the call's C (or its
    partials, which the reduce then sums into C)."""
    import torch

    from mxfp4_mm import reference
    from mxfp4_mm.launchers import current_target
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    from mxfp4_mm.launchers.gemm import GemmLauncher
    m, n, k = 4, 64, 512
    data = reference.generate_input(m, n, k, seed=3, device=device)
    a, _, _, b_shuffle, b_scale_sh = data
    launcher = GemmLauncher(GemmConfig(16, 64, 256, split_k=split_k),
                            current_target(a.device)[0], m, n, k, a.stride(), a.device)
    args, partials, out = launcher.gemm_arguments(a, b_shuffle, b_scale_sh)
    launcher.gemm.standard(*args)
    if launcher.reduce is not None:
        launcher.reduce.standard(partials, out, *launcher._reduce_constants)
    assert torch.equal(out.view(torch.int16), launcher(a, b_shuffle, b_scale_sh).view(torch.int16))


def test_the_host_inputs_are_the_ops_operands_the_same_for_the_same_shape():
    """A bf16 [M, K], the bf16 weight [N, K], B_shuffle uint8 [N, K/2] and B_scale_sh uint8
    (the shuffled scales' padded shape, every scale 2^0), on the device asked for; seeded by
    the shape."""
    from mxfp4_mm.kernels import formats
    a, weight, b_shuffle, b_scale_sh = bench_host.host_inputs(3, 64, 256, "cpu")
    assert (a.dtype, tuple(a.shape)) == (torch.bfloat16, (3, 256))
    assert (weight.dtype, tuple(weight.shape)) == (torch.bfloat16, (64, 256))
    assert (b_shuffle.dtype, tuple(b_shuffle.shape)) == (torch.uint8, (64, 128))
    assert b_scale_sh.dtype == torch.uint8
    assert tuple(b_scale_sh.shape) == formats.scales_padded_shape(64, 256)
    assert b_scale_sh.eq(127).all()
    assert {t.device.type for t in (a, weight, b_shuffle, b_scale_sh)} == {"cpu"}
    again = bench_host.host_inputs(3, 64, 256, "cpu")
    assert all(torch.equal(x, y) for x, y in zip((a, weight, b_shuffle), again[:3]))
    assert not torch.equal(a, bench_host.host_inputs(3, 64, 512, "cpu")[0][:, :256])
    assert b_shuffle.unique().numel() > 200 and a.std() > 0.5 and weight.std() > 0.5


def test_host_inputs_are_made_on_the_device_asked(monkeypatch):
    """On the device asked, not the default one (meta here), their generator too (a GPU's
    tensors refuse a CPU generator)."""
    devices = []
    generator = torch.Generator
    monkeypatch.setattr(torch, "Generator",
                        lambda device=None: devices.append(device) or generator(device=device))
    with torch.device("meta"):
        tensors = bench_host.host_inputs(1, 64, 256, "cpu")
    assert devices == ["cpu"] and [t.device.type for t in tensors] == ["cpu"] * 4


@pytest.mark.parametrize("stub", [True, False])
def test_host_only_times_each_shape_on_the_gpu_or_stubbed_on_the_cpu(fake_gpu, monkeypatch,
                                                                     capsys, stub):
    """run_host_only: each shape's host_row in turn, with --host-calls, on "cuda" (the device
    named first), or stubbed on the CPU inside stubbed_launches (a launcher cache of its own)."""
    import argparse

    from mxfp4_mm import launchers
    cache = launchers._launchers
    rows, shown = [], []

    def host_row(shape, calls, device, stubbed=False):
        rows.append((shape, calls, device, stubbed, launchers._launchers is cache))
        return {"shape": shape}
    monkeypatch.setattr(bench_host, "host_row", host_row)
    monkeypatch.setattr(bench_host, "_host_progress", lambda row: shown.append(row) or row)
    shapes = [(1, 64, 256), (8, 128, 512)]
    args = argparse.Namespace(stub_launches=stub, host_calls=7)
    assert bench.run_host_only(shapes, args) == [{"shape": shape} for shape in shapes]
    assert shown == [{"shape": shape} for shape in shapes]
    device = "cpu" if stub else "cuda"
    assert rows == [(shape, 7, device, stub, not stub) for shape in shapes]
    printed = capsys.readouterr().out
    assert printed == ("--stub-launches on the CPU: 2 shape(s), 7 calls each\n" if stub else
                       "device: Fake GPU; 2 shape(s), 7 calls each\n")


class FlushedOutput:
    """A stdout that records what had been written at each flush."""

    def __init__(self):
        self.text, self.flushed = "", []

    def write(self, text):
        self.text += text

    def flush(self):
        self.flushed.append(self.text)


@pytest.mark.parametrize("stub", [True, False])
def test_host_only_flushes_each_line_as_it_prints_it(fake_gpu, monkeypatch, stub):
    """Its first line and each shape's progress line reach a pipe as they are printed (a log
    read while the shapes are timed): a shape's line names each entry's µs, - where not timed,
    the not-served mark where its path does not serve the M."""
    import argparse
    row = host_fake(1, {"F.linear": 1.0, "op": 2.5, "custom_kernel": 3.25},
                    not_served=bench_host.PREPARED_ENTRIES)
    monkeypatch.setattr(bench_host, "host_row", lambda shape, calls, device, stubbed=False: row)
    output = FlushedOutput()
    monkeypatch.setattr(sys, "stdout", output)
    bench.run_host_only([(1, 64, 256)], argparse.Namespace(stub_launches=stub, host_calls=7))
    first = ("--stub-launches on the CPU: 1 shape(s), 7 calls each\n" if stub else
             "device: Fake GPU; 1 shape(s), 7 calls each\n")
    progress = (f"1x64x256: F.linear 1.00, op 2.50, layer -, prep op {bench_host.NOT_SERVED}, "
                f"prep lay {bench_host.NOT_SERVED}, ck 3.25, direct - µs\n")
    assert output.flushed == [first, first + progress]


@pytest.mark.parametrize("stub", [True, False])
def test_host_only_prints_its_legend_table_and_targets_and_writes_the_device_and_rows(
        fake_gpu, monkeypatch, tmp_path, capsys, stub):
    """host_only_main (its rows, table and targets faked): the legend of the stubbed run or of
    the GPU's, then the table and the targets line; --json the device (the GPU's name, or the
    CPU with its launches stubbed), --host-calls and the rows, indented by two."""
    monkeypatch.setenv("TRITON_INTERPRET", "1" if stub else "0")
    monkeypatch.setattr(bench, "gpu_problem", lambda: None)
    monkeypatch.setattr(bench, "run_host_only", lambda shapes, args: [{"m": m} for m, _, _ in
                                                                       shapes])
    monkeypatch.setattr(bench, "format_host_table", lambda rows: f"TABLE {len(rows)}")
    monkeypatch.setattr(bench, "host_targets_text", lambda rows: "TARGETS")
    out = tmp_path / "host.json"
    assert bench.main(["--host-only", *(["--stub-launches"] if stub else []), "--shapes",
                       "64,256", "--m", "3,5", "--host-calls", "7", "--json", str(out)]) == 0
    legend = bench.STUBBED_LEGEND if stub else bench.HOST_ONLY_LEGEND
    assert capsys.readouterr().out == f"\n{legend}\nTABLE 2\nTARGETS\nwrote {out}\n"
    device = "cpu (launches stubbed)" if stub else "Fake GPU"
    expected = {"device": device, "host_calls": 7, "rows": [{"m": 3}, {"m": 5}]}
    assert json.loads(out.read_text()) == expected
    assert out.read_text().splitlines()[1] == f'  "device": "{device}",'


def test_host_only_flushes_its_table_and_the_json_line_as_it_prints_them(fake_gpu, monkeypatch,
                                                                         tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(bench, "gpu_problem", lambda: None)
    monkeypatch.setattr(bench, "run_host_only", lambda shapes, args: [{"m": 3}])
    monkeypatch.setattr(bench, "format_host_table", lambda rows: "TABLE")
    monkeypatch.setattr(bench, "host_targets_text", lambda rows: "TARGETS")
    output = FlushedOutput()
    monkeypatch.setattr(sys, "stdout", output)
    out = tmp_path / "host.json"
    assert bench.main(["--host-only", "--shapes", "64,256", "--m", "3", "--json", str(out)]) == 0
    table = f"\n{bench.HOST_ONLY_LEGEND}\nTABLE\nTARGETS\n"
    assert output.flushed == [table, f"{table}wrote {out}\n"]


def test_host_only_without_a_usable_gpu_says_why_and_times_nothing(monkeypatch, capsys):
    monkeypatch.setattr(bench, "gpu_problem", lambda: "needs a GPU here")
    monkeypatch.setattr(bench, "run_host_only", lambda shapes, args: pytest.fail("timed"))
    assert bench.main(["--host-only", "--shapes", "64,256"]) == 2
    assert capsys.readouterr().err == "tools.bench: needs a GPU here\n"


@pytest.fixture
def timed_once(monkeypatch):
    """bench_host.host_time_us faked: each entry called once, {entry's first result: (its result,
    the synchronize it was timed with)} in the returned dict, 1.0 µs each."""
    results = []

    def host_time_us(fn, calls, synchronize):
        results.append((fn(), synchronize))
        return 1.0 + len(results)
    monkeypatch.setattr(bench_host, "host_time_us", host_time_us)
    return results


@pytest.mark.interpreter
def test_each_host_entry_times_the_call_it_names(timed_once, monkeypatch):
    """Stubbed (the launches no-ops): the op, MXFP4Linear, the prepared op and its layer, and
    custom_kernel, each a bf16 [M, N] from its own entry point, in HOST_ONLY_COLUMNS' order,
    without synchronization; F.linear and the direct launch not timed."""
    m, n, k = 3, 64, 256
    inputs = bench_host.host_inputs
    devices = []
    monkeypatch.setattr(bench_host, "host_inputs", lambda m, n, k, device: devices.append(device)
                        or inputs(m, n, k, device))
    with bench_host.stubbed_launches():
        row = bench_host.host_row((m, n, k), 7, "cpu", stubbed=True)
    assert devices == ["cpu"]       # its inputs made on the device it times
    timed = [key for key, _ in bench_host.HOST_ONLY_COLUMNS if row["host_us"][key] is not None]
    assert timed == ["op", "MXFP4Linear", "prepared", "MXFP4Linear prepared", "custom_kernel"]
    assert row["host_us"]["F.linear"] is None and row["host_us"]["direct"] is None
    assert [row["host_us"][key] for key in timed] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert (row["m"], row["n"], row["k"]) == (m, n, k)
    for out, synchronize in timed_once:
        assert out.dtype == torch.bfloat16 and tuple(out.shape) == (m, n)
        assert synchronize is not torch.cuda.synchronize and synchronize() is None


@pytest.mark.interpreter
def test_on_a_gpu_the_host_row_also_times_f_linear_and_the_direct_launch(timed_once,
                                                                         monkeypatch):
    """Not stubbed (the GPU's path, its launches here the stubbed no-ops): F.linear on the bf16
    weight and the GEMM's direct launch on the launcher's own arguments, each timed with
    torch.cuda.synchronize."""
    launched = []
    monkeypatch.setattr(bench_host, "_no_launch", lambda *arguments: launched.append(arguments))
    synchronize = torch.cuda.synchronize
    m, n, k = 3, 64, 256
    with bench_host.stubbed_launches():
        row = bench_host.host_row((m, n, k), 7, "cpu")
    assert row["host_us"]["F.linear"] is not None and row["host_us"]["direct"] is not None
    assert {sync for _, sync in timed_once} == {synchronize}
    a, weight, b_shuffle, _ = bench_host.host_inputs(m, n, k, "cpu")
    linear = timed_once[[key for key, _ in bench_host.HOST_ONLY_COLUMNS
                         if row["host_us"][key] is not None].index("F.linear")][0]
    assert torch.equal(linear, torch.nn.functional.linear(a, weight))
    direct = launched[-1]           # the last entry timed; its A and B_shuffle (the kernel's view)
    assert torch.equal(direct[0], a)
    assert any(isinstance(argument, torch.Tensor) and argument.dtype == torch.uint8
               and torch.equal(argument.reshape(-1), b_shuffle.reshape(-1)) for argument in direct)


@pytest.mark.interpreter
def test_each_host_entry_launches_its_own_path_on_the_devices_target(monkeypatch):
    """Not stubbed, its launches the stubbed no-ops, each entry's launches recorded: the
    prepared op and its layer launch the prepared GEMM on the layout's values (a 6-D tensor),
    the op and the layer theirs on B_shuffle; the direct entry makes one launch, A first. The
    target is the device's (asked of `device`, never of None, which a GPU refuses)."""
    from mxfp4_mm import launchers
    launched, per_entry, asked = [], [], []
    monkeypatch.setattr(bench_host, "_no_launch", lambda *arguments: launched.append(arguments))

    def host_time_us(fn, calls, synchronize):
        start = len(launched)
        fn()
        per_entry.append(launched[start:])
        return 1.0
    monkeypatch.setattr(bench_host, "host_time_us", host_time_us)
    current_target = launchers.current_target
    monkeypatch.setattr(launchers, "current_target",
                        lambda device: asked.append(device) or current_target(device))
    m, n, k = 3, 64, 256
    with bench_host.stubbed_launches():
        row = bench_host.host_row((m, n, k), 7, "cpu")
    timed = [key for key, _ in bench_host.HOST_ONLY_COLUMNS if row["host_us"][key] is not None]
    entries = dict(zip(timed, per_entry))

    def on_the_layout(launches):
        return any(isinstance(argument, torch.Tensor) and argument.dim() == 6
                   for arguments in launches for argument in arguments)
    assert on_the_layout(entries["prepared"]) and on_the_layout(entries["MXFP4Linear prepared"])
    assert entries["op"] and not on_the_layout(entries["op"])
    assert entries["MXFP4Linear"] and not on_the_layout(entries["MXFP4Linear"])
    a = bench_host.host_inputs(m, n, k, "cpu")[0]
    assert len(entries["direct"]) == 1 and torch.equal(entries["direct"][0][0], a)
    assert asked and None not in asked


@pytest.mark.interpreter
def test_a_launcher_without_a_direct_gemm_has_no_direct_entry(timed_once, monkeypatch):
    """Where the problem's launcher is not the GEMM's (another path's: no .gemm), the direct
    launch is not timed."""
    from mxfp4_mm import launchers
    monkeypatch.setattr(launchers, "launcher_for", lambda a, n: object())
    with bench_host.stubbed_launches():
        row = bench_host.host_row((3, 64, 256), 7, "cpu")
    assert row["host_us"]["direct"] is None and row["host_us"]["F.linear"] is not None


# ----------------------------------------------------------------------------- --model

QUARK_EXPORT = Path(__file__).parent / "data" / "quark_tiny_llama"
NEEDS_TRANSFORMERS = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="building the model needs transformers (pip install -e '.[model]'), which the test "
           "extra leaves out")


MODEL_ALONE = "--model times a model: --shapes and --png do not go with it"
MODEL_OPTIONS = "--modes and --profile go with --model"


@pytest.mark.parametrize("argv, message", [
    (["--model", str(QUARK_EXPORT), "--shapes", "tests"], MODEL_ALONE),
    (["--model", str(QUARK_EXPORT), "--png", "x.png"], MODEL_ALONE),
    (["--m", "1,8"], "--m goes with --model, --prepared or --host-only"),
    (["--modes", "eager"], MODEL_OPTIONS),
    (["--profile"], MODEL_OPTIONS),
    (["--model", "tests"], "--model tests: no config.json there (expected an AMD Quark export's "
                           "folder or one of llama-3-8b, llama-3-70b)"),
    (["--model", str(QUARK_EXPORT), "--m", "0"], "expected positive integers"),
])
def test_model_arguments_are_checked_before_looking_for_a_gpu(capsys, argv, message):
    """Each refusal in one line (argparse's within its usage text)."""
    try:
        code = bench.main(argv)
        parsed = True
    except SystemExit as exit:      # argparse's own refusal
        code, parsed = exit.code, False
    assert code == 2
    err = capsys.readouterr().err
    assert err == f"tools.bench: {message}\n" if parsed else message in err


HOST_ONLY_ALONE = "--host-only times the host path: --model, --vendor-gemm and --png do not go " \
                  "with it"


@pytest.mark.parametrize("argv, interpret, message", [
    (["--stub-launches"], "1", "--stub-launches goes with --host-only"),
    (["--host-only", "--model", "llama-3-8b"], "1", HOST_ONLY_ALONE),
    (["--host-only", "--vendor-gemm"], "1", HOST_ONLY_ALONE),
    (["--host-only", "--png", "x.png"], "1", HOST_ONLY_ALONE),
    (["--host-only", "--stub-launches"], "0", "--stub-launches runs the launchers' Python on the "
     "CPU through Triton's interpreter: set TRITON_INTERPRET=1 before the command"),
])
def test_host_only_and_its_stubs_refuse_what_does_not_go_with_them(capsys, monkeypatch, argv,
                                                                   interpret, message):
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    assert bench.main(argv) == 2
    assert f"tools.bench: {message}" in capsys.readouterr().err


def test_the_model_mode_refuses_without_a_gpu(capsys, monkeypatch):
    monkeypatch.setattr(bench.torch.cuda, "is_available", lambda: False)
    assert bench.main(["--model", str(QUARK_EXPORT), "--m", "1,2"]) == 2
    assert "needs a GPU" in capsys.readouterr().err


@NEEDS_TRANSFORMERS
def test_the_bf16_twin_holds_each_layers_dequantized_weight():
    from safetensors.torch import load_file

    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers.linear import MXFP4Linear, load_quark
    checkpoint = load_file(QUARK_EXPORT / "model.safetensors")
    model = load_quark(QUARK_EXPORT)
    twin = bench_model.bf16_twin(model)
    names = sorted(key[:-len(".weight_scale")] for key in checkpoint
                   if key.endswith(".weight_scale"))
    for name in names:
        assert isinstance(model.get_submodule(name), MXFP4Linear)     # the model is untouched
        linear = twin.get_submodule(name)
        assert type(linear) is torch.nn.Linear and linear.weight.dtype == torch.bfloat16
        assert torch.equal(linear.weight.float(), formats.dequantize_mxfp4(
            checkpoint[f"{name}.weight"], checkpoint[f"{name}.weight_scale"]))
    assert torch.equal(twin.lm_head.weight, model.lm_head.weight)
    assert bench_model.decode_step(twin, torch.tensor([[3], [5]])).shape == (2, 1, 256)


def test_a_dequantized_linear_holds_the_layers_mxfp4_weight_and_bias_on_its_device():
    """Made under another default device (meta), still on the layer's."""
    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers.linear import MXFP4Linear
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32, dtype=torch.bfloat16)
    layer = MXFP4Linear.from_linear(linear)
    with torch.device("meta"):
        twin = bench_model.dequantized_linear(layer)
    assert twin.weight.device.type == twin.bias.device.type == "cpu"
    assert torch.equal(twin.weight.float(),
                       formats.dequantize_mxfp4(*formats.quantize_mxfp4(linear.weight.float())))
    assert torch.equal(twin.bias, linear.bias)


def test_relative_l2_is_the_norm_of_the_difference_over_the_wanted_norm():
    assert bench_model.relative_l2(torch.tensor([0.0, 3.0]), torch.tensor([0.0, 2.0])) == 0.5


@NEEDS_TRANSFORMERS
def test_a_named_llama_is_built_with_its_decoder_linears_in_mxfp4():
    from mxfp4_mm.launchers.linear import MXFP4Linear
    config = dict(hidden_size=64, intermediate_size=128, num_attention_heads=2,
                  num_key_value_heads=1, num_hidden_layers=2, vocab_size=96)
    model = bench_model.mxfp4_llama(config, "cpu")
    kinds = {name: type(module) for name, module in model.named_modules()
             if isinstance(module, (MXFP4Linear, torch.nn.Linear))}
    assert sum(kind is MXFP4Linear for kind in kinds.values()) == 2 * 7
    assert kinds["lm_head"] is torch.nn.Linear and model.lm_head.weight.dtype == torch.bfloat16
    down = model.get_submodule("model.layers.1.mlp.down_proj")     # in place, by its path
    assert isinstance(down, MXFP4Linear) and down.in_features == 128
    assert isinstance(model.get_submodule("model.layers.0.self_attn.q_proj"), MXFP4Linear)


def test_the_named_llamas_have_the_layers_tools_isa_models():
    from mxfp4_mm.tools.model_shapes import LLAMA_CONFIGS, MODEL_LAYERS
    for name, fields in LLAMA_CONFIGS.items():
        head = fields["hidden_size"] // fields["num_attention_heads"]
        hidden, inner = fields["hidden_size"], fields["intermediate_size"]
        assert MODEL_LAYERS[name] == {
            "qkv_proj": ((fields["num_attention_heads"] + 2 * fields["num_key_value_heads"])
                         * head, hidden),
            "o_proj": (hidden, hidden), "gate_up_proj": (2 * inner, hidden),
            "down_proj": (hidden, inner)}


class TinyLM(torch.nn.Module):
    """What --model reads of a model: config.vocab_size, its MXFP4Linear layers and a forward
    of input_ids (use_cache False) to .logits; here an embedding and one MXFP4Linear, each
    forward's input_ids recorded in `seen`."""

    def __init__(self):
        super().__init__()
        from types import SimpleNamespace

        from mxfp4_mm.launchers.linear import MXFP4Linear
        torch.manual_seed(0)
        self.config = SimpleNamespace(vocab_size=32)
        self.embed = torch.nn.Embedding(32, 64, dtype=torch.bfloat16)
        self.head = MXFP4Linear.from_linear(torch.nn.Linear(64, 32, dtype=torch.bfloat16))
        self.seen = []

    def forward(self, input_ids, use_cache):
        from types import SimpleNamespace
        assert use_cache is False
        self.seen.append(input_ids)
        return SimpleNamespace(logits=self.head(self.embed(input_ids)))


class FakeGPU:
    """tools.bench's torch with the GPU faked on the CPU (bench.torch): the device's name,
    synchronize and empty_cache recorded in `log`; CUDA graphs that capture by running the
    step (a capture numbered in `fail_captures` raises, its message over 300 characters) and
    replay nothing, each capture and replay logged with its graph; generators and
    randint on the CPU, the device asked for recorded; torch.compile giving a wrapper that
    records its calls in `compiled_calls`."""

    def __init__(self):
        import contextlib
        from types import SimpleNamespace
        self.log, self.devices, self.compiled, self.compiled_calls = [], [], [], []
        self.fail_captures = ()
        captures = iter(range(1, 100))
        fake = self

        class Graph:
            def replay(self):
                fake.log.append(("replay", self))

        @contextlib.contextmanager
        def graph(into):
            number = next(captures)
            if number in fake.fail_captures:
                raise RuntimeError(f"capture {number}\n  failed   here " + "x" * 400)
            fake.log.append(("capture", into))
            yield
            fake.log.append("captured")
        self.cuda = SimpleNamespace(
            get_device_name=lambda: "Fake GPU", synchronize=lambda: self.log.append("sync"),
            empty_cache=lambda: self.log.append("empty_cache"), CUDAGraph=Graph, graph=graph)

    def __getattr__(self, name):
        return getattr(torch, name)

    def Generator(self, device):
        self.devices.append(device)
        return torch.Generator()

    def randint(self, low, high, size, device, generator):
        self.devices.append(device)
        return torch.randint(low, high, size, generator=generator)

    def compile(self, model, mode, dynamic):
        self.compiled.append((model, mode, dynamic))

        def call(**inputs):
            self.compiled_calls.append(model)
            return model(**inputs)
        return call


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = FakeGPU()
    for module in (bench, bench_host, bench_model, bench_vendor):
        monkeypatch.setattr(module, "torch", fake)
    monkeypatch.setattr(timing_module, "torch", fake)     # its time_variant's synchronize
    return fake


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_the_model_mode_flushes_its_first_line_and_each_modes_line_as_it_prints_them(
        fake_gpu, monkeypatch):
    class Loop:
        def __init__(self, clear_bytes):
            pass

        def time(self, fn, calls):
            return [fn() and 10.0] * calls
    monkeypatch.setattr(bench_model, "RunnerLoop", Loop)
    monkeypatch.setattr(bench_model, "load_model", lambda source, device: TinyLM())
    monkeypatch.setattr(bench, "gpu_problem", lambda: None)
    output = FlushedOutput()
    monkeypatch.setattr(sys, "stdout", output)
    assert bench.main(["--model", "llama-3-8b", "--m", "1", "--modes", "eager",
                       "--calls", "1"]) == 0
    lines = output.text.splitlines(keepends=True)
    assert lines[0].startswith("device: Fake GPU; llama-3-8b: ")
    assert lines[1].startswith("eager M=1 (")
    assert output.flushed[:2] == [lines[0], lines[0] + lines[1]]


def test_the_model_table_gives_each_row_its_ratio_target_errors_and_emulated_check():
    """A target met (ok), missed (MISS) or none (blank); a failed mode's row in one line, the
    rows after it still given; an emulated check out of tolerance by its message's first 80
    characters."""
    base = dict(mxfp4_us=21.0, bf16_us=20.0, ratio=1.05, rel_bf16=0.0123, rel_eager=0.0,
                rel_emulated=0.00045, emulated_ok=True, emulated_check="within")
    rows = [dict(base, mode="eager", m=1, target=1.05, met=True),
            {"mode": "captured", "m": 1, "error": "X: y"},
            dict(base, mode="captured", m=8, target=0.6, met=False),
            dict(base, mode="compiled", m=8, target=None, met=None, emulated_ok=False,
                 emulated_check="mismatch " + "z" * 100)]
    assert bench.format_model_table(rows).splitlines() == [
        "mode         M   mxfp4 µs    bf16 µs  ratio target  rel bf16 rel eager  rel emul "
        "emulated check",
        "eager        1       21.0       20.0   1.05   1.05 ok      0.0123    0.0000    0.0004 "
        "within tolerance",
        "captured     1 failed: X: y",
        "captured     8       21.0       20.0   1.05   0.60 MISS    0.0123    0.0000    0.0004 "
        "within tolerance",
        "compiled     8       21.0       20.0   1.05      -         0.0123    0.0000    0.0004 "
        "mismatch " + "z" * 71]


def test_a_model_row_meets_a_target_it_equals_and_keeps_the_emulated_checks_message(
        monkeypatch):
    """Steps faked (fixed logits): 21 µs over 20 is eager's 1.05 exactly, met; the row holds
    compare's verdict and message on the MXFP4 logits against the emulated model's."""
    from mxfp4_mm.launchers.proof import compare
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    logits = torch.linspace(-1, 1, 32).reshape(1, 1, 32)
    emulated = logits + 1.0
    steps = {"mxfp4": lambda: logits, "bf16": lambda: logits * 2}
    times = iter([21.0, 20.0])
    row = bench_model.model_row("eager", 1, steps, lambda step: next(times),
                          {"mxfp4": logits, "emulated": emulated})
    assert (row["ratio"], row["target"], row["met"]) == (1.05, 1.05, True)
    assert (row["emulated_ok"], row["emulated_check"]) == compare(logits.float(), emulated.float())
    assert not row["emulated_ok"]


def test_a_captured_step_runs_eagerly_then_replays_the_graph_its_capture_made(fake_gpu):
    steps = []

    def model(input_ids, use_cache):
        from types import SimpleNamespace
        steps.append((input_ids, use_cache))
        fake_gpu.log.append("step")
        return SimpleNamespace(logits=torch.full((1, 1, 4), len(steps)))
    ids = torch.tensor([[7]])
    replay = bench_model.captured_step(model, ids)
    graph = fake_gpu.log[2][1]
    assert fake_gpu.log == ["step", "sync", ("capture", graph), "step", "captured"]
    assert isinstance(graph, fake_gpu.cuda.CUDAGraph)
    assert all(seen is ids and use_cache is False for seen, use_cache in steps)
    assert torch.equal(replay(), torch.full((1, 1, 4), 2))
    assert fake_gpu.log[-1] == ("replay", graph) and len(steps) == 2


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_the_model_mode_times_each_mode_and_m_beside_the_twin_and_goes_on_past_a_failure(
        fake_gpu, monkeypatch, tmp_path, capsys):
    """run_model through main on the CPU, the GPU faked (FakeGPU) and the runner's loop a fake
    whose n-th timed variant takes 10n µs: per M of --m (input_ids from a generator seeded 0 on
    the device) and mode of --modes a row, the MXFP4 step timed before its twin's; the
    compiled mode on models torch.compile made once each; a mode that fails (the capture at
    M = 2) a row with its error in one line, and the next mode runs; a profile of both steps
    where a target is missed or none is set; the cache emptied after each M; the JSON."""
    loops, built, profiled = [], [], []

    class Loop:
        def __init__(self, clear_bytes):
            loops.append(self)
            self.clear_bytes, self.calls = clear_bytes, []

        def time(self, fn, calls):
            self.calls.append(calls)
            for _ in range(calls):
                fn()
            return [10.0 * sum(map(len, (loop.calls for loop in loops)))] * calls

    def load_model(source, device):
        built.append((str(source), device))
        return TinyLM()
    monkeypatch.setattr(bench_model, "RunnerLoop", Loop)
    monkeypatch.setattr(bench_model, "load_model", load_model)
    monkeypatch.setattr(bench, "gpu_problem", lambda: None)
    monkeypatch.setattr(bench_model, "profile_summary",
                        lambda step: profiled.append(step().shape) or f"profile {len(profiled)}")
    fake_gpu.fail_captures = (3,)     # M = 2's first: a captured mode captures both models
    out = tmp_path / "model.json"
    assert bench.main(["--model", "llama-3-8b", "--m", "1,2", "--modes", "eager,captured,compiled",
                       "--calls", "2", "--clear-bytes", "4096", "--profile",
                       "--json", str(out)]) == 0
    assert built == [("llama-3-8b", "cuda")]
    assert [loop.clear_bytes for loop in loops] == [4096] and set(loops[0].calls) == {2}
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [(row["mode"], row["m"]) for row in rows] == [
        ("eager", 1), ("captured", 1), ("compiled", 1), ("eager", 2), ("captured", 2),
        ("compiled", 2)]
    error = "RuntimeError: capture 3 failed here " + "x" * (300 - 36)
    assert rows[4] == {"mode": "captured", "m": 2, "error": error} and len(error) == 300
    timed = [row for row in rows if "error" not in row]
    assert [(row["mxfp4_us"], row["bf16_us"]) for row in timed] == [
        (10.0 * i, 10.0 * (i + 1)) for i in (1, 3, 5, 7, 9)]
    assert [row["target"] for row in timed] == [1.05, 0.5, None, 1.05, None]
    assert [row["met"] for row in timed] == [True, False, None, True, None]
    assert all(row["rel_eager"] == 0.0 and row["emulated_ok"] for row in timed)
    assert profiled == [(1, 1, 32)] * 4 + [(2, 1, 32)] * 2       # the logits of each step
    assert report["profiles"] == {"captured M=1": {"mxfp4": "profile 1", "bf16": "profile 2"},
                                  "compiled M=1": {"mxfp4": "profile 3", "bf16": "profile 4"},
                                  "compiled M=2": {"mxfp4": "profile 5", "bf16": "profile 6"}}
    assert {key: report[key] for key in ("device", "model", "calls", "mxfp4_layers", "modes")} == {
        "device": "Fake GPU", "model": "llama-3-8b", "calls": 2, "mxfp4_layers": 1,
        "modes": ["eager", "captured", "compiled"]}
    mxfp4, twin = fake_gpu.compiled[0][0], fake_gpu.compiled[1][0]
    assert [(mode, dynamic) for _, mode, dynamic in fake_gpu.compiled] == [
        ("max-autotune-no-cudagraphs", False)] * 2
    assert isinstance(mxfp4, TinyLM) and type(twin.head) is torch.nn.Linear
    assert set(map(id, fake_gpu.compiled_calls)) == {id(mxfp4), id(twin)}
    generator = torch.Generator().manual_seed(0)
    expected = [torch.randint(0, 32, (m, 1), generator=generator) for m in (1, 2)]
    first_of_each_m = [ids for ids in mxfp4.seen if ids.shape[0] == 1][:1] + \
        [ids for ids in mxfp4.seen if ids.shape[0] == 2][:1]
    assert all(torch.equal(got, want) for got, want in zip(first_of_each_m, expected))
    assert set(fake_gpu.devices) == {"cuda"} and fake_gpu.log.count("empty_cache") == 2
    printed = capsys.readouterr().out.splitlines()
    loading = "device: Fake GPU; llama-3-8b: TinyLM, 1 MXFP4Linear layers, loaded with its " \
              "bf16 twin in "
    assert printed[0].startswith(loading)
    assert printed[0].endswith(" s; modes eager, captured, compiled; 2 timed calls each")
    assert 0 <= float(printed[0][len(loading):].split()[0]) < 60         # seconds, not a clock
    assert printed[1].startswith("eager M=1 (") and printed[1].split("): ")[1].split()[:4] == [
        "eager", "1", "10.0", "20.0"]
    assert all(0 <= int(line.split("(")[1].split(" s)")[0]) < 60 for line in printed[1:7])
    assert printed[5].split("): ")[1] == f"captured     2 failed: {error}"


def test_a_profile_summary_ranks_a_few_steps_ops_by_device_then_host_time(monkeypatch):
    """PROFILED_STEPS calls after an untimed one; twelve ops a table at most, the host time's
    heaviest first (a 512 x 512 matmul among fourteen elementwise ops on 8 values)."""
    monkeypatch.setattr(bench.torch.cuda, "synchronize", lambda: None)
    calls = []
    x = torch.randn(512, 512)

    def step():
        calls.append(1)
        y = torch.ones(8)
        for op in (torch.sin, torch.cos, torch.exp, torch.abs, torch.neg, torch.sqrt,
                   torch.tanh, torch.sigmoid, torch.relu, torch.floor, torch.ceil, torch.round,
                   torch.sign, torch.square):
            y = op(y)
        return x @ x
    text = bench_model.profile_summary(step)
    assert len(calls) == 1 + bench_model.PROFILED_STEPS
    device, host = text.split(f"{bench_model.PROFILED_STEPS} steps, by host time:\n")
    assert device.startswith(f"{bench_model.PROFILED_STEPS} steps, by device time:\n")
    ops = {name: [line.split()[0] for line in table.splitlines()
                  if line.lstrip().startswith("aten::")] for name, table in (("device", device),
                                                                               ("host", host))}
    assert len(ops["device"]) == len(ops["host"]) == 12 and ops["host"][0] == "aten::mm"


def test_a_profile_summary_ranks_the_device_table_by_device_time(monkeypatch):
    """With a GPU's profiler (faked: three ops, each with its device and host time): the first
    table has the heaviest op on the device first, the second the heaviest on the host; `rows`
    ops a table."""
    ops = {"aten::cos": (20.0, 1.0), "aten::sin": (1.0, 30.0), "aten::mm": (50.0, 5.0)}
    columns = {"self_device_time_total": 0, "self_cpu_time_total": 1}

    class Events:
        def table(self, sort_by=None, row_limit=100):
            names = list(ops) if sort_by is None else sorted(
                ops, key=lambda name: -ops[name][columns[sort_by]])
            return "\n".join(names[:row_limit])

    class Profile:
        def __init__(self, activities=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            return False

        def key_averages(self):
            return Events()
    monkeypatch.setattr(torch.profiler, "profile", Profile)
    monkeypatch.setattr(bench.torch.cuda, "synchronize", lambda: None)
    text = bench_model.profile_summary(lambda: None, rows=2)
    steps = bench_model.PROFILED_STEPS
    assert text == (f"{steps} steps, by device time:\naten::mm\naten::cos\n"
                    f"{steps} steps, by host time:\naten::sin\naten::mm")


def test_the_model_comes_from_its_name_or_its_export(monkeypatch):
    """load_model: a name of LLAMA_CONFIGS builds that Llama (mxfp4_llama), anything else is an
    export's folder (load_quark); either on the device asked for."""
    from mxfp4_mm.launchers import linear
    from mxfp4_mm.tools.model_shapes import LLAMA_CONFIGS
    built = []
    monkeypatch.setattr(bench_model, "mxfp4_llama", lambda config, device: built.append(
        ("llama", config, device)) or "a llama")
    monkeypatch.setattr(linear, "load_quark", lambda source, device: built.append(
        ("quark", source, device)) or "an export")
    assert bench_model.load_model(Path("llama-3-70b"), "cuda:1") == "a llama"
    assert bench_model.load_model(QUARK_EXPORT, "cuda") == "an export"
    assert built == [("llama", LLAMA_CONFIGS["llama-3-70b"], "cuda:1"),
                     ("quark", QUARK_EXPORT, "cuda")]


# ----------------------------------------------------------------------------- served paths

def test_the_progress_line_of_a_shape_served_without_an_unfused_variant():
    """A shape the dequant path (or aiter) serves has no quantize-then-GEMM variant (b) and no
    host-timed GEMM launch."""
    timings = {"fused": timing(8.0), "reference": timing(100.0), "bf16_linear": timing(16.0)}
    host = {"direct": None, "standard": None, "custom_kernel": 5.0}
    row = bench.make_row({"m": 256, "n": 4096, "k": 4096, "seed": 1}, timings, 4.0, 4,
                         "dequant 32x32x256 w8", host, {})
    assert bench._progress(1, 2, row) == (
        "[1/2] 256x4096x4096 seed 1 (dequant 32x32x256 w8): a fused 8.00, b unfused -, "
        "c ref 100.00, d bf16 16.00, e floor 4.00 µs; a/e 2.00; check ok")


@pytest.mark.parametrize("bias", [True, False])
def test_the_bf16_twin_of_a_layer_has_its_bias_or_none(bias):
    from mxfp4_mm.launchers.linear import MXFP4Linear
    linear = torch.nn.Linear(64, 32, bias=bias, dtype=torch.bfloat16)
    twin = bench_model.dequantized_linear(MXFP4Linear.from_linear(linear))
    if bias:
        assert torch.equal(twin.bias, linear.bias)
    else:
        assert twin.bias is None


@pytest.mark.parametrize("large_tiles_from", ["threshold", "never"])
def test_vendor_gemm_times_the_fused_gemm_against_dequant_where_dequant_is_served(
        monkeypatch, large_tiles_from):
    """On sm_90 from its record's vendor_gemm_from_m the lookup serves the dequant path; the
    "fused" column is then a fused GEMM, not the dequant path again: the hopper path's large
    tile from the record's large_tiles_from_m, else the heuristic's config."""
    from mxfp4_mm import launchers
    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers import configs, ladder, paths
    from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG
    from mxfp4_mm.launchers.proof import reference_output
    from mxfp4_mm.launchers import targets
    from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
    from mxfp4_mm.launchers.gemm_config import config_from_fields
    from mxfp4_mm.launchers.targets import SM90
    m, n, k = SM90.vendor_gemm_from_m, 32, 64
    assert configs.config_lookup("sm_90", m, n, k)[0] == DEQUANT_CONFIG
    if large_tiles_from == "never":
        monkeypatch.setitem(targets.TARGETS, "sm_90",
                            dataclasses.replace(SM90, large_tiles_from_m=None))
    else:
        assert SM90.large_tiles_from_m <= m
    built = []

    def build_launcher(config, *args, **kwargs):
        built.append(config)

        def launcher(a, b_shuffle, b_scale_sh):
            codes = formats.unshuffle_weight(b_shuffle)
            scales = formats.e8m0_unshuffle(b_scale_sh, codes.shape[0], a.shape[1] // 32)
            return reference_output(a, codes, scales)
        return launcher
    monkeypatch.setattr(launchers, "current_target", lambda device: ("cuda", "sm_90"))
    monkeypatch.setattr(paths, "build_launcher", build_launcher)
    monkeypatch.setattr(ladder, "prove_rung", lambda rung, *args: rung.build())
    def time_us(fn):
        fn()
        return 1.0
    row = bench_vendor.vendor_gemm_row({"m": m, "n": n, "k": k, "seed": 1}, time_us, device="cpu")
    fused = (config_from_fields(HOPPER_LARGE_TILE) if large_tiles_from == "threshold"
             else heuristic_config("sm_90", m, n, k))
    assert fused.path in ("hopper", "preshuffle") and built == [fused, DEQUANT_CONFIG]
    assert row["fused_config"] == fused.label and row["errors"] == {}


# -------------------------------------------------------------------------------- --vendor-gemm

def vendor_row(m, fused, dequant_us, n=4096, k=4096):
    return {"m": m, "n": n, "k": k, "fused_us": fused, "dequant_us": dequant_us, "bf16_us": 1.0,
            "fused_config": "x"}


def test_the_vendor_gemm_threshold_is_where_dequant_wins_from_on_every_n_k():
    from mxfp4_mm.tools import bench
    rows = [vendor_row(256, 10.0, 12.0), vendor_row(512, 20.0, 15.0), vendor_row(1024, 30.0, 31.0),
            vendor_row(2048, 60.0, 40.0), vendor_row(4096, None, 80.0),
            vendor_row(256, 10.0, 9.0, n=7168), vendor_row(512, 20.0, 19.0, n=7168)]
    wins_from = bench_vendor.dequant_wins_from(rows)
    assert wins_from == {(4096, 4096): 2048, (7168, 4096): 256}
    assert bench_vendor.vendor_gemm_threshold(wins_from) == 2048
    assert bench_vendor.vendor_gemm_threshold({**wins_from, (1, 1): None}) is None
    lines = bench_vendor.format_vendor_table(rows).splitlines()
    assert lines[1].endswith("fused") and lines[2].endswith("dequant") and len(lines) == 8
    assert bench.vendor_gemm_grid()[:2] == ["256,4096,4096", "512,4096,4096"]


def test_a_vendor_gemm_row_proves_checks_and_times_both_paths_and_bf16(device):
    from mxfp4_mm.tools import bench
    timed = []

    def time_us(fn):
        timed.append(fn())
        return float(len(timed))
    row = bench_vendor.vendor_gemm_row({"m": 5, "n": 64, "k": 192, "seed": 1}, time_us, device=device)
    arch = row["arch"]
    assert row["errors"] == {} and row["fused_config"] == heuristic_config(arch, 5, 64, 192).label
    assert (row["fused_us"], row["dequant_us"], row["bf16_us"]) == (1.0, 2.0, 3.0)
    assert [tuple(out.shape) for out in timed] == [(5, 64)] * 3


# -------------------------------------------------------------------------------- --host-only

HOST_MARGIN_LABELS = ["op-lin", "layer-lin", "prep-lin", "plyr-lin", "ck-op"]


def host_fake(m, us, not_served=(), n=64, k=256):
    """A --host-only row: µs of the entries in `us`, the others not timed."""
    return {"m": m, "n": n, "k": k, "host_us": {key: us.get(key) for key, _ in
                                               bench_host.HOST_ONLY_COLUMNS},
            "not_served": list(not_served)}


def host_table_rows(table: str) -> list:
    """Each line of a --host-only table after its header as {column label: cell}, each cell
    ending where its label ends (the columns are right-aligned)."""
    header, *lines = table.splitlines()
    labels = ["M", "N", "K"] + [label for _, label in bench_host.HOST_ONLY_COLUMNS] + HOST_MARGIN_LABELS
    ends = []
    for label in labels:
        ends.append(header.index(label, ends[-1] if ends else 0) + len(label))
    return [{label: line[start:end].strip() for label, start, end in zip(labels, [0] + ends, ends)}
            for line in lines]


def test_the_host_table_gives_each_margin_as_the_entry_less_its_reference():
    row = host_fake(1, {"F.linear": 2.0, "op": 7.5, "MXFP4Linear": 8.0, "prepared": 3.0,
                        "MXFP4Linear prepared": 4.25, "custom_kernel": 9.0})
    cells = host_table_rows(bench.format_host_table([row]))[0]
    assert (cells["M"], cells["op"], cells["prep lay"], cells["direct"]) == ("1", "7.50", "4.25",
                                                                             "-")
    assert [cells[label] for label in HOST_MARGIN_LABELS] == ["5.50", "6.00", "1.00", "2.25",
                                                              "1.50"]


def test_the_host_tables_header_names_each_entry_and_margin_and_its_last_line_the_median():
    header, _, median = bench.format_host_table([host_fake(1, {})]).splitlines()
    assert median.startswith("median            ")
    assert header == ("    M     N     K  F.linear        op     layer   prep op  prep lay"
                      "        ck    direct    op-lin layer-lin  prep-lin  plyr-lin     ck-op")


def test_the_targets_line_says_where_no_target_was_timed():
    assert bench.host_targets_text([host_fake(1, {"op": 2.0})]) == "targets: none timed here"


def test_the_host_tables_median_is_each_entrys_over_the_rows():
    rows = [host_fake(m, {"op": op, "custom_kernel": 1.0}) for m, op in ((1, 1.0), (8, 10.0),
                                                                         (32, 2.0))]
    median = host_table_rows(bench.format_host_table(rows))[3]
    assert (median["op"], median["ck"], median["layer"]) == ("2.00", "1.00", "-")


def test_the_targets_line_counts_the_shapes_within_each_bound_its_bound_included():
    """op - F.linear 4, 5 and 6 µs against 5; custom_kernel - op -1, 3 and 2 against 2; the
    targets not timed on every shape left out."""
    rows = [host_fake(1, {"F.linear": 1.0, "op": 5.0, "custom_kernel": 4.0}),
            host_fake(8, {"F.linear": 1.0, "op": 6.0, "custom_kernel": 9.0}),
            host_fake(32, {"F.linear": 2.0, "op": 8.0, "custom_kernel": 10.0, "prepared": 1.0})]
    assert bench.host_targets_text(rows) == ("targets: op <= F.linear + 5 µs on 2 of 3 shapes; "
                                             "custom_kernel <= op + 2 µs on 2 of 3 shapes")


def test_an_entry_not_served_at_an_m_is_marked_and_left_out_of_medians_and_targets():
    prepared = list(bench_host.PREPARED_ENTRIES)
    rows = [host_fake(1, {"F.linear": 1.0, "prepared": 3.0, "MXFP4Linear prepared": 7.0}),
            host_fake(8, {"F.linear": 2.0}, not_served=prepared),
            host_fake(32, {"F.linear": 3.0}, not_served=prepared)]
    table = bench.format_host_table(rows)
    first, second, _, median, legend = host_table_rows(table)
    assert (first["prep op"], first["prep-lin"], first["plyr-lin"]) == ("3.00", "2.00", "6.00")
    assert [second[label] for label in ("prep op", "prep lay", "prep-lin", "plyr-lin")] == \
        [bench_host.NOT_SERVED] * 4
    assert (second["op"], second["op-lin"]) == ("-", "-")       # not timed
    assert (median["prep op"], median["F.linear"]) == ("3.00", "2.00")
    assert table.splitlines()[-1] == bench_host.NOT_SERVED_LEGEND
    assert bench.host_targets_text(rows) == (
        "targets: prepared <= F.linear + 5 µs on 1 of 1 shapes served (of 3); "
        "MXFP4Linear prepared <= F.linear + 5 µs on 0 of 1 shapes served (of 3)")
    assert bench_host.NOT_SERVED_LEGEND not in bench.format_host_table(rows[:1])


def test_host_only_takes_each_model_shape_at_each_m_of_its_m_option(monkeypatch, capsys):
    """The table's rows are the shapes of --shapes at --m (host_row faked: no launcher runs)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")     # what --stub-launches asks for
    timed = []

    def host_row(shape, calls, device, stubbed=False):
        timed.append((tuple(shape), calls))
        return host_fake(shape[0], {"op": 1.0}, n=shape[1], k=shape[2])
    monkeypatch.setattr(bench_host, "host_row", host_row)
    assert bench.main(["--host-only", "--stub-launches", "--shapes", "64,256", "--m", "3,5",
                       "--host-calls", "7"]) == 0
    assert timed == [((3, 64, 256), 7), ((5, 64, 256), 7)]
    printed = capsys.readouterr().out
    table = printed[printed.index("    M     N     K"):printed.index("\ntargets:")]
    assert [(row["M"], row["N"], row["K"]) for row in host_table_rows(table)[:2]] == [
        ("3", "64", "256"), ("5", "64", "256")]


@pytest.mark.interpreter
def test_host_only_times_the_prepared_path_only_at_the_m_it_serves(monkeypatch, tmp_path,
                                                                     capsys):
    """The prepared path's reach faked to stop at M = 7 (as a chip's record may stop it; the
    op then refuses one row more): at that M its entries are timed, one row more they are
    marked not served, and the run goes on."""
    import json

    from mxfp4_mm.launchers import prepared
    limit = 7
    monkeypatch.setattr(prepared, "serves_rows", lambda arch, m: m <= limit)
    out = tmp_path / "host.json"
    assert bench.main(["--host-only", "--stub-launches", "--shapes", "64,256", "--m",
                       f"{limit},{limit + 1}", "--host-calls", "5", "--json", str(out)]) == 0
    served, beyond = json.loads(out.read_text())["rows"]
    assert served["not_served"] == [] and served["host_us"]["prepared"] > 0
    assert served["host_us"]["MXFP4Linear prepared"] > 0
    assert beyond["not_served"] == list(bench_host.PREPARED_ENTRIES)
    assert beyond["host_us"]["prepared"] is None is beyond["host_us"]["MXFP4Linear prepared"]
    assert beyond["host_us"]["op"] > 0
    printed = capsys.readouterr().out
    table = printed[printed.index("    M     N     K"):printed.index("\ntargets:")]
    assert host_table_rows(table)[1]["prep op"] == bench_host.NOT_SERVED


def test_timed_rows_builds_each_row_then_empties_the_cache_and_prints_its_line(fake_gpu, capsys):
    """tools.timing.timed_rows (--prepared's and --vendor-gemm's progress): per spec its row,
    the device's cache emptied, then "[i/n] " + the row's description + each failed variant."""
    rows = timing_module.timed_rows(
        ["a", "b"], lambda spec: fake_gpu.log.append(f"row {spec}") or {
            "spec": spec, "errors": {} if spec == "a" else {"fused": "X: y", "bf16": "Z"}},
        lambda row: f"shape {row['spec']}")
    assert [row["spec"] for row in rows] == ["a", "b"]
    assert fake_gpu.log == ["row a", "empty_cache", "row b", "empty_cache"]
    assert capsys.readouterr().out == ("[1/2] shape a\n"
                                       "[2/2] shape b; fused failed: X: y; bf16 failed: Z\n")
