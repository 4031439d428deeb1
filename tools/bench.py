"""GPU benchmark: the fused kernel beside the unfused path, the torch reference, bf16 and the floor.

    python -m tools.bench [--shapes benchmarks|tests|all|M,N,K ...] [--calls 100] [--clear-bytes N]
                          [--host-calls 200] [--json FILE] [--png FILE]
    python -m tools.bench --model DIR|llama-3-8b|llama-3-70b [--m 1,2,4,...,256] [--calls 100]
                          [--modes eager,captured,reduce-overhead,compiled] [--profile]
                          [--json FILE]
    python -m tools.bench --host-only [--shapes llama-3-8b benchmarks] [--m 1,8,32,64]
                          [--host-calls 200] [--json FILE]
    TRITON_INTERPRET=1 python -m tools.bench --host-only --stub-launches [--host-calls 5000]

Per shape (default: the 6 benchmark shapes; the runner's seed of each task shape, as tools.evaluate),
one set of inputs from reference.generate_input, and in the runner's loop (tools.timing.RunnerLoop:
synchronize, cache clear, start event, call, end event, synchronize), `--calls` times each of:
  (a) fused:       submission.custom_kernel(data);
  (b) unfused:     kernels.quantize.quantize_rows(A), then the GEMM on the quantized A with the
                   config custom_kernel uses (GemmLauncher with a_prequantized);
  (c) reference:   reference.ref_kernel(data) (dequantize, fp32 matmul);
  (d) bf16_linear: torch.nn.functional.linear(A, B) with the weight B kept in bf16;
  (e) floor:       an empty Triton kernel's time in the same loop plus the bytes the GEMM must
                   move (A, B_shuffle, B's scales, C) at the device copy bandwidth measured in
                   this run (best of several 1 GiB device-to-device copies, read + write).
(a) and (b) are checked once per shape with reference.check_implementation; a failure is
printed and recorded, and the shape is still timed. Host µs per call without synchronization
(tools.timing.host_time_us): the GEMM's bypass launch ("direct"), its standard Triton launch,
and custom_kernel itself.

Prints one line per shape, then a table (mean µs of (a)..(e), a/d, a/e, launches per call,
config, host µs) ending in a geomean row. --json writes the rows, --png a grouped bar chart
(log scale; needs matplotlib). Exit codes: 0 every check passed, 1 a check failed, 2 usage
error or no GPU.

    python -m tools.bench --prepared --shapes llama-3-8b|N,K|M,N,K ... --m 1,8,32,64,128
                          [--calls 100] [--json FILE]

times the prepared-weight path for NVIDIA Hopper (launchers.prepared) beside custom_kernel and
F.linear bf16, with the prepared weight's bytes at the copy bandwidth (tools/bench_prepared.py).

    python -m tools.bench --vendor-gemm [--shapes M,N,K ...] [--calls 100] [--json FILE]

measures the M from which the "dequant" path (launchers.dequant: A and B dequantized to bf16,
the vendor GEMM) serves chips without FP4 MMA (launchers.targets: Target.vendor_gemm_from_m): per
shape (default each M of VENDOR_GEMM_M with each (N, K) of VENDOR_GEMM_NK) the fused GEMM
(vendor_fused_config: the looked-up config; where the lookup serves another path, the hopper
path's large tile from the target's large_tiles_from_m, else the heuristic's) and the
dequant path, each proven, checked and timed in the runner's loop, beside F.linear bf16; then a table, per
(N, K) the smallest M from which the dequant path wins at every larger M timed, and last the
threshold: the largest of those. Exit code 1 when the dequant path failed on some shape.

--model DIR loads an AMD Quark MXFP4 export with launchers.linear.load_quark (needs
transformers and safetensors); --model llama-3-8b (or llama-3-70b, tools/model_shapes.py)
builds that Llama with random weights, its decoder layers' linears quantized into MXFP4Linear
(mxfp4_llama; lm_head stays bf16, as Quark's llama template leaves it); then its bf16 twin
(bf16_twin: each MXFP4Linear an nn.Linear holding its dequantized weight; embedding, attention
and lm_head as the model has them), then times, per M of --m (default 1 to 256) and mode of
--modes, one decode step of each: a forward of M sequences of one new token each (input_ids [M,
1], no KV cache, so the linears and the per-token work of the step without attention over a
context), in the same runner's loop. The modes: eager; captured (a torch.cuda.graph of the
step, captured after one eager step and replayed); compiled (torch.compile with mode
"max-autotune-no-cudagraphs"); and, when asked for, reduce-overhead (torch.compile with mode
"reduce-overhead": CUDA graphs through torch.compile, the captured mode's alternative). Prints
per mode and M the mean µs of both, their ratio beside the target (eager <= 1.05; captured and
reduce-overhead <= 0.5 at M = 1 and <= 0.6 at M = 8), and the relative L2 difference of the
MXFP4 logits from the twin's, from the eager MXFP4 step's and from the model emulated exactly
(emulating: each MXFP4Linear as the reference's rule in torch, dequantized weight and
activations quantized by kernels.formats) with the task's element check against the latter.
--profile adds a torch.profiler summary (device and host time by op) of both steps wherever a
target is missed or none is set.

--host-only times the host path alone: µs per call (median, back to back, no synchronization)
of F.linear on the bf16 weight, torch.ops.mxfp4_mm.gemm and MXFP4Linear on it, the prepared
path's op torch.ops.mxfp4_mm.gemm_prepared and MXFP4Linear on it (at the M that path serves on
the device: up to its chip's prepared_max_m on NVIDIA sm_90 and up; the table marks the others
not served), custom_kernel and the GEMM's direct launch, side by side, on
--shapes (default llama-3-8b's layers at each M of --m, default 1, 8, 32, 64, and the benchmark
shapes), with the margins the targets bound (each op and its MXFP4Linear within 5 µs of
F.linear, custom_kernel within 2 µs of the op). With
--stub-launches it runs on the CPU under TRITON_INTERPRET=1: launchers built without proof,
every kernel launch a no-op taken as direct, so the figures are the Python part of a call
(F.linear and the direct launch are not timed there; the interpreter serves the prepared path).
"""

import argparse
import collections
import contextlib
import dataclasses
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

from .cli import (SHAPES_HELP, ArgumentParser, UsageError, check_fault_variable,
                  clear_bytes, output_file, parse_m_list, parse_model_shapes, parse_shapes,
                  positive_int, usage_error)
from .evaluate import _num, geomean
from .model_shapes import DECODE_MAX_M
from .timing import DEFAULT_CLEAR_BYTES, RunnerLoop, host_time_us, summary, time_variant

COPY_BYTES = 1 << 30
COPY_REPETITIONS = 5
DEFAULT_CALLS = 100
DEFAULT_HOST_CALLS = 200
DEFAULT_SHAPES = ["benchmarks"]
DECODE_M = tuple(2 ** i for i in range(DECODE_MAX_M.bit_length()))     # 1, 2, 4, ..., 256

US_COLUMNS = (("fused", "a fused"), ("unfused", "b unfused"), ("reference", "c ref"),
              ("bf16_linear", "d bf16"), ("floor", "e floor"))
RATIO_COLUMNS = (("fused/bf16_linear", "a/d"), ("fused/floor", "a/e"))
HOST_COLUMNS = (("direct", "host dir"), ("standard", "host std"),
                ("custom_kernel", "host ck"))
LEGEND = ("mean µs per call in the runner's loop: (a) custom_kernel, (b) quantize_rows + GEMM, "
          "(c) reference.ref_kernel, (d) F.linear on the bf16 weight, (e) floor = empty kernel + "
          "bytes at copy bandwidth; host: µs per call without synchronization (GEMM direct and "
          "standard launch, custom_kernel)")


# ----------------------------------------------------------------------------- pure functions

def gemm_bytes(m, n, k):
    """Bytes the GEMM must move: A bf16, B_shuffle (K/2 bytes a row), B's e8m0 scales, C bf16."""
    return m * k * 2 + n * k // 2 + n * k // 32 + m * n * 2


def copy_bandwidth(nbytes, seconds):
    """Bytes per second of a copy of `nbytes` that took `seconds`, counting read and write."""
    return 2 * nbytes / seconds


def floor_us(nbytes, empty_kernel_us, bandwidth):
    """The time no GEMM beats: an empty launch plus `nbytes` at `bandwidth` (bytes/s)."""
    return empty_kernel_us + nbytes / bandwidth * 1e6


def make_row(spec, timings, floor, launches, config, host_us, failures):
    """One shape's record. timings: {variant (a)-(d): tools.timing.summary}; floor: (e) in µs;
    host_us: {"direct" (None when the bypass launch is unavailable), "standard",
    "custom_kernel"}; failures: {"fused" or "unfused": the check's message}."""
    us = {name: timings[name]["mean_us"] if name in timings else None
          for name, _ in US_COLUMNS if name != "floor"}
    us["floor"] = floor
    ratios = {"fused/bf16_linear": us["fused"] / us["bf16_linear"],
              "fused/floor": us["fused"] / floor}
    return dict(spec, config=config, launches=launches,
                bytes=gemm_bytes(spec["m"], spec["n"], spec["k"]), us=us, ratios=ratios,
                host_us=dict(host_us), timings=timings, failures=dict(failures), ok=not failures)


def check_text(row):
    """"ok", or "FAIL" and the variants whose check failed."""
    return "ok" if row["ok"] else "FAIL " + ",".join(sorted(row["failures"]))


def _column_geomeans(rows, group, columns):
    return {key: geomean(row[group][key] for row in rows if row[group][key] is not None)
            for key, _ in columns}


def summarize(rows):
    """Geomeans over the rows of every µs column, both ratios and the host µs (None where no row
    has a value)."""
    return {"shapes": len(rows), "us": _column_geomeans(rows, "us", US_COLUMNS),
            "ratios": _column_geomeans(rows, "ratios", RATIO_COLUMNS),
            "host_us": _column_geomeans(rows, "host_us", HOST_COLUMNS)}


def _cells(values, columns, width, digits):
    return [_num(values[key], width, digits) for key, _ in columns]


def _headers(columns, width):
    return [f"{label:>{width}}" for _, label in columns]


def format_table(rows, summary):
    """M N K, (a)..(e) µs, a/d, a/e, launches, config, host µs, check; then a geomean row."""
    config_width = max([len("config")] + [len(row["config"]) for row in rows])
    header = ([f"{'M':>5} {'N':>5} {'K':>5}"] + _headers(US_COLUMNS, 9) + _headers(RATIO_COLUMNS, 6)
              + [f"{'launches':>8}", f"{'config':<{config_width}}"] + _headers(HOST_COLUMNS, 8)
              + ["check"])
    lines = [" ".join(header)]
    for row in rows:
        cells = ([f"{row['m']:>5} {row['n']:>5} {row['k']:>5}"]
                 + _cells(row["us"], US_COLUMNS, 9, 2) + _cells(row["ratios"], RATIO_COLUMNS, 6, 2)
                 + [f"{row['launches']:>8}", f"{row['config']:<{config_width}}"]
                 + _cells(row["host_us"], HOST_COLUMNS, 8, 1) + [check_text(row)])
        lines.append(" ".join(cells))
    cells = ([f"{'geomean':<17}"] + _cells(summary["us"], US_COLUMNS, 9, 2)
             + _cells(summary["ratios"], RATIO_COLUMNS, 6, 2)
             + [f"{'':>8}", f"{'':<{config_width}}"]
             + _cells(summary["host_us"], HOST_COLUMNS, 8, 1))
    lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)


def write_png(path, rows, summary, title):
    """Grouped bars per shape, (a)..(e), on a log µs axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / len(US_COLUMNS)
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(rows) + 2), 4.8))
    for index, (key, label) in enumerate(US_COLUMNS):
        offset = (index - (len(US_COLUMNS) - 1) / 2) * width
        ax.bar([x + offset for x in xs], [row["us"][key] for row in rows], width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{row['m']}x{row['n']}x{row['k']}" for row in rows], rotation=20)
    ax.set_ylabel("mean µs per call")
    ratio = summary["ratios"]["fused/floor"]
    ax.set_title(f"{title}: geomean a/e {ratio:.2f}" if ratio else title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--png needs matplotlib, which is not installed here "
                         "(pip install matplotlib, or pip install -e '.[plot]')")


# ----------------------------------------------------------------------------- GPU

@triton.jit
def empty_kernel():
    """Does nothing: its time in the runner's loop is the cost of one launch."""
    pass


def gpu_problem():
    """Why this cannot run here (a sentence), or None when a CUDA/ROCm GPU is usable."""
    from mxfp4_mm.launchers import interpreting
    if not torch.cuda.is_available():
        return "needs a GPU (CUDA or ROCm); none is available here"
    if interpreting():
        return "TRITON_INTERPRET is set; unset it to time compiled kernels"
    return None


def measure_copy_bandwidth(nbytes=COPY_BYTES, repetitions=COPY_REPETITIONS):
    """Device copy bandwidth in bytes/s: the best of `repetitions` timed copies of `nbytes`."""
    source = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    target.copy_(source)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best_s = float("inf")
    for _ in range(repetitions):
        torch.cuda.synchronize()
        start.record()
        target.copy_(source)
        end.record()
        torch.cuda.synchronize()
        best_s = min(best_s, start.elapsed_time(end) / 1000.0)
    return copy_bandwidth(nbytes, best_s)


def bench_shape(spec, loop, calls, host_calls, empty_kernel_us, bandwidth):
    """Check (a) and (b), time (a)..(d) and the host launches for one shape; its row."""
    from mxfp4_mm import reference
    from mxfp4_mm.kernels.quantize import quantize_rows
    from mxfp4_mm.launchers import current_target, launcher_for
    from mxfp4_mm.launchers.gemm import GemmLauncher
    from mxfp4_mm.submission import custom_kernel

    m, n, k = spec["m"], spec["n"], spec["k"]
    data = reference.generate_input(m, n, k, spec["seed"], device="cuda")
    a, b, _, b_shuffle, b_scale_sh = data
    launcher = launcher_for(a, n)
    backend, _ = current_target(a.device)
    variants = {"fused": lambda: custom_kernel(data),
                "reference": lambda: reference.ref_kernel(data),
                "bf16_linear": lambda: torch.nn.functional.linear(a, b)}
    fused_gemm = isinstance(launcher, GemmLauncher)   # else another path serves the shape
    if fused_gemm:
        quantizer = launcher.quantizer      # the quantizer the proven launcher uses
        unfused_gemm = GemmLauncher(launcher.config, backend, m, n, k, a.stride(), a.device,
                                    a_prequantized=True)

        def unfused():
            codes, scales = quantize_rows(a, quantizer)
            return unfused_gemm(codes, b_shuffle, b_scale_sh, scales)
        variants["unfused"] = unfused
    failures = {}
    for name in [name for name in ("fused", "unfused") if name in variants]:
        ok, message = reference.check_implementation(data, variants[name]())
        if not ok:
            failures[name] = message
            print(f"  FAIL {m}x{n}x{k} {name}: {message}", flush=True)
    timings = {name: time_variant(loop, fn, calls) for name, fn in variants.items()}

    host_us = {"direct": None, "standard": None,
               "custom_kernel": host_time_us(variants["fused"], host_calls)}
    if fused_gemm:
        args, _, _ = launcher.gemm_arguments(a, b_shuffle, b_scale_sh)
        host_us["direct"] = (host_time_us(lambda: launcher.gemm(*args), host_calls)
                             if launcher.gemm.is_direct else None)
        host_us["standard"] = host_time_us(lambda: launcher.gemm.standard(*args), host_calls)
    floor = floor_us(gemm_bytes(m, n, k), empty_kernel_us, bandwidth)
    row = make_row(spec, timings, floor, launcher.launches_per_call, launcher.config.label,
                   host_us, failures)
    row["config_fields"] = dataclasses.asdict(launcher.config)
    return row


def _progress(index, count, row):
    us = row["us"]
    times = ", ".join(f"{label} {_num(us[key], 0, 2)}" for key, label in US_COLUMNS)
    return (f"[{index}/{count}] {row['m']}x{row['n']}x{row['k']} seed {row['seed']} "
            f"({row['config']}): {times} µs; a/e {_num(row['ratios']['fused/floor'], 0, 2)}; "
            f"check {check_text(row)}")


def run(specs, args):
    """Measure the floor's parts, then every shape; returns (rows, run facts)."""
    device = torch.cuda.get_device_name()
    print(f"device: {device}; {len(specs)} shape(s), {args.calls} timed calls each, cache clear "
          f"{args.clear_bytes / 2**20:.0f} MiB", flush=True)
    start = time.perf_counter()
    from mxfp4_mm import submission  # noqa: F401  (pre-warms every task shape's kernels on a GPU)
    print(f"imported submission (pre-warm) in {time.perf_counter() - start:.1f} s", flush=True)

    loop = RunnerLoop(args.clear_bytes)
    bandwidth = measure_copy_bandwidth()
    empty_kernel[(1,)]()
    empty_kernel_us = summary(loop.time(lambda: empty_kernel[(1,)](), args.calls))["mean_us"]
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s (best of {COPY_REPETITIONS} copies of "
          f"{COPY_BYTES / 2**30:.0f} GiB, read + write); empty kernel {empty_kernel_us:.2f} µs",
          flush=True)
    rows = []
    for index, spec in enumerate(specs, 1):
        rows.append(bench_shape(spec, loop, args.calls, args.host_calls, empty_kernel_us,
                                bandwidth))
        print(_progress(index, len(specs), rows[-1]), flush=True)
    facts = {"device": device, "calls": args.calls, "host_calls": args.host_calls,
             "clear_bytes": args.clear_bytes, "copy_bandwidth_bytes_per_s": bandwidth,
             "empty_kernel_us": empty_kernel_us}
    return rows, facts


# ----------------------------------------------------------------------------- --vendor-gemm

VENDOR_GEMM_M = (256, 512, 1024, 2048, 4096, 8192)
VENDOR_GEMM_NK = ((4096, 4096), (7168, 2048), (2112, 7168), (8192, 8192), (4096, 4352))
VENDOR_LEGEND = ("mean µs per call in the runner's loop: fused = our fused GEMM (the looked-up "
                 "config; where the lookup serves another path, the hopper path's large tile "
                 "from the target's large_tiles_from_m, else the heuristic's), dequant = the "
                 "\"dequant\" path (launchers.dequant), bf16 = F.linear on the bf16 weight")


def vendor_gemm_grid() -> list:
    """The shapes --vendor-gemm times by default: each M of VENDOR_GEMM_M with each (N, K) of
    VENDOR_GEMM_NK, as M,N,K words for tools.cli.parse_shapes."""
    return [f"{m},{n},{k}" for n, k in VENDOR_GEMM_NK for m in VENDOR_GEMM_M]


def dequant_wins(row) -> bool:
    """The dequant path timed and faster than the fused GEMM (or the fused GEMM had no
    proven launcher)."""
    return row["dequant_us"] is not None and (row["fused_us"] is None
                                              or row["dequant_us"] < row["fused_us"])


def dequant_wins_from(rows) -> dict:
    """{(N, K): the smallest M timed from which the dequant path wins at it and at every larger
    M timed for that (N, K), or None where it does not win at the largest}."""
    by_nk = {}
    for row in sorted(rows, key=lambda r: r["m"]):
        by_nk.setdefault((row["n"], row["k"]), []).append(row)
    found = {}
    for nk, group in by_nk.items():
        found[nk] = None
        for row in reversed(group):
            if not dequant_wins(row):
                break
            found[nk] = row["m"]
    return found


def vendor_gemm_threshold(wins_from: dict):
    """The M from which the dequant path wins on every (N, K): the largest of wins_from's,
    None when some (N, K) never wins (or nothing was timed)."""
    values = list(wins_from.values())
    return None if not values or None in values else max(values)


def format_vendor_table(rows) -> str:
    config_width = max([len("fused config")] + [len(row["fused_config"]) for row in rows])
    lines = [f"{'M':>5} {'N':>5} {'K':>5} {'fused':>9} {'dequant':>9} {'bf16':>9} "
             f"{'deq/bf16':>8} {'fused config':<{config_width}} winner"]
    for row in rows:
        ratio = (row["dequant_us"] / row["bf16_us"]
                 if row["dequant_us"] is not None else None)
        lines.append(f"{row['m']:>5} {row['n']:>5} {row['k']:>5} {_num(row['fused_us'], 9, 2)} "
                     f"{_num(row['dequant_us'], 9, 2)} {_num(row['bf16_us'], 9, 2)} "
                     f"{_num(ratio, 8, 2)} {row['fused_config']:<{config_width}} "
                     f"{'dequant' if dequant_wins(row) else 'fused'}")
    return "\n".join(lines)


def vendor_fused_config(arch, m, n, k):
    """The "fused" column's config: the looked-up one where it is a fused GEMM
    (launchers.gemm.GEMM_KERNELS), else from the target's large_tiles_from_m the hopper path's
    large tile (launchers.candidates.HOPPER_LARGE_TILE), else the heuristic's."""
    from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
    from mxfp4_mm.launchers.configs import config_lookup
    from mxfp4_mm.launchers.gemm import GEMM_KERNELS
    from mxfp4_mm.launchers.gemm_config import config_from_fields
    from mxfp4_mm.launchers.heuristics import heuristic_config
    from mxfp4_mm.launchers.targets import target_facts
    looked_up = config_lookup(arch, m, n, k)[0]
    if looked_up.path in GEMM_KERNELS:
        return looked_up
    large_from = target_facts(arch).large_tiles_from_m
    if large_from is not None and m >= large_from:
        return config_from_fields(HOPPER_LARGE_TILE)
    return heuristic_config(arch, m, n, k)


def vendor_gemm_row(spec, time_us, device="cuda") -> dict:
    """One shape: the fused GEMM and the dequant path, each proven (launchers.proof), checked
    with reference.check_implementation and timed, and F.linear bf16 timed (time_us(fn) -> mean
    µs per call); a path that fails gets None and its reason."""
    from mxfp4_mm import reference
    from mxfp4_mm.launchers import current_target
    from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG
    from mxfp4_mm.launchers.ladder import Rung, prove_rung
    from mxfp4_mm.launchers.paths import build_launcher

    m, n, k = spec["m"], spec["n"], spec["k"]
    data = reference.generate_input(m, n, k, spec["seed"], device=device)
    a, b, _, b_shuffle, b_scale_sh = data
    backend, arch = current_target(a.device)
    fused = vendor_fused_config(arch, m, n, k)
    row = dict(spec, arch=arch, fused_config=fused.label, errors={})
    for name, config in (("fused", fused), ("dequant", DEQUANT_CONFIG)):
        row[f"{name}_us"] = None
        try:
            launcher = prove_rung(Rung(name, lambda config=config: build_launcher(
                config, backend, m, n, k, a.stride(), a.device)), m, n, k, a.stride(), a.device)
            ok, message = reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh))
            if not ok:
                raise RuntimeError(f"wrong output: {message}")
            row[f"{name}_us"] = time_us(lambda launcher=launcher: launcher(a, b_shuffle,
                                                                           b_scale_sh))
        except Exception as error:   # reported in the row, the other variants still timed
            row["errors"][name] = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        launcher = None
    row["bf16_us"] = time_us(lambda: torch.nn.functional.linear(a, b))
    return row


def run_vendor_gemm(specs, args) -> int:
    device = torch.cuda.get_device_name()
    print(f"device: {device}; {len(specs)} shape(s), {args.calls} timed calls each, cache clear "
          f"{args.clear_bytes / 2**20:.0f} MiB", flush=True)
    loop = RunnerLoop(args.clear_bytes)
    rows = []
    for index, spec in enumerate(specs, 1):
        row = vendor_gemm_row(spec, lambda fn: time_variant(loop, fn, args.calls)["mean_us"])
        torch.cuda.empty_cache()
        rows.append(row)
        errors = "".join(f"; {name} failed: {text}" for name, text in row["errors"].items())
        print(f"[{index}/{len(specs)}] {row['m']}x{row['n']}x{row['k']} on {row['arch']}: fused "
              f"{_num(row['fused_us'], 0, 2)} ({row['fused_config']}), dequant "
              f"{_num(row['dequant_us'], 0, 2)}, bf16 {_num(row['bf16_us'], 0, 2)} µs{errors}",
              flush=True)
    wins_from = dequant_wins_from(rows)
    threshold = vendor_gemm_threshold(wins_from)
    print(f"\n{VENDOR_LEGEND}\n{format_vendor_table(rows)}\n")
    for (n, k), m in wins_from.items():
        print(f"N={n} K={k}: the dequant path wins from M = "
              f"{m if m is not None else '- (not at the largest M timed)'}")
    arch = rows[0]["arch"] if rows else "?"
    if threshold is None:
        print(f"vendor GEMM threshold on {arch}: none (the dequant path does not win on every "
              f"(N, K) at the largest M timed)")
    else:
        below = (" (the smallest M timed: time smaller ones with --shapes to see whether it "
                 "wins below)" if threshold == min(row["m"] for row in rows) else "")
        print(f"vendor GEMM threshold on {arch}: the dequant path wins on every (N, K) from "
              f"M = {threshold}: set vendor_gemm_from_m={threshold} in launchers/targets.py's "
              f"record of {arch}{below}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=device, calls=args.calls, rows=rows,
                                                   wins_from={f"{n},{k}": m for (n, k), m
                                                              in wins_from.items()},
                                                   threshold=threshold), indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    failed = [row for row in rows if "dequant" in row["errors"]]
    return 1 if failed else 0


def run_prepared_mode(specs, args) -> int:
    """--prepared: tools/bench_prepared.py's rows after the run's copy bandwidth and empty launch."""
    from .bench_prepared import format_prepared_table, run_prepared
    loop = RunnerLoop(args.clear_bytes)
    bandwidth = measure_copy_bandwidth()
    empty_kernel[(1,)]()
    empty_kernel_us = summary(loop.time(lambda: empty_kernel[(1,)](), args.calls))["mean_us"]
    device = torch.cuda.get_device_name()
    print(f"device: {device}; copy bandwidth {bandwidth / 1e12:.2f} TB/s; empty kernel "
          f"{empty_kernel_us:.2f} µs", flush=True)
    rows = run_prepared(specs, args, loop, empty_kernel_us, bandwidth)
    print(format_prepared_table(rows), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=device, calls=args.calls,
                                                   copy_bandwidth_bytes_per_s=bandwidth,
                                                   empty_kernel_us=empty_kernel_us, rows=rows),
                                              indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    return 1 if any("prepared" in row["errors"] for row in rows) else 0


# ----------------------------------------------------------------------------- --host-only

HOST_ONLY_SHAPES = ["llama-3-8b", "benchmarks"]
HOST_ONLY_M = (1, 8, 32, 64)
STUBBED_HOST_CALLS = 5000
# (key, column label): F.linear on the bf16 weight, the op, MXFP4Linear on it, the prepared
# path's op and MXFP4Linear on it (launchers.prepared), custom_kernel, the GEMM's direct launch
# alone
HOST_ONLY_COLUMNS = (("F.linear", "F.linear"), ("op", "op"), ("MXFP4Linear", "layer"),
                     ("prepared", "prep op"), ("MXFP4Linear prepared", "prep lay"),
                     ("custom_kernel", "ck"), ("direct", "direct"))
PREPARED_ENTRIES = ("prepared", "MXFP4Linear prepared")
NOT_SERVED = "—"     # the host table's cell of an entry whose path does not serve the row's M
NOT_SERVED_LEGEND = (f"{NOT_SERVED}: not served at that M on this device (the prepared path: "
                     f"launchers.prepared.serves_rows); -: not timed")
# the targets: each op and MXFP4Linear within 5 µs of F.linear, custom_kernel within 2 µs of
# the op
HOST_TARGET_US = {("op", "F.linear"): 5.0, ("MXFP4Linear", "F.linear"): 5.0,
                  ("prepared", "F.linear"): 5.0, ("MXFP4Linear prepared", "F.linear"): 5.0,
                  ("custom_kernel", "op"): 2.0}
HOST_ONLY_LEGEND = ("host µs per call, the median over back-to-back calls without "
                    "synchronization: F.linear on the bf16 weight, torch.ops.mxfp4_mm.gemm, "
                    "MXFP4Linear on it, torch.ops.mxfp4_mm.gemm_prepared and MXFP4Linear on it "
                    "(where that path serves the M on the device), submission.custom_kernel, and the "
                    "GEMM's direct launch alone")
STUBBED_LEGEND = ("the Python part alone, on the CPU: launchers built without proof, every "
                  "kernel launch a no-op taken as direct (F.linear and the direct launch, which "
                  "would compute or launch, are not timed); host µs per call, the median over "
                  "back-to-back calls")


def _no_launch(*arguments):
    """A kernel launch that launches nothing (--stub-launches)."""


@contextlib.contextmanager
def stubbed_launches():
    """Inside: launchers built without proof (the looked-up config, launchers.paths) in an
    empty launcher cache of their own, each of their kernel launches a direct one that
    launches nothing; outside, the cache and KernelLaunch are as they were."""
    from unittest import mock

    from mxfp4_mm import launchers
    from mxfp4_mm.launchers import prepared
    from mxfp4_mm.launchers.bypass import KernelLaunch
    from mxfp4_mm.launchers.configs import config_for
    from mxfp4_mm.launchers.paths import build_launcher

    def unproven(arch, backend, m, n, k, a_strides, device, out_dtype):
        return build_launcher(config_for(arch, m, n, k), backend, m, n, k, a_strides, device,
                              out_dtype=out_dtype)

    def unproven_prepared(arch, backend, m, n, k, a_strides, device, wide_scales, out_dtype):
        return prepared.PreparedLauncher(prepared.prepared_config(m, n, k), backend, m, n, k,
                                         a_strides, device, wide_scales, out_dtype=out_dtype)
    built = KernelLaunch.__init__

    def stubbed(launch, *arguments, **options):
        built(launch, *arguments, **options)
        launch.direct = _no_launch
    with mock.patch.object(launchers, "proven_launcher", unproven), \
            mock.patch.object(prepared, "proven_prepared_launcher", unproven_prepared), \
            mock.patch.object(launchers, "_launchers", collections.OrderedDict()), \
            mock.patch.object(launchers, "_checked_signatures", {}), \
            mock.patch.object(KernelLaunch, "__init__", stubbed):
        yield


def host_inputs(m, n, k, device):
    """(A bf16 [M, K], the bf16 weight [N, K], B_shuffle uint8 [N, K/2], B_scale_sh uint8)
    of random values (every scale 2^0): host time reads none of them."""
    from mxfp4_mm.kernels import formats
    generator = torch.Generator(device=device).manual_seed(m * n + k)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device, generator=generator)
    weight = torch.randn(n, k, dtype=torch.bfloat16, device=device, generator=generator)
    b_shuffle = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=device,
                              generator=generator)
    b_scale_sh = torch.full(formats.scales_padded_shape(n, k), 127, dtype=torch.uint8,
                            device=device)
    return a, weight, b_shuffle, b_scale_sh


def host_row(shape, calls, device, stubbed=False) -> dict:
    """One shape's host µs per call of each HOST_ONLY_COLUMNS entry (None where not timed),
    each entry called once first (the launcher built and cached). The prepared path's entries
    are timed where that path serves M rows on the device (prepared.serves_rows: any M in the
    interpreter, so stubbed), else named in "not_served"."""
    from mxfp4_mm.launchers import current_target, launcher_for, prepared
    from mxfp4_mm.launchers.gemm import GemmLauncher
    from mxfp4_mm.launchers.linear import MXFP4Linear
    from mxfp4_mm.submission import custom_kernel

    m, n, k = shape
    a, weight, b_shuffle, b_scale_sh = host_inputs(m, n, k, device)
    layer = MXFP4Linear(b_shuffle, b_scale_sh)
    layer.use_hopper_layout(False)      # on the op torch.ops.mxfp4_mm.gemm wherever it runs
    data = (a, None, None, b_shuffle, b_scale_sh)
    entries = {"op": lambda: torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh),
               "MXFP4Linear": lambda: layer(a), "custom_kernel": lambda: custom_kernel(data)}
    served = prepared.serves_rows(current_target(device)[1], m)
    if served:
        hopper = prepared.hopper_weight(b_shuffle, b_scale_sh)
        prepared_layer = MXFP4Linear(b_shuffle, b_scale_sh)
        prepared_layer.use_hopper_layout(True)
        entries["prepared"] = lambda: torch.ops.mxfp4_mm.gemm_prepared(
            a, hopper.values, hopper.scales, hopper.k, hopper.wide_scales)
        entries["MXFP4Linear prepared"] = lambda: prepared_layer(a)
    synchronize = (lambda: None) if stubbed else torch.cuda.synchronize
    if not stubbed:
        entries["F.linear"] = lambda: torch.nn.functional.linear(a, weight)
        launcher = launcher_for(a, n)
        if isinstance(launcher, GemmLauncher) and launcher.gemm.is_direct:
            args, _, _ = launcher.gemm_arguments(a, b_shuffle, b_scale_sh)
            entries["direct"] = lambda: launcher.gemm.direct(*args)
    us = {key: (host_time_us(entries[key], calls, synchronize) if key in entries else None)
          for key, _ in HOST_ONLY_COLUMNS}
    return {"m": m, "n": n, "k": k, "host_us": us,
            "not_served": [] if served else list(PREPARED_ENTRIES)}


def host_margins(row) -> dict:
    """{"LEFT-RIGHT": µs} of each HOST_TARGET_US pair, None where either side was not
    timed."""
    us = row["host_us"]
    return {f"{left}-{right}": (us[left] - us[right] if us[left] is not None
                                and us[right] is not None else None)
            for left, right in HOST_TARGET_US}


def _served(row, *keys) -> bool:
    return not set(keys) & set(row["not_served"])


def _host_cell(value, served: bool, width: int) -> str:
    return _num(value, width, 2) if served else f"{NOT_SERVED:>{width}}"


def format_host_table(rows) -> str:
    """A line per row, then the median of each entry over the rows that serve it; the legend
    of NOT_SERVED where a row has it."""
    labels = {"op-F.linear": "op-lin", "MXFP4Linear-F.linear": "layer-lin",
              "prepared-F.linear": "prep-lin", "MXFP4Linear prepared-F.linear": "plyr-lin",
              "custom_kernel-op": "ck-op"}
    lines = [" ".join([f"{'M':>5} {'N':>5} {'K':>5}"] + _headers(HOST_ONLY_COLUMNS, 9)
                      + [f"{labels[f'{left}-{right}']:>9}" for left, right in HOST_TARGET_US])]
    for row in rows:
        found = host_margins(row)
        lines.append(" ".join(
            [f"{row['m']:>5} {row['n']:>5} {row['k']:>5}"]
            + [_host_cell(row["host_us"][key], _served(row, key), 9)
               for key, _ in HOST_ONLY_COLUMNS]
            + [_host_cell(found[f"{left}-{right}"], _served(row, left, right), 9)
               for left, right in HOST_TARGET_US]))
    medians = []
    for key, _ in HOST_ONLY_COLUMNS:
        timed = [row["host_us"][key] for row in rows if _served(row, key)]
        medians.append(_host_cell(statistics.median(timed) if timed and None not in timed
                                  else None, bool(timed), 9))
    lines.append(" ".join([f"{'median':<17}"] + medians))
    if any(row["not_served"] for row in rows):
        lines.append(NOT_SERVED_LEGEND)
    return "\n".join(lines)


def host_targets_text(rows) -> str:
    """Per target, on how many of the shapes that serve both its entries it holds (only the
    targets timed on every such shape)."""
    parts = []
    for (left, right), bound in HOST_TARGET_US.items():
        found = [host_margins(row)[f"{left}-{right}"] for row in rows
                 if _served(row, left, right)]
        if found and None not in found:
            held = sum(margin <= bound for margin in found)
            served = "" if len(found) == len(rows) else f" served (of {len(rows)})"
            parts.append(f"{left} <= {right} + {bound:g} µs on {held} of {len(found)} "
                         f"shapes{served}")
    return "targets: " + ("; ".join(parts) if parts else "none timed here")


def run_host_only(shapes, args) -> list:
    """Each shape's host_row, on the GPU, or with --stub-launches on the CPU."""
    if args.stub_launches:
        device, calls = "cpu", args.host_calls
        print(f"--stub-launches on the CPU: {len(shapes)} shape(s), {calls} calls each",
              flush=True)
        with stubbed_launches():
            return [_host_progress(host_row(shape, calls, device, stubbed=True))
                    for shape in shapes]
    from mxfp4_mm import submission  # noqa: F401  (pre-warms every task shape's kernels)
    calls = args.host_calls
    print(f"device: {torch.cuda.get_device_name()}; {len(shapes)} shape(s), {calls} calls each",
          flush=True)
    return [_host_progress(host_row(shape, calls, "cuda")) for shape in shapes]


def _host_progress(row) -> dict:
    us = ", ".join(f"{label} {_host_cell(row['host_us'][key], _served(row, key), 0)}"
                   for key, label in HOST_ONLY_COLUMNS)
    print(f"{row['m']}x{row['n']}x{row['k']}: {us} µs", flush=True)
    return row


# ----------------------------------------------------------------------------- a model

def dequantized_linear(layer) -> torch.nn.Linear:
    """The bf16 nn.Linear of an MXFP4Linear: its dequantized weight and its bias, on its device."""
    from mxfp4_mm.kernels import formats
    n, k = layer.out_features, layer.in_features
    codes, scales = layer.mxfp4_weight()
    linear = torch.nn.Linear(k, n, bias=layer.bias is not None, dtype=torch.bfloat16,
                             device=codes.device)
    with torch.no_grad():
        linear.weight.copy_(formats.dequantize_mxfp4(codes, scales))
        if layer.bias is not None:
            linear.bias.copy_(layer.bias)
    return linear


def bf16_twin(model):
    """A copy of `model` whose every MXFP4Linear is its dequantized_linear."""
    import copy
    from mxfp4_mm.launchers.linear import MXFP4Linear
    twin = copy.deepcopy(model)
    for name, module in list(twin.named_modules()):
        if isinstance(module, MXFP4Linear):
            parent, _, attribute = name.rpartition(".")
            setattr(twin.get_submodule(parent), attribute, dequantized_linear(module))
    return twin


def mxfp4_llama(config: dict, device):
    """A LlamaForCausalLM of these LlamaConfig fields on `device`, random bf16 weights, each
    linear of its decoder layers an MXFP4Linear (MXFP4Linear.from_linear), lm_head kept."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from mxfp4_mm.launchers.linear import MXFP4Linear
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**config),
                                                 dtype=torch.bfloat16).eval()
    for name, module in list(model.model.layers.named_modules()):
        if isinstance(module, torch.nn.Linear):
            parent, _, attribute = name.rpartition(".")
            setattr(model.model.layers.get_submodule(parent), attribute,
                    MXFP4Linear.from_linear(module))
    return model


def load_model(source, device):
    """--model's model: a Quark export's folder through load_quark, or a name of LLAMA_CONFIGS
    through mxfp4_llama."""
    from .model_shapes import LLAMA_CONFIGS
    if str(source) in LLAMA_CONFIGS:
        return mxfp4_llama(LLAMA_CONFIGS[str(source)], device)
    from mxfp4_mm.launchers.linear import load_quark
    return load_quark(source, device=device)


def decode_step(model, input_ids):
    """One decode step of len(input_ids) sequences: their logits, no KV cache kept."""
    with torch.no_grad():
        return model(input_ids=input_ids, use_cache=False).logits


class EmulatedMXFP4Linear(torch.nn.Module):
    """One MXFP4Linear by the reference's rule in torch (launchers.proof.reference_output):
    bf16(dequant(quantize(x)) @ W^T) in fp32, plus the bias, where W is the layer's dequantized
    weight, which its bf16 twin's nn.Linear holds exactly (E2M1 times a power of two)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        from mxfp4_mm.kernels import formats
        rows = x.reshape(-1, x.shape[-1])
        values = formats.dequantize_mxfp4(*formats.quantize_mxfp4(rows))
        y = (values @ self.linear.weight.float().T).to(torch.bfloat16)
        if self.linear.bias is not None:
            y = y + self.linear.bias
        return y.view(*x.shape[:-1], y.shape[-1])


@contextlib.contextmanager
def emulating(twin, names):
    """Inside: `twin` (bf16_twin's) with each linear of `names` an EmulatedMXFP4Linear of it,
    so that twin is the MXFP4 model emulated exactly; outside, as it was."""
    swapped = {name: twin.get_submodule(name) for name in names}

    def put(modules):
        for name, module in modules.items():
            parent, _, attribute = name.rpartition(".")
            setattr(twin.get_submodule(parent), attribute, module)
    put({name: EmulatedMXFP4Linear(linear) for name, linear in swapped.items()})
    try:
        yield twin
    finally:
        put(swapped)


# the modes a step is timed in, and the torch.compile mode of those that compile the model
MODEL_MODES = ("eager", "captured", "reduce-overhead", "compiled")
DEFAULT_MODEL_MODES = ("eager", "captured", "compiled")
COMPILE_MODES = {"reduce-overhead": "reduce-overhead", "compiled": "max-autotune-no-cudagraphs"}
# the targets for the MXFP4 step over its bf16 twin's: {mode: {M: ratio}}, "*" any M
MODEL_TARGETS = {"eager": {"*": 1.05}, "captured": {1: 0.5, 8: 0.6},
                 "reduce-overhead": {1: 0.5, 8: 0.6}}


MODEL_LEGEND = ("mean µs of one decode step (input_ids [M, 1], no KV cache) in the runner's "
                "loop, per mode: eager; captured (a torch.cuda.graph of the step, replayed); "
                "reduce-overhead (torch.compile mode 'reduce-overhead', when asked for); "
                f"compiled (torch.compile mode {COMPILE_MODES['compiled']!r}); ratio: MXFP4 "
                "step / bf16 "
                "twin's, beside its target; relative L2 difference of the MXFP4 logits from the "
                "bf16 twin's, from the eager MXFP4 step's and from the model emulated exactly "
                "(dequantized weights, activations quantized by the reference's rule in torch), "
                "and the task's element check (rtol = atol = 1e-2) against the emulated logits")


def parse_modes(text: str) -> tuple:
    """--modes' value, e.g. "eager,captured" -> ("eager", "captured"), in MODEL_MODES' order."""
    words = [word for word in text.split(",") if word]
    unknown = [word for word in words if word not in MODEL_MODES]
    if unknown or not words:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(MODEL_MODES)}, got "
                                         f"{text!r}")
    return tuple(mode for mode in MODEL_MODES if mode in words)


def model_target(mode: str, m: int):
    targets = MODEL_TARGETS.get(mode, {})
    return targets.get(m, targets.get("*"))


def captured_step(model, input_ids):
    """A call that replays a CUDA graph of decode_step(model, input_ids) and returns the logits
    it writes (input_ids read where they are); the step runs eagerly once first, so that every
    launcher is built and proven before the capture."""
    decode_step(model, input_ids)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = decode_step(model, input_ids)

    def replay():
        graph.replay()
        return logits
    return replay


def mode_steps(mode, models, input_ids):
    """{"mxfp4", "bf16": a call of one decode step of that model in `mode` (MODEL_MODES)};
    models holds each model as "mxfp4" and "bf16", and, compiled once by the caller for a mode
    of COMPILE_MODES, as "MODE mxfp4" and "MODE bf16"."""
    if mode == "captured":
        return {name: captured_step(models[name], input_ids) for name in ("mxfp4", "bf16")}
    prefix = f"{mode} " if mode in COMPILE_MODES else ""
    return {name: functools.partial(decode_step, models[prefix + name], input_ids)
            for name in ("mxfp4", "bf16")}


def relative_l2(got, want) -> float:
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm()).item()


def profile_summary(step, rows: int = 12) -> str:
    """torch.profiler's table of a few calls of `step`: the ops that take the most device time
    and the most host time, each with its count."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_STEPS):
            step()
        torch.cuda.synchronize()
    events = profiler.key_averages()
    return "\n".join([f"{PROFILED_STEPS} steps, by device time:",
                      events.table(sort_by="self_device_time_total", row_limit=rows),
                      f"{PROFILED_STEPS} steps, by host time:",
                      events.table(sort_by="self_cpu_time_total", row_limit=rows)])


PROFILED_STEPS = 5


def model_row(mode, m, steps, time_us, eager_logits) -> dict:
    """One (mode, M): both steps' mean µs, their ratio beside the target, and how far the MXFP4
    logits lie from the twin's, from the eager MXFP4 step's and (eager_logits["emulated"]) from
    the emulated model's."""
    from mxfp4_mm.launchers.proof import compare
    logits = {name: step().float() for name, step in steps.items()}
    torch.cuda.synchronize()
    row = {"mode": mode, "m": m, "target": model_target(mode, m)}
    row.update({f"{name}_us": time_us(step) for name, step in steps.items()})
    row["ratio"] = row["mxfp4_us"] / row["bf16_us"]
    row["met"] = None if row["target"] is None else row["ratio"] <= row["target"]
    row["rel_bf16"] = relative_l2(logits["mxfp4"], logits["bf16"])
    row["rel_eager"] = relative_l2(logits["mxfp4"], eager_logits["mxfp4"])
    row["rel_emulated"] = relative_l2(logits["mxfp4"], eager_logits["emulated"])
    row["emulated_ok"], row["emulated_check"] = compare(logits["mxfp4"], eager_logits["emulated"])
    return row


def format_model_table(rows) -> str:
    lines = [f"{'mode':<9} {'M':>4} {'mxfp4 µs':>10} {'bf16 µs':>10} {'ratio':>6} {'target':>6} "
             f"{'rel bf16':>9} {'rel eager':>9} {'rel emul':>9} emulated check"]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['mode']:<9} {row['m']:>4} failed: {row['error']}")
            continue
        met = "" if row["met"] is None else (" ok" if row["met"] else " MISS")
        lines.append(f"{row['mode']:<9} {row['m']:>4} {row['mxfp4_us']:>10.1f} "
                     f"{row['bf16_us']:>10.1f} {row['ratio']:>6.2f} "
                     f"{_num(row['target'], 6, 2)}{met:<5} {row['rel_bf16']:>9.4f} "
                     f"{row['rel_eager']:>9.4f} {row['rel_emulated']:>9.4f} "
                     f"{'within tolerance' if row['emulated_ok'] else row['emulated_check'][:80]}")
    return "\n".join(lines)


def run_model(args):
    """Load the model and its twin on the GPU; per mode of --modes and M of --m, time a decode
    step of both and compare their logits (and the emulated model's)."""
    from mxfp4_mm.launchers.linear import MXFP4Linear
    device = torch.cuda.get_device_name()
    start = time.perf_counter()
    model = load_model(args.model, "cuda")
    twin = bf16_twin(model)
    names = [name for name, module in model.named_modules() if isinstance(module, MXFP4Linear)]
    print(f"device: {device}; {args.model}: {type(model).__name__}, {len(names)} MXFP4Linear "
          f"layers, loaded with its bf16 twin in {time.perf_counter() - start:.1f} s; modes "
          f"{', '.join(args.modes)}; {args.calls} timed calls each", flush=True)
    loop = RunnerLoop(args.clear_bytes)
    models = {"mxfp4": model, "bf16": twin}
    for mode in set(args.modes) & set(COMPILE_MODES):
        models.update({f"{mode} {name}": torch.compile(models[name], mode=COMPILE_MODES[mode],
                                                       dynamic=False)
                       for name in ("mxfp4", "bf16")})
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows, profiles = [], {}
    for m in args.m:
        input_ids = torch.randint(0, model.config.vocab_size, (m, 1), device="cuda",
                                  generator=generator)
        eager_logits = {"mxfp4": decode_step(model, input_ids)}
        with emulating(twin, names):
            eager_logits["emulated"] = decode_step(twin, input_ids)
        for mode in args.modes:
            begin = time.perf_counter()
            try:
                steps = mode_steps(mode, models, input_ids)
                rows.append(model_row(mode, m, steps, lambda step: time_variant(
                    loop, step, args.calls)["mean_us"], eager_logits))
            except Exception as error:      # reported in its row; the other modes still run
                rows.append({"mode": mode, "m": m,
                             "error": " ".join(f"{type(error).__name__}: {error}".split())[:300]})
            print(f"{mode} M={m} ({time.perf_counter() - begin:.0f} s): "
                  f"{format_model_table(rows[-1:]).splitlines()[1]}", flush=True)
            if args.profile and "error" not in rows[-1] and rows[-1]["met"] is not True:
                profiles[f"{mode} M={m}"] = {name: profile_summary(step)
                                             for name, step in steps.items()}
            steps = None
        torch.cuda.empty_cache()
    return rows, profiles, {"device": device, "model": str(args.model), "calls": args.calls,
                            "mxfp4_layers": len(names), "modes": list(args.modes)}


# ----------------------------------------------------------------------------- command line

def build_parser():
    parser = ArgumentParser("tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES, metavar="SHAPES",
                        help=f"{SHAPES_HELP}; with --host-only also N,K and model names "
                             f"(tools/model_shapes.py), each at every M of --m; default "
                             f"benchmarks (with --vendor-gemm: each M "
                             f"of {','.join(map(str, VENDOR_GEMM_M))} with each N,K of "
                             f"{' '.join(f'{n},{k}' for n, k in VENDOR_GEMM_NK)})")
    parser.add_argument("--vendor-gemm", action="store_true",
                        help="time the fused GEMM, the dequant path (A and B dequantized to "
                             "bf16, the vendor GEMM) and F.linear bf16 per shape, and print the "
                             "smallest M from which the dequant path wins on every N,K "
                             "(launchers.targets: Target.vendor_gemm_from_m)")
    parser.add_argument("--prepared", action="store_true",
                        help="time the prepared-weight path for NVIDIA Hopper per shape "
                             "(model names and N,K pairs take each M of --m)")
    parser.add_argument("--calls", type=positive_int, default=DEFAULT_CALLS,
                        help=f"timed calls per variant and shape (default {DEFAULT_CALLS})")
    parser.add_argument("--clear-bytes", type=clear_bytes, default=DEFAULT_CLEAR_BYTES,
                        help=f"cache-clear buffer before each timed call "
                             f"(default {DEFAULT_CLEAR_BYTES})")
    parser.add_argument("--host-calls", type=positive_int,
                        help=f"calls per host-time figure (default {DEFAULT_HOST_CALLS}, "
                             f"{STUBBED_HOST_CALLS} with --stub-launches)")
    parser.add_argument("--host-only", action="store_true",
                        help="time only the host path: µs per call of F.linear, the op, "
                             "MXFP4Linear, custom_kernel and the GEMM's direct launch side by "
                             "side, on --shapes (default: llama-3-8b's layers at each M of --m, "
                             f"default {','.join(map(str, HOST_ONLY_M))}, and the benchmark "
                             "shapes)")
    parser.add_argument("--stub-launches", action="store_true",
                        help="with --host-only: on the CPU (TRITON_INTERPRET=1), launchers "
                             "built without proof and every kernel launch a no-op: the "
                             "Python part of a call alone; needs no GPU")
    parser.add_argument("--json", metavar="FILE", type=output_file,
                        help="write the rows, the geomeans and the run's facts here")
    parser.add_argument("--png", metavar="FILE", type=output_file,
                        help="write a grouped bar chart here (needs matplotlib)")
    parser.add_argument("--model", metavar="DIR|NAME", type=Path,
                        help="time a decode step of this AMD Quark MXFP4 export (or of llama-3-8b "
                             "or llama-3-70b with random weights) against its bf16 twin instead "
                             "of the shapes (needs transformers and safetensors)")
    parser.add_argument("--m", type=parse_m_list, default=DECODE_M,
                        help=f"with --model: the decode batches (default "
                             f"{','.join(map(str, DECODE_M))}); with --host-only: the M of "
                             f"each model named in --shapes")
    parser.add_argument("--modes", type=parse_modes, default=DEFAULT_MODEL_MODES,
                        help=f"with --model: the modes to time the step in, some of "
                             f"{','.join(MODEL_MODES)} (default "
                             f"{','.join(DEFAULT_MODEL_MODES)})")
    parser.add_argument("--profile", action="store_true",
                        help="with --model: a torch.profiler summary of both steps (device "
                             "and host time by op) wherever a target is missed or none is set")
    return parser


def check_model_arguments(args):
    """Refuse (UsageError) what does not go with --model, and a folder that is no export."""
    if args.stub_launches and not args.host_only:
        raise UsageError("--stub-launches goes with --host-only")
    if args.host_only and (args.model or args.vendor_gemm or args.png):
        raise UsageError("--host-only times the host path: --model, --vendor-gemm and --png do "
                         "not go with it")
    from mxfp4_mm.launchers import interpreting
    if args.stub_launches and not interpreting():
        raise UsageError("--stub-launches runs the launchers' Python on the CPU through "
                         "Triton's interpreter: set TRITON_INTERPRET=1 before the command")
    if args.model is None:
        if args.m != DECODE_M and not (args.prepared or args.host_only):
            raise UsageError("--m goes with --model, --prepared or --host-only")
        if args.modes != DEFAULT_MODEL_MODES or args.profile:
            raise UsageError("--modes and --profile go with --model")
        return
    if args.shapes != ["benchmarks"] or args.png:
        raise UsageError("--model times a model: --shapes and --png do not go with it")
    from .model_shapes import LLAMA_CONFIGS
    if str(args.model) not in LLAMA_CONFIGS and not (args.model / "config.json").is_file():
        raise UsageError(f"--model {args.model}: no config.json there (expected an AMD Quark "
                         f"export's folder or one of {', '.join(LLAMA_CONFIGS)})")


def host_only_main(args, shapes) -> int:
    """--host-only: its table and targets (and --json); 2 where it cannot run here."""
    problem = None if args.stub_launches else gpu_problem()
    if problem:
        print(f"tools.bench: {problem}", file=sys.stderr)
        return 2
    rows = run_host_only(shapes, args)
    legend = STUBBED_LEGEND if args.stub_launches else HOST_ONLY_LEGEND
    print(f"\n{legend}\n{format_host_table(rows)}\n{host_targets_text(rows)}", flush=True)
    if args.json:
        device = "cpu (launches stubbed)" if args.stub_launches else torch.cuda.get_device_name()
        Path(args.json).write_text(json.dumps(dict(device=device, host_calls=args.host_calls,
                                                   rows=rows), indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        check_model_arguments(args)
        if args.vendor_gemm and args.shapes is DEFAULT_SHAPES:   # --shapes not given
            args.shapes = vendor_gemm_grid()
        if args.host_only:
            args.shapes = HOST_ONLY_SHAPES if args.shapes is DEFAULT_SHAPES else args.shapes
            args.m = HOST_ONLY_M if args.m is DECODE_M else args.m
            specs = parse_model_shapes(args.shapes, args.m)
        elif args.prepared:
            specs = [dict(m=m, n=n, k=k, seed=m + n + k)
                     for m, n, k in parse_model_shapes(args.shapes, args.m)]
        else:
            specs = parse_shapes(args.shapes)
        args.host_calls = args.host_calls or (STUBBED_HOST_CALLS if args.stub_launches
                                              else DEFAULT_HOST_CALLS)
        if args.vendor_gemm and args.png:
            raise UsageError("--png does not apply to --vendor-gemm")
        if args.png:
            require_matplotlib()
        check_fault_variable()
    except UsageError as error:
        return usage_error("tools.bench", error)
    if args.host_only:
        return host_only_main(args, specs)
    problem = gpu_problem()
    if problem:
        print(f"tools.bench: {problem}", file=sys.stderr)
        return 2
    if args.model:
        rows, profiles, facts = run_model(args)
        for where, summaries in profiles.items():
            for name, text in summaries.items():
                print(f"\ntorch.profiler, {name} step, {where} (its target missed):\n{text}")
        print(f"\n{MODEL_LEGEND}\n{format_model_table(rows)}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(dict(facts, rows=rows, profiles=profiles),
                                                  indent=2) + "\n")
            print(f"wrote {args.json}", flush=True)
        return 0

    if args.vendor_gemm:
        return run_vendor_gemm(specs, args)
    if args.prepared:
        return run_prepared_mode(specs, args)
    rows, facts = run(specs, args)
    totals = summarize(rows)
    print(f"\n{LEGEND}\n{format_table(rows, totals)}", flush=True)
    failed = [row for row in rows if not row["ok"]]
    for row in failed:
        for name, message in sorted(row["failures"].items()):
            print(f"FAIL {row['m']}x{row['n']}x{row['k']} {name}: {message}", flush=True)
    if args.json:
        report = dict(facts, rows=rows, geomean=totals)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    if args.png:
        write_png(args.png, rows, totals, f"mxfp4-mm bench on {facts['device']}")
        print(f"wrote {args.png}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
