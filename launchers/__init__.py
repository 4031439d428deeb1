"""Config lookup and launcher cache: (A, B_shuffle, B_scale_sh) -> the proven launcher to run.

`launcher_for(a, n)` returns the launcher for the current target and this problem, built and
proven on first use (launchers.ladder: the table's config with the best quantizer whose
proof passes, or the next rung down) and kept in a bounded LRU cache keyed by (target,
device, M, N, K, A strides). `prewarm(shapes)` builds and proves the launchers of the given
shapes, so that the first timed call compiles and loads nothing; `tune_launchers(shapes)`
then lets the device choose among proven candidates by timing them (launchers.tuner).

The build runs in a thread of its own, which the caller's thread waits for: there it takes
that thread's default queue and the caching allocator's ordinary pool, whatever the caller's
thread is doing. So a shape's first call may come inside torch.compile(mode="reduce-overhead")
(its warm-up routes the calling thread's allocations to a CUDA graph's pool; its capture uses
the "thread_local" error mode) or inside a torch.cuda.graph capture in "thread_local" or
"relaxed" error mode. In a capture in "global" mode (torch.cuda.graph's default) CUDA refuses
the build thread's calls too; a first call there raises one line naming the shape.

Configs for shapes beyond the built-in table: `load_configs(path)` reads a tuned-shapes file
(launchers.tuned_shapes; MXFP4_MM_CONFIGS=path loads one at import), and
`untuned_shapes()` lists the (N, K, M bucket) that took the heuristic config so far, each
named once on stderr as it first did (launchers.configs.note_untuned).

`mxfp4_gemm(a, b_shuffle, b_scale_sh)` is the one path from the three tensors to a new output
(validation, the empty-M case, the cached launcher): submission.custom_kernel calls it, and so
does the torch op `torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh) -> c`, registered here with
a fake implementation (shapes only), so that torch.compile traces it and CUDA/HIP graphs
capture it. The op is defined through torch.library.Library (schema, one implementation for
every device, an autograd kernel whose output's backward raises, the fake), whose dispatch
costs less than half of torch.library.custom_op's.

A call's checks (launchers.inputs.gemm_problem) read nothing but each tensor's shape, strides,
dtype and device, and so does the choice of launcher. A call whose signature (those twelve
values) has passed them before is neither checked nor looked up again: one dictionary lookup
gives its launcher's key; a signature seen for the first time, or anything that is not three
tensors, takes the full checks, and so gets their one-line error. What the signature cannot
hold, the tensors' addresses, the launcher checks on every call (16-byte alignment for its
direct launches).
"""

import contextlib
import functools
import os
import threading
from collections import OrderedDict

import torch
import triton

from . import tuner
from .configs import untuned_shapes  # noqa: F401
from .task_shapes import BENCHMARK_SHAPES, TASK_SHAPES  # noqa: F401
from .inputs import gemm_problem
from .ladder import proven_launcher
from .tuned_shapes import load_configs, load_configs_from_environment  # noqa: F401

LAUNCHER_CACHE_CAPACITY = 64
_launchers = OrderedDict()


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=16)
def _target_of_device(device_index: int) -> tuple:
    target = triton.runtime.driver.active.get_current_target()
    if target.backend == "cuda":
        return "cuda", f"sm_{target.arch}"
    return target.backend, str(target.arch).split(":")[0]


def current_target(device) -> tuple:
    """(backend, arch) for tensors on `device`: ("hip", "gfx950"), ("cuda", "sm_90"), ..."""
    if interpreting():
        return "interpreter", "interpreter"
    return _target_of_device(torch.device(device).index or 0)


def _built_in_own_thread(build, device):
    """build() run in a new thread on `device`; its result, or its exception raised here."""
    outcome = {}

    def run():
        try:
            with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
                outcome["launcher"] = build()
        except BaseException as error:   # handed to the caller's thread, raised there
            outcome["error"] = error

    thread = threading.Thread(target=run, name="mxfp4-mm launcher build")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["launcher"]


# In CUDA's and HIP's messages for what a graph capture forbids ("... when ... is capturing",
# "... during capture").
CAPTURE_IN_ERROR = "captur"


def _proven_launcher(arch, backend, device, m, n, k, a_strides):
    try:
        return _built_in_own_thread(
            lambda: proven_launcher(arch, backend, m, n, k, a_strides, device), device)
    except RuntimeError as error:
        if CAPTURE_IN_ERROR not in str(error):
            raise
    raise RuntimeError(f"mxfp4_mm.gemm: the first call of shape {m}x{n}x{k} is inside a CUDA "
                       f"graph capture whose error mode forbids building and proving its "
                       f"launcher; call the shape once before capturing, or capture with "
                       f"capture_error_mode=\"thread_local\"")


def _launcher_key(device, m: int, n: int, k: int, a_strides: tuple) -> tuple:
    """The cache key of the launcher of this problem, the launcher built and proven first where
    it is not cached; the key becomes the most recently used."""
    backend, arch = current_target(device)
    key = (arch, str(device), m, n, k, a_strides)
    if key in _launchers:
        _launchers.move_to_end(key)
        return key
    _launchers[key] = _proven_launcher(arch, backend, torch.device(device), m, n, k, a_strides)
    if len(_launchers) > LAUNCHER_CACHE_CAPACITY:
        evicted, _ = _launchers.popitem(last=False)
        for signature in [s for s, held in list(_checked_signatures.items()) if held == evicted]:
            del _checked_signatures[signature]
    return key


def _launcher(device, m: int, n: int, k: int, a_strides: tuple):
    return _launchers[_launcher_key(device, m, n, k, a_strides)]


def launcher_for(a, n: int):
    m, k = a.shape
    return _launcher(a.device, m, n, k, a.stride())


# call signature (call_signature) -> the key of its launcher in _launchers, for the signatures
# that passed gemm_problem; entries go with their launcher's
_checked_signatures = {}


def call_signature(a, b_shuffle, b_scale_sh) -> tuple:
    """All that gemm_problem's checks and the launcher's choice read of the three tensors: each
    one's shape, strides, dtype and device (AttributeError for what is no tensor)."""
    return (a.shape, a.stride(), a.dtype, a.device,
            b_shuffle.shape, b_shuffle.stride(), b_shuffle.dtype, b_shuffle.device,
            b_scale_sh.shape, b_scale_sh.stride(), b_scale_sh.dtype, b_scale_sh.device)


def _empty_output(n: int):
    return lambda a, b_shuffle, b_scale_sh: torch.empty((0, n), dtype=torch.bfloat16,
                                                          device=a.device)


def _checked_launcher(a, b_shuffle, b_scale_sh):
    """The launcher of a call not seen before, after gemm_problem's full checks."""
    m, n, k = gemm_problem(a, b_shuffle, b_scale_sh)
    if m == 0:
        return _empty_output(n)
    key = _launcher_key(a.device, m, n, k, a.stride())
    _checked_signatures[call_signature(a, b_shuffle, b_scale_sh)] = key
    return _launchers[key]


def mxfp4_gemm(a: torch.Tensor, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor) -> torch.Tensor:
    """A bf16 [M, K], B_shuffle fp4x2 [N, K/2], B_scale_sh e8m0 [pad(N,256), pad(K/32,8)] ->
    a new bf16 [M, N] = quantize(A) @ dequant(B)^T."""
    try:
        key = _checked_signatures[call_signature(a, b_shuffle, b_scale_sh)]
        _launchers.move_to_end(key)
        launcher = _launchers[key]
    except (AttributeError, KeyError):  # no tensor, a new signature, or its launcher evicted
        launcher = _checked_launcher(a, b_shuffle, b_scale_sh)
    return launcher(a, b_shuffle, b_scale_sh)


OP_NAMESPACE, OP_NAME = "mxfp4_mm", "gemm"


_library = None     # the torch.library.Library that holds the op, kept for the process


def _output_like(a, b_shuffle, b_scale_sh):
    return a.new_empty((a.shape[0], b_shuffle.shape[0]), dtype=torch.bfloat16)


class _WithoutBackward(torch.autograd.Function):
    """The op's output where A requires grad: it has a grad_fn, whose backward raises (the
    GEMM has none)."""

    @staticmethod
    def forward(ctx, keyset, a, b_shuffle, b_scale_sh):
        return _op.redispatch(keyset & _AFTER_AUTOGRAD, a, b_shuffle, b_scale_sh)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(f"{OP_NAMESPACE}::{OP_NAME}: no autograd formula was registered "
                           f"(the MXFP4 GEMM has no backward)")


def _autograd(keyset, a, b_shuffle, b_scale_sh):
    """The op's autograd kernel: the GEMM, with a grad_fn that refuses backward where A needs
    one (B_shuffle and B_scale_sh are integer codes, which never require grad). Where nothing
    but a device's own kernel lies below (no fake or subclass tensor, no dispatch mode), it
    calls mxfp4_gemm itself: the redispatch costs about 2 µs."""
    if a.requires_grad and torch.is_grad_enabled():
        return _WithoutBackward.apply(keyset, a, b_shuffle, b_scale_sh)
    device_kernel_next = _device_kernel_next.get(keyset.raw_repr())
    if device_kernel_next is None:
        below = (keyset & _AFTER_AUTOGRAD).remove(_IN_PLACE_OR_VIEW)
        device_kernel_next = below.highestPriorityTypeId() in _DEVICE_KEYS
        _device_kernel_next[keyset.raw_repr()] = device_kernel_next
    if device_kernel_next:
        return mxfp4_gemm(a, b_shuffle, b_scale_sh)
    return _op.redispatch(keyset & _AFTER_AUTOGRAD, a, b_shuffle, b_scale_sh)


def _register_op():
    """torch.ops.mxfp4_mm.gemm, once per process (a second import of this code keeps it)."""
    global _library
    if hasattr(getattr(torch.ops, OP_NAMESPACE), OP_NAME):
        return
    _library = torch.library.Library(OP_NAMESPACE, "DEF")
    _library.define(f"{OP_NAME}(Tensor a, Tensor b_shuffle, Tensor b_scale_sh) -> Tensor",
                    tags=(torch.Tag.pt2_compliant_tag,))
    _library.impl(OP_NAME, mxfp4_gemm, "CompositeExplicitAutograd")
    _library.impl(OP_NAME, _autograd, "Autograd", with_keyset=True)
    torch.library.register_fake(f"{OP_NAMESPACE}::{OP_NAME}", _output_like, lib=_library)


_register_op()
_op = getattr(getattr(torch.ops, OP_NAMESPACE), OP_NAME).default
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_IN_PLACE_OR_VIEW = torch._C.DispatchKey.ADInplaceOrView     # a pass-through for this op
_DEVICE_KEYS = (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA)    # CUDA: HIP's too
# a dispatch key set seen by _autograd (its raw bits) -> whether a device's own kernel comes
# next below autograd; a few sets in a process
_device_kernel_next = {}


def cached_launcher_count() -> int:
    return len(_launchers)


def _gpu(device) -> torch.device:
    device = torch.device(device)
    return torch.device(device.type, torch.cuda.current_device()) if device.index is None else device


def prewarm(shapes=TASK_SHAPES, device="cuda"):
    """Build and prove (compile, load, run) every launcher that `shapes` use."""
    device = _gpu(device)
    for m, n, k in shapes:
        _launcher(device, m, n, k, (k, 1))
    torch.cuda.synchronize()


def tune_launchers(shapes=BENCHMARK_SHAPES, device="cuda"):
    """Time the proven candidates of `shapes` and keep the fastest (launchers.tuner)."""
    device = _gpu(device)
    backend, arch = current_target(device)
    winners = tuner.tune(shapes, lambda shape: _launcher(device, *shape, (shape[2], 1)), device,
                         arch, backend)
    for (m, n, k), launcher in winners.items():
        _launchers[(arch, str(device), m, n, k, (k, 1))] = launcher


load_configs_from_environment()
