"""Which config serves a shape: the table's, a tuned-shapes file's or the heuristic's.

`config_lookup(arch, m, n, k) -> (config, source)` is the lookup used by the launchers, in
this order: the table's entry for the exact shape ("table"), a tuned-shapes file's entry for
the exact shape ("file"), a file's entry for (N, K) and the M bucket of M ("bucket": the
smallest power of two >= M, at most M_BUCKET_CAP), else, on a chip without FP4 MMA from its
Target.vendor_gemm_from_m on (launchers.targets), DEQUANT_CONFIG (the "dequant" path), else
`heuristic_config(arch, ...)` (both "heuristic": the rules of the arch's family,
launchers.heuristics; sm_90's serve the hopper path up to M = Target.hopper_max_m).
So the task shapes keep the table's entries whatever a file holds. Arch keys are Triton
target names: "gfx950" (MI355X), "sm_90" (H100/H200); the interpreter uses the gfx950 entries
(Target.entries_of) so that CPU tests run the production tiling. The table's entries are data
in launchers.config_table, each with a note on where it comes from (tools.tune rewrites an
arch's entries there); a file's entries (launchers.tuned_shapes) are added by `add_entries`.

`note_untuned(arch, m, n, k, config)` prints one stderr line the first time an (N, K, M bucket)
takes the heuristic, naming it and the command that would tune it (MXFP4_MM_QUIET=1 silences
it); `untuned_shapes()` lists those seen.
"""

import os
import sys

import triton

from .config_table import CONFIG_TABLE
from .gemm_config import DEQUANT_CONFIG, GemmConfig
from .heuristics import heuristic_config
from .targets import TARGETS, target_facts


def _table(entries: dict) -> dict:
    return {shape: GemmConfig(**{k: v for k, v in fields.items() if k != "note"})
            for shape, fields in entries.items()}


GEMM_CONFIGS = {arch: _table(entries) for arch, entries in CONFIG_TABLE.items()}
GEMM_CONFIGS.update({arch: GEMM_CONFIGS[target.entries_of] for arch, target in TARGETS.items()
                     if target.entries_of})
M_BUCKET_CAP = 8192          # every M above it shares the cap's bucket
# A tuned-shapes file's entries (add_entries): {arch: {(m, n, k): GemmConfig}} for exact
# shapes, {arch: {(n, k, m bucket): GemmConfig}} for buckets.
FILE_SHAPES = {}
FILE_BUCKETS = {}


def m_bucket(m: int) -> int:
    """The M bucket of M: the smallest power of two >= M, at most M_BUCKET_CAP."""
    return min(triton.next_power_of_2(max(1, m)), M_BUCKET_CAP)


def is_m_bucket(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= M_BUCKET_CAP and value & (value - 1) == 0)


def add_entries(arch: str, shapes: dict, buckets: dict) -> None:
    """Add a tuned-shapes file's entries of `arch`: shapes {(m, n, k): GemmConfig}, buckets
    {(n, k, m bucket): GemmConfig}; an entry already there for a key is replaced."""
    FILE_SHAPES.setdefault(arch, {}).update(shapes)
    FILE_BUCKETS.setdefault(arch, {}).update(buckets)


def config_lookup(arch: str, m: int, n: int, k: int) -> tuple:
    """(config, source): see the module's text for the order and the sources."""
    arch = target_facts(arch).entries_of or arch
    for source, entries, key in (("table", GEMM_CONFIGS, (m, n, k)),
                                 ("file", FILE_SHAPES, (m, n, k)),
                                 ("bucket", FILE_BUCKETS, (n, k, m_bucket(m)))):
        config = entries.get(arch, {}).get(key)
        if config is not None:
            return config, source
    vendor_from_m = target_facts(arch).vendor_gemm_from_m
    if vendor_from_m is not None and m >= vendor_from_m:
        return DEQUANT_CONFIG, "heuristic"
    return heuristic_config(arch, m, n, k), "heuristic"


def config_for(arch: str, m: int, n: int, k: int) -> GemmConfig:
    return config_lookup(arch, m, n, k)[0]


QUIET_VARIABLE = "MXFP4_MM_QUIET"
_untuned = {}   # (n, k, m bucket) -> the first M seen in it


def tune_command(arch: str, n: int, k: int, bucket: int) -> str:
    """The command that tunes the bucket into a tuned-shapes file: measured on a GPU, modelled
    for gfx950 where there is none (the interpreter runs the gfx950 entries)."""
    if arch == "interpreter":
        return f"python -m tools.isa --sweep {n},{k} --m {bucket} --configs FILE"
    return f"python -m tools.tune --shapes {n},{k} --m {bucket} --configs FILE"


def note_untuned(arch: str, m: int, n: int, k: int, config: GemmConfig) -> None:
    """Record (N, K, M bucket) as untuned; the first time, one line on stderr unless
    MXFP4_MM_QUIET is set to anything but 0."""
    key = (n, k, m_bucket(m))
    if key in _untuned:
        return
    _untuned[key] = m
    if os.environ.get(QUIET_VARIABLE, "0") not in ("", "0"):
        return
    print(f"mxfp4-mm: untuned shape N={n} K={k} M bucket {key[2]} (M={m}) takes the heuristic "
          f"config {config.label}; tune it with `{tune_command(arch, *key)}`, then set "
          f"MXFP4_MM_CONFIGS=FILE ({QUIET_VARIABLE}=1 silences this)", file=sys.stderr, flush=True)


def untuned_shapes() -> list:
    """[(N, K, M bucket)] that took the heuristic in this process, in the order first seen."""
    return list(_untuned)
