"""The runner's timed call (docs/runner.md), for tools that time on a GPU.

`RunnerLoop(clear_bytes)` keeps one cache-clear buffer; `loop.time(fn, calls)` runs, per call:
synchronize; overwrite the buffer (a kernel that evicts L2 and keeps the GPU busy, so host time
inside `fn` is hidden behind it, as behind the runner's 67 GB randn); record the start event;
`fn()`; record the end event; synchronize. It returns the event times in microseconds.
`host_time_us(fn, calls)` is the other figure: host time per call, without synchronization.
"""

import statistics
import sys
import time

import torch

DEFAULT_CLEAR_BYTES = 512 << 20


class RunnerLoop:
    def __init__(self, clear_bytes: int = DEFAULT_CLEAR_BYTES, device="cuda"):
        self.clear = torch.empty(max(1, clear_bytes // 4), dtype=torch.float32, device=device)

    def time(self, fn, calls: int) -> list:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(calls):
            torch.cuda.synchronize()
            self.clear.normal_()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        return times


def host_time_us(fn, calls: int) -> float:
    """Median host time of one `fn()` in µs, over `calls` calls issued back to back."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        begin = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - begin) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def summary(times: list) -> dict:
    return {"mean_us": statistics.fmean(times), "median_us": statistics.median(times),
            "min_us": min(times), "calls": len(times)}


if __name__ == "__main__":
    print(f"tools.timing is a library (the runner's timed loop, for tools.bench and tools.tune), "
          f"not a command; nothing to run.\n{__doc__}", file=sys.stderr)
    sys.exit(2)
