"""Bypass launches: call a compiled Triton kernel's own launch, skipping the JIT dispatch.

`KernelLaunch(kernel, grid, options, sample_args)` compiles `kernel` once for the sample
arguments (`JITFunction.warmup`) and keeps the closure `compiled[grid]`, the launch that
`CompiledKernel.__getitem__` returns in Triton 3.3 through 3.9: it takes every kernel
argument in signature order, constexprs included, and launches with no binding, no
specialization and no cache lookup.

The queue: that closure, called without its optional queue argument, asks Triton's driver
for the current device and that device's current queue at every call, exactly as the JIT
launch `kernel[grid](...)` does. So the work goes where the caller's torch context puts it
(the runner's default queue, or any queue a user made current), and none of our code names
or handles a queue.

The compiled kernel is specialized on its sample arguments: integers equal to 1 or divisible
by 16 and 16-byte-aligned pointers. Callers keep one KernelLaunch per set of integer
arguments and use `aligned(...)` to send a call with a misaligned tensor to `standard`.

Where the direct launch is unavailable (the interpreter, or a Triton whose internals differ)
every call goes through the standard `kernel[grid](...)` launch, after a one-line notice
(none for the interpreter or allow_direct=False). A compiler error is not caught here: it
reaches the caller (launchers.ladder steps down on it). Nor is a kernel that does not fit the
device: before its launch is taken, the compiled kernel's shared memory is checked against the
device's limit (launchers.fit.DoesNotFit, one line), and Triton's own OutOfResources passes
through; `registers` and `spilled_registers` are then the compiled kernel's registers and
register spills a thread (None without a direct launch).
"""

import sys

import triton
from triton.runtime.autotuner import OutOfResources

from .fit import check_fits
from .targets import backend_facts

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover - every supported Triton has it
    InterpretedFunction = ()

_ALIGNMENT = 16
_notices_given = set()


def notice_once(message: str) -> None:
    """Print `message` on stderr the first time it is seen (a set of at most a few strings)."""
    if message not in _notices_given:
        _notices_given.add(message)
        print(message, file=sys.stderr)


def backend_options(backend: str, *, num_warps, num_stages, waves_per_eu, matrix_instr_nonkdim):
    """Compile options for `backend`; the AMD-only ones raise on NVIDIA, so they go only where
    the backend takes them (Backend.hip_options)."""
    options = dict(num_warps=num_warps, num_stages=num_stages)
    if backend_facts(backend).hip_options:
        options.update(waves_per_eu=waves_per_eu, matrix_instr_nonkdim=matrix_instr_nonkdim)
    return options


def aligned(*tensors) -> bool:
    address_bits = 0
    for tensor in tensors:
        address_bits |= tensor.data_ptr()
    return address_bits % _ALIGNMENT == 0


def _kernel_name(kernel) -> str:
    return getattr(getattr(kernel, "fn", kernel), "__name__", str(kernel))


class KernelLaunch:
    """`kernel` at a fixed grid and options; `launch(*args)` with all arguments in order."""

    def __init__(self, kernel, grid, options, sample_args, allow_direct=True):
        self.kernel = kernel
        self.grid = grid
        self.options = options
        self.direct = self.registers = self.spilled_registers = None
        if isinstance(kernel, InterpretedFunction) or not allow_direct:
            return
        compiled = kernel.warmup(*sample_args, grid=grid, **options)
        check_fits(_kernel_name(kernel), compiled)
        try:
            self.direct = compiled[grid]
        except OutOfResources:
            raise
        except Exception as error:  # an internal-API mismatch means: use the JIT launch
            reason = f"{type(error).__name__}: {error}".splitlines()[0]
            notice_once(f"mxfp4-mm: standard Triton launch for {_kernel_name(kernel)} "
                        f"(direct launch unavailable: {reason})")
            return
        self.registers = getattr(compiled, "n_regs", None)
        self.spilled_registers = getattr(compiled, "n_spills", None)

    @property
    def is_direct(self) -> bool:
        return self.direct is not None

    def __call__(self, *args):
        if self.direct is not None:
            self.direct(*args)
        else:
            self.standard(*args)

    def standard(self, *args):
        self.kernel[self.grid](*args, **self.options)
