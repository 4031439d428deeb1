"""launchers.bypass's decisions, with fake kernels that record what they are built and called
with (tests/test_launchers.py has the options per backend and the interpreter's launches).

Decisions of launchers.bypass:
- aligned: every tensor's address a multiple of 16 bytes (8 is not enough);
- KernelLaunch builds a direct launch unless the kernel is interpreted or allow_direct is
  False; it compiles once with the sample arguments, the grid and the options, and takes the
  compiled kernel's launch for that grid;
- a compiled kernel without that launch gives a standard launch and one notice naming the
  kernel and the first line of the reason; a compiler error is not caught;
- a compiled kernel asking for more shared memory than the device grants raises DoesNotFit in
  one line naming both, before its launch is taken; Triton's OutOfResources passes through;
  the direct launch records the compiled kernel's register spills;
- a call goes to the direct launch when there is one, else to kernel[grid](*args, **options).
"""

import types

import pytest
import torch
from triton.runtime.autotuner import OutOfResources

from mxfp4_mm.launchers import bypass, fit

DEVICE_SHARED_MEMORY = 232448


@pytest.fixture(autouse=True)
def device_limit(monkeypatch):
    monkeypatch.setattr(fit, "shared_memory_limit", lambda: DEVICE_SHARED_MEMORY)


class Recorded:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __call__(self, *args, **kwargs):
        self.log.append((self.name, args, kwargs))


class FakeCompiled:
    def __init__(self, log, fail=None, shared=0, n_spills=0):
        self.log, self.fail = log, fail
        self.metadata = types.SimpleNamespace(shared=shared)
        self.n_spills = n_spills

    def __getitem__(self, grid):
        if self.fail:
            raise self.fail
        self.log.append(("direct for", grid))
        return Recorded(self.log, "direct")


class FakeKernel:
    """Records warmup (the compile) and the standard launch kernel[grid](...)."""

    def __init__(self, fail=None, name="fake_kernel", **compiled):
        self.log, self.fail, self.compiled = [], fail, compiled
        self.fn = type(name, (), {})

    def warmup(self, *args, grid, **options):
        self.log.append(("warmup", args, grid, options))
        return FakeCompiled(self.log, self.fail, **self.compiled)

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


def test_a_kernel_over_the_devices_shared_memory_fails_in_one_line_before_its_launch():
    kernel = FakeKernel(name="big_kernel", shared=DEVICE_SHARED_MEMORY + 1)
    with pytest.raises(fit.DoesNotFit) as raised:
        bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
    assert str(raised.value) == ("big_kernel needs 232,449 bytes of shared memory (LDS on AMD) "
                                 "a program, over the 232,448 the device grants")
    assert kernel.log == [("warmup", SAMPLE, GRID, OPTIONS)]
    at_the_limit = bypass.KernelLaunch(FakeKernel(shared=DEVICE_SHARED_MEMORY), GRID, OPTIONS,
                                       SAMPLE)
    assert at_the_limit.is_direct


def test_out_of_resources_from_the_launch_is_not_taken_for_a_missing_launch(capsys):
    kernel = FakeKernel(fail=OutOfResources(300000, 232448, "shared memory"))
    with pytest.raises(OutOfResources):
        bypass.KernelLaunch(kernel, GRID, OPTIONS, SAMPLE)
    assert capsys.readouterr().err == ""


def test_the_direct_launch_records_the_spills():
    assert bypass.KernelLaunch(FakeKernel(n_spills=7), GRID, OPTIONS, SAMPLE).spilled_registers == 7
    assert bypass.KernelLaunch(FakeKernel(), GRID, OPTIONS, SAMPLE).spilled_registers == 0
    standard = bypass.KernelLaunch(FakeKernel(n_spills=7), GRID, OPTIONS, SAMPLE,
                                   allow_direct=False)
    assert standard.spilled_registers is None
