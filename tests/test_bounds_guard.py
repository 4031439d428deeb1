"""The interpreter's bounds guard (tests/conftest.py) on tiny kernels: every access that leaves
its tensor is caught, and accesses that stay inside, or are masked off, are not; and a test
that launches a kernel without stating its device (the device fixture, or the interpreter or
own_device marker) is failed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

BLOCK = 64


@triton.jit
def _copy(src_ptr, dst_ptr, start, limit, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < limit
    tl.store(dst_ptr + offsets, tl.load(src_ptr + start + offsets, mask=mask), mask=mask)


@triton.jit
def _count(counters_ptr, limit, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.atomic_add(counters_ptr + offsets, 1, mask=offsets < limit)


pytestmark = pytest.mark.interpreter


@pytest.fixture
def guard(bounds_guard):
    if bounds_guard is None:
        pytest.skip("the bounds guard runs in the interpreter only")
    yield bounds_guard
    bounds_guard.violations.clear()     # the violations these tests provoke on purpose


def expect_violation(guard, match, launch):
    with pytest.raises(Exception, match=match) as error:
        launch()
    assert type(error.value.__cause__).__name__ == "OutOfBoundsAccess"
    assert len(guard.violations) == 1


def test_accesses_inside_the_tensors_pass(guard):
    src = torch.arange(BLOCK, dtype=torch.int16)
    dst = torch.zeros(BLOCK, dtype=torch.int16)
    _copy[(1,)](src, dst, 0, BLOCK, BLOCK=BLOCK)
    assert torch.equal(dst, src) and guard.violations == []


def test_masked_off_elements_past_the_end_pass(guard):
    src = torch.arange(BLOCK, dtype=torch.int16)
    dst = torch.zeros(BLOCK, dtype=torch.int16)
    _copy[(1,)](src, dst, 1, BLOCK - 1, BLOCK=BLOCK)
    assert torch.equal(dst[:-1], src[1:]) and guard.violations == []


def test_a_load_one_element_past_the_end_fails(guard):
    src, dst = torch.arange(BLOCK, dtype=torch.int16), torch.zeros(BLOCK, dtype=torch.int16)
    expect_violation(guard, r"_copy program \(0, 0, 0\): a load \(mask true\) starts at byte 2"
                            r" of src_ptr \(128 bytes\) and ends 2 bytes past it",
                     lambda: _copy[(1,)](src, dst, 1, BLOCK, BLOCK=BLOCK))


def test_a_load_before_the_start_fails(guard):
    src, dst = torch.arange(BLOCK, dtype=torch.int16), torch.zeros(BLOCK, dtype=torch.int16)
    expect_violation(guard, "a load .* in no tensor argument",
                     lambda: _copy[(1,)](src, dst, -1, BLOCK, BLOCK=BLOCK))


def test_a_load_running_into_the_next_argument_fails(guard):
    """The bytes past src are dst's: each access must stay inside one tensor."""
    buffer = torch.zeros(2 * BLOCK, dtype=torch.int16)
    src, dst = buffer[:BLOCK], buffer[BLOCK:]
    expect_violation(guard, "a load .* of src_ptr .* ends 2 bytes past it",
                     lambda: _copy[(1,)](src, dst, 1, BLOCK, BLOCK=BLOCK))


def test_a_store_past_the_end_fails(guard):
    src, dst = torch.arange(BLOCK, dtype=torch.int32), torch.zeros(BLOCK // 2, dtype=torch.int32)
    expect_violation(guard, "a store .* of dst_ptr \\(128 bytes\\) and ends 128 bytes past it",
                     lambda: _copy[(1,)](src, dst, 0, BLOCK, BLOCK=BLOCK))


def test_an_atomic_past_the_end_fails(guard):
    counters = torch.zeros(BLOCK - 1, dtype=torch.int32)
    _count[(1,)](counters, BLOCK - 1, BLOCK=BLOCK)
    assert int(counters.sum()) == BLOCK - 1 and guard.violations == []
    expect_violation(guard, "an? atomic .* ends 4 bytes past it",
                     lambda: _count[(1,)](counters, BLOCK, BLOCK=BLOCK))


def test_a_strided_view_spans_its_rows_only(guard):
    """A column slice: reads inside its rows pass, one element past its last row fails."""
    wide = torch.arange(4 * BLOCK, dtype=torch.int16).view(4, BLOCK)
    view = wide[:2, :BLOCK // 2]          # its span: row 0 and the first half of row 1
    dst = torch.zeros(2 * BLOCK, dtype=torch.int16)
    _copy[(1,)](view, dst, 0, BLOCK + BLOCK // 2, BLOCK=2 * BLOCK)
    expect_violation(guard, "of src_ptr \\(192 bytes\\) and ends 2 bytes past it",
                     lambda: _copy[(1,)](view, dst, 1, BLOCK + BLOCK // 2, BLOCK=2 * BLOCK))


def test_a_caught_violation_is_still_recorded(guard):
    """Code that catches the launch's error (a launcher's fallback) cannot hide it: the
    fixture fails the test at teardown from this record."""
    src, dst = torch.arange(BLOCK, dtype=torch.int16), torch.zeros(BLOCK, dtype=torch.int16)
    try:
        _copy[(1,)](src, dst, 1, BLOCK, BLOCK=BLOCK)
    except Exception:
        pass
    assert len(guard.violations) == 1 and "src_ptr" in guard.violations[0]


UNSTATED = """
import torch
from test_bounds_guard import _copy

def test_without_a_device(device_statement):
    src = torch.arange(8, dtype=torch.float32)
    _copy[(1,)](src, torch.empty_like(src), 0, 8, BLOCK=8)
"""


@pytest.mark.parametrize("statement, outcome", [
    ("", "1 error"),
    ("import pytest\npytestmark = pytest.mark.own_device\n", "1 passed"),
    ("import pytest\npytestmark = pytest.mark.interpreter\n", "1 passed"),
])
def test_a_test_that_launches_a_kernel_must_state_its_device(statement, outcome, tmp_path):
    """conftest's rule (states_its_device), run on a test module of its own in a child pytest
    with the project's conftest as a plugin: a launch without a stated device is an error."""
    (tmp_path / "test_unstated.py").write_text(
        statement + UNSTATED.replace("device_statement", "tmp_path"))
    tests = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_unstated.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests), str(tests.parent)])))
    assert outcome in done.stdout, done.stdout[-3000:]
    if outcome == "1 error":
        assert "neither takes the `device` fixture" in done.stdout
