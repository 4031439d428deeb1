"""launchers.bypass's decisions, with fake kernels that record what they are built and called
with (tests/test_launchers.py has the options per backend and the interpreter's launches).

Decisions of launchers.bypass:
- aligned: every tensor's address a multiple of 16 bytes (8 is not enough);
- KernelLaunch builds a direct launch unless the kernel is interpreted or allow_direct is
  False; it compiles once with the sample arguments, the grid and the options, and takes the
  compiled kernel's launch for that grid;
- a compiled kernel without that launch gives a standard launch and one notice naming the
  kernel and the first line of the reason; a compiler error is not caught;
- a call goes to the direct launch when there is one, else to kernel[grid](*args, **options).
"""

import pytest
import torch

from launchers import bypass


class Recorded:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __call__(self, *args, **kwargs):
        self.log.append((self.name, args, kwargs))


class FakeCompiled:
    def __init__(self, log, fail=None):
        self.log, self.fail = log, fail

    def __getitem__(self, grid):
        if self.fail:
            raise self.fail
        self.log.append(("direct for", grid))
        return Recorded(self.log, "direct")


class FakeKernel:
    """Records warmup (the compile) and the standard launch kernel[grid](...)."""

    def __init__(self, fail=None, name="fake_kernel"):
        self.log, self.fail = [], fail
        self.fn = type(name, (), {})

    def warmup(self, *args, grid, **options):
        self.log.append(("warmup", args, grid, options))
        return FakeCompiled(self.log, self.fail)

    def __getitem__(self, grid):
        self.log.append(("standard for", grid))
        return Recorded(self.log, "standard")


GRID, OPTIONS, SAMPLE = (3, 1, 1), {"num_warps": 4}, ("sample", 1)


def test_misaligned_by_8_bytes_is_not_aligned():
    storage = torch.zeros(128, dtype=torch.uint8)
    assert bypass.aligned(storage[16:], storage[48:])
    for offset in (1, 2, 4, 8):
        assert not bypass.aligned(storage, storage[offset:])
        assert not bypass.aligned(storage[offset:], storage)
    assert bypass.aligned()


def test_the_direct_launch_compiles_once_and_launches_with_the_arguments_as_given():
    kernel = FakeKernel()
    launch = bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
    assert launch.is_direct
    assert kernel.log == [("warmup", SAMPLE, GRID, OPTIONS), ("direct for", GRID)]
    launch(1, 2, 3)
    launch(4)
    assert kernel.log[2:] == [("direct", (1, 2, 3), {}), ("direct", (4,), {})]


def test_the_standard_launch_passes_grid_and_options():
    kernel = FakeKernel()
    launch = bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
    launch.standard(7, 8)
    assert kernel.log[2:] == [("standard for", GRID), ("standard", (7, 8), OPTIONS)]


def test_allow_direct_false_neither_compiles_nor_launches_directly():
    kernel = FakeKernel()
    launch = bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE, allow_direct=False)
    assert not launch.is_direct and kernel.log == []
    launch(5)
    assert kernel.log == [("standard for", GRID), ("standard", (5,), OPTIONS)]


def test_a_missing_direct_launch_falls_back_with_one_notice(capsys):
    kernel = FakeKernel(fail=AttributeError("no launcher here\nsecond line"), name="kernel_x1")
    for _ in range(2):
        launch = bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
        assert not launch.is_direct
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "kernel_x1" in err and "AttributeError: no launcher here" in err
    assert "second line" not in err
    launch(6)
    assert kernel.log[-1] == ("standard", (6,), OPTIONS)


def test_a_compiler_error_reaches_the_caller():
    class Broken(FakeKernel):
        def warmup(self, *args, grid, **options):
            raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError, match="compile failed"):
        bypass.KernelLaunch(Broken(), GRID, OPTIONS, SAMPLE)


def test_an_interpreted_kernel_is_never_compiled(monkeypatch):
    monkeypatch.setattr(bypass, "InterpretedFunction", FakeKernel)
    kernel = FakeKernel()
    launch = bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
    assert not launch.is_direct and kernel.log == []


def test_the_notice_names_a_kernel_without_fn():
    assert bypass._kernel_name(FakeKernel(name="k2")) == "k2"
    assert bypass._kernel_name(len) == "len"
