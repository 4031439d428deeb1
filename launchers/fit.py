"""Whether a compiled kernel fits the chip it is built for: the shared memory a program asks
for (LDS on AMD, the pipeliner's buffers included) against what the device grants one, and
the registers it spills.

`check_fits(name, compiled)` raises DoesNotFit, in one line naming the bytes and the limit,
when a compiled kernel (Triton's CompiledKernel, before any launch) asks for more shared
memory than the current device grants a program (the driver's "max_shared_mem": the opt-in
maximum per block on NVIDIA, 232,448 bytes on an H100; the LDS of a CU on AMD, 160 KiB on
gfx950). launchers.targets holds the same limit per target (Target.shared_memory_bytes) for the
tools that cross-compile on a CPU. `spill_refusal(name, spilled)` is the one line of a kernel
that spills.
"""


class DoesNotFit(RuntimeError):
    """A kernel needs more of the chip than it has, or spills where it must not."""


def shared_memory_limit() -> int:
    """What the current device grants one program, in bytes (Triton's driver properties)."""
    from triton.runtime import driver
    device = driver.active.get_current_device()
    return driver.active.utils.get_device_properties(device)["max_shared_mem"]


def check_fits(name: str, compiled, limit: int = None) -> None:
    """Raise DoesNotFit when `compiled` needs more shared memory than `limit` (default: the
    current device's)."""
    needed = compiled.metadata.shared
    limit = shared_memory_limit() if limit is None else limit
    if needed > limit:
        raise DoesNotFit(f"{name} needs {needed:,} bytes of shared memory (LDS on "
                         f"AMD) a program, over the {limit:,} the device grants")


def spill_refusal(name: str, spilled: int) -> DoesNotFit:
    return DoesNotFit(f"{name} spills {spilled:,} registers a thread")
