"""tools.bench --vendor-gemm: the M from which the "dequant" path (launchers.dequant: A and B
dequantized to bf16, the vendor GEMM) serves chips without FP4 MMA (tools/bench.py says how it
is run and what it prints)."""

import json
from pathlib import Path

import torch

from .evaluate import _num
from .timing import RunnerLoop, time_variant, timed_rows

VENDOR_GEMM_M = (256, 512, 1024, 2048, 4096, 8192)
VENDOR_GEMM_NK = ((4096, 4096), (7168, 2048), (2112, 7168), (8192, 8192), (4096, 4352))
VENDOR_LEGEND = ("mean µs per call in the runner's loop: fused = our fused GEMM (the looked-up "
                 "config; where the lookup serves another path, the hopper path's large tile "
                 "from the target's large_tiles_from_m, else the heuristic's), dequant = the "
                 "\"dequant\" path (launchers.dequant), bf16 = F.linear on the bf16 weight")


def vendor_gemm_grid() -> list:
    """The shapes --vendor-gemm times by default: each M of VENDOR_GEMM_M with each (N, K) of
    VENDOR_GEMM_NK, as M,N,K words for tools.cli.parse_shapes."""
    return [f"{m},{n},{k}" for n, k in VENDOR_GEMM_NK for m in VENDOR_GEMM_M]


def dequant_wins(row) -> bool:
    """The dequant path timed and faster than the fused GEMM (or the fused GEMM had no
    proven launcher)."""
    return row["dequant_us"] is not None and (row["fused_us"] is None
                                              or row["dequant_us"] < row["fused_us"])


def dequant_wins_from(rows) -> dict:
    """{(N, K): the smallest M timed from which the dequant path wins at it and at every larger
    M timed for that (N, K), or None where it does not win at the largest}."""
    by_nk = {}
    for row in sorted(rows, key=lambda r: r["m"]):
        by_nk.setdefault((row["n"], row["k"]), []).append(row)
    found = {}
    for nk, group in by_nk.items():
        found[nk] = None
        for row in reversed(group):
            if not dequant_wins(row):
                break
            found[nk] = row["m"]
    return found


def vendor_gemm_threshold(wins_from: dict):
    """The M from which the dequant path wins on every (N, K): the largest of wins_from's,
    None when some (N, K) never wins (or nothing was timed)."""
    values = list(wins_from.values())
    return None if not values or None in values else max(values)


def format_vendor_table(rows) -> str:
    config_width = max([len("fused config")] + [len(row["fused_config"]) for row in rows])
    lines = [f"{'M':>5} {'N':>5} {'K':>5} {'fused':>9} {'dequant':>9} {'bf16':>9} "
             f"{'deq/bf16':>8} {'fused config':<{config_width}} winner"]
    for row in rows:
        ratio = (row["dequant_us"] / row["bf16_us"]
                 if row["dequant_us"] is not None else None)
        lines.append(f"{row['m']:>5} {row['n']:>5} {row['k']:>5} {_num(row['fused_us'], 9, 2)} "
                     f"{_num(row['dequant_us'], 9, 2)} {_num(row['bf16_us'], 9, 2)} "
                     f"{_num(ratio, 8, 2)} {row['fused_config']:<{config_width}} "
                     f"{'dequant' if dequant_wins(row) else 'fused'}")
    return "\n".join(lines)


def vendor_fused_config(arch, m, n, k):
    """The "fused" column's config: the looked-up one where it is a fused GEMM
    (launchers.gemm.GEMM_KERNELS), else from the target's large_tiles_from_m the hopper path's
    large tile (launchers.candidates.HOPPER_LARGE_TILE), else the heuristic's."""
    from mxfp4_mm.launchers.candidates import HOPPER_LARGE_TILE
    from mxfp4_mm.launchers.configs import config_lookup
    from mxfp4_mm.launchers.gemm import GEMM_KERNELS
    from mxfp4_mm.launchers.gemm_config import config_from_fields
    from mxfp4_mm.launchers.heuristics import heuristic_config
    from mxfp4_mm.launchers.targets import target_facts
    looked_up = config_lookup(arch, m, n, k)[0]
    if looked_up.path in GEMM_KERNELS:
        return looked_up
    large_from = target_facts(arch).large_tiles_from_m
    if large_from is not None and m >= large_from:
        return config_from_fields(HOPPER_LARGE_TILE)
    return heuristic_config(arch, m, n, k)


def vendor_gemm_row(spec, time_us, device="cuda") -> dict:
    """One shape: the fused GEMM and the dequant path, each proven (launchers.proof), checked
    with reference.check_implementation and timed, and F.linear bf16 timed (time_us(fn) -> mean
    µs per call); a path that fails gets None and its reason."""
    from mxfp4_mm import reference
    from mxfp4_mm.launchers import current_target
    from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG
    from mxfp4_mm.launchers.ladder import Rung, prove_rung
    from mxfp4_mm.launchers.paths import build_launcher

    m, n, k = spec["m"], spec["n"], spec["k"]
    data = reference.generate_input(m, n, k, spec["seed"], device=device)
    a, b, _, b_shuffle, b_scale_sh = data
    backend, arch = current_target(a.device)
    fused = vendor_fused_config(arch, m, n, k)
    row = dict(spec, arch=arch, fused_config=fused.label, errors={})
    for name, config in (("fused", fused), ("dequant", DEQUANT_CONFIG)):
        row[f"{name}_us"] = None
        try:
            launcher = prove_rung(Rung(name, lambda config=config: build_launcher(
                config, backend, m, n, k, a.stride(), a.device)), m, n, k, a.stride(), a.device)
            ok, message = reference.check_implementation(data, launcher(a, b_shuffle, b_scale_sh))
            if not ok:
                raise RuntimeError(f"wrong output: {message}")
            row[f"{name}_us"] = time_us(lambda launcher=launcher: launcher(a, b_shuffle,
                                                                           b_scale_sh))
        except Exception as error:   # reported in the row, the other variants still timed
            row["errors"][name] = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        launcher = None
    row["bf16_us"] = time_us(lambda: torch.nn.functional.linear(a, b))
    return row


def run_vendor_gemm(specs, args) -> int:
    device = torch.cuda.get_device_name()
    print(f"device: {device}; {len(specs)} shape(s), {args.calls} timed calls each, cache clear "
          f"{args.clear_bytes / 2**20:.0f} MiB", flush=True)
    loop = RunnerLoop(args.clear_bytes)
    rows = timed_rows(
        specs, lambda spec: vendor_gemm_row(
            spec, lambda fn: time_variant(loop, fn, args.calls)["mean_us"]),
        lambda row: (f"{row['m']}x{row['n']}x{row['k']} on {row['arch']}: fused "
                     f"{_num(row['fused_us'], 0, 2)} ({row['fused_config']}), dequant "
                     f"{_num(row['dequant_us'], 0, 2)}, bf16 {_num(row['bf16_us'], 0, 2)} µs"))
    wins_from = dequant_wins_from(rows)
    threshold = vendor_gemm_threshold(wins_from)
    print(f"\n{VENDOR_LEGEND}\n{format_vendor_table(rows)}\n")
    for (n, k), m in wins_from.items():
        print(f"N={n} K={k}: the dequant path wins from M = "
              f"{m if m is not None else '- (not at the largest M timed)'}")
    arch = rows[0]["arch"] if rows else "?"
    if threshold is None:
        print(f"vendor GEMM threshold on {arch}: none (the dequant path does not win on every "
              f"(N, K) at the largest M timed)")
    else:
        below = (" (the smallest M timed: time smaller ones with --shapes to see whether it "
                 "wins below)" if threshold == min(row["m"] for row in rows) else "")
        print(f"vendor GEMM threshold on {arch}: the dequant path wins on every (N, K) from "
              f"M = {threshold}: set vendor_gemm_from_m={threshold} in launchers/targets.py's "
              f"record of {arch}{below}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=device, calls=args.calls, rows=rows,
                                                   wins_from={f"{n},{k}": m for (n, k), m
                                                              in wins_from.items()},
                                                   threshold=threshold), indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    failed = [row for row in rows if "dequant" in row["errors"]]
    return 1 if failed else 0
