"""Config lookup and launcher cache: (A, B_shuffle, B_scale_sh) -> the GemmLauncher to run.

`launcher_for(a, n)` returns the launcher for the current target and this problem, built on
first use and kept in a bounded LRU cache keyed by (target, device, M, N, K, A strides); on
gfx950 it uses the hardware quantizer once the self-check (launchers.selfcheck) has passed.
`prewarm(shapes)` builds and runs the launchers of the given shapes once, so that the first
timed call compiles and loads nothing.
"""

import functools
import os
from collections import OrderedDict

import torch
import triton

from kernels import formats
from launchers.configs import TASK_SHAPES, config_for
from launchers.gemm import GemmLauncher
from launchers.selfcheck import hardware_quantizer_ok

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


def launcher_for(a, n: int) -> GemmLauncher:
    m, k = a.shape
    backend, arch = current_target(a.device)
    key = (arch, str(a.device), m, n, k, a.stride())
    launcher = _launchers.get(key)
    if launcher is None:
        hw_cvt = hardware_quantizer_ok(arch, backend, str(a.device))
        launcher = GemmLauncher(config_for(arch, m, n, k), backend, m, n, k, a.stride(),
                                a.device, hw_cvt)
        _launchers[key] = launcher
        if len(_launchers) > LAUNCHER_CACHE_CAPACITY:
            _launchers.popitem(last=False)
    else:
        _launchers.move_to_end(key)
    return launcher


def cached_launcher_count() -> int:
    return len(_launchers)


def prewarm(shapes=TASK_SHAPES, device="cuda"):
    """Compile, load and run once every kernel variant that `shapes` use."""
    for m, n, k in shapes:
        a = torch.zeros((m, k), dtype=torch.bfloat16, device=device)
        b = torch.zeros((n, k // 2), dtype=torch.uint8, device=device)
        scales = torch.full(formats.scales_padded_shape(n, k), 127, dtype=torch.uint8,
                            device=device)
        launcher_for(a, n)(a, b, scales)
    torch.cuda.synchronize()
