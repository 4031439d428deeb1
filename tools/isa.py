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
not forward (tools.gfx950.hazards), with its line and the reader's. With --asm-dir, each
row's assembly is written there and the row names its file ("asm"). --compare-tritons
compiles the table with each release and both quantizers and prints a markdown table of them
side by side. Runs offline on a CPU: no AMD GPU is involved.

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

Every gfx950 kernel row carries "critical_path": {"instructions", "global_round_trips",
"lds_waits", "barriers", "busiest_simd_issue"}, the path of one wave from entry to s_endpgm on
ordinary data (tools.gfx950.critical_path: the K loop runs the K tiles one program handles,
less those peeled out of it; the quantizer's uniform branch takes its fast path, told by the
.loc chains as above, its `if fast:` body against its `else`), and "launches_per_call". The
busiest-SIMD issue is the path's instructions times the waves the busiest SIMD runs: the
launch's workgroups dealt evenly over the 256 CUs, those that cannot be resident at once
(occupancy) in rounds. A GEMM that reduces split-K in the kernel takes the `arrived ==
SPLIT_K - 1` branch: "critical_path" is the last program's, "critical_path_other_programs"
the others'. Code the walker cannot follow gives "critical_path_error" instead (and exit
status 1). Except with --sweep, a second table gives per call (the GEMM and its reduce
launch): launches, global round trips per launch · LDS waits · barriers, and the
busiest-SIMD issue of its launches, with aiter's figures beside the benchmark shapes
(AITER_CRITICAL_PATH).

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
from tools.gfx950.assembly import k_loop, mfma_shape, parse, source_files  # noqa: E402
from tools.gfx950.critical_path import CUS, SIMDS_PER_CU, busiest_simd_waves, walk  # noqa: E402
from tools.gfx950.hazards import asm_hazards  # noqa: E402
from tools.release_order import release_ordered  # noqa: E402
from tools.cross_compile import (GFX950, ROOT, RUNNER_TRITON, SIDE_TRITON_ENV, SM90,  # noqa: E402
                                 compile_for, run_with_triton)

LDS_PER_CU = 160 * 1024
VGPRS_PER_SIMD_LANE = 512
MAX_WAVES_PER_SIMD = 8
WAVE = 64
CVT = "v_cvt_scalef32_pk_fp4_"   # the quantizer instruction: _f32 or _bf16 sources
QUANTIZER_SOURCE = ROOT / "kernels" / "quantize.py"
GEMM_SOURCE = ROOT / "kernels" / "preshuffle_gemm.py"
# aiter's Triton gemm_a16wfp4_preshuffle (the same design: A quantized inside the GEMM,
# preshuffled MXFP4 B) at the runner's aiter commit with aiter's own gfx950 configs, compiled
# by Triton 3.6.0 and walked the way tools.gfx950.critical_path walks ours, per benchmark
# shape: (global round trips per launch, LDS waits, barriers, busiest-SIMD issue).
AITER_CRITICAL_PATH = {
    (4, 2880, 512): ((2,), 11, 7, 2132),
    (16, 2112, 7168): ((1, 2), 47, 12, 2658),
    (32, 4096, 512): ((2,), 11, 7, 2132),
    (32, 2880, 512): ((2,), 11, 7, 2132),
    (64, 7168, 2048): ((8,), 48, 32, 6674),
    (256, 3072, 1536): ((12,), 72, 48, 10340),
}
_SCALED_MFMA = re.compile(r"^v_mfma_scale_")
_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%p\d+\s+)?([a-z][\w.]*)", re.MULTILINE)
H200_SCHEDULERS = 132 * 4
H200_CLOCK_GHZ = 1.98


def _metadata_int(amdgcn: str, key: str) -> int:
    found = re.search(rf"\.{key}:?\s+(\d+)", amdgcn)
    return int(found.group(1)) if found else 0


def instruction_counts(program) -> dict:
    return dict(sorted(Counter(i.mnemonic for i in program.instructions).items()))


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


def _project_frame_resolver(amdgcn: str) -> dict:
    """file name -> its path, for the project's source files named by the .file directives;
    None for Triton's own library files (the quantizer's calls of tl.max and the like)."""
    library = Path(triton.__file__).resolve().parent
    resolved = {}
    for name, paths in source_files(amdgcn).items():
        found = {Path(path).resolve() for path in paths}
        outside = {p for p in found if library not in p.parents}
        if outside and len(found) > 1:
            raise ValueError(f"source file name {name} is ambiguous in the assembly: "
                             f"{sorted(found)}")
        resolved[name] = next(iter(outside)) if outside else None
    return resolved


def _frames(instruction, project: dict) -> list:
    """The instruction's inlining chain as (project source path or None, line), innermost
    first."""
    return [(project.get(name), line) for name, line in instruction.frames]


def _branch_lines(path: Path, function: str, test) -> tuple:
    """(lines of the body, lines of the else branch) of the first `if` in `function` of the
    source file `path` whose test satisfies test(node)."""
    tree = ast.parse(path.read_text())
    defined = next(node for node in ast.walk(tree)
                   if isinstance(node, ast.FunctionDef) and node.name == function)
    branch = next(node for node in ast.walk(defined)
                  if isinstance(node, ast.If) and test(node.test))
    return tuple(range(part[0].lineno, part[-1].end_lineno + 1) if part else range(0)
                 for part in (branch.body, branch.orelse))


def _quantizer_branch(path: Path = QUANTIZER_SOURCE) -> tuple:
    """(fast, slow) source lines of `if fast:` in quantize_tile_mxfp4."""
    return _branch_lines(path, "quantize_tile_mxfp4",
                         lambda test: isinstance(test, ast.Name) and test.id == "fast")


def fast_path_lines(path: Path = QUANTIZER_SOURCE) -> range:
    """The source lines of the quantizer's fast path: the body of `if fast:` in
    quantize_tile_mxfp4 (what a tile of ordinary values runs)."""
    return _quantizer_branch(path)[0]


def slow_path_lines(path: Path = QUANTIZER_SOURCE) -> range:
    """The source lines of the quantizer's slow path: the `else` branch of `if fast:` in
    quantize_tile_mxfp4 (what a tile with a NaN, inf or extreme block amax runs)."""
    return _quantizer_branch(path)[1]


def last_program_lines(path: Path = GEMM_SOURCE) -> range:
    """The source lines only the last program of an output tile runs in a GEMM that reduces
    split-K in the kernel: the body of `if arrived == SPLIT_K - 1:`."""
    return _branch_lines(path, "preshuffle_gemm_kernel",
                         lambda test: isinstance(test, ast.Compare)
                         and isinstance(test.left, ast.Name) and test.left.id == "arrived")[0]


def branch_side(project: dict, last_program: bool = True):
    """side(instruction) for tools.gfx950.critical_path.walk, from the inlining chain: "off" on
    the quantizer's slow path, "on" on its fast path (ordinary data); on the last program's
    split-K reduce, "on" for the last program, "off" for the others."""
    fast, slow, last = fast_path_lines(), slow_path_lines(), last_program_lines()

    def side(instruction):
        frames = _frames(instruction, project)
        if any(path == QUANTIZER_SOURCE and line in slow for path, line in frames):
            return "off"
        if any(path == GEMM_SOURCE and line in last for path, line in frames):
            return "on" if last_program else "off"
        if any(path == QUANTIZER_SOURCE and line in fast for path, line in frames):
            return "on"
        return None
    return side


def k_tiles_per_program(config, k: int) -> int:
    return formats.cdiv(config.splits_for(k)[1], config.block_k)


def per_k_tile(program, project: dict, config, k: int) -> dict:
    """Quantizer instructions per A element per lane, and MFMA replication, per K tile."""
    loop = k_loop(program)
    body = program.instructions if loop is None else program.instructions[loop[0]:loop[1] + 1]
    k_tiles = 1 if loop is not None else k_tiles_per_program(config, k)
    elements_per_lane = config.block_m * config.block_k / (WAVE * config.num_warps)
    slow_lines = slow_path_lines()
    quantizer = fast = mfma_work = 0
    for instruction in body:
        frames = _frames(instruction, project)
        if next((path for path, _ in frames if path), None) == QUANTIZER_SOURCE:
            quantizer += 1
            fast += not any(path == QUANTIZER_SOURCE and line in slow_lines
                            for path, line in frames)
        size = mfma_shape(instruction.mnemonic)
        if size:
            mfma_work += size[0] * size[1] * size[2]
    needed = config.block_m * config.block_n * config.block_k
    lane_elements = k_tiles * elements_per_lane
    return dict(k_loop=loop is not None,
                k_tile_instructions=round(len(body) / k_tiles, 1),
                quantizer_instructions_per_element=round(quantizer / lane_elements, 1),
                fast_path_instructions_per_element=round(fast / lane_elements, 1),
                mfma_replication=round(mfma_work * config.num_warps / k_tiles / needed, 2))


def critical_paths(program, project: dict, k_tiles: int, waves_on_busiest_simd: int,
                   reduces_in_kernel: bool) -> dict:
    """{"critical_path": {instructions, global_round_trips, lds_waits, barriers,
    busiest_simd_issue}} of one wave on ordinary data (tools.gfx950.critical_path); a GEMM that
    reduces split-K in the kernel: the last program's, and "critical_path_other_programs"."""
    def figures(last_program):
        path = walk(program, branch_side(project, last_program), k_tiles)
        return dict(path._asdict(), busiest_simd_issue=waves_on_busiest_simd * path.instructions)
    found = dict(critical_path=figures(True))
    if reduces_in_kernel:
        found["critical_path_other_programs"] = figures(False)
    return found


def _asm_name(shape, kernel: str, quantizer: str, config) -> str:
    label = re.sub(r"[^\w.]+", "-", config.label).replace(".", "")
    nonkdim = f"-n{config.matrix_instr_nonkdim}" if config.matrix_instr_nonkdim != 16 else ""
    reduce = f"-r{config.reduce_block_m}x{config.reduce_block_n}" if kernel == "reduce" else ""
    return f"{'x'.join(map(str, shape))}-{kernel}-{quantizer}-{label}{nonkdim}{reduce}.s"


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
    program, project = parse(amdgcn), _project_frame_resolver(amdgcn)
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
        counts=instruction_counts(program), hazards=asm_hazards(amdgcn))
    gemm = spec.name == "gemm"
    reduces_in_kernel = (gemm and config.splits_for(k)[0] > 1
                         and config.split_k_reduce == "last_program")
    if gemm:
        row.update(per_k_tile(program, project, config, k))
    if reduces_in_kernel:
        row["release_ordered"] = release_ordered(amdgcn)
    waves = busiest_simd_waves(workgroups, num_warps, row["occupancy"])
    try:
        row.update(critical_paths(program, project, k_tiles_per_program(config, k) if gemm else 1,
                                  waves, reduces_in_kernel))
    except ValueError as error:   # the walker cannot follow this code: reported, not guessed
        row["critical_path_error"] = str(error)
    if asm_dir is not None:
        path = Path(asm_dir) / _asm_name(shape, spec.name, quantizer, config)
        path.write_text(amdgcn)
        row["asm"] = str(path)
    return row


def report(arch: str, quantizer: str, asm_dir=None) -> list:
    rows = []
    for (m, n, k), config in GEMM_CONFIGS[arch].items():
        specs = launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer)
        for spec in specs:
            rows.append(dict(resource_row((m, n, k), config, spec, quantizer, asm_dir),
                             launches_per_call=len(specs)))
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
            specs = launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer)
            for spec in specs:
                rows.append(dict(resource_row((m, n, k), config, spec, quantizer, asm_dir),
                                 candidate=index, launches_per_call=len(specs)))
            print(f"tools.isa: compiled {m}x{n}x{k} candidate {index + 1}/{len(configs)}",
                  file=sys.stderr, flush=True)
    return rows


def sweep(shapes, quantizer: str, asm_dir=None) -> list:
    from tools.tune import tile_candidates
    rows = []
    for m, n, k in shapes:
        candidates = tile_candidates("gfx950", m, n, k, CUS)
        for index, config in enumerate(candidates):
            specs = launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer)
            rows.append(dict(resource_row((m, n, k), config, specs[0], quantizer, asm_dir),
                             launches_per_call=len(specs)))
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


def per_call(rows) -> list:
    """The rows of one call of each config (its GEMM row and the reduce row after it) summed
    up: [{"shape", "config", "candidate" (None for the table), "launches", "global_round_trips"
    (per launch), "lds_waits", "barriers", "busiest_simd_issue", "others" (the other programs'
    (round trips, LDS waits, barriers) where split-K is reduced in the kernel, else None)}].
    Rows whose critical path is missing (a compile error) leave their call out."""
    calls = []
    for row in rows:
        if row["kernel"] == "gemm":
            calls.append([row])
        elif calls and calls[-1][0]["shape"] == row["shape"]:
            calls[-1].append(row)
    found = []
    for call in calls:
        if any("critical_path" not in row for row in call):
            continue
        paths = [row["critical_path"] for row in call]
        others = call[0].get("critical_path_other_programs")
        found.append(dict(
            shape=tuple(call[0]["shape"]), config=call[0]["config"],
            candidate=call[0].get("candidate"), launches=len(call),
            global_round_trips=[p["global_round_trips"] for p in paths],
            lds_waits=sum(p["lds_waits"] for p in paths),
            barriers=sum(p["barriers"] for p in paths),
            busiest_simd_issue=sum(p["busiest_simd_issue"] for p in paths),
            others=others and (others["global_round_trips"], others["lds_waits"],
                               others["barriers"])))
    return found


def _trips(per_launch) -> str:
    return str(per_launch[0]) if len(per_launch) == 1 else f"({'+'.join(map(str, per_launch))})"


def format_critical_paths(rows) -> str:
    """Per call: launches; global round trips · LDS waits · barriers of one program's critical
    path; busiest-SIMD issue; aiter's figures beside the benchmark shapes."""
    lines = ["critical path of one program per call (tools.gfx950.critical_path): launches, "
             "global round trips · LDS waits · barriers (split-K reduced in the kernel: the last "
             "program; the others in brackets), busiest-SIMD issue; aiter's "
             "gemm_a16wfp4_preshuffle beside",
             f"{'shape':<16} {'config':<40} {'launches':>8}  {'RT · LDS · barriers':<36} "
             f"{'issue':>6}   aiter"]
    shown = set()
    for call in per_call(rows):
        candidate = "" if call["candidate"] is None else f"#{call['candidate']} "
        path = (f"{_trips(call['global_round_trips'])} · {call['lds_waits']} · "
                f"{call['barriers']}")
        if call["others"]:
            path += " (others {} · {} · {})".format(*call["others"])
        aiter = None if call["shape"] in shown else AITER_CRITICAL_PATH.get(call["shape"])
        shown.add(call["shape"])
        aiter_text = "" if aiter is None else (
            f"{len(aiter[0])}, {_trips(aiter[0])} · {aiter[1]} · {aiter[2]}, {aiter[3]}")
        lines.append(f"{'x'.join(map(str, call['shape'])):<16} "
                     f"{candidate + GemmConfig(**call['config']).label:<40} "
                     f"{call['launches']:>8}  {path:<36} {call['busiest_simd_issue']:>6}   "
                     f"{aiter_text}".rstrip())
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
        if not sweep_shapes:    # a sweep compiles the GEMMs alone, not whole calls
            print()
            print(format_critical_paths(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failed = [row for row in rows if "error" in row]
    for row in failed:
        print(f"tools.isa: {'x'.join(map(str, row['shape']))} {row['kernel']} does not compile "
              f"with Triton {row['triton']}: {row['error']}", file=sys.stderr)
    unwalked = [row for row in rows if "critical_path_error" in row]
    for row in unwalked:
        print(f"tools.isa: {'x'.join(map(str, row['shape']))} {row['kernel']}: no critical path: "
              f"{row['critical_path_error']}", file=sys.stderr)
    return 1 if failed or unwalked else 0


if __name__ == "__main__":
    sys.exit(main())
