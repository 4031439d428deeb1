"""The runner's timed call, for timing on a GPU (the import-time tuner, tools.bench, tools.tune).

`RunnerLoop(clear_bytes)` keeps one cache-clear buffer; `loop.time(fn, calls)` runs, per call:
synchronize; overwrite the buffer (a kernel that evicts the caches and keeps the GPU busy, so
host time inside `fn` is hidden behind it, as behind the runner's 67 GB randn); record the
start event; `fn()`; record the end event; synchronize. It returns the event times in µs.
`loop.time_interleaved(fns, calls)` does the same round-robin over several functions, so that
a drift of the machine falls on all of them alike.
"""

import torch

DEFAULT_CLEAR_BYTES = 1 << 30   # 4x the MI355X's 256 MB Infinity Cache, 20x the H200's L2


class RunnerLoop:
    def __init__(self, clear_bytes: int = DEFAULT_CLEAR_BYTES, device="cuda"):
        self.clear = torch.empty(max(1, clear_bytes // 4), dtype=torch.float32, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _one(self, fn) -> float:
        torch.cuda.synchronize()
        self.clear.normal_()
        self.start.record()
        fn()
        self.end.record()
        torch.cuda.synchronize()
        return self.start.elapsed_time(self.end) * 1000.0

    def time(self, fn, calls: int) -> list:
        return [self._one(fn) for _ in range(calls)]

    def time_interleaved(self, fns, calls: int) -> list:
        """[[µs per call] per function], the functions' calls taken in turn."""
        times = [[] for _ in fns]
        for _ in range(calls):
            for fn, samples in zip(fns, times):
                samples.append(self._one(fn))
        return times
