"""Cross-compile the configured kernels for gfx950 (or sm_90) and report their resources.

    python -m tools.isa --arch gfx950 [--quantizer NAME] [--json FILE]
                        [--asm-dir DIR] [--sweep SHAPES ... | --candidates] [--triton VERSION]
    python -m tools.isa --arch gfx950 --compare-tritons 3.6.0,3.7.0,3.8.0,3.9.0 [--markdown FILE]
    python -m tools.isa --arch sm_90 [--json FILE]

The compiler is Triton --triton (default 3.6.0, the leaderboard runner's). When the running
Triton is another release, the tool installs that one into ROOT/.triton/<version> on first use
(pip --target, no dependencies) and runs itself again with it first on PYTHONPATH. Every row
names the release that compiled it ("triton"). Tensor arguments are specialized as the JIT of
that release does (on HIP: tt.pointer_range=32, so buffer loads; see tools.cross_compile).

Per entry of the arch's config table (the 10 task shapes) and per kernel (the GEMM, and the
split-K reduce where the config splits K): VGPRs, AGPRs, SGPRs, LDS bytes, scratch bytes,
spills, occupancy, workgroups against the 256 CUs, and instruction counts. With --sweep, the
same for the GEMM of every stage-1 candidate that tools.tune would try on gfx950 for each given
shape (the material the table is chosen from). With --candidates, the same for every kernel
of every import-time tuning candidate of gfx950 (launchers/candidates.py, each shape's table
entry first; rows carry "candidate", its index). A GEMM row whose config reduces split-K in the
kernel (split_k_reduce "last_program") carries "release_ordered": whether its assembly orders
every wave's partial stores before the tile counter's atomic and the last program's loads
after it (tools.release_order). Every gfx950 row carries "hazards" (the "hz" column counts
them): each `v_cvt_scalef32_*` whose result the very next instruction reads, which gfx950 does
not forward (tools.gfx950.hazards), with its line and the reader's. With --asm-dir, each row's assembly is written
there and the row names its file ("asm"). --compare-tritons compiles the table with each
release and both quantizers and prints a markdown table of them side by side. Runs offline on
a CPU: no AMD GPU is involved.

Occupancy (CDNA3/4, wave64): 512 unified VGPRs per SIMD lane, allocated in granules of 8;
160 KiB of LDS and 4 SIMDs per CU; at most 8 waves per SIMD. "waves_per_simd" is the estimate
from the registers the code uses; "occupancy" is the real one: the same from the allocation in
the kernel descriptor (.amdhsa_next_free_vgpr, which LLVM pads to 169 for waves_per_eu 2 and
257 for 1), and at most waves_per_eu where that is set (0: no limit).

GEMM rows also give, per K tile (the K-loop body where there is a K loop, "k_loop", else the
whole kernel divided by the K tiles each program handles), "k_tile_instructions" (the static
instructions one wave runs per K tile) and:
- "quantizer_instructions_per_element": the static instructions of the in-register quantizer
  per A element each lane holds (BLOCK_M*BLOCK_K / (64*num_warps)). An instruction is the
  quantizer's when the innermost frame of its inlining chain that lies in the project (not in
  Triton's own library, e.g. standard.py for tl.max) is kernels/quantize.py. The chain is the
  comment LLVM writes after each .loc directive ("f.py:L:C @[ caller.py:L:C @[ ... ] ]"); its
  file names are resolved through the .file directives.
- "fast_path_instructions_per_element": the same without the quantizer's slow path (an
  instruction whose chain holds a line of the `else` branch of `if fast:` in
  quantize_tile_mxfp4): what a tile of ordinary values (no NaN, inf or extreme block amax)
  spends. LLVM may merge or move instructions across the branch; the attribution follows
  their .loc.
- "mfma_replication": the MFMA work the workgroup issues (static count x MFMA M*N*K x waves,
  scaled MFMAs or, where Triton lowers dot_scaled to them, bf16 ones) over the tile's
  BLOCK_M*BLOCK_N*BLOCK_K; 1 means no wave repeats another's products.

With --arch sm_90, per entry of the sm_90 table: the PTX instructions of the GEMM as
configured and with A pre-quantized (the share of the in-register quantizer), the MMA
instructions, and an estimate of the warp instructions the launch executes (PTX count x
warps x programs x K tiles per program; the loop body dominates the count) with the time
that takes at one instruction per cycle on each of the H200's 528 schedulers at 1.98 GHz.
"""

import ast
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)   # compiling needs the real JIT functions

import triton                                # noqa: E402

from kernels import formats                  # noqa: E402
from kernels.quantize import QUANTIZERS      # noqa: E402
from launchers.configs import GEMM_CONFIGS, GemmConfig  # noqa: E402
from launchers.gemm import launch_specs      # noqa: E402
from tools.cli import SHAPES_HELP, UsageError, parse_plain_shapes, usage_error  # noqa: E402
from tools.gfx950.hazards import conversion_hazards  # noqa: E402
from tools.release_order import release_ordered  # noqa: E402
from tools.cross_compile import (GFX950, ROOT, RUNNER_TRITON, SIDE_TRITON_ENV, SM90,  # noqa: E402
                                 compile_for, run_with_triton)

CUS = 256
LDS_PER_CU = 160 * 1024
SIMDS_PER_CU = 4
VGPRS_PER_SIMD_LANE = 512
MAX_WAVES_PER_SIMD = 8
WAVE = 64
CVT = "v_cvt_scalef32_pk_fp4_"   # the quantizer instruction: _f32 or _bf16 sources
QUANTIZER_SOURCE = ROOT / "kernels" / "quantize.py"
_MNEMONIC = re.compile(r"^\s+([a-z][a-z0-9_]*)\b", re.MULTILINE)
_SCALED_MFMA = re.compile(r"^v_mfma_scale_")
_MFMA = re.compile(r"^v_mfma_(?:scale_)?[a-z0-9]+_(\d+)x(\d+)x(\d+)")
_FILE = re.compile(r'^\s*\.file\s+\d+\s+"([^"]*)"\s+"([^"]*)"', re.MULTILINE)
_FRAME = re.compile(r"([^\s:@\[\]]*):(\d+):\d+")
_LABEL = re.compile(r"^(\.?\w+):")
_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%p\d+\s+)?([a-z][\w.]*)", re.MULTILINE)
H200_SCHEDULERS = 132 * 4
H200_CLOCK_GHZ = 1.98


def _metadata_int(amdgcn: str, key: str) -> int:
    found = re.search(rf"\.{key}:?\s+(\d+)", amdgcn)
    return int(found.group(1)) if found else 0


def _code(amdgcn: str) -> str:
    return amdgcn.split(".end_amdgpu_metadata")[0].split("amdhsa.kernels")[0].split(".Lfunc_end")[0]


def instruction_counts(amdgcn: str) -> dict:
    return dict(sorted(Counter(_MNEMONIC.findall(_code(amdgcn))).items()))


def waves_per_simd(vgprs: int, agprs: int, lds_bytes: int, num_warps: int) -> int:
    registers = -(-vgprs // 4) * 4 + agprs
    registers = max(8, -(-registers // 8) * 8)
    by_registers = VGPRS_PER_SIMD_LANE // registers
    if lds_bytes:
        by_lds = (LDS_PER_CU // lds_bytes) * num_warps // SIMDS_PER_CU
        by_registers = min(by_registers, max(by_lds, 0))
    return min(MAX_WAVES_PER_SIMD, by_registers)


def occupancy(allocated_vgprs: int, lds_bytes: int, num_warps: int, waves_per_eu: int) -> int:
    """Waves per SIMD the hardware can hold: the descriptor's register allocation (arch VGPRs
    and AGPRs together), LDS, and waves_per_eu where it is set."""
    by_resources = waves_per_simd(allocated_vgprs, 0, lds_bytes, num_warps)
    return min(by_resources, waves_per_eu) if waves_per_eu else by_resources


def _project_frame_resolver(amdgcn: str):
    """basename -> its path, for the project's source files named by the .file directives;
    None for Triton's own library files (the quantizer's calls of tl.max and the like)."""
    library = Path(triton.__file__).resolve().parent
    paths = {}
    for folder, name in _FILE.findall(amdgcn):
        paths.setdefault(name, set()).add(Path(folder, name).resolve())
    resolved = {}
    for name, found in paths.items():
        outside = {p for p in found if library not in p.parents}
        if outside and len(found) > 1:
            raise ValueError(f"source file name {name} is ambiguous in the assembly: "
                             f"{sorted(found)}")
        resolved[name] = next(iter(outside)) if outside else None
    return resolved


def slow_path_lines(path: Path = QUANTIZER_SOURCE) -> range:
    """The source lines of the quantizer's slow path: the `else` branch of `if fast:` in
    quantize_tile_mxfp4 (what a tile with a NaN, inf or extreme block amax runs)."""
    tree = ast.parse(path.read_text())
    function = next(node for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef) and node.name == "quantize_tile_mxfp4")
    branch = next(node for node in ast.walk(function) if isinstance(node, ast.If)
                  and isinstance(node.test, ast.Name) and node.test.id == "fast")
    return range(branch.orelse[0].lineno, branch.orelse[-1].end_lineno + 1)


def annotated_instructions(amdgcn: str) -> tuple:
    """([(mnemonic, source path of the innermost project frame or None, on the quantizer's slow
    path)], {label: index}, [(index, target label)] of the branches), in the kernel's code
    order. An instruction is on the slow path when a frame of its chain is a line of it."""
    code = _code(amdgcn)
    project = _project_frame_resolver(amdgcn)
    slow_lines = slow_path_lines()
    instructions, labels, branches = [], {}, []
    source, slow = None, False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith(".loc"):
            chain = _FRAME.findall(line.split(";", 1)[1]) if ";" in line else []
            source = next((project[name] for name, _ in chain if project.get(name)), None)
            slow = any(project.get(name) == QUANTIZER_SOURCE and int(number) in slow_lines
                       for name, number in chain)
            continue
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        mnemonic = _MNEMONIC.match(line)
        if mnemonic:
            name = mnemonic.group(1)
            if name.startswith(("s_branch", "s_cbranch")):
                branches.append((len(instructions), stripped.split()[-1]))
            instructions.append((name, source, slow))
    return instructions, labels, branches


def k_loop_body(instructions, labels, branches):
    """The instructions of the innermost backward-branch region holding an MFMA (the K loop),
    or None where the kernel has no such loop."""
    loops = []
    for at, target in branches:
        start = labels.get(target)
        if start is not None and start <= at:
            body = instructions[start:at + 1]
            if any(_MFMA.match(name) for name, _, _ in body):
                loops.append(body)
    return min(loops, key=len) if loops else None


def per_k_tile(amdgcn: str, config, k: int) -> dict:
    """Quantizer instructions per A element per lane, and MFMA replication, per K tile."""
    instructions, labels, branches = annotated_instructions(amdgcn)
    body = k_loop_body(instructions, labels, branches)
    k_tiles = 1 if body is not None else formats.cdiv(config.splits_for(k)[1], config.block_k)
    body = instructions if body is None else body
    elements_per_lane = config.block_m * config.block_k / (WAVE * config.num_warps)
    quantizer = sum(source == QUANTIZER_SOURCE for _, source, _ in body)
    fast = sum(source == QUANTIZER_SOURCE and not slow for _, source, slow in body)
    mfma_work = 0
    for name, _, _ in body:
        size = _MFMA.match(name)
        if size:
            mfma_work += int(size.group(1)) * int(size.group(2)) * int(size.group(3))
    needed = config.block_m * config.block_n * config.block_k
    per_element = quantizer / k_tiles / elements_per_lane
    fast_per_element = fast / k_tiles / elements_per_lane
    return dict(k_loop=body is not instructions, k_tile_instructions=round(len(body) / k_tiles, 1),
                quantizer_instructions_per_element=round(per_element, 1),
                fast_path_instructions_per_element=round(fast_per_element, 1),
                mfma_replication=round(mfma_work * config.num_warps / k_tiles / needed, 2))


def resource_row(shape, config, spec, quantizer: str, asm_dir=None) -> dict:
    m, n, k = shape
    row = dict(shape=[m, n, k], kernel=spec.name, quantizer=quantizer,
               config=dict(vars(config)), triton=triton.__version__)
    try:
        compiled = compile_for(spec.kernel, spec.sample_args, spec.options, GFX950)
    except Exception as error:  # reported as this row's result: the release rejects the kernel
        row["error"] = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
        return row
    amdgcn = compiled.asm["amdgcn"]
    vgprs, agprs = _metadata_int(amdgcn, "vgpr_count"), _metadata_int(amdgcn, "agpr_count")
    lds = compiled.metadata.shared + _metadata_int(amdgcn, "group_segment_fixed_size")
    num_warps = spec.options["num_warps"]
    workgroups = spec.grid[0] * spec.grid[1] * spec.grid[2]
    allocated = _metadata_int(amdgcn, "amdhsa_next_free_vgpr")
    row.update(
        vgprs=vgprs, agprs=agprs, sgprs=_metadata_int(amdgcn, "sgpr_count"),
        vgpr_spills=_metadata_int(amdgcn, "vgpr_spill_count"),
        sgpr_spills=_metadata_int(amdgcn, "sgpr_spill_count"),
        lds_bytes=lds, scratch_bytes=_metadata_int(amdgcn, "private_segment_fixed_size"),
        waves_per_simd=waves_per_simd(vgprs, agprs, lds, num_warps),
        allocated_vgprs=allocated,
        occupancy=occupancy(allocated, lds, num_warps, spec.options.get("waves_per_eu", 0)),
        workgroups=workgroups, cu_coverage=round(workgroups / CUS, 3),
        counts=instruction_counts(amdgcn), hazards=conversion_hazards(amdgcn))
    if spec.name == "gemm":
        row.update(per_k_tile(amdgcn, config, k))
        if config.splits_for(k)[0] > 1 and config.split_k_reduce == "last_program":
            row["release_ordered"] = release_ordered(amdgcn)
    if asm_dir is not None:
        c = config
        name = (f"{m}x{n}x{k}-{spec.name}-{row['quantizer']}-{c.block_m}x{c.block_n}x{c.block_k}"
                f"-s{c.split_k}-w{c.num_warps}-st{c.num_stages}-wpe{c.waves_per_eu}"
                f"-n{c.matrix_instr_nonkdim}{(c.cache_modifier or '').replace('.', '-')}.s")
        path = Path(asm_dir) / name
        path.write_text(amdgcn)
        row["asm"] = str(path)
    return row


def report(arch: str, quantizer: str, asm_dir=None) -> list:
    rows = []
    for (m, n, k), config in GEMM_CONFIGS[arch].items():
        for spec in launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer):
            rows.append(resource_row((m, n, k), config, spec, quantizer, asm_dir))
            print(f"tools.isa: compiled {m}x{n}x{k} {spec.name}", file=sys.stderr, flush=True)
    return rows


def candidates_report(quantizer: str, asm_dir=None) -> list:
    """Every import-time tuning candidate of gfx950 (launchers.tuner.candidate_configs: the
    table's entry first), each kernel of each; rows carry "candidate" (its index)."""
    from launchers.candidates import CANDIDATES
    from launchers.tuner import candidate_configs
    rows = []
    for m, n, k in CANDIDATES["gfx950"]:
        configs = candidate_configs("gfx950", (m, n, k))
        for index, config in enumerate(configs):
            for spec in launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer):
                rows.append(dict(resource_row((m, n, k), config, spec, quantizer, asm_dir),
                                 candidate=index))
            print(f"tools.isa: compiled {m}x{n}x{k} candidate {index + 1}/{len(configs)}",
                  file=sys.stderr, flush=True)
    return rows


def sweep(shapes, quantizer: str, asm_dir=None) -> list:
    from tools.tune import tile_candidates
    rows = []
    for m, n, k in shapes:
        candidates = tile_candidates("gfx950", m, n, k, CUS)
        for index, config in enumerate(candidates):
            spec = launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer)[0]
            rows.append(resource_row((m, n, k), config, spec, quantizer, asm_dir))
            print(f"tools.isa: compiled {m}x{n}x{k} candidate {index + 1}/{len(candidates)}",
                  file=sys.stderr, flush=True)
    return rows


def _source_commit(path: Path) -> str:
    relative = str(path.relative_to(ROOT))
    git = ["git", "-C", str(ROOT)]
    found = subprocess.run(git + ["log", "-1", "--format=%h", "--", relative],
                           capture_output=True, text=True)
    commit = found.stdout.strip() or "unknown"
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--", relative]).returncode != 0
    return commit + (" plus uncommitted changes" if dirty else "")


def compare_tritons(versions: list) -> str:
    """Compile the gfx950 table with each release and both quantizers: a markdown table."""
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for version in versions:
            for quantizer in ("hardware", "software"):
                out = Path(folder) / f"{version}-{quantizer}.json"
                print(f"tools.isa: compiling the gfx950 table with Triton {version}, {quantizer} quantizer",
                      file=sys.stderr, flush=True)
                run_with_triton(version, ["tools.isa", "--arch", "gfx950", "--triton", version,
                                          "--quantizer", quantizer, "--json", str(out)])
                rows = json.loads(out.read_text()) if out.exists() else []
                for row in rows:
                    key = (tuple(row["shape"]), row["kernel"], quantizer)
                    results.setdefault(key, {})[version] = row
    lines = [f"gfx950 table compiled by each Triton release ({datetime.date.today()}, "
             f"kernels/quantize.py at {_source_commit(QUANTIZER_SOURCE)}; "
             f"`python -m tools.isa --compare-tritons {','.join(versions)}`). Each cell: VGPRs · "
             f"occupancy (waves/SIMD) · spills · scratch bytes · {CVT}* · scaled MFMAs; "
             f"✗: the release does not compile it.", "",
             "| shape | kernel | config | quantizer | " + " | ".join(versions) + " |",
             "|---" * (4 + len(versions)) + "|"]
    for (shape, kernel, quantizer), by_version in results.items():
        config = next(iter(by_version.values()))["config"]
        cells = [_compare_cell(by_version.get(version)) for version in versions]
        lines.append(f"| {'x'.join(map(str, shape))} | {kernel} | {_config_text(config)} | "
                     f"{quantizer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _compare_cell(row) -> str:
    if row is None:
        return "✗ (no result)"
    if "error" in row:
        return f"✗ {row['error'][:80]}"
    return (f"{row['vgprs']} · {row['occupancy']} · {row['vgpr_spills'] + row['sgpr_spills']} · "
            f"{row['scratch_bytes']} · {_cvts(row)} · {_scaled_mfmas(row)}")


def _cvts(row) -> int:
    return sum(v for name, v in row["counts"].items() if name.startswith(CVT))


def _scaled_mfmas(row) -> int:
    return sum(v for name, v in row["counts"].items() if _SCALED_MFMA.match(name))


def _yes_no(flag) -> str:
    return "" if flag is None else ("yes" if flag else "no")


def _config_text(c: dict) -> str:
    return f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"


def ptx_instructions(ptx: str) -> Counter:
    body = ptx.split("{", 1)[-1]
    return Counter(_PTX_INSTRUCTION.findall(body))


def sm90_row(shape, config) -> dict:
    m, n, k = shape
    counts, grids = {}, {}
    for prequantized in (False, True):
        spec = launch_specs(config, "cuda", m, n, k, (k, 1), "meta",
                            a_prequantized=prequantized)[0]
        compiled = compile_for(spec.kernel, spec.sample_args, spec.options, SM90)
        counts[prequantized], grids[prequantized] = ptx_instructions(compiled.asm["ptx"]), spec.grid
    fused, prequantized = sum(counts[False].values()), sum(counts[True].values())
    programs = grids[False][0]
    k_tiles_per_program = formats.cdiv(config.splits_for(k)[1], config.block_k)
    warp_instructions = fused * config.num_warps * programs * k_tiles_per_program
    return dict(shape=[m, n, k], config=dict(vars(config)), triton=triton.__version__,
                ptx_fused=fused,
                ptx_a_prequantized=prequantized,
                quantizer_share=round(1 - prequantized / fused, 3),
                mma=sum(v for name, v in counts[False].items() if "mma" in name),
                programs=programs, est_warp_instructions=warp_instructions,
                est_issue_us=round(warp_instructions / (H200_SCHEDULERS * H200_CLOCK_GHZ * 1e3), 2))


def format_sm90_table(rows) -> str:
    lines = [f"{'shape':<16} {'cfg BMxBNxBK/S/w':<19} {'ptx':>6} {'ptx preq':>8} {'A quant':>7} "
             f"{'mma':>4} {'progs':>5} {'est warp instr':>14} {'µs at issue':>11}"]
    for row in rows:
        c = row["config"]
        cfg = f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"
        lines.append(f"{'x'.join(map(str, row['shape'])):<16} {cfg:<19} {row['ptx_fused']:>6} "
                     f"{row['ptx_a_prequantized']:>8} {row['quantizer_share']:>7.0%} "
                     f"{row['mma']:>4} {row['programs']:>5} {row['est_warp_instructions']:>14,} "
                     f"{row['est_issue_us']:>11}")
    return "\n".join(lines)


def format_table(rows) -> str:
    header = (f"{'shape':<16} {'kernel':<7} {'config':<34} {'vgpr':>4} {'agpr':>4} "
              f"{'sgpr':>4} {'lds':>6} {'scr':>3} {'spill':>5} {'occ':>3} {'WGs':>5} {'WG/CU':>5} "
              f"{'cvt_fp4':>7} {'mfma_scale':>10} {'q/elem':>6} {'q/fast':>6} {'mfma_x':>6} {'rel':>3} {'hz':>3}")
    lines = [header]
    for row in rows:
        head = (f"{'x'.join(map(str, row['shape'])):<16} {row['kernel']:<7} "
                f"{GemmConfig(**row['config']).label:<34}")
        if "error" in row:
            lines.append(f"{head} does not compile: {row['error']}")
            continue
        gemm = row["kernel"] == "gemm"
        lines.append(
            f"{head} {row['vgprs']:>4} {row['agprs']:>4} {row['sgprs']:>4} {row['lds_bytes']:>6} "
            f"{row['scratch_bytes']:>3} {row['vgpr_spills'] + row['sgpr_spills']:>5} "
            f"{row['occupancy']:>3} {row['workgroups']:>5} {row['cu_coverage']:>5} "
            f"{_cvts(row):>7} {_scaled_mfmas(row):>10} "
            f"{row['quantizer_instructions_per_element'] if gemm else '':>6} "
            f"{row['fast_path_instructions_per_element'] if gemm else '':>6} "
            f"{row['mfma_replication'] if gemm else '':>6} "
            f"{_yes_no(row.get('release_ordered')):>3} {len(row['hazards']):>3}")
    return "\n".join(lines)


_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def _version(word: str) -> str:
    if not _VERSION.match(word):
        raise argparse.ArgumentTypeError(f"expected a Triton release like 3.6.0, got {word!r}")
    return word


def _versions(word: str) -> list:
    return [_version(v) for v in word.split(",")]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m tools.isa",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["gfx950", "sm_90"], default="gfx950")
    parser.add_argument("--quantizer", choices=QUANTIZERS, default="hardware",
                        help="the gfx950 in-register quantizer (default hardware)")
    parser.add_argument("--json", help="write the rows as a JSON list to this file")
    parser.add_argument("--asm-dir", metavar="DIR",
                        help="write each gfx950 row's assembly into DIR (the row's \"asm\")")
    parser.add_argument("--sweep", nargs="+", metavar="SHAPES",
                        help="report tools.tune's stage-1 candidates for these shapes instead: "
                             + SHAPES_HELP)
    parser.add_argument("--candidates", action="store_true",
                        help="report every gfx950 import-time tuning candidate "
                             "(launchers/candidates.py, the table's entry first) instead")
    parser.add_argument("--triton", default=RUNNER_TRITON, type=_version, metavar="VERSION",
                        help=f"the Triton release that compiles (default {RUNNER_TRITON}, the "
                             "runner's); installed into .triton/VERSION on first use")
    parser.add_argument("--compare-tritons", type=_versions, metavar="V1,V2,...",
                        help="compile the gfx950 table with each release and both quantizers "
                             "and print a markdown table of them side by side")
    parser.add_argument("--markdown", metavar="FILE",
                        help="with --compare-tritons: also write the markdown table to FILE")
    args = parser.parse_args(argv)
    try:
        sweep_shapes = parse_plain_shapes(args.sweep) if args.sweep else None
    except UsageError as error:
        return usage_error("tools.isa", error)
    if args.compare_tritons:
        if args.arch != "gfx950" or args.sweep or args.candidates or args.json or args.asm_dir:
            parser.error("--compare-tritons takes only --arch gfx950 and --markdown")
        table = compare_tritons(args.compare_tritons)
        print(table)
        if args.markdown:
            Path(args.markdown).write_text(table + "\n")
        return 0
    if args.markdown:
        parser.error("--markdown goes with --compare-tritons")
    if args.candidates and (args.sweep or args.arch != "gfx950"):
        parser.error("--candidates takes neither --sweep nor --arch sm_90")
    if triton.__version__ != args.triton:
        if os.environ.get(SIDE_TRITON_ENV) == args.triton:
            print(f"tools.isa: the side install of Triton {args.triton} did not load "
                  f"(this process has {triton.__version__} at {triton.__file__})", file=sys.stderr)
            return 1
        return run_with_triton(args.triton, ["tools.isa", *argv])
    if args.arch == "sm_90":
        rows = [sm90_row(shape, config) for shape, config in GEMM_CONFIGS["sm_90"].items()]
        print(format_sm90_table(rows))
    else:
        if args.asm_dir:
            os.makedirs(args.asm_dir, exist_ok=True)
        if args.candidates:
            rows = candidates_report(args.quantizer, args.asm_dir)
        elif sweep_shapes:
            rows = sweep(sweep_shapes, args.quantizer, args.asm_dir)
        else:
            rows = report(args.arch, args.quantizer, args.asm_dir)
        print(format_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failed = [row for row in rows if "error" in row]
    for row in failed:
        print(f"tools.isa: {'x'.join(map(str, row['shape']))} {row['kernel']} does not compile "
              f"with Triton {row['triton']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
