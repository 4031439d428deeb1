"""Config lookup and launcher cache: (A, B_shuffle, B_scale_sh) -> the proven launcher to run.

`launcher_for(a, n)` returns the launcher for the current target and this problem, built and
proven on first use (launchers.ladder: the table's config with the best quantizer whose proof
passes, or the next rung down) and kept in a bounded LRU cache keyed by (target, device, M, N,
K, A strides, output dtype). `prewarm(shapes)` builds and proves the launchers of the given
shapes, so that the first timed call compiles and loads nothing; `tune_launchers(shapes)` then
lets the device choose among proven candidates by timing them (launchers.tuner).

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
does the torch op `torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh, out_dtype=None) -> c`.
out_dtype (launchers.inputs.output_dtype): None or torch.bfloat16, the bf16 C; torch.float32,
the GEMM's fp32 sums unrounded (what a tensor-parallel rank sums before rounding once:
launchers.tensor_parallel), by launchers built and proven for it. The op is registered here with
a fake implementation (shapes only), so that torch.compile traces it and CUDA/HIP graphs
capture it. `define_op` defines it, and the prepared path's torch.ops.mxfp4_mm.gemm_prepared
(launchers.prepared), through torch.library.Library (schema, one implementation for every
device, an autograd kernel whose output's backward raises, the fake), whose dispatch costs less
than half of torch.library.custom_op's.

A call's checks (launchers.inputs.gemm_problem) read nothing but each tensor's shape, strides,
dtype and device (and out_dtype), and so does the choice of launcher. A call whose signature
(those thirteen values) has passed them before is neither checked nor looked up again: one
dictionary lookup gives its launcher (launcher_of_signature); a signature seen for the first
time, or anything that is not three tensors, takes the full checks, and so gets their one-line
error. What the signature cannot hold, the tensors' addresses, the launcher checks on every
call (16-byte alignment for its direct launches). The prepared path keeps its launchers and
signatures in the same cache and table (cached_launcher, checked_signature), under keys of its
own.
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
from .inputs import gemm_problem, output_dtype
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


def cached_launcher(key, op: str, shape: tuple, device, build):
    """The launcher cached under `key`, made the most recently used; where there is none,
    build()'s (the launcher built and proven, in a thread of its own: _built_in_own_thread),
    the least recently used evicted past LAUNCHER_CACHE_CAPACITY with its signatures. A first
    call inside a graph capture that forbids the build raises one line naming `op` and
    `shape` (M, N, K)."""
    if key in _launchers:
        _launchers.move_to_end(key)
        return _launchers[key]
    try:
        launcher = _built_in_own_thread(build, torch.device(device))
    except RuntimeError as error:
        if CAPTURE_IN_ERROR not in str(error):
            raise
        raise RuntimeError(f"mxfp4_mm.{op}: the first call of shape {'x'.join(map(str, shape))} "
                           f"is inside a CUDA graph capture whose error mode forbids building "
                           f"and proving its launcher; call the shape once before capturing, or "
                           f"capture with capture_error_mode=\"thread_local\"") from None
    _launchers[key] = launcher
    if len(_launchers) > LAUNCHER_CACHE_CAPACITY:
        evicted, _ = _launchers.popitem(last=False)
        for signature in [s for s, held in list(_checked_signatures.items()) if held == evicted]:
            del _checked_signatures[signature]
    return launcher


def _gemm_key(arch: str, device, m: int, n: int, k: int, a_strides: tuple,
              out_dtype: torch.dtype) -> tuple:
    """The launcher cache's key of the GEMM's launcher of this problem."""
    return (arch, str(device), m, n, k, a_strides, out_dtype)


def _launcher_key(device, m: int, n: int, k: int, a_strides: tuple,
                  out_dtype: torch.dtype = torch.bfloat16) -> tuple:
    """The cache key of the GEMM's launcher of this problem, the launcher built and proven
    first where it is not cached (launchers.ladder); the key becomes the most recently used."""
    backend, arch = current_target(device)
    key = _gemm_key(arch, device, m, n, k, a_strides, out_dtype)
    cached_launcher(key, OP_NAME, (m, n, k), device, lambda: proven_launcher(
        arch, backend, m, n, k, a_strides, torch.device(device), out_dtype=out_dtype))
    return key


def _launcher(device, m: int, n: int, k: int, a_strides: tuple):
    return _launchers[_launcher_key(device, m, n, k, a_strides)]


def launcher_for(a, n: int):
    m, k = a.shape
    return _launcher(a.device, m, n, k, a.stride())


# call signature -> the key of its launcher in _launchers, for the signatures that passed
# their op's full checks (the GEMM's: call_signature; the prepared path's: launchers.prepared);
# entries go with their launcher's
_checked_signatures = {}


def call_signature(a, b_shuffle, b_scale_sh, out_dtype=None) -> tuple:
    """All that gemm_problem's checks and the launcher's choice read of the three tensors: each
    one's shape, strides, dtype and device (AttributeError for what is no tensor), and the
    out_dtype asked for. The prepared path's signature starts with the same of its three
    tensors."""
    return (a.shape, a.stride(), a.dtype, a.device,
            b_shuffle.shape, b_shuffle.stride(), b_shuffle.dtype, b_shuffle.device,
            b_scale_sh.shape, b_scale_sh.stride(), b_scale_sh.dtype, b_scale_sh.device,
            out_dtype)


def launcher_of_signature(signature):
    """The launcher of a call whose signature passed its op's full checks before, made the most
    recently used; KeyError where it did not (or where its launcher was evicted since)."""
    key = _checked_signatures[signature]
    _launchers.move_to_end(key)
    return _launchers[key]


def checked_signature(signature, key):
    """Records that `signature` passed its op's full checks and is served by the launcher of
    `key`; that launcher."""
    _checked_signatures[signature] = key
    return _launchers[key]


def empty_output(n: int, dtype: torch.dtype = torch.bfloat16):
    """The launcher of a call with no rows: a new [0, N] of `dtype` on A's device."""
    return lambda a, *weight: torch.empty((0, n), dtype=dtype, device=a.device)


def _checked_launcher(a, b_shuffle, b_scale_sh, out_dtype):
    """The launcher of a call not seen before, after gemm_problem's full checks."""
    dtype = output_dtype(f"{OP_NAMESPACE}.{OP_NAME}", out_dtype)
    m, n, k = gemm_problem(a, b_shuffle, b_scale_sh)
    if m == 0:
        return empty_output(n, dtype)
    return checked_signature(call_signature(a, b_shuffle, b_scale_sh, out_dtype),
                             _launcher_key(a.device, m, n, k, a.stride(), dtype))


def mxfp4_gemm(a: torch.Tensor, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor,
               out_dtype=None) -> torch.Tensor:
    """A bf16 [M, K], B_shuffle fp4x2 [N, K/2], B_scale_sh e8m0 [pad(N,256), pad(K/32,8)] ->
    a new [M, N] = quantize(A) @ dequant(B)^T: bf16 (out_dtype None or torch.bfloat16), or
    the fp32 sums unrounded (torch.float32)."""
    try:
        launcher = launcher_of_signature(call_signature(a, b_shuffle, b_scale_sh, out_dtype))
    except (AttributeError, KeyError):  # no tensor, a new signature, or its launcher evicted
        launcher = _checked_launcher(a, b_shuffle, b_scale_sh, out_dtype)
    return launcher(a, b_shuffle, b_scale_sh)


OP_NAMESPACE, OP_NAME = "mxfp4_mm", "gemm"
_libraries = []     # the torch.library.Library of each op defined here, kept for the process


class _WithoutBackward(torch.autograd.Function):
    """An op's output where A requires grad: it has a grad_fn, whose backward raises (the
    GEMM has none)."""

    @staticmethod
    def forward(ctx, op, keyset, *arguments):
        ctx.op_name = op._schema.name
        return op.redispatch(keyset & _AFTER_AUTOGRAD, *arguments)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(f"{ctx.op_name}: no autograd formula was registered (the MXFP4 GEMM "
                           f"has no backward)")


def _autograd_kernel(op, implementation):
    """The op's autograd kernel: its implementation, with a grad_fn that refuses backward where
    A (the first argument) needs one (the weight's tensors are integer codes, which never
    require grad). Where nothing but a device's own kernel lies below (no fake or subclass
    tensor, no dispatch mode), it calls the implementation itself: the redispatch costs about
    2 µs."""
    def autograd(keyset, *arguments):
        if arguments[0].requires_grad and torch.is_grad_enabled():
            return _WithoutBackward.apply(op, keyset, *arguments)
        device_kernel_next = _device_kernel_next.get(keyset.raw_repr())
        if device_kernel_next is None:
            below = (keyset & _AFTER_AUTOGRAD).remove(_IN_PLACE_OR_VIEW)
            device_kernel_next = below.highestPriorityTypeId() in _DEVICE_KEYS
            _device_kernel_next[keyset.raw_repr()] = device_kernel_next
        if device_kernel_next:
            return implementation(*arguments)
        return op.redispatch(keyset & _AFTER_AUTOGRAD, *arguments)
    return autograd


def define_op(name: str, arguments: str, implementation, fake):
    """torch.ops.mxfp4_mm.<name>(<arguments>) -> Tensor, defined once per process (a second
    import of the defining code keeps the first) through torch.library.Library: `implementation`
    for every device, _autograd_kernel's kernel, `fake` (shapes only) for tracing. Its default
    overload."""
    namespace = getattr(torch.ops, OP_NAMESPACE)
    if not hasattr(namespace, name):
        library = torch.library.Library(OP_NAMESPACE, "FRAGMENT")
        _libraries.append(library)
        library.define(f"{name}({arguments}) -> Tensor", tags=(torch.Tag.pt2_compliant_tag,))
        op = getattr(namespace, name).default
        library.impl(name, implementation, "CompositeExplicitAutograd")
        library.impl(name, _autograd_kernel(op, implementation), "Autograd", with_keyset=True)
        torch.library.register_fake(f"{OP_NAMESPACE}::{name}", fake, lib=library)
    return getattr(namespace, name).default


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_IN_PLACE_OR_VIEW = torch._C.DispatchKey.ADInplaceOrView     # a pass-through for these ops
_DEVICE_KEYS = (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA)    # CUDA: HIP's too
# a dispatch key set seen by an autograd kernel (its raw bits) -> whether a device's own kernel
# comes next below autograd; a few sets in a process
_device_kernel_next = {}


def _output_like(a, b_shuffle, b_scale_sh, out_dtype=None):
    return a.new_empty((a.shape[0], b_shuffle.shape[0]),
                       dtype=output_dtype(f"{OP_NAMESPACE}.{OP_NAME}", out_dtype))


define_op(OP_NAME, "Tensor a, Tensor b_shuffle, Tensor b_scale_sh, ScalarType? out_dtype=None",
          mxfp4_gemm, _output_like)


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
        _launchers[_gemm_key(arch, device, m, n, k, (k, 1), torch.bfloat16)] = launcher


load_configs_from_environment()
