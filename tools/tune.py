"""Search kernel configs per shape on the running GPU and write the winners into the config data.

    python -m tools.tune [--shapes benchmarks|tests|all|M,N,K|N,K|MODEL ...] [--m 1,8,...]
                         [--budget-s 480] [--calls 30] [--state tune-state.json] [--workers 8]
                         [--write] [--configs FILE]

For each shape, in two stages within its share of the time budget:
  1. tiles: BLOCK_M, BLOCK_N, BLOCK_K and the split-K count, the other fields at their
     defaults; the candidates whose grid is closest to two waves of the GPU go first;
  2. refine the two best: warps, stages, the B-load cache modifier, who reduces split-K
     (a second kernel or the last program), and on HIP waves_per_eu and matrix_instr_nonkdim.
From M = 64 on, stage 1 also tries A quantized once (GemmConfig.quantize_a_once) with tiles
of up to 256 rows, and at large M the other launchers (GemmConfig.path): "dequant" (A and B
dequantized to bf16, the vendor GEMM) on chips without FP4 MMA from
launchers.targets' vendor_gemm_from_m, "aiter" (aiter's quantize + gemm_a4w4) on gfx950 where
aiter imports (launchers.candidates.path_candidates); a winner of either is written with its
path. The current config (the table's entry, a loaded file's, or the
heuristic's) is always measured too, as the baseline. A model name or N,K stands for each M
of --m (default tools.model_shapes.MODEL_M). Each candidate is
compiled (in parallel worker processes that fill Triton's cache), checked once against the
reference and rejected if wrong, timed with the runner's loop (tools.timing), and checked
again on its last timed output; its row carries each launch's registers and spilled registers
a thread (the loaded kernel's n_regs and n_spills), and a shape's winner is the fastest that
does not spill, where one does not. Every result goes to the state file as soon as it exists, so
an interrupted run resumes where it stopped; `--write` puts each shape's fastest config (by
median) into launchers/config_table.py for the running arch, with a note of its figures;
`--configs FILE` merges them into a tuned-shapes file instead (launchers.tuned_shapes), one
entry per (N, K) and M bucket of the tuned M, which MXFP4_MM_CONFIGS=FILE or
launchers.load_configs(FILE) then loads.
"""

import dataclasses
import datetime
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

from mxfp4_mm.kernels.tiles import gemm_tiles
from mxfp4_mm.launchers.gemm_config import non_default_fields
from mxfp4_mm.launchers.targets import target_facts

ROOT = Path(__file__).resolve().parents[1]
TABLE_PATH = ROOT / "launchers" / "config_table.py"
SPLIT_COUNTS = (1, 2, 3, 4, 7, 8, 14, 16)
REFINE_TOP = 2
MAX_TILE_ELEMENTS = 64 * 128 * 512   # larger tiles spill and take long to compile
# On sm_90, weight tiles past 128x256 spill (ptxas -v); past half of it, 8 warps share the work.
MAX_WEIGHT_TILE = 128 * 256
QUANTIZE_ONCE_FROM_M = 64
QUANTIZE_ONCE_MAX_TILE = 256 * 128 * 256   # A arrives quantized: no quantizer registers


def _nvidia(arch: str) -> bool:
    return target_facts(arch).vendor == "nvidia"


def config_key(config) -> str:
    return json.dumps(non_default_fields(config), sort_keys=True)


def _waves(config, m, n, k, processors) -> float:
    splits, _ = config.splits_for(k)
    programs = splits * gemm_tiles(m, n, config.block_m, config.block_n)
    return programs / processors


def reduce_choices(arch: str, splits: int) -> tuple:
    """Who may sum the split-K partials. "last_program" only on NVIDIA: on AMD, a barrier and
    one wave's device-scope release do not wait for the other waves' partial stores (see
    README, "Split-K"), so it stays unproven there until it has run on the hardware."""
    if splits == 1:
        return ("kernel",)
    return ("kernel", "last_program") if _nvidia(arch) else ("kernel",)


def tile_candidates(arch: str, m: int, n: int, k: int, processors: int) -> list:
    """Stage 1: the tile shapes and split counts worth trying for this shape, and the other
    paths at this M (launchers.candidates.path_candidates)."""
    from mxfp4_mm.launchers.candidates import path_candidates
    from mxfp4_mm.launchers.gemm_config import GemmConfig, config_from_fields
    block_ms = [bm for bm in (16, 32, 64, 128) if bm == 16 or bm <= m]
    nvidia = _nvidia(arch)
    found = {}
    for bm in block_ms:
        for bn in (32, 64, 128, 256):
            for bk in (256, 512):
                if bm * bn * bk > MAX_TILE_ELEMENTS or (nvidia and bn * bk > MAX_WEIGHT_TILE):
                    continue
                warps = 8 if nvidia and bn * bk > MAX_WEIGHT_TILE // 2 else 4
                # Narrow tiles (16x32, 16x64, 32x32) give 4 waves too little output: on
                # gfx950 each wave repeats the others' MFMAs (tools.isa mfma_replication).
                warp_counts = (1, 2, warps) if bm * bn <= 16 * 64 else (warps,)
                k_tiles = -(-k // bk)
                for split in SPLIT_COUNTS:
                    if split > k_tiles:
                        continue
                    per_split = -(-k_tiles // split)
                    for num_warps in warp_counts:
                        config = GemmConfig(bm, bn, bk, split_k=split, num_warps=num_warps,
                                            num_stages=2 if per_split > 1 else 1,
                                            split_k_reduce=reduce_choices(arch, split)[-1])
                        if config.splits_for(k)[0] == split:
                            found[config_key(config)] = config
    if m >= QUANTIZE_ONCE_FROM_M:
        for config in quantize_once_candidates(m):
            found[config_key(config)] = config
    # The other paths first (a few, each a whole launcher); then two waves of programs hide
    # memory latency best.
    by_waves = sorted(found.values(),
                      key=lambda c: abs(math.log(_waves(c, m, n, k, processors) / 2)))
    return [config_from_fields(fields) for fields in path_candidates(arch, m)] + by_waves


def quantize_once_candidates(m: int) -> list:
    """Stage 1's quantize-once tiles: BLOCK_M up to 256 (no more than M calls for), one split."""
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    return [GemmConfig(bm, bn, bk, num_warps=8, num_stages=2, quantize_a_once=True)
            for bm in (64, 128, 256) if bm <= max(64, m)
            for bn in (64, 128, 256) for bk in (256, 512)
            if bm * bn * bk <= QUANTIZE_ONCE_MAX_TILE]


def refine_candidates(arch: str, config, k: int) -> list:
    """Stage 2: the launch and load options around one stage-1 winner (none for another path
    than the fused GEMM's: those read no such option)."""
    if config.path != "preshuffle":
        return []
    splits, split_size = config.splits_for(k)
    per_split = -(-split_size // config.block_k)
    stage_choices = (1, 2, 3) if per_split > 1 else (1,)
    hip_choices = [(0, 16)] if _nvidia(arch) else [(0, 16), (1, 16), (2, 16), (2, 32)]
    found = []
    for warps in (4, 8):
        for stages in stage_choices:
            for cache in (None, ".cg"):
                for reduce in reduce_choices(arch, splits):
                    for waves_per_eu, nonkdim in hip_choices:
                        found.append(dataclasses.replace(
                            config, num_warps=warps, num_stages=stages, cache_modifier=cache,
                            split_k_reduce=reduce, waves_per_eu=waves_per_eu,
                            matrix_instr_nonkdim=nonkdim))
    return found


def _compile_in_worker(fields: dict, m: int, n: int, k: int):
    """Build (and so compile into Triton's cache) one launcher; returns an error text or None."""
    try:
        from mxfp4_mm.launchers import current_target
        from mxfp4_mm.launchers.gemm_config import GemmConfig
        from mxfp4_mm.launchers.paths import build_launcher
        backend = current_target("cuda")[0]
        build_launcher(GemmConfig(**fields), backend, m, n, k, (k, 1), torch.device("cuda"))
        return None
    except Exception as error:  # reported as the candidate's rejection
        return f"{type(error).__name__}: {error}".splitlines()[0][:300]


class State:
    """Results per arch, shape and config key, saved to a JSON file after every change."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def results(self, arch: str, shape: tuple) -> dict:
        return self.data.setdefault(arch, {}).setdefault("x".join(map(str, shape)), {})

    def record(self, arch: str, shape: tuple, key: str, result: dict):
        self.results(arch, shape)[key] = result
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def _still_valid(result) -> bool:
    """False for results of configs this version no longer accepts (an older state file)."""
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    try:
        GemmConfig(**result["config"])
        return True
    except (TypeError, ValueError):
        return False


def spills(result) -> bool:
    """Whether a launch of the result's config spilled registers on the device."""
    return any(found.get("n_spills") for found in result.get("resources", {}).values())


def best_result(results: dict):
    """The fastest good result by median among those that do not spill (among all good ones
    where every one spills): no config that spills is written where one that does not exists."""
    good = [r for r in results.values() if r.get("ok") and _still_valid(r)]
    good = [r for r in good if not spills(r)] or good
    return min(good, key=lambda r: r["median_us"]) if good else None


def measure(config, backend, data, loop, calls: int) -> dict:
    from mxfp4_mm import reference
    from mxfp4_mm.launchers.paths import build_launcher
    from .timing import summary
    a, _, _, b_shuffle, b_scale_sh = data
    m, k = a.shape
    n = b_shuffle.shape[0]
    try:
        launcher = build_launcher(config, backend, m, n, k, a.stride(), a.device)
        ok, message = reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh))
        if not ok:
            return {"ok": False, "error": f"wrong output: {message}"[:300]}
        outputs = []
        times = loop.time(lambda: outputs.append(launcher(a, b_shuffle, b_scale_sh)), calls)
        ok, message = reference.check_implementation(data, outputs[-1])
        if not ok:
            return {"ok": False, "error": f"wrong output after timing: {message}"[:300]}
    except Exception as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}".splitlines()[0][:300]}
    return {"ok": True, "launches": launcher.launches_per_call,
            "resources": launcher.launch_resources(), **summary(times)}


def tune_shape(shape, arch, backend, state, loop, pool, args, deadline, progress):
    from mxfp4_mm import reference
    from mxfp4_mm.launchers.configs import config_for
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    m, n, k = shape
    processors = torch.cuda.get_device_properties(0).multi_processor_count
    data = reference.generate_input(m, n, k, seed=2024, device="cuda")
    results = state.results(arch, shape)

    def run_stage(name, configs):
        todo = [c for c in configs if config_key(c) not in results]
        done = len(configs) - len(todo)
        batch = max(1, args.workers)
        for start in range(0, len(todo), batch):
            if time.time() > deadline:
                print(f"{progress} {name}: time's up after {done}/{len(configs)}", flush=True)
                return
            chunk = todo[start:start + batch]
            errors = list(pool.map(_compile_in_worker, [dataclasses.asdict(c) for c in chunk],
                                   [m] * len(chunk), [n] * len(chunk), [k] * len(chunk)))
            for config, error in zip(chunk, errors):
                key, fields = config_key(config), dataclasses.asdict(config)
                # Written first, so that a candidate that kills the process is not retried.
                state.record(arch, shape, key, {"ok": False, "config": fields,
                                                "error": "the process died measuring it"})
                result = ({"ok": False, "error": f"compile: {error}"} if error
                          else measure(config, backend, data, loop, args.calls))
                result["config"] = fields
                state.record(arch, shape, key, result)
                done += 1
                best = best_result(results)
                figure = (f"{result['median_us']:8.2f} µs" if result["ok"]
                          else f"rejected ({result['error'][:60]})")
                if result["ok"]:
                    figure += "".join(
                        f" {name} {found['n_regs']}r/{found['n_spills']}s"
                        for name, found in result["resources"].items()
                        if found["n_regs"] is not None)
                best_text = f"   best {best['median_us']:.2f} µs" if best else ""
                print(f"{progress} {name} {done}/{len(configs)} {config.label:<34} {figure}"
                      f"{best_text}", flush=True)

    baseline = config_for(arch, m, n, k)
    run_stage("baseline", [baseline])
    run_stage("tiles", tile_candidates(arch, m, n, k, processors))
    ranked = sorted((r for r in results.values() if r.get("ok") and _still_valid(r)),
                    key=lambda r: r["median_us"])
    refine = []
    for result in ranked[:REFINE_TOP]:
        refine += refine_candidates(arch, GemmConfig(**result["config"]), k)
    run_stage("refine", refine)
    return best_result(results), results.get(config_key(baseline))


def render_table(table: dict, doc: str) -> str:
    lines = [f'"""{doc}"""', "", "CONFIG_TABLE = {"]
    for arch, entries in table.items():
        lines.append(f"    {arch!r}: {{")
        for shape, fields in entries.items():
            items = ", ".join(f"{name!r}: {value!r}" for name, value in fields.items())
            lines.append(f"        {tuple(shape)!r}: {{{items}}},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_winners(arch: str, winners: dict, path: Path = TABLE_PATH):
    """Replace the entries of `arch` for the tuned shapes in the config data file."""
    from mxfp4_mm.launchers import config_table
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    table = {a: dict(entries) for a, entries in config_table.CONFIG_TABLE.items()}
    entries = table.setdefault(arch, {})
    for shape, (result, note) in winners.items():
        fields = non_default_fields(GemmConfig(**result["config"]))
        entries[tuple(shape)] = {**fields, "note": note}
    path.write_text(render_table(table, config_table.__doc__))


def write_file_entries(arch: str, winners: dict, path) -> None:
    """Merge the winners into the tuned-shapes file at `path`, each as its M's bucket."""
    from mxfp4_mm.launchers.configs import m_bucket
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    from mxfp4_mm.launchers.tuned_shapes import file_entry, write_configs
    write_configs(path, [file_entry(arch, n, k, GemmConfig(**result["config"]),
                                    f"{note}; tuned at M={m}", m_bucket=m_bucket(m))
                         for (m, n, k), (result, note) in winners.items()])


def build_parser():
    from .cli import (MODEL_SHAPES_HELP, ArgumentParser, clear_bytes, output_file,
                      parse_m_list, positive_float, positive_int)
    from .model_shapes import MODEL_LAYERS, MODEL_M
    parser = ArgumentParser("tools.tune", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["benchmarks"], metavar="SHAPES",
                        help=MODEL_SHAPES_HELP.format(", ".join(MODEL_LAYERS))
                        + "; default benchmarks")
    parser.add_argument("--m", type=parse_m_list, default=MODEL_M, metavar="M1,M2,...",
                        help="the M values of N,K and model shapes (default "
                             f"{','.join(map(str, MODEL_M))})")
    parser.add_argument("--budget-s", type=positive_float, default=480.0,
                        help="total wall time in seconds, shared by the shapes (default 480)")
    parser.add_argument("--calls", type=positive_int, default=30,
                        help="timed calls per candidate (default 30)")
    parser.add_argument("--clear-bytes", type=clear_bytes, default=None,
                        help="cache-clear buffer before each timed call "
                             "(default: tools.timing's)")
    parser.add_argument("--state", default="tune-state.json", type=output_file,
                        help="results file; an interrupted run resumes from it "
                             "(default tune-state.json)")
    parser.add_argument("--workers", type=positive_int, default=8,
                        help="compile processes (default 8)")
    parser.add_argument("--write", action="store_true",
                        help="write the winners into launchers/config_table.py for this arch")
    parser.add_argument("--configs", metavar="FILE",
                        help="merge the winners into this tuned-shapes file, by (N, K) and M "
                             "bucket (launchers.tuned_shapes)")
    return parser


def parse_args(argv):
    from .cli import UsageError, parse_model_shapes
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.shape_list = parse_model_shapes(args.shapes, args.m)
    except UsageError as error:
        parser.error(str(error))
    if args.write and args.configs:
        parser.error("--write and --configs go alone")
    return args


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("tools.tune: needs a GPU; run it on a machine with CUDA or ROCm, TRITON_INTERPRET unset", file=sys.stderr)
        return 2
    from mxfp4_mm.launchers import current_target
    from .timing import DEFAULT_CLEAR_BYTES, RunnerLoop
    backend, arch = current_target("cuda")
    loop = RunnerLoop(args.clear_bytes or DEFAULT_CLEAR_BYTES)
    state = State(Path(args.state))
    started = time.time()
    winners, lines = {}, []
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=get_context("spawn")) as pool:
        for index, shape in enumerate(args.shape_list):
            share = (args.budget_s - (time.time() - started)) / (len(args.shape_list) - index)
            progress = f"[{arch} {'x'.join(map(str, shape))} {index + 1}/{len(args.shape_list)}]"
            best, baseline = tune_shape(shape, arch, backend, state, loop, pool, args,
                                        time.time() + share, progress)
            if best is None:
                lines.append(f"{'x'.join(map(str, shape)):<16} no candidate passed")
                continue
            tried = len(state.results(arch, shape))
            device = torch.cuda.get_device_name(0)
            note = (f"tools.tune {datetime.date.today()} on {device}: median {best['median_us']:.2f} µs, "
                    f"mean {best['mean_us']:.2f} µs over {best['calls']} runner-loop calls; "
                    f"best of {tried} candidates")
            winners[shape] = (best, note)
            base = f"{baseline['median_us']:.2f}" if baseline and baseline.get("ok") else "-"
            from mxfp4_mm.launchers.gemm_config import GemmConfig
            lines.append(f"{'x'.join(map(str, shape)):<16} {GemmConfig(**best['config']).label:<34} "
                         f"{best['median_us']:8.2f} µs (table before: {base} µs, {tried} tried)")
    print("\n".join(["", f"winners on {arch}:"] + lines))
    if args.write and winners:
        write_winners(arch, winners)
        print(f"wrote {len(winners)} {arch} entries to {TABLE_PATH.relative_to(ROOT)}")
    if args.configs and winners:
        write_file_entries(arch, winners, args.configs)
        print(f"wrote {len(winners)} {arch} entries to {args.configs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
