"""tools.bench --prepared: the prepared-weight path (launchers.prepared: the op gemm_prepared
and MXFP4Linear on NVIDIA Hopper) timed in the runner's loop, per shape, beside custom_kernel's
path and F.linear on the bf16 weight.

    python -m tools.bench --prepared --shapes llama-3-8b [M,N,K | N,K ...] --m 1,8,32,64,128
                          [--calls 100] [--json FILE]

Per shape (inputs from reference.generate_input with the runner's seed rule), each checked
once against the reference, then timed: "prepared", the rule's config
(launchers.prepared.prepared_config); "s_flip", the same with the other staging (Triton's
pipeliner in three stages, or one stage with B's next tile prefetched into registers); "a_flip", the same with A quantized the other way
(once by its own launches, or in the GEMM); "n_flip", the same with the other BLOCK_N (64 and
4 warps, or 128 and 8); each combination of those three changes, named by theirs joined with
"+" ("a_flip+s_flip"), all below sm_90's Target.large_tiles_from_m only; "tile_alt", below
that threshold the large tile that would serve there (launchers.prepared.large_tile_config),
from it the tile before the rule's in launchers.prepared.LARGE_TILES (the next, for the
first); "custom_kernel", submission.custom_kernel on
(A, B_shuffle, B_scale_sh); "bf16", F.linear on the bf16 weight; and "bytes": an empty launch
plus the prepared weight's bytes (values and scales) and A's and C's at the copy bandwidth
measured in the run. Prints a table with prepared/bf16 and prepared/bytes; tuned configs are
not read (run with MXFP4_MM_TUNE=0 and no MXFP4_MM_CONFIGS).
"""

import torch

from .evaluate import _num
from .timing import time_variant, timed_rows

FLIPS = ("a_flip", "n_flip", "s_flip")
FLIP_COMBINATIONS = tuple("+".join(flip for flip in FLIPS if mask >> FLIPS.index(flip) & 1)
                          for mask in range(1, 1 << len(FLIPS)))
VARIANTS = ("prepared",) + FLIP_COMBINATIONS + ("tile_alt", "custom_kernel", "bf16")


def prepared_bytes(m, n, k, weight) -> int:
    return 2 * m * k + weight.values.numel() + weight.scales.numel() + 2 * m * n


def alternative_tile(m, n, k):
    """The "tile_alt" variant's config (the module's text)."""
    from mxfp4_mm.launchers.prepared import large_tile_config, large_tiles
    from mxfp4_mm.launchers.targets import SM90
    config = large_tile_config(m, n, k)
    if m < SM90.large_tiles_from_m:
        return config
    tiles = large_tiles()
    at = tiles.index(config)
    return tiles[at - 1] if at > 0 else tiles[at + 1]


def variant_configs(m, n, k) -> dict:
    from mxfp4_mm.launchers.prepared import prepared_config
    from mxfp4_mm.launchers.targets import SM90
    config = prepared_config(m, n, k)
    warps = 12 - config.num_warps           # 4 <-> 8
    configs = {"prepared": config}
    if m < SM90.large_tiles_from_m:
        changes = {"a_flip": dict(a_dequantized=not config.a_dequantized),
                   "n_flip": dict(num_warps=warps, block_n=16 * warps),
                   "s_flip": dict(num_stages=4 - config.num_stages)}     # 1 <-> 3
        for name in FLIP_COMBINATIONS:
            fields = {}
            for flip in name.split("+"):
                fields.update(changes[flip])
            configs[name] = config._replace(**fields)
    configs["tile_alt"] = alternative_tile(m, n, k)
    return configs


def prepared_row(spec, time_us, empty_kernel_us, bandwidth) -> dict:
    """One shape: each variant checked and timed (time_us(fn) -> mean µs); a variant that
    fails gets None and its reason."""
    from mxfp4_mm import reference, submission
    from mxfp4_mm.launchers import current_target
    from mxfp4_mm.launchers.prepared import PreparedLauncher, hopper_weight

    m, n, k = spec["m"], spec["n"], spec["k"]
    data = reference.generate_input(m, n, k, spec["seed"], device="cuda")
    a, b, _, b_shuffle, b_scale_sh = data
    weight = hopper_weight(b_shuffle, b_scale_sh)
    backend, _ = current_target(a.device)
    calls = {"custom_kernel": lambda: submission.custom_kernel(data),
             "bf16": lambda: torch.nn.functional.linear(a, b)}
    row = dict(spec, configs={}, errors={})
    for name, config in variant_configs(m, n, k).items():
        row["configs"][name] = config.label
        try:
            launcher = PreparedLauncher(config, backend, m, n, k, a.stride(), a.device,
                                        weight.wide_scales)
            calls[name] = lambda launcher=launcher: launcher(a, weight.values, weight.scales)
        except Exception as error:   # reported in the row, the other variants still timed
            row["errors"][name] = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    for name in VARIANTS:
        row[f"{name}_us"] = None
        if name not in calls:
            continue
        try:
            if name != "bf16":
                ok, message = reference.check_implementation(data, calls[name]())
                if not ok:
                    raise RuntimeError(f"wrong output: {message}")
            row[f"{name}_us"] = time_us(calls[name])
        except Exception as error:
            row["errors"][name] = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    row["bytes_us"] = empty_kernel_us + prepared_bytes(m, n, k, weight) / bandwidth * 1e6
    row["weight_mb"] = (weight.values.numel() + weight.scales.numel()) / 1e6
    return row


def _ratio(row, over):
    if row["prepared_us"] is None or row[f"{over}_us"] is None:
        return None
    return row["prepared_us"] / row[f"{over}_us"]


def format_prepared_table(rows) -> str:
    widths = {v: max(9, len(v)) for v in VARIANTS}
    lines = [f"{'M':>4} {'N':>6} {'K':>6} {'MB':>6} "
             + " ".join(f"{v:>{widths[v]}}" for v in VARIANTS)
             + f" {'bytes':>8} {'prep/bf16':>9} {'prep/bytes':>10}  config"]
    for row in rows:
        lines.append(f"{row['m']:>4} {row['n']:>6} {row['k']:>6} {row['weight_mb']:>6.1f} "
                     + " ".join(_num(row[f'{v}_us'], widths[v], 2) for v in VARIANTS)
                     + f" {_num(row['bytes_us'], 8, 2)} {_num(_ratio(row, 'bf16'), 9, 2)} "
                     f"{_num(_ratio(row, 'bytes'), 10, 2)}  {row['configs'].get('prepared', '')}")
    return "\n".join(lines)


def run_prepared(shapes, args, loop, empty_kernel_us, bandwidth) -> list:
    """Every shape's row, printed as it comes; the rows."""
    return timed_rows(
        shapes, lambda spec: prepared_row(
            spec, lambda fn: time_variant(loop, fn, args.calls)["mean_us"], empty_kernel_us,
            bandwidth),
        lambda row: (f"{row['m']}x{row['n']}x{row['k']}: prepared "
                     f"{_num(row['prepared_us'], 0, 2)} µs ({row['configs'].get('prepared')}), "
                     f"bf16 {_num(row['bf16_us'], 0, 2)}, bytes {_num(row['bytes_us'], 0, 2)}"))
