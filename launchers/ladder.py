"""A proven launcher for one problem, stepping down a ladder of fallbacks until one is proven.

`proven_launcher(arch, backend, m, n, k, a_strides, device[, out_dtype=])` tries, in order,
each rung's launcher built for out_dtype (bf16, the default, or float32):

    hardware quantizer (bf16)  the looked-up config (launchers.configs.config_lookup: the
                               table's, a tuned-shapes file's or the heuristic's) with
                               gfx950's conversion instruction, its bf16 form (gfx950 only)
    hardware quantizer (f32)   the same with the instruction's f32 form (gfx950 only)
    software quantizer         the same config with the software quantizer
    standard launch            the same, through Triton's standard launch only (no bypass)
    heuristic config           heuristics.heuristic_config, standard launch (skipped if it is
                               the looked-up one)
    small tiles                gemm_config.FITTING_CONFIG (small tiles, one stage, no split:
                               it fits every target), standard launch (skipped if it is one
                               of the above)
    aiter                      aiter's dynamic_mxfp4_quant + gemm_a4w4 (where aiter imports;
                               bf16 outputs only)

A rung fails when building it raises (a compiler error, say), its compiled kernels do not fit
the device (launchers.fit: the shared memory a program asks for over what the device grants,
checked before any launch, or Triton's OutOfResources), a launch of it spills registers (known
where the launch is direct; every rung of ours but the last refuses spills), or its proof
(launchers.proof) fails (a launcher runs the first proof case its `proof_repeats` more
times, each output byte for byte the first: SPLIT_K_REPEATS for a GEMM that reduces split-K
in the kernel).
A rung that does not fit or spills takes the following rungs of the same config with it. Each
step down prints one stderr line naming the shape as MxNxK, the rung and the reason, and the
rung that then serves the shape says so too. When every rung fails, a RuntimeError names the
shape and why each rung failed. A shape whose first rung passes prints nothing.

Fault injection, to see the ladder work: MXFP4_MM_FAULT="KIND:M,N,K[;KIND:M,N,K...]" makes
the first rung of shape MxNxK fail: KIND "compile" raises while building it, as a compiler
error would; "wrong" corrupts its outputs before the proof sees them, as a miscompile would.
"""

import os
import sys
from typing import Callable, NamedTuple

import torch
from triton.runtime.autotuner import OutOfResources

from . import aiter_path
from .configs import config_lookup, note_untuned
from .fit import DoesNotFit, spill_refusal
from .gemm_config import FITTING_CONFIG
from .heuristics import heuristic_config
from .paths import build_launcher
from .proof import proof_cases, prove
from .targets import target_facts

# The quantizer rungs in ladder order: the name of each, by the quantizer it builds with
# (kernels.quantize.QUANTIZERS); the hardware ones only where the target has them
# (launchers.targets.Target.hardware_quantizer).
QUANTIZER_RUNGS = {"hardware": "hardware quantizer (bf16)",
                   "hardware-f32": "hardware quantizer (f32)",
                   "software": "software quantizer"}
FAULT_VARIABLE = "MXFP4_MM_FAULT"
FAULT_KINDS = ("compile", "wrong")
_REASON_CHARS = 300


class Rung(NamedTuple):
    name: str
    build: Callable[[], object]   # () -> a launchers.launcher.Launcher
    config: object = None         # the GemmConfig it builds (None: not one of ours)
    refuses_spills: bool = True


class InjectedFault(RuntimeError):
    """Raised by MXFP4_MM_FAULT's "compile" kind in place of a compiler error."""


def parse_faults(text: str) -> dict:
    """"wrong:16,2112,7168;compile:4,2880,512" -> {(16, 2112, 7168): "wrong", ...}."""
    faults = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        kind, _, shape = item.partition(":")
        try:
            m, n, k = (int(x) for x in shape.split(","))
        except ValueError:
            kind = None
        if kind not in FAULT_KINDS:
            raise ValueError(f"{FAULT_VARIABLE}: expected KIND:M,N,K with KIND one of "
                             f"{', '.join(FAULT_KINDS)}, got {item!r}")
        faults[(m, n, k)] = kind
    return faults


class _CorruptedOutputs:
    """A launcher whose outputs come back wrong, as a miscompiled kernel's would; the rest of
    the launcher (launchers.launcher) is the wrapped one's."""

    def __init__(self, launcher):
        self.launcher = launcher

    def __getattr__(self, name):
        return getattr(self.launcher, name)

    def __call__(self, *args, **kwargs):
        out = self.launcher(*args, **kwargs)
        out.view(torch.int16).bitwise_xor_(0x4000)
        return out


def _with_fault(rung: Rung, kind: str) -> Rung:
    if kind == "compile":
        def build():
            raise InjectedFault(f"injected compile fault ({FAULT_VARIABLE})")
    else:
        def build():
            return _CorruptedOutputs(rung.build())
    return rung._replace(build=build)


def rungs_for(arch, backend, m, n, k, a_strides, device, out_dtype=torch.bfloat16) -> list:
    config, source = config_lookup(arch, m, n, k)
    if source == "heuristic":
        note_untuned(arch, m, n, k, config)

    def rung(name, config, quantizer="software", allow_direct=True, refuses_spills=True):
        return Rung(name, lambda: build_launcher(config, backend, m, n, k, a_strides, device,
                                                 quantizer, allow_direct=allow_direct,
                                                 out_dtype=out_dtype),
                    config, refuses_spills)

    rungs = [rung(name, config, quantizer) for quantizer, name in QUANTIZER_RUNGS.items()
             if quantizer == "software" or target_facts(arch).hardware_quantizer]
    rungs.append(rung("standard launch", config, allow_direct=False))
    heuristic = heuristic_config(arch, m, n, k)
    if heuristic != config:
        rungs.append(rung("heuristic config", heuristic, allow_direct=False))
    if FITTING_CONFIG not in (config, heuristic):
        rungs.append(rung("small tiles", FITTING_CONFIG, allow_direct=False,
                          refuses_spills=False))
    if aiter_path.available() and out_dtype == torch.bfloat16:
        rungs.append(Rung("aiter", lambda: aiter_path.AiterLauncher(m, n)))
    return rungs


def _one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


def prove_rung(rung: Rung, m, n, k, a_strides, device):
    """The rung's launcher once proven; raises whatever building or proving it raised."""
    launcher = rung.build()
    spilling = launcher.spilling_launches()
    if rung.refuses_spills and spilling:
        name, spilled = next(iter(spilling.items()))
        raise spill_refusal(f"the {name} kernel", spilled)
    prove(launcher, proof_cases(m, n, k, a_strides, device), launcher.is_direct,
          launcher.proof_repeats)
    launcher.rung = rung.name
    return launcher


def proven_launcher(arch, backend, m, n, k, a_strides, device, rungs=None,
                    out_dtype=torch.bfloat16):
    """The first launcher of the ladder (rungs_for's unless `rungs`) whose proof passes;
    RuntimeError if none does."""
    shape = f"{m}x{n}x{k}"
    if rungs is None:
        rungs = rungs_for(arch, backend, m, n, k, a_strides, device, out_dtype)
    fault = parse_faults(os.environ.get(FAULT_VARIABLE, "")).get((m, n, k))
    if fault:
        rungs = [_with_fault(rungs[0], fault)] + rungs[1:]
    failures = []
    index = 0
    while index < len(rungs):
        rung = rungs[index]
        index += 1
        try:
            launcher = prove_rung(rung, m, n, k, a_strides, device)
        except Exception as error:   # a compiler error, a launch error or a ProofFailure
            failures.append(f"{rung.name}: {_one_line(error)}")
            if isinstance(error, (DoesNotFit, OutOfResources)) and rung.config is not None:
                while index < len(rungs) and rungs[index].config == rung.config:
                    index += 1     # the same kernels would not fit either
            following = rungs[index].name if index < len(rungs) else "no rung left"
            print(f"mxfp4-mm: {shape}: {rung.name} failed ({_one_line(error)}); "
                  f"stepping down to {following}", file=sys.stderr, flush=True)
            continue
        if failures:
            print(f"mxfp4-mm: {shape}: served by {rung.name}", file=sys.stderr, flush=True)
        return launcher
    raise RuntimeError(f"mxfp4-mm: no launcher for {shape} passed its proof: "
                       + "; ".join(failures))
