"""Whether the configs the lookup serves fit their chip, seen from a CPU: each launch of a call
cross-compiled (tools.gfx950.cross_compile) for gfx950 or sm_90, its shared memory (LDS)
against the target's limit (launchers.targets: Target.shared_memory_bytes), its registers and
spills.

`launch_resources(arch, spec)` compiles one launch (what the config's launcher compiles:
launchers.paths.path_launch_specs) and reads:
on sm_90, the dynamic shared memory Triton asks for, and from the cubin (`cuobjdump
-res-usage`, shipped in Triton's wheel) the registers and the stack bytes a thread (a stack
means spilled registers); on gfx950, the LDS, VGPRs, VGPR and SGPR spills and scratch bytes of
the amdgcn metadata. A compile is kept per distinct specialization (the kernel, its constexprs
and argument attributes as the JIT specializes them, and the options), so that a grid of
shapes compiles each distinct kernel once (`compile_all`, in WORKERS processes).
`served_row(arch, shape)` is the row of the config served first for a shape
(launchers.configs.config_lookup), `rows(arch, shapes)` those of many shapes; `python -m
tools.isa --shapes` prints them. Compile with real JIT functions (TRITON_INTERPRET unset).
"""

import os
import re
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import triton

from mxfp4_mm.launchers.configs import config_lookup
from mxfp4_mm.launchers.paths import path_launch_specs
from mxfp4_mm.launchers.targets import target_facts
from .gfx950 import report
from .gfx950.cross_compile import GFX950, SM90, compile_for, specialization

TARGETS = {"gfx950": GFX950, "sm_90": SM90}
BACKENDS = {"gfx950": "hip", "sm_90": "cuda"}
WORKERS = 2
_RES_USAGE = re.compile(r"REG:(\d+) STACK:(\d+)")
_compiled = {}


def cuobjdump(cubin: bytes, option: str) -> str:
    """What the cuobjdump of Triton's wheel prints for a cubin with `option` ("-res-usage",
    "-sass")."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        return subprocess.run([tool, option, file.name], capture_output=True, text=True,
                              check=True).stdout


def cubin_resources(cubin: bytes) -> dict:
    """{"registers", "stack_bytes"} a thread of a cubin's kernel (`cuobjdump -res-usage`)."""
    registers, stack = _RES_USAGE.search(cuobjdump(cubin, "-res-usage")).groups()
    return dict(registers=int(registers), stack_bytes=int(stack))


def amdgcn_resources(amdgcn: str) -> dict:
    """{"registers" (VGPRs), "vgpr_spills", "sgpr_spills", "scratch_bytes"} of gfx950 code."""
    read = report._metadata_int
    return dict(registers=read(amdgcn, "vgpr_count"),
                vgpr_spills=read(amdgcn, "vgpr_spill_count"),
                sgpr_spills=read(amdgcn, "sgpr_spill_count"),
                scratch_bytes=read(amdgcn, "private_segment_fixed_size"))


def _key(arch: str, spec) -> tuple:
    """What tells two compiles of a launch apart: the target, the kernel, its specialization
    and its options."""
    return (arch, spec.name, specialization(spec.kernel, spec.sample_args, TARGETS[arch]),
            tuple(sorted(spec.options.items())))


def _compile(arch: str, spec) -> dict:
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, TARGETS[arch])
    if arch == "sm_90":
        found = dict(shared_bytes=compiled.metadata.shared,
                     **cubin_resources(compiled.asm["cubin"]))
        found["spills"] = found["stack_bytes"] > 0
    else:
        amdgcn = compiled.asm["amdgcn"]
        found = dict(shared_bytes=report.lds_bytes(compiled, amdgcn), **amdgcn_resources(amdgcn))
        found["spills"] = bool(found["vgpr_spills"] or found["sgpr_spills"]
                               or found["scratch_bytes"])
    return found


def launch_resources(arch: str, spec) -> dict:
    """{"kernel", "shared_bytes", "shared_limit", "fits", "registers", "spills", ...}: one
    launch compiled for `arch`; "spills" is whether the compiled code spills any register."""
    key = _key(arch, spec)
    if key not in _compiled:
        _compiled[key] = _compile(arch, spec)
    limit = target_facts(arch).shared_memory_bytes
    found = _compiled[key]
    return dict(kernel=spec.name, shared_limit=limit, fits=found["shared_bytes"] <= limit,
                **found)


def _specs(arch: str, shape, config) -> list:
    m, n, k = shape
    return path_launch_specs(config, BACKENDS[arch], m, n, k, (k, 1), "meta",
                             target_facts(arch).first_quantizer)


def config_row(arch: str, shape, config, source: str = None) -> dict:
    """The row of one call of `config` on `shape` compiled for `arch`: its launches' resources,
    whether every launch fits ("fits") and whether any spills ("spills")."""
    m, n, k = shape
    launches = [launch_resources(arch, spec) for spec in _specs(arch, shape, config)]
    return dict(arch=arch, shape=[m, n, k], config=dict(vars(config)), label=config.label,
                source=source, triton=triton.__version__, quantizer=target_facts(arch).first_quantizer,
                launches=launches, fits=all(launch["fits"] for launch in launches),
                spills=any(launch["spills"] for launch in launches))


def served_row(arch: str, shape) -> dict:
    """config_row of the config the lookup serves first for `shape` on `arch`."""
    config, source = config_lookup(arch, *shape)
    return config_row(arch, shape, config, source)


def _compile_job(job) -> tuple:
    arch, shape, config, index = job
    spec = _specs(arch, shape, config)[index]
    return _key(arch, spec), _compile(arch, spec)


def compile_all(arch: str, calls, workers: int = WORKERS) -> None:
    """Compile every distinct launch of `calls` [(shape, config)] for `arch` once, in `workers`
    processes, into the cache launch_resources reads."""
    jobs = {}
    for shape, config in calls:
        for index, spec in enumerate(_specs(arch, shape, config)):
            key = _key(arch, spec)
            if key not in _compiled:
                jobs.setdefault(key, (arch, tuple(shape), config, index))
    if len(jobs) < 2 or workers < 2:
        for job in jobs.values():
            _compiled.update([_compile_job(job)])
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        _compiled.update(pool.map(_compile_job, jobs.values()))


def rows(arch: str, shapes) -> list:
    """served_row of each shape, each distinct launch compiled once (compile_all)."""
    compile_all(arch, [(shape, config_lookup(arch, *shape)[0]) for shape in shapes])
    return [served_row(arch, shape) for shape in shapes]


def _launch_text(launch: dict) -> str:
    spill = (f"stack {launch['stack_bytes']:,} B" if "stack_bytes" in launch else
             f"spills {launch['vgpr_spills']}v/{launch['sgpr_spills']}s, "
             f"scratch {launch['scratch_bytes']:,} B")
    return (f"{launch['kernel']} {launch['shared_bytes']:,}/{launch['shared_limit']:,} B, "
            f"{launch['registers']} regs, {spill}")


def format_rows(rows) -> str:
    """One line per shape: the config served and its source, each launch's shared memory (LDS)
    against the limit, registers and spills, and whether the call fits without spilling."""
    lines = [f"{rows[0]['arch']}: Triton {rows[0]['triton']}, the {rows[0]['quantizer']} "
             f"quantizer; per launch: shared memory (LDS) a program against the limit, registers "
             f"and spills a thread (a lane on gfx950)"] if rows else []
    for row in rows:
        verdict = ("fits" if row["fits"] else "DOES NOT FIT") + (", SPILLS" if row["spills"] else "")
        lines.append(f"{row['arch']} {'x'.join(map(str, row['shape'])):<16} "
                     f"{row['label']:<34} {row['source'] or '':<9} {verdict}")
        lines += [f"    {_launch_text(launch)}" for launch in row["launches"]]
    return "\n".join(lines)
