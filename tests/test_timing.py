"""launchers.timing's decisions, with fake CUDA events and synchronization (no GPU).

Decisions of launchers.timing:
- the cache-clearing buffer: clear_bytes / 4 float32 values (at least one), on the device;
- one timed call: synchronize, overwrite the buffer, record the start, call, record the end,
  synchronize, in that order; the time is the events' milliseconds in µs;
- time: `calls` calls of one function; time_interleaved: the functions taken in turn, one
  list per function.
"""

import torch

from mxfp4_mm.launchers import timing


class Clock:
    def __init__(self):
        self.log = []


def fake_cuda(monkeypatch):
    clock = Clock()

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self):
            clock.log.append("record")
            self.at = len(clock.log)

        def elapsed_time(self, end):
            return (end.at - self.at) / 4.0        # ms: a quarter per step between them

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: clock.log.append("sync"))
    return clock


def test_the_clear_buffer_size(monkeypatch):
    fake_cuda(monkeypatch)
    loop = timing.RunnerLoop(4096, device="cpu")
    assert loop.clear.dtype == torch.float32 and loop.clear.numel() == 1024
    assert timing.RunnerLoop(3, device="cpu").clear.numel() == 1
    assert timing.DEFAULT_CLEAR_BYTES == 1 << 30


def test_the_clear_buffer_is_on_the_loops_device_the_gpu_by_default(monkeypatch):
    fake_cuda(monkeypatch)
    assert timing.RunnerLoop(64, device="meta").clear.device.type == "meta"
    devices = []
    empty = torch.empty

    def recording_empty(*args, device=None, **kwargs):
        devices.append(device)
        return empty(*args, **kwargs)
    monkeypatch.setattr(timing.torch, "empty", recording_empty)
    timing.RunnerLoop(64)
    assert devices == ["cuda"]


def test_one_timed_call_in_order_and_in_microseconds(monkeypatch):
    clock = fake_cuda(monkeypatch)
    loop = timing.RunnerLoop(64, device="cpu")
    loop.clear.zero_()
    cleared = []

    def fn():
        cleared.append(bool(loop.clear.ne(0).any()))
        clock.log.append("fn")

    assert loop.time(fn, 2) == [500.0, 500.0]     # record, fn, record: 2 steps = 0.5 ms
    assert clock.log == ["sync", "record", "fn", "record", "sync"] * 2
    assert cleared == [True, True]


def test_interleaved_calls_take_the_functions_in_turn(monkeypatch):
    clock = fake_cuda(monkeypatch)
    loop = timing.RunnerLoop(64, device="cpu")
    slow = lambda: clock.log.extend(["fn a", "pad"])      # noqa: E731
    fast = lambda: clock.log.append("fn b")               # noqa: E731
    times = loop.time_interleaved([slow, fast], 3)
    assert times == [[750.0] * 3, [500.0] * 3]
    called = [entry for entry in clock.log if entry.startswith("fn")]
    assert called == ["fn a", "fn b"] * 3
