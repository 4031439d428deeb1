"""Shared test setup: the interpreter on machines without a GPU, the device to test on, the
tests that need the interpreter (in a child process on a GPU machine), the runner's Triton for
the tests that compile with it, the Hypothesis profile, and (interpreter only) a guard that
fails any access outside its tensor."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import settings

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

# The first Triton release whose interpreter runs tl.dot_scaled (README's test requirements).
INTERPRETER_TRITON = (3, 9)
CHILD_TIMEOUT_S = 1800


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "interpreter: runs in Triton's interpreter; on a GPU machine in a child "
                   "process with TRITON_INTERPRET=1, skipped where its Triton cannot interpret "
                   "the kernels")
    config.addinivalue_line(
        "markers", "own_device: the code under test picks the device itself (the GPU where "
                   "there is one), so the test runs its kernels wherever they are")


def _interpreter_triton_missing() -> str:
    """Why this Triton cannot interpret the project's kernels, or ""."""
    import triton      # here: Triton reads TRITON_INTERPRET when imported, set above
    release = tuple(int(part) for part in triton.__version__.split(".")[:2])
    if release >= INTERPRETER_TRITON:
        return ""
    return (f"needs Triton >= {'.'.join(map(str, INTERPRETER_TRITON))}'s interpreter "
            f"(tl.dot_scaled); this is Triton {triton.__version__}")


def pytest_runtest_setup(item):
    if item.get_closest_marker("interpreter") and not interpreting():
        missing = _interpreter_triton_missing()
        if missing:
            pytest.skip(missing)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked `interpreter`, outside the interpreter: the same test in a child pytest
    with TRITON_INTERPRET=1; its failure or skip is this test's."""
    if pyfuncitem.get_closest_marker("interpreter") is None or interpreting():
        return None
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
         pyfuncitem.nodeid], cwd=pyfuncitem.config.rootpath,
        env=dict(os.environ, TRITON_INTERPRET="1"), capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S)
    output = done.stdout + done.stderr
    if done.returncode:
        pytest.fail(f"in the interpreter (a child pytest):\n{output[-6000:]}", pytrace=False)
    skipped = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    if skipped:
        pytest.skip(f"in the interpreter: {skipped[0].partition(': ')[2]}")
    return True


@pytest.fixture(scope="session")
def runners_triton():
    """The PYTHONPATH entries that give a child process the runner's Triton (none where it is
    the installed one, else its side install, made on first use); the test skips where that
    install fails (no network)."""
    import triton
    from mxfp4_mm.tools.gfx950.cross_compile import RUNNER_TRITON, SideInstallError, triton_paths
    try:
        return triton_paths(RUNNER_TRITON)
    except SideInstallError as error:
        pytest.skip(f"needs Triton {RUNNER_TRITON} (installed: {triton.__version__}): {error}")

# The same examples on every run and every machine: CI failures reproduce.
settings.register_profile("reproducible", derandomize=True, print_blob=True)
settings.load_profile("reproducible")


@pytest.fixture
def fresh_lookup(monkeypatch):
    """The config lookup with no file entries and no untuned shape seen."""
    from mxfp4_mm.launchers import configs
    monkeypatch.setattr(configs, "FILE_SHAPES", {})
    monkeypatch.setattr(configs, "FILE_BUCKETS", {})
    monkeypatch.setattr(configs, "_untuned", {})


@pytest.fixture
def device():
    """Where the kernels run: the GPU when one is present and not interpreting, else the CPU."""
    if torch.cuda.is_available() and not interpreting():
        return "cuda"
    return "cpu"


class OutOfBoundsAccess(AssertionError):
    """A kernel load or store (mask true) reached bytes outside the tensor it addresses."""


class BoundsGuard:
    """Checks every interpreted load, store and atomic against the launch's tensor arguments.

    At each launch the byte span [first, last element + itemsize) of every tensor argument is
    recorded (from the host copies the interpreter hands the kernel). Every access must then
    lie, all its mask-true elements together, inside the span of one argument: a load that
    starts in A and runs past A's end fails even if the bytes past it belong to another tensor.
    Violations raise OutOfBoundsAccess in the kernel and are also kept in `violations`, so that
    code which catches the launch's error cannot hide them (the fixture fails the test).
    """

    def __init__(self, interpreter):
        self._interpreter = interpreter
        self.kernel = None
        self.spans = []          # (argument name, first byte, end byte)
        self.violations = []

    def record_launch(self, kernel_name, arg_names, args_hst, kwargs_hst):
        self.kernel = kernel_name
        named = list(zip(arg_names, args_hst)) + list(kwargs_hst.items())
        self.spans = [span for name, arg in named for span in self._spans(name, arg)]

    def _spans(self, name, arg):
        if isinstance(arg, tuple):
            return [span for i, item in enumerate(arg) for span in self._spans(f"{name}[{i}]", item)]
        arg = self._interpreter._unwrap_tensor(arg)
        if not isinstance(arg, torch.Tensor):
            return []
        if arg.numel() == 0:
            return [(name, arg.data_ptr(), arg.data_ptr())]
        last = sum((size - 1) * stride for size, stride in zip(arg.shape, arg.stride()))
        return [(name, arg.data_ptr(), arg.data_ptr() + (last + 1) * arg.element_size())]

    def check(self, what, ptrs, mask):
        addresses = ptrs.data
        if mask is None:
            active = addresses
        else:
            active = addresses[np.broadcast_to(mask.data, addresses.shape)]
        if active.size == 0:
            return
        first = int(active.min())
        end = int(active.max()) + self._interpreter._get_np_dtype(ptrs.get_element_ty()).itemsize
        if any(start <= first and end <= stop for _, start, stop in self.spans):
            return
        self._fail(what, first, end)

    def _fail(self, what, first, end):
        program = tuple(self._interpreter.interpreter_builder.grid_idx)
        home = [(name, start, stop) for name, start, stop in self.spans if start <= first < stop]
        if home:
            name, start, stop = home[0]
            where = (f"starts at byte {first - start} of {name} ({stop - start} bytes) and"
                     f" ends {end - stop} bytes past it")
        else:
            where = f"starts at {first:#x}, in no tensor argument"
        message = f"{self.kernel} program {program}: a {what} (mask true) {where}"
        self.violations.append(message)
        raise OutOfBoundsAccess(message)


def states_its_device(item) -> bool:
    """The rule that keeps a GPU run from failing where the CPU run passed: a test that runs a
    kernel takes the `device` fixture (its tensors then live where compiled kernels can read
    them), carries the `interpreter` marker (it then runs in a child interpreter) or the
    `own_device` marker (the code under test picks the device itself)."""
    return "device" in item.fixturenames or any(
        item.get_closest_marker(name) is not None for name in ("interpreter", "own_device"))


@pytest.fixture(autouse=True)
def bounds_guard(monkeypatch, request):
    """Interpreter only: every kernel access must stay inside its tensor (BoundsGuard), and a
    test that launches a kernel states its device (states_its_device)."""
    if not interpreting():
        yield None
        return
    from triton.runtime import interpreter

    guard = BoundsGuard(interpreter)
    builder = interpreter.InterpreterBuilder
    init_args = interpreter.GridExecutor._init_args_hst

    def init_args_and_record(executor, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(executor, args_dev, kwargs)
        guard.record_launch(executor.fn.__name__, executor.arg_names, args_hst, kwargs_hst)
        return args_hst, kwargs_hst

    def guarded(method, what, ptr_index, mask_index):
        original = getattr(builder, method)

        def wrapper(self, *args):
            guard.check(what, args[ptr_index], None if mask_index is None else args[mask_index])
            return original(self, *args)
        monkeypatch.setattr(builder, method, wrapper)

    monkeypatch.setattr(interpreter.GridExecutor, "_init_args_hst", init_args_and_record)
    # create_load / create_store / atomic load and store all go through the masked versions.
    guarded("create_masked_load", "load", 0, 1)
    guarded("create_masked_store", "store", 0, 2)
    guarded("create_atomic_rmw", "atomic", 1, 3)
    guarded("create_atomic_cas", "atomic_cas", 0, None)
    yield guard
    assert not guard.violations, guard.violations[0]
    assert guard.kernel is None or states_its_device(request.node), (
        f"{request.node.name} launches {guard.kernel} but neither takes the `device` fixture "
        f"nor carries the `interpreter` or `own_device` marker: on a GPU machine its CPU "
        f"tensors would reach a compiled kernel")


class FlushRecorder:
    """A stdout that records each write and each flush, in order: what a pipe would see, and
    when. Installed in the test's body (pytest's capture takes sys.stdout back after setup)."""

    def __init__(self):
        self.events = []

    def write(self, text):
        self.events.append(("write", text))

    def flush(self):
        self.events.append(("flush", None))

    def flushed_lines(self) -> list:
        """The lines flushed as soon as they were complete, before the next line began."""
        lines, pending = [], ""
        for kind, text in self.events:
            if kind == "flush":
                lines += [line for line in pending.split("\n") if line]
                pending = ""
            elif pending.endswith("\n"):      # a complete line left unflushed
                pending = text
            else:
                pending += text
        return lines

