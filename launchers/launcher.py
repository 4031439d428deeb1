"""What every path's launcher is (launchers.paths): the one contract that the ladder, the
tuners and the tools read, and nothing else of a launcher.

A Launcher, called with (A bf16 [M, K], B_shuffle, B_scale_sh[, direct]), returns a new
[M, N] of its out_dtype for the one problem (M, N, K, A's strides) it was built for. It states:

    config              the GemmConfig it serves (launchers.gemm_config)
    out_dtype           its output's dtype: bf16, or float32 (launchers.inputs.OUT_DTYPES)
    quantizer           A's quantizer (kernels.quantize.QUANTIZERS) it was built with
    splits              K splits a call launches (1 where it does not split K)
    launches_per_call   kernel launches of one call, ours and any library's
    proof_repeats       how many more times the proof runs its first case, each output byte
                        for byte the first (launchers.proof)
    rung                the ladder's rung that proved it (launchers.ladder), None before
    kernel_launches()   {launch name: launchers.bypass.KernelLaunch} of its own Triton kernels

and from those, alike for every path: is_direct (every launch of ours takes the direct launch),
launch_resources() (registers and spills a thread of each) and spilling_launches().
"""

from abc import ABC, abstractmethod
from typing import Optional

import torch


class Launcher(ABC):
    config: object
    quantizer: str
    out_dtype: torch.dtype = torch.bfloat16
    splits: int = 1
    launches_per_call: int
    proof_repeats: int = 0
    rung: Optional[str] = None

    @abstractmethod
    def __call__(self, a, b_shuffle, b_scale_sh, direct=True):
        """direct=False takes the standard launch even where the bypass is available."""

    @abstractmethod
    def kernel_launches(self) -> dict:
        """{launch name: KernelLaunch} of the Triton kernels of ours that a call runs."""

    @property
    def is_direct(self) -> bool:
        """Whether it has launches of ours and every one takes the direct launch."""
        launches = self.kernel_launches().values()
        return bool(launches) and all(launch.is_direct for launch in launches)

    def launch_resources(self) -> dict:
        """{launch name: {"n_regs", "n_spills"}} a thread, of each launch's loaded kernel
        (known for direct launches only, else None: launchers.bypass.KernelLaunch)."""
        return {name: dict(n_regs=launch.registers, n_spills=launch.spilled_registers)
                for name, launch in self.kernel_launches().items()}

    def spilling_launches(self) -> dict:
        """{launch name: registers spilled a thread} of the launches whose kernel spills."""
        return {name: found["n_spills"] for name, found in self.launch_resources().items()
                if found["n_spills"]}
