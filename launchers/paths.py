"""The launcher that serves a config, by its path (launchers.configs.GEMM_PATHS)."""

from launchers.configs import GemmConfig
from launchers.gemm import GemmLauncher

# GemmLauncher builds either GEMM kernel by config.path (launchers.gemm.launch_specs).
LAUNCHERS = {"preshuffle": GemmLauncher, "hopper": GemmLauncher}


def build_launcher(config: GemmConfig, backend: str, m: int, n: int, k: int, a_strides: tuple,
                   device, quantizer: str = "software", allow_direct: bool = True):
    """The launcher of config.path for one problem; call it with (A, B_shuffle, B_scale_sh)."""
    return LAUNCHERS[config.path](config, backend, m, n, k, a_strides, device, quantizer,
                                  allow_direct=allow_direct)
