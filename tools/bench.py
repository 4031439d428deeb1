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
threshold: the largest of those. Exit code 1 when the dequant path failed on some shape
(tools/bench_vendor.py).

--model DIR (tools/bench_model.py) loads an AMD Quark MXFP4 export with
launchers.linear.load_quark (needs transformers and safetensors); --model llama-3-8b (or
llama-3-70b, tools/model_shapes.py) builds that Llama with random weights, its decoder layers' linears quantized into MXFP4Linear
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

--host-only (tools/bench_host.py) times the host path alone: µs per call (median, back to
back, no synchronization) of F.linear on the bf16 weight, torch.ops.mxfp4_mm.gemm and MXFP4Linear on it, the prepared
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

import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
import triton

from .cli import (SHAPES_HELP, ArgumentParser, UsageError, check_fault_variable,
                  clear_bytes, output_file, parse_m_list, parse_model_shapes, parse_shapes,
                  positive_int, usage_error)
from .bench_host import (HOST_ONLY_LEGEND, HOST_ONLY_M, HOST_ONLY_SHAPES, STUBBED_HOST_CALLS,
                         STUBBED_LEGEND, format_host_table, host_targets_text, run_host_only)
from .bench_model import (DEFAULT_MODEL_MODES, MODEL_LEGEND, MODEL_MODES, format_model_table,
                          parse_modes, run_model)
from .bench_vendor import VENDOR_GEMM_M, VENDOR_GEMM_NK, run_vendor_gemm, vendor_gemm_grid
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
