"""Timing helpers for the tools that time on a GPU (tools.bench, tools.tune), beside the
runner's timed loop, whose one home is launchers/timing.py (`RunnerLoop`, re-exported here with
its `DEFAULT_CLEAR_BYTES`; the import-time tuner uses it too).
`host_time_us(fn, calls)` is the other figure: host time per call, without synchronization.
"""

import statistics
import sys
import time

import torch

from mxfp4_mm.launchers.timing import DEFAULT_CLEAR_BYTES, RunnerLoop  # noqa: F401 (re-exported)


def host_time_us(fn, calls: int, synchronize=None) -> float:
    """Median host time of one `fn()` in µs, over `calls` calls issued back to back, with
    `synchronize()` (default torch.cuda.synchronize) before and after them."""
    synchronize = synchronize or torch.cuda.synchronize
    fn()
    synchronize()
    samples = []
    for _ in range(calls):
        begin = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - begin) * 1e6)
    synchronize()
    return statistics.median(samples)


def summary(times: list) -> dict:
    return {"mean_us": statistics.fmean(times), "median_us": statistics.median(times),
            "min_us": min(times), "calls": len(times)}


def time_variant(loop, fn, calls):
    """summary of `calls` timed calls of fn in `loop` (a RunnerLoop), after one untimed call."""
    fn()
    torch.cuda.synchronize()
    return summary(loop.time(fn, calls))


def timed_rows(specs, row_of, describe) -> list:
    """row_of(spec) for each spec, the device's cache emptied after each and its progress line
    printed as it comes: "[i/n] ", describe(row), then each failed variant's error (the row's
    "errors"); the rows."""
    rows = []
    for index, spec in enumerate(specs, 1):
        row = row_of(spec)
        torch.cuda.empty_cache()
        rows.append(row)
        errors = "".join(f"; {name} failed: {text}" for name, text in row["errors"].items())
        print(f"[{index}/{len(specs)}] {describe(row)}{errors}", flush=True)
    return rows


if __name__ == "__main__":
    print(f"tools.timing: a library (the runner's timed loop, for tools.bench and tools.tune), "
          f"not a command; nothing to run.\n{__doc__}", file=sys.stderr)
    sys.exit(2)
