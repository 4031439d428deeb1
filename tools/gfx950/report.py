"""The gfx950 report: cross-compile each kernel of a call (Triton's HIP backend, offline) and
read its resources, quantizer cost, hazards, release order, critical path and modelled time.

`report(quantizer)` covers the gfx950 config table (the 10 task shapes), `candidates_report`
every import-time tuning candidate, `tools.gfx950.search` the config space; `python -m
tools.isa` prints them. Per kernel (the GEMM, and the split-K reduce where the config splits K
with a second launch): VGPRs, AGPRs, SGPRs, LDS bytes, scratch bytes, spills, occupancy,
workgroups against the 256 CUs, and instruction counts. A GEMM row whose config reduces
split-K in the kernel (split_k_reduce "last_program") carries "release_ordered"
(tools.gfx950.release_order). Every row carries "hazards" (tools.gfx950.hazards).

Occupancy (CDNA3/4, wave64): 512 unified VGPRs per SIMD lane, allocated in granules of 8;
160 KiB of LDS and 4 SIMDs per CU; at most 8 waves per SIMD. "waves_per_simd" is the estimate
from the registers the code uses; "occupancy" is the real one: the same from the allocation in
the kernel descriptor (.amdhsa_next_free_vgpr, which LLVM pads to 169 for waves_per_eu 2 and
257 for 1), and at most waves_per_eu where that is set (0: no limit).

GEMM rows also give, per K tile (the K-loop body where there is a K loop, "k_loop", else the
whole kernel divided by the K tiles each program handles), "k_tile_instructions" (the static
instructions one wave runs per K tile) and:
- "quantizer_instructions_per_element": the static instructions of the in-register quantizer
  per A element each lane holds (A_ROWS*BLOCK_K / (64*num_warps); A_ROWS: the rows of A a
  program quantizes, BLOCK_M or fewer where M is smaller). An instruction is the
  quantizer's when the innermost frame of its inlining chain that lies in the project (not in
  Triton's own library, e.g. standard.py for tl.max) is kernels/quantize.py. The chain is the
  comment LLVM writes after each .loc directive ("f.py:L:C @[ caller.py:L:C @[ ... ] ]"); its
  file names are resolved through the .file directives.
- "fast_path_instructions_per_element": the same without the quantizer's slow path (an
  instruction whose chain holds a line of the `else` branch of `if fast:` in
  quantize_tile_mxfp4): what a tile of ordinary values (no NaN, inf or extreme block amax)
  spends. LLVM may merge or move instructions across the branch; the attribution follows
  their .loc. "fast_path_instructions_per_tile_element": the same over the BLOCK_M rows of
  the tile the MFMA takes (equal where A_ROWS is BLOCK_M): the quantizer's budget, which a
  program quantizing fewer rows may spend on fewer elements.
- "mfma_replication": the MFMA work the workgroup issues (static count x MFMA M*N*K x waves,
  scaled MFMAs or, where Triton lowers dot_scaled to them, bf16 ones) over the tile's
  BLOCK_M*BLOCK_N*BLOCK_K; 1 means no wave repeats another's products.

Every kernel row carries "critical_path": {"instructions", "global_round_trips", "lds_waits",
"barriers", "issue_cycles", "latency_cycles", "busiest_simd_issue", "busiest_simd_cycles"}, the
path of one wave from entry to s_endpgm on ordinary data (tools.gfx950.critical_path: the K
loop runs the K tiles one program handles, less those peeled out of it; the quantizer's
uniform branch takes its fast path, told by the .loc chains as above, its `if fast:` body
against its `else`), and "launches_per_call". The busiest-SIMD issue is the path's
instructions times the waves the busiest SIMD runs: the launch's workgroups dealt evenly over
the 256 CUs, those that cannot be resident at once (occupancy) in rounds; its cycles, each
round's cycle walk plus the issue of the round's other waves. Each row of a call carries the
call's modelled time through the runner's harness under every member of tools.gfx950.model's
family ("modelled_us_by_member"), their range ("modelled_range": low, high and the members at
either end), the family's maximum, by which configs are chosen ("modelled_us"), and the
(member, term) pairs whose value lies outside the calibration points' range
("outside_calibration"). A GEMM that reduces split-K in the kernel takes the
`arrived == SPLIT_K - 1` branch: "critical_path" is the last program's,
"critical_path_other_programs" the others'. Code the walker cannot follow gives
"critical_path_error" instead.
"""

import ast
import re
import sys
from collections import Counter
from pathlib import Path

import triton

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.preshuffle_gemm import a_rows
from mxfp4_mm.launchers.configs import GEMM_CONFIGS
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES
from mxfp4_mm.launchers import targets
from mxfp4_mm.launchers.gemm import launch_specs
from . import model
from .assembly import k_loop, mfma_shape, parse, source_files
from .critical_path import (CUS, SIMDS_PER_CU, busiest_simd_cycles,
                            busiest_simd_rounds, walk)
from .cross_compile import GFX950, ROOT, compile_for
from .hazards import asm_hazards
from .release_order import release_ordered

LDS_PER_CU = targets.GFX950.shared_memory_bytes
VGPRS_PER_SIMD_LANE = targets.GFX950.registers
MAX_WAVES_PER_SIMD = 8
WAVE = 64
CVT = "v_cvt_scalef32_pk_fp4_"   # the quantizer instruction: _f32 or _bf16 sources
QUANTIZER_SOURCE = ROOT / "kernels" / "quantize.py"
EPILOGUE_SOURCE = ROOT / "kernels" / "splitk_reduce.py"   # the GEMMs' store_output_tile
_SCALED_MFMA = re.compile(r"^v_mfma_scale_")


def _metadata_int(amdgcn: str, key: str) -> int:
    found = re.search(rf"\.{key}:?\s+(\d+)", amdgcn)
    return int(found.group(1)) if found else 0


def lds_bytes(compiled, amdgcn: str) -> int:
    """The LDS a workgroup of a compiled gfx950 kernel takes: Triton's dynamic share and the
    code object's fixed group segment."""
    return compiled.metadata.shared + _metadata_int(amdgcn, "group_segment_fixed_size")


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


def last_program_lines(path: Path = EPILOGUE_SOURCE) -> range:
    """The source lines only the last program of an output tile runs in a GEMM that reduces
    split-K in the kernel: the body of `if arrived == SPLIT_K - 1:` in store_output_tile."""
    return _branch_lines(path, "store_output_tile",
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
        if any(path == EPILOGUE_SOURCE and line in last for path, line in frames):
            return "on" if last_program else "off"
        if any(path == QUANTIZER_SOURCE and line in fast for path, line in frames):
            return "on"
        return None
    return side


def k_tiles_per_program(config, k: int) -> int:
    return formats.cdiv(config.splits_for(k)[1], config.block_k)


def per_k_tile(program, project: dict, config, m: int, k: int) -> dict:
    """Quantizer instructions per A element per lane (the rows a program quantizes:
    kernels.preshuffle_gemm.a_rows), its fast path's per element of the BLOCK_M-row tile the
    MFMA takes, and MFMA replication, per K tile."""
    loop = k_loop(program)
    body = program.instructions if loop is None else program.instructions[loop[0]:loop[1] + 1]
    k_tiles = 1 if loop is not None else k_tiles_per_program(config, k)
    elements_per_lane = a_rows(m, config.block_m) * config.block_k / (WAVE * config.num_warps)
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
                fast_path_instructions_per_tile_element=round(
                    fast / lane_elements * a_rows(m, config.block_m) / config.block_m, 1),
                mfma_replication=round(mfma_work * config.num_warps / k_tiles / needed, 2))


def critical_paths(program, project: dict, k_tiles: int, rounds: list,
                   reduces_in_kernel: bool) -> dict:
    """{"critical_path": {instructions, global_round_trips, lds_waits, barriers, issue_cycles,
    latency_cycles, busiest_simd_issue, busiest_simd_cycles}} of one wave on ordinary data
    (tools.gfx950.critical_path; rounds: the waves the busiest SIMD runs in each round); a
    GEMM that reduces split-K in the kernel: the last program's, and
    "critical_path_other_programs"."""
    def figures(last_program):
        path = walk(program, branch_side(project, last_program), k_tiles)
        return dict(path._asdict(), latency_cycles=list(path.latency_cycles),
                    busiest_simd_issue=sum(rounds) * path.instructions,
                    busiest_simd_cycles=list(busiest_simd_cycles(path, rounds)))
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
    lds = lds_bytes(compiled, amdgcn)
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
        row.update(per_k_tile(program, project, config, m, k))
    if reduces_in_kernel:
        row["release_ordered"] = release_ordered(amdgcn)
    rounds = busiest_simd_rounds(workgroups, num_warps, row["occupancy"])
    try:
        row.update(critical_paths(program, project, k_tiles_per_program(config, k) if gemm else 1,
                                  rounds, reduces_in_kernel))
    except ValueError as error:   # the walker cannot follow this code: reported, not guessed
        row["critical_path_error"] = str(error)
    if asm_dir is not None:
        path = Path(asm_dir) / _asm_name(shape, spec.name, quantizer, config)
        path.write_text(amdgcn)
        row["asm"] = str(path)
    return row


def call_rows(shape, config, quantizer: str, asm_dir=None, **extra) -> list:
    """The rows of one call of `config` on `shape` (its GEMM, then its reduce launch), each with
    "launches_per_call", the call's modelled figures (modelled_figures) and `extra`."""
    m, n, k = shape
    specs = launch_specs(config, "hip", m, n, k, (k, 1), "meta", quantizer)
    rows = [dict(resource_row(shape, config, spec, quantizer, asm_dir),
                 launches_per_call=len(specs), **extra) for spec in specs]
    figures = modelled_figures(rows)
    for row in rows:
        row.update(figures)
    return rows


def model_call(rows) -> model.Call:
    """What tools.gfx950.model reads off the rows of one call; None where a row has no path."""
    if any("critical_path" not in row for row in rows):
        return None
    gemm = next(row for row in rows if row["kernel"] == "gemm")
    return model.launches_call(rows[0]["shape"], [row["critical_path"] for row in rows],
                               gemm["workgroups"])


def modelled_figures(rows) -> dict:
    """The call's modelled µs through the runner's harness: {"modelled_us" (the family's
    maximum), "modelled_us_by_member", "modelled_range", "outside_calibration"}; modelled_us
    None without a critical path."""
    call = model_call(rows)
    if call is None:
        return dict(modelled_us=None)
    data, family = model.calibrated()
    found = family.range(call, data)
    return dict(modelled_us=round(found.high, 2),
                modelled_us_by_member={name: round(us, 2)
                                       for name, us in family.figures(call, data).items()},
                modelled_range=dict(low=round(found.low, 2), high=round(found.high, 2),
                                    low_member=found.low_member,
                                    high_member=found.high_member),
                outside_calibration=[list(pair) for pair in found.outside])


def report(quantizer: str, asm_dir=None) -> list:
    """Every entry of the gfx950 config table."""
    rows = []
    for shape, config in GEMM_CONFIGS["gfx950"].items():
        rows += call_rows(shape, config, quantizer, asm_dir)
        print(f"tools.isa: compiled {'x'.join(map(str, shape))}", file=sys.stderr, flush=True)
    return rows


def candidates_report(quantizer: str, asm_dir=None) -> list:
    """Every import-time tuning candidate of gfx950 (launchers.tuner.candidate_configs: the
    table's entry first), each kernel of each; rows carry "candidate" (its index)."""
    from mxfp4_mm.launchers.candidates import CANDIDATES
    from mxfp4_mm.launchers.tuner import candidate_configs
    rows = []
    for shape in CANDIDATES["gfx950"]:
        configs = candidate_configs("gfx950", shape)
        for index, config in enumerate(configs):
            rows += call_rows(shape, config, quantizer, asm_dir, candidate=index)
            print(f"tools.isa: compiled {'x'.join(map(str, shape))} candidate "
                  f"{index + 1}/{len(configs)}", file=sys.stderr, flush=True)
    return rows


def _cvts(row) -> int:
    return sum(v for name, v in row["counts"].items() if name.startswith(CVT))


def _scaled_mfmas(row) -> int:
    return sum(v for name, v in row["counts"].items() if _SCALED_MFMA.match(name))


def _yes_no(flag) -> str:
    return "" if flag is None else ("yes" if flag else "no")


def _config_text(c: dict) -> str:
    return f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"


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
    (per launch), "lds_waits", "barriers", "busiest_simd_issue", "modelled_us",
    "modelled_us_by_member", "modelled_range", "outside_calibration", "others" (the
    other programs' (round trips, LDS waits, barriers) where split-K is reduced in the kernel,
    else None)}]. Rows whose critical path is missing (a compile error) leave their call out."""
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
            modelled_us=call[0]["modelled_us"],
            modelled_us_by_member=call[0]["modelled_us_by_member"],
            modelled_range=call[0]["modelled_range"],
            outside_calibration=call[0]["outside_calibration"],
            others=others and (others["global_round_trips"], others["lds_waits"],
                               others["barriers"])))
    return found


def _trips(per_launch) -> str:
    return str(per_launch[0]) if len(per_launch) == 1 else f"({'+'.join(map(str, per_launch))})"


def _range_text(low: float, high: float) -> str:
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"


def _call_range(call: dict) -> str:
    found = call["modelled_range"]
    return _range_text(found["low"], found["high"])


def benchmark_summary(calls) -> dict:
    """Per benchmark shape of the table's calls: {shape: {"ours", "aiter", "public": {member:
    modelled µs}, "point": the best public config's id, "measured": its µs}}, and under
    "geomean" {"ours", "aiter", "public": {member: geomean}}. aiter's is its own config's point
    (model.aiter_points), the best public config the fastest measured (model.best_public)."""
    data, family = model.calibrated()
    best, aiter = model.best_public(data), model.aiter_points(data)
    found = {}
    for call in calls:
        shape = call["shape"]
        if call["candidate"] not in (None, 0) or shape not in BENCHMARK_SHAPES or shape in found:
            continue
        point, public_call, measured = best[shape]
        found[shape] = dict(ours=call["modelled_us_by_member"],
                            aiter=family.figures(aiter[shape][1], data),
                            public=family.figures(public_call, data), point=point,
                            measured=measured)
    if set(found) == set(BENCHMARK_SHAPES):
        found["geomean"] = {
            side: {name: model.geomean(found[s][side][name] for s in BENCHMARK_SHAPES)
                   for name in family.fits} for side in ("ours", "aiter", "public")}
    return found


def _extremes(figures: dict) -> str:
    return _range_text(min(figures.values()), max(figures.values()))


def _aiter_path_text(point) -> str:
    kernels = point["kernels"]
    trips = [k["global_round_trips"] for k in kernels]
    return (f"{len(kernels)}, {_trips(trips)} · {sum(k['lds_waits'] for k in kernels)} · "
            f"{sum(k['barriers'] for k in kernels)}, "
            f"{sum(k['busiest_simd_issue'] for k in kernels)}")


def family_lines(family: model.Family) -> list:
    """One line per member: its name and fit (model.Fit.describe)."""
    return [f"  {name}: {fit.describe()}" for name, fit in family.fits.items()]


def format_critical_paths(rows) -> str:
    """Per call: launches; global round trips · LDS waits · barriers of one program's critical
    path; busiest-SIMD issue; modelled µs as a range over the model family (the members at
    either end named; "*" where a figure extrapolates past the calibration data); aiter's
    figures beside the benchmark shapes. Then, per benchmark shape, the ranges of ours, aiter's
    and the best public config's, the geomeans, and each member with its errors."""
    data, family = model.calibrated()
    aiter = model.aiter_points(data)
    calls = per_call(rows)
    lines = ["critical path of one program per call (tools.gfx950.critical_path): launches, "
             "global round trips · LDS waits · barriers (split-K reduced in the kernel: the last "
             "program; the others in brackets), busiest-SIMD issue, modelled µs over the family "
             "(tools.gfx950.model; low .. high member; * outside the calibration data); aiter's "
             "gemm_a16wfp4_preshuffle with its own config beside",
             f"{'shape':<16} {'config':<40} {'launches':>8}  {'RT · LDS · barriers':<36} "
             f"{'issue':>6} {'model µs':>12}  {'members (low .. high)':<38} aiter"]
    shown = set()
    for call in calls:
        candidate = "" if call["candidate"] is None else f"#{call['candidate']} "
        path = (f"{_trips(call['global_round_trips'])} · {call['lds_waits']} · "
                f"{call['barriers']}")
        if call["others"]:
            path += " (others {} · {} · {})".format(*call["others"])
        found = call["modelled_range"]
        members = f"{found['low_member']} .. {found['high_member']}"
        aiter_text = ""
        if call["shape"] in aiter and call["shape"] not in shown and \
                call["shape"] in BENCHMARK_SHAPES:
            point, aiter_call = aiter[call["shape"]]
            aiter_text = (f"{_aiter_path_text(point)}, "
                          f"{_extremes(family.figures(aiter_call, data))} µs")
        shown.add(call["shape"])
        mark = "*" if call["outside_calibration"] else " "
        lines.append(f"{'x'.join(map(str, call['shape'])):<16} "
                     f"{candidate + GemmConfig(**call['config']).label:<40} "
                     f"{call['launches']:>8}  {path:<36} {call['busiest_simd_issue']:>6} "
                     f"{_call_range(call):>11}{mark}  {members:<38} {aiter_text}".rstrip())
    summary = benchmark_summary(calls)
    if summary:
        lines += ["", "modelled µs per call, benchmark shapes, as ranges over the family: ours "
                      "(the table's entry), aiter's, the best public config's (measured); then "
                      "ours against the best public config under each member",
                  f"{'shape':<16} {'ours':>12} {'aiter':>12} {'best public':>12}  "
                  f"point (measured µs)  ours - best public by member"]
        for shape, figures in summary.items():
            name = shape if shape == "geomean" else "x".join(map(str, shape))
            text = (f"{name:<16} {_extremes(figures['ours']):>12} "
                    f"{_extremes(figures['aiter']):>12} {_extremes(figures['public']):>12}")
            margins = ", ".join(f"{figures['ours'][m] - figures['public'][m]:+.2f}"
                                for m in family.fits)
            text += (f"  {figures['point'] + ' (' + format(figures['measured'], '.2f') + ')':<19}"
                     if shape != "geomean" else f"  {'':<19}")
            lines.append(f"{text}  {margins}")
    lines += ["", "the family (tools.gfx950.model), each member fitted on the public points; "
                  "ours - best public is listed in this order:"] + family_lines(family)
    return "\n".join(lines)


def per_call_markdown(rows, with_family: bool = True) -> str:
    """The benchmark shapes' table entries as markdown, per call: launches, global round trips
    · LDS waits · barriers, busiest-SIMD issue and modelled µs as ranges over the model family,
    beside aiter's kernel and the best public config of the shape (modelled, and measured),
    the geomeans, and (with_family) each member with its errors. What README and
    docs/results.md show (`python -m tools.docs`)."""
    data, family = model.calibrated()
    calls = per_call(rows)
    summary = benchmark_summary(calls)
    lines = ["| shape | ours: config | launches, RT · LDS · barriers, issue | modelled µs: ours "
             "(low .. high member) | aiter | best public (measured) |",
             "|---|---|---|---|---|---|"]
    for call in calls:
        if call["candidate"] is not None or call["shape"] not in BENCHMARK_SHAPES:
            continue
        figures = summary[call["shape"]]
        found = call["modelled_range"]
        path = (f"{call['launches']}, {_trips(call['global_round_trips'])} · "
                f"{call['lds_waits']} · {call['barriers']}, {call['busiest_simd_issue']:,}")
        mark = " \\*" if call["outside_calibration"] else ""
        lines.append(f"| {'×'.join(map(str, call['shape']))} | "
                     f"{GemmConfig(**call['config']).label} | {path} | "
                     f"**{_call_range(call)}**{mark} ({found['low_member']} .. "
                     f"{found['high_member']}) | {_extremes(figures['aiter'])} | "
                     f"{_extremes(figures['public'])} ({figures['measured']:.2f}) |")
    if "geomean" in summary:
        figures = summary["geomean"]
        lines.append(f"| geomean | | | **{_extremes(figures['ours'])}** | "
                     f"{_extremes(figures['aiter'])} | {_extremes(figures['public'])} |")
    note = "\\* a term outside the calibration points' range."
    if not with_family:
        return "\n".join(lines + ["", f"{note} Low .. high: the members of the family "
                                       f"(`tools.gfx950.model`) at either end."])
    return "\n".join(lines + ["", f"{note} The family (`tools.gfx950.model`):", ""]
                      + [f"- {name}: {fit.describe()}." for name, fit in family.fits.items()])
