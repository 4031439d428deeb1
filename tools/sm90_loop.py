"""The main loop of a GEMM cross-compiled for sm_90, read from its SASS (`cuobjdump -sass`,
shipped in Triton's wheel): per shape, for the path the op torch.ops.mxfp4_mm.gemm_prepared and
MXFP4Linear serve on sm_90 ("prepared", launchers.prepared, the Hopper weight layout) and for
custom_kernel's (the config the lookup serves, reading B_shuffle in aiter's layout).

The main loop is the innermost backward branch whose body holds the MMA (HGMMA): its
instructions are what one K tile costs each warp. "lane_instructions_per_element" is that
count times the program's threads over the weight elements of one K tile (BLOCK_N x BLOCK_K):
what each weight element costs in instructions issued, lane by lane. `rows(shapes, asm_dir)`
compiles the GEMM launch of each (shape, path) and writes its SASS to asm_dir.
"""

import os
import re
from collections import Counter
from pathlib import Path

import triton

from mxfp4_mm.launchers.configs import config_lookup
from mxfp4_mm.launchers.paths import path_launch_specs
from mxfp4_mm.launchers.prepared import prepared_config, prepared_launch_specs
from mxfp4_mm.launchers import targets
from .fit import cubin_resources, cuobjdump
from .gfx950.cross_compile import SM90, compile_for

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")
LAYOUTS = {"prepared": "hopper (kernels.layouts.hopper)",
           "custom_kernel": "aiter preshuffle (B_shuffle, B_scale_sh)"}


def main_loop(sass: str) -> list:
    """The opcodes (with modifiers) of the innermost loop that holds an HGMMA (the first of two
    as short), [] if none."""
    instructions = [(int(address, 16), opcode, rest)
                    for address, opcode, rest in _INSTRUCTION.findall(sass)]
    best = []
    for address, opcode, rest in instructions:
        target = _BRANCH_TARGET.search(rest) if opcode.startswith("BRA") else None
        if target is None or int(target.group(1), 16) >= address:
            continue
        body = [op for at, op, _ in instructions if int(target.group(1), 16) <= at <= address]
        if any(op.startswith("HGMMA") for op in body) and (not best or len(body) < len(best)):
            best = body
    return best


def _gemm_spec(path: str, shape, prepared_tile=None):
    m, n, k = shape
    if path == "prepared":
        config = prepared_tile or prepared_config(m, n, k)
        specs = prepared_launch_specs(config, "cuda", m, n, k, (k, 1), "meta")
        fields = dict(config._asdict(), label=config.label)
    else:
        config, _ = config_lookup("sm_90", m, n, k)
        specs = path_launch_specs(config, "cuda", m, n, k, (k, 1), "meta")
        fields = dict(vars(config), label=config.label)
    gemm = [spec for spec in specs if spec.name == "gemm"]
    return fields, (gemm[0] if gemm else None), [spec.name for spec in specs]


def loop_row(path: str, shape, asm_dir=None, prepared_tile=None) -> dict:
    """One (path, shape): its config (for "prepared", the rule's, or the PreparedConfig
    prepared_tile), its launches, and the GEMM's resources and main loop."""
    fields, spec, launches = _gemm_spec(path, shape, prepared_tile)
    row = dict(arch="sm_90", path=path, shape=list(shape), layout=LAYOUTS[path], config=fields,
               launches=launches, triton=triton.__version__)
    if spec is None:
        return dict(row, loop_sass_per_k_tile=None, note="no Triton GEMM on this path")
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, SM90)
    sass = cuobjdump(compiled.asm["cubin"], "-sass")
    if asm_dir is not None:
        label = re.sub(r"[^\w.-]+", "_", fields["label"])
        name = f"{path}_{'x'.join(map(str, shape))}_{label}.sass"
        row["asm"] = str(Path(asm_dir) / name)
        Path(row["asm"]).write_text(sass)
    loop = main_loop(sass)
    if not loop:
        return dict(row, loop_sass_per_k_tile=None, note="no loop: one K tile a program")
    threads = 32 * spec.options["num_warps"]
    elements = fields["block_n"] * fields["block_k"]
    mix = Counter(op.split(".")[0] for op in loop)
    resources = cubin_resources(compiled.asm["cubin"])
    return dict(row, **resources, shared_bytes=compiled.metadata.shared,
                fits=compiled.metadata.shared <= targets.SM90.shared_memory_bytes,
                loop_sass_per_k_tile=len(loop),
                lane_instructions_per_element=round(len(loop) * threads / elements, 2),
                loop_mix=dict(mix.most_common()))


def rows(shapes, asm_dir=None, paths=("prepared", "custom_kernel"), prepared_tile=None) -> list:
    if asm_dir is not None:
        os.makedirs(asm_dir, exist_ok=True)
    return [loop_row(path, shape, asm_dir, prepared_tile) for shape in shapes for path in paths]


def format_rows(rows) -> str:
    lines = [f"sm_90 main loops (Triton {rows[0]['triton']}): SASS a K tile and lane-instructions "
             f"a weight element; registers and stack a thread; the loop's top opcodes"] if rows else []
    for row in rows:
        shape = "x".join(map(str, row["shape"]))
        if row["loop_sass_per_k_tile"] is None:
            lines.append(f"{shape:<15} {row['path']:<13} {row['config']['label']:<34} {row['note']}")
            continue
        top = ", ".join(f"{op} {count}" for op, count in list(row["loop_mix"].items())[:6])
        lines.append(f"{shape:<15} {row['path']:<13} {row['config']['label']:<34} "
                     f"{row['loop_sass_per_k_tile']:>5} {row['lane_instructions_per_element']:>5.2f}"
                     f"  regs {row['registers']:>3} stack {row['stack_bytes']}"
                     f"{'' if row['fits'] else ' DOES NOT FIT'}  {top}")
    return "\n".join(lines)
