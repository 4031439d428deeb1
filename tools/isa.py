"""Cross-compile the kernels for gfx950 (or sm_90) and report what their code says.

    python -m tools.isa --arch gfx950 [--quantizer NAME] [--json FILE] [--asm-dir DIR]
                        [--candidates | --sweep SHAPES ...] [--triton VERSION]
    python -m tools.isa --sweep MODEL|N,K ... [--m 1,8,...] [--configs FILE] [--json FILE]
    python -m tools.isa --arch gfx950 --compare-tritons 3.6.0,3.7.0,3.8.0,3.9.0 [--markdown FILE]
    python -m tools.isa --arch sm_90 [--json FILE]
    python -m tools.isa --arch gfx950|sm_90 --shapes M,N,K|N,K|MODEL ... [--m 1,8,...] [--json FILE]
    python -m tools.isa --arch sm_90 --shapes M,N,K|N,K|MODEL ... [--asm-dir DIR] [--json FILE]

The face of tools/gfx950/: per call of each entry of the gfx950 config table (or, with
--candidates, of every import-time tuning candidate), each kernel's resources, quantizer cost,
hazards and release order (tools.gfx950.report), then per call its critical path and its
modelled time through the runner's harness (tools.gfx950.critical_path, tools.gfx950.model),
beside aiter's kernel and the best public config of each benchmark shape, with the model's
held-out error. --sweep searches each given shape's config space by modelled time
(tools.gfx950.search) and prints the best calls; given model names or N,K pairs (each taken
with every M of --m), it compares instead a few configs of the fused GEMM and of the
quantize-once path per shape (tools.gfx950.paths) and prints per shape the chosen path and
config, its modelled µs and the MFMA bound (tools.gfx950.mfma). --configs FILE merges each
shape's best into a tuned-shapes file (launchers.tuned_shapes) as the entry of its M
bucket. With --asm-dir, each row's assembly is written there and the row names its file
("asm"). --compare-tritons compiles the table with each release and both quantizers and prints
a markdown table of them side by side.

The compiler is Triton --triton (default 3.6.0, the leaderboard runner's). When the running
Triton is another release, the tool installs that one into ROOT/.triton/<version> on first use
(pip --target, no dependencies) and runs itself again with it first on PYTHONPATH. Every row
names the release that compiled it ("triton"). Tensor arguments are specialized as the JIT of
that release does (on HIP: tt.pointer_range=32, so buffer loads; see
tools.gfx950.cross_compile). Runs offline on a CPU: no AMD GPU is involved.

With --shapes (M,N,K, or model names and N,K pairs with each M of --m), per shape the config
the lookup serves first on the target (launchers.configs.config_lookup: table, file, bucket or
heuristic) and each of its launches compiled for it (tools.fit): shared memory (LDS on gfx950)
against the target's limit, registers, and spills (sm_90: the cubin's stack bytes a thread;
gfx950: VGPR and SGPR spills and scratch), and whether the call fits and spills; the exit code
is 1 when one does not fit.

With --arch sm_90, --shapes and --asm-dir, per shape the GEMM of the prepared-weight path (the
op gemm_prepared and MXFP4Linear on sm_90, the Hopper layout) and of custom_kernel's served
config (aiter's layout), each with its SASS main loop: instructions a K tile, lane-instructions
a weight element, the opcode mix, registers, stack and shared memory (tools.sm90_loop), each
GEMM's SASS written to DIR (the row's "asm").

With --arch sm_90 alone, per entry of the sm_90 table: the registers, stack bytes and shared memory
of the GEMM (tools.fit), the PTX instructions of the GEMM as
configured and with A pre-quantized (the share of the in-register quantizer), the MMA
instructions, and an estimate of the warp instructions the launch executes (PTX count x
warps x programs x K tiles per program; the loop body dominates the count) with the time
that takes at one instruction per cycle on each of the H200's 528 schedulers at 1.98 GHz.
"""

import argparse
import datetime
import json
import os
import re
import sys
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)   # compiling needs the real JIT functions

import triton                                # noqa: E402

from mxfp4_mm.kernels import formats                  # noqa: E402
from mxfp4_mm.kernels.quantize import QUANTIZERS      # noqa: E402
from mxfp4_mm.launchers.configs import GEMM_CONFIGS, m_bucket  # noqa: E402
from mxfp4_mm.launchers.gemm_config import GemmConfig  # noqa: E402
from mxfp4_mm.launchers import targets                # noqa: E402
from mxfp4_mm.launchers.gemm import launch_specs      # noqa: E402
from mxfp4_mm.launchers.tuned_shapes import file_entry, write_configs  # noqa: E402
from .cli import (SHAPES_HELP, ArgumentParser, UsageError, output_file,  # noqa: E402
                  output_folder, parse_m_list, parse_model_shapes, usage_error)
from .model_shapes import MODEL_LAYERS, MODEL_M  # noqa: E402
from . import fit                                      # noqa: E402
from .gfx950 import report as gfx950                 # noqa: E402
from .gfx950.cross_compile import (ROOT, RUNNER_TRITON, SIDE_TRITON_ENV, SM90,  # noqa: E402
                                   SideInstallError, compile_for, run_with_triton)

_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%p\d+\s+)?([a-z][\w.]*)", re.MULTILINE)
H200_SCHEDULERS = targets.SM90.processors * 4
H200_CLOCK_GHZ = 1.98
SWEEP_SHOWN = 12   # the best calls --sweep prints per shape


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
             f"kernels/quantize.py at {_source_commit(gfx950.QUANTIZER_SOURCE)}; "
             f"`python -m tools.isa --compare-tritons {','.join(versions)}`). Each cell: VGPRs · "
             f"occupancy (waves/SIMD) · spills · scratch bytes · {gfx950.CVT}* · scaled MFMAs; "
             f"✗: the release does not compile it.", "",
             "| shape | kernel | config | quantizer | " + " | ".join(versions) + " |",
             "|---" * (4 + len(versions)) + "|"]
    for (shape, kernel, quantizer), by_version in results.items():
        config = next(iter(by_version.values()))["config"]
        cells = [_compare_cell(by_version.get(version)) for version in versions]
        lines.append(f"| {'x'.join(map(str, shape))} | {kernel} | {gfx950._config_text(config)} | "
                     f"{quantizer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _compare_cell(row) -> str:
    if row is None:
        return "✗ (no result)"
    if "error" in row:
        return f"✗ {row['error'][:80]}"
    return (f"{row['vgprs']} · {row['occupancy']} · {row['vgpr_spills'] + row['sgpr_spills']} · "
            f"{row['scratch_bytes']} · {gfx950._cvts(row)} · {gfx950._scaled_mfmas(row)}")


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
        if not prequantized:
            resources = dict(fit.cubin_resources(compiled.asm["cubin"]),
                             shared_bytes=compiled.metadata.shared)
    fused, prequantized = sum(counts[False].values()), sum(counts[True].values())
    programs = grids[False][0]
    k_tiles_per_program = formats.cdiv(config.splits_for(k)[1], config.block_k)
    warp_instructions = fused * config.num_warps * programs * k_tiles_per_program
    return dict(shape=[m, n, k], config=dict(vars(config)), triton=triton.__version__,
                **resources, ptx_fused=fused,
                ptx_a_prequantized=prequantized,
                quantizer_share=round(1 - prequantized / fused, 3),
                mma=sum(v for name, v in counts[False].items() if "mma" in name),
                programs=programs, est_warp_instructions=warp_instructions,
                est_issue_us=round(warp_instructions / (H200_SCHEDULERS * H200_CLOCK_GHZ * 1e3), 2))


def format_sm90_table(rows) -> str:
    lines = [f"{'shape':<16} {'cfg BMxBNxBK/S/w':<19} {'regs':>4} {'stack':>5} {'shared':>7} "
             f"{'ptx':>6} {'ptx preq':>8} {'A quant':>7} "
             f"{'mma':>4} {'progs':>5} {'est warp instr':>14} {'µs at issue':>11}"]
    for row in rows:
        c = row["config"]
        cfg = f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"
        lines.append(f"{'x'.join(map(str, row['shape'])):<16} {cfg:<19} {row['registers']:>4} "
                     f"{row['stack_bytes']:>5} {row['shared_bytes']:>7} {row['ptx_fused']:>6} "
                     f"{row['ptx_a_prequantized']:>8} {row['quantizer_share']:>7.0%} "
                     f"{row['mma']:>4} {row['programs']:>5} {row['est_warp_instructions']:>14,} "
                     f"{row['est_issue_us']:>11}")
    return "\n".join(lines)


def format_sweep(shape, calls) -> str:
    """The SWEEP_SHOWN best eligible calls of one shape by their worst modelled µs over the
    model family (tools.gfx950.search.ranked), their range, and each member's own best, with the
    count of those compiled and of those not eligible (spills, scratch, hazards, unordered
    release)."""
    from .gfx950.search import members_best, ranked
    best = ranked(calls)
    lines = [f"{'x'.join(map(str, shape))}: {len(calls)} calls compiled, {len(best)} eligible; "
             f"the best {min(SWEEP_SHOWN, len(best))} by the family's worst modelled µs",
             f"  {'config':<40} {'launches':>8} {'RT · LDS · barriers':<24} {'occ':>3} "
             f"{'WGs':>5} {'issue':>6} {'model µs':>12}"]

    def line(rows, note=""):
        call = gfx950.per_call(rows)[0]
        path = (f"{gfx950._trips(call['global_round_trips'])} · {call['lds_waits']} · "
                f"{call['barriers']}")
        mark = "*" if call["outside_calibration"] else " "
        return (f"  {GemmConfig(**call['config']).label:<40} {call['launches']:>8} "
                f"{path:<24} {rows[0]['occupancy']:>3} {rows[0]['workgroups']:>5} "
                f"{call['busiest_simd_issue']:>6} {gfx950._call_range(call):>11}{mark}{note}")
    lines += [line(rows) for rows in best[:SWEEP_SHOWN]]
    lines += ["  each member's own best:"]
    lines += [line(rows, f"  {member}: {rows[0]['modelled_us_by_member'][member]:.2f}")
              for member, rows in members_best(calls).items()]
    return "\n".join(lines)


def _sweep_note(quantizer: str) -> str:
    return (f"python -m tools.isa --sweep {datetime.date.today()}: Triton {triton.__version__}, "
            f"{quantizer} quantizer, modelled (tools.gfx950.model)")


_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def _version(word: str) -> str:
    if not _VERSION.match(word):
        raise argparse.ArgumentTypeError(f"expected a Triton release like 3.6.0, got {word!r}")
    return word


def _versions(word: str) -> list:
    return [_version(v) for v in word.split(",")]


def build_parser():
    parser = ArgumentParser("tools.isa", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["gfx950", "sm_90"], default="gfx950",
                        help="the target: gfx950 (MI355X) or sm_90 (H100/H200; default gfx950)")
    parser.add_argument("--quantizer", choices=QUANTIZERS, default="hardware",
                        help="the gfx950 in-register quantizer (default hardware)")
    parser.add_argument("--json", metavar="FILE", type=output_file,
                        help="write the rows as a JSON list to this file")
    parser.add_argument("--asm-dir", metavar="DIR", type=output_folder,
                        help="write each row's assembly into DIR (the row's \"asm\"; gfx950, "
                             "or sm_90 with --shapes: SASS)")
    parser.add_argument("--sweep", nargs="+", metavar="SHAPES",
                        help="search these shapes' config space by modelled time instead "
                             "(tools.gfx950.search): " + SHAPES_HELP + "; given model names ("
                             + ", ".join(MODEL_LAYERS) + ") or N,K pairs, each with every M of "
                             "--m, compare the fused and the quantize-once path instead "
                             "(tools.gfx950.paths)")
    parser.add_argument("--shapes", nargs="+", metavar="SHAPES",
                        help="per shape, the config served first on --arch and each of its "
                             "launches' shared memory (LDS), registers and spills against the "
                             "target: " + SHAPES_HELP + ", N,K or model names (each with every "
                             "M of --m)")
    parser.add_argument("--m", type=parse_m_list, default=MODEL_M, metavar="M1,M2,...",
                        help="with --sweep or --shapes: the M values of N,K and model shapes "
                             f"(default {','.join(map(str, MODEL_M))})")
    parser.add_argument("--configs", metavar="FILE",
                        help="with --sweep: merge each shape's best config into this "
                             "tuned-shapes file, as the entry of its M bucket")
    parser.add_argument("--candidates", action="store_true",
                        help="report every gfx950 import-time tuning candidate "
                             "(launchers/candidates.py, the table's entry first) instead")
    parser.add_argument("--triton", default=RUNNER_TRITON, type=_version, metavar="VERSION",
                        help=f"the Triton release that compiles (default {RUNNER_TRITON}, the "
                             "runner's); installed into .triton/VERSION on first use")
    parser.add_argument("--compare-tritons", type=_versions, metavar="V1,V2,...",
                        help="compile the gfx950 table with each release and both quantizers "
                             "and print a markdown table of them side by side")
    parser.add_argument("--markdown", metavar="FILE", type=output_file,
                        help="with --compare-tritons: also write the markdown table to FILE")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        sweep_shapes = parse_model_shapes(args.sweep, args.m, "--sweep") if args.sweep else None
        fit_shapes = parse_model_shapes(args.shapes, args.m) if args.shapes else None
    except UsageError as error:
        return usage_error("tools.isa", error)
    compare_paths = bool(args.sweep) and any(word in MODEL_LAYERS or word.count(",") == 1
                                             for word in args.sweep)
    if args.configs and not args.sweep:
        parser.error("--configs goes with --sweep")
    if args.compare_tritons:
        if args.arch != "gfx950" or args.sweep or args.candidates or args.json or args.asm_dir:
            parser.error("--compare-tritons takes only --arch gfx950 and --markdown")
        try:
            table = compare_tritons(args.compare_tritons)
        except SideInstallError as error:
            return usage_error("tools.isa", f"--compare-tritons: {error}")
        print(table)
        if args.markdown:
            Path(args.markdown).write_text(table + "\n")
        return 0
    if args.markdown:
        parser.error("--markdown goes with --compare-tritons")
    if args.shapes and (args.sweep or args.candidates or args.configs):
        parser.error("--shapes goes alone (with --arch, --m, --json, --asm-dir and --triton)")
    if args.shapes and args.asm_dir and args.arch != "sm_90":
        parser.error("--shapes takes --asm-dir with --arch sm_90")
    if (args.candidates or args.sweep) and args.arch != "gfx950":
        parser.error("--candidates and --sweep are for --arch gfx950")
    if args.candidates and args.sweep:
        parser.error("--candidates and --sweep go alone")
    if args.sweep and args.asm_dir:
        parser.error("--asm-dir does not go with --sweep")
    if triton.__version__ != args.triton:
        if os.environ.get(SIDE_TRITON_ENV) == args.triton:
            print(f"tools.isa: the side install of Triton {args.triton} did not load "
                  f"(this process has {triton.__version__} at {triton.__file__})", file=sys.stderr)
            return 1
        try:
            return run_with_triton(args.triton, ["tools.isa", *argv])
        except SideInstallError as error:
            return usage_error("tools.isa", f"--triton: {error}")
    if fit_shapes and args.arch == "sm_90" and args.asm_dir:
        from . import sm90_loop
        rows = sm90_loop.rows(fit_shapes, args.asm_dir)
        print(sm90_loop.format_rows(rows))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0 if all(row.get("fits", True) for row in rows) else 1
    if fit_shapes:
        rows = fit.rows(args.arch, fit_shapes)
        print(fit.format_rows(rows))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0 if all(row["fits"] for row in rows) else 1
    if args.arch == "sm_90":
        rows = [sm90_row(shape, config) for shape, config in GEMM_CONFIGS["sm_90"].items()]
        print(format_sm90_table(rows))
    elif compare_paths:
        from .gfx950 import paths
        started = time.time()
        rows = paths.sweep(sweep_shapes, args.quantizer)
        print(paths.format_paths(rows))
        if paths.decoder_step_rows(rows):
            print(paths.format_decoder_steps(rows))
        print(f"{len(sweep_shapes)} shapes, {len(rows)} calls in {time.time() - started:.0f} s")
        if args.configs:
            write_configs(args.configs, paths.config_entries(rows, _sweep_note(args.quantizer)))
    elif sweep_shapes:
        from .gfx950.search import ranked, search
        rows, entries = [], []
        for shape in sweep_shapes:
            calls = search(shape, args.quantizer)
            print(format_sweep(shape, calls), flush=True)
            rows += [row for rows_of_call in calls for row in rows_of_call]
            if ranked(calls):
                call = ranked(calls)[0][0]
                entries.append(file_entry("gfx950", shape[1], shape[2],
                                          GemmConfig(**call["config"]),
                                          f"{_sweep_note(args.quantizer)}; "
                                          f"{call['modelled_us']:.2f} µs modelled at M={shape[0]}",
                                          m_bucket=m_bucket(shape[0])))
        if args.configs:
            write_configs(args.configs, entries)
    else:
        if args.asm_dir:
            os.makedirs(args.asm_dir, exist_ok=True)
        if args.candidates:
            rows = gfx950.candidates_report(args.quantizer, args.asm_dir)
        else:
            rows = gfx950.report(args.quantizer, args.asm_dir)
        print(gfx950.format_table(rows))
        print()
        print(gfx950.format_critical_paths(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if compare_paths:
        return 0
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
