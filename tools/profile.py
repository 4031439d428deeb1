"""Where a shape's GPU time goes: Nsight Compute counters for every kernel custom_kernel launches.

    python -m tools.profile [--shapes benchmarks|tests|all|M,N,K ...] [--ncu PATH] [--csv FILE]

Runs ncu (`--clock-control none --profile-from-start off --csv --page raw`) on this module in
child mode. The child makes one input per shape (reference.generate_input, seed 1), calls
submission.custom_kernel once to warm up, then once more between cudaProfilerStart and
cudaProfilerStop, so only that call's kernels are measured. Per kernel it prints: duration,
warp instructions executed, instructions per active SM cycle (at most 4), issue-slot use, SM
and memory throughput (% of peak), achieved occupancy, registers per thread, grid size, and
the warp stall reasons that cost the most (cycles per issued instruction). An issue-bound
kernel shows high issue-slot use and little memory throughput; a latency-bound one shows
neither and long scoreboard or barrier stalls.
Needs a GPU and ncu with access to the counters; exit 2 otherwise.
"""

import csv
import io
import os
import shutil
import subprocess
import sys

STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
METRICS = {   # ncu metric: column heading
    "gpu__time_duration.sum": "µs",
    "smsp__inst_executed.sum": "warp instr",
    "sm__inst_executed.avg.per_cycle_active": "IPC/SM",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "mem %",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__registers_per_thread": "regs",
    "launch__grid_size": "grid",
}
TOP_STALLS = 3
CHILD_FLAG = "--child"
GEMM_KERNEL = "preshuffle_gemm_kernel"


def ncu_command(ncu: str, shapes: list) -> list:
    metrics = ",".join(list(METRICS) + [f"regex:{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')}"])
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page",
            "raw", "--print-units", "base", "--metrics", metrics,
            sys.executable, "-m", "tools.profile", CHILD_FLAG,
            *[",".join(map(str, shape)) for shape in shapes]]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_raw_csv(text: str) -> list:
    """ncu --csv --page raw output -> one dict per kernel: name, the METRICS values, stalls.

    Lines before the CSV header (the child's own output, ncu's ==PROF== notes) are skipped;
    the row after the header holds the units.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, data = rows[0], [row for row in rows[2:] if len(row) == len(rows[0])]
    kernels = []
    for row in data:
        record = dict(zip(header, row))
        stalls = {name[len(STALL_PREFIX):-len(STALL_SUFFIX)]: _number(value)
                  for name, value in record.items()
                  if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX) and value}
        values = {metric: _number(record[metric]) for metric in METRICS if record.get(metric)}
        if "gpu__time_duration.sum" in values:
            values["gpu__time_duration.sum"] /= 1000.0   # base unit ns -> µs
        kernels.append({"name": record.get("Kernel Name", "?"), "values": values,
                        "stalls": stalls})
    return kernels


def format_report(shapes: list, kernels: list) -> str:
    """One line per profiled kernel, in launch order, labelled with its shape: each call of
    the child starts with the GEMM kernel (a split-K reduce kernel may follow it)."""
    heading = f"{'shape':<16}{'kernel':<24}" + "".join(f"{title:>12}" for title in METRICS.values())
    lines, index = [heading], -1
    for kernel in kernels:
        index += kernel["name"].startswith(GEMM_KERNEL)
        label = "x".join(map(str, shapes[index])) if 0 <= index < len(shapes) else "?"
        cells = "".join(f"{kernel['values'].get(metric, float('nan')):>12.4g}"
                        for metric in METRICS)
        top = sorted(kernel["stalls"].items(), key=lambda item: -item[1])[:TOP_STALLS]
        stall_text = ", ".join(f"{name} {value:.2f}" for name, value in top)
        lines.append(f"{label:<16}{kernel['name'][:24]:<24}{cells}   stalls/issue: {stall_text}")
    return "\n".join(lines)


def run_child(shape_words: list) -> int:
    import torch
    from mxfp4_mm import reference
    from mxfp4_mm.submission import custom_kernel
    for word in shape_words:
        m, n, k = map(int, word.split(","))
        data = reference.generate_input(m, n, k, seed=1)
        custom_kernel(data)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        custom_kernel(data)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


def build_parser():
    from .cli import SHAPES_HELP, ArgumentParser, output_file
    parser = ArgumentParser("tools.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["benchmarks"], metavar="SHAPES",
                        help=f"{SHAPES_HELP}; default benchmarks")
    parser.add_argument("--ncu", default=None, help="ncu executable (default: from PATH)")
    parser.add_argument("--csv", default=None, metavar="FILE", type=output_file, help="also write ncu's raw CSV here")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [CHILD_FLAG]:
        return run_child(argv[1:])
    from .cli import UsageError, parse_plain_shapes
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        shapes = parse_plain_shapes(args.shapes)
    except UsageError as error:
        parser.error(str(error))
    ncu = args.ncu or shutil.which("ncu")
    if ncu is None:
        print("tools.profile: needs Nsight Compute (ncu); pass --ncu PATH", file=sys.stderr)
        return 2
    print(f"profiling {len(shapes)} shapes under ncu (one warm call, then one measured)",
          flush=True)
    result = subprocess.run(ncu_command(ncu, shapes), capture_output=True, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if args.csv:
        with open(args.csv, "w") as out:
            out.write(result.stdout)
    kernels = parse_raw_csv(result.stdout)
    if result.returncode != 0 or not kernels:
        print(f"tools.profile: ncu exited {result.returncode} with no kernel rows:\n{result.stderr[-2000:]}"
              f"\n{result.stdout[-2000:]}", file=sys.stderr)
        return 2
    print(format_report(shapes, kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
