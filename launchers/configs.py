"""Per-arch, per-shape kernel configs: data, plus a heuristic per arch family for shapes not in
the table.

`config_lookup(arch, m, n, k) -> (config, source)` is the lookup used by the launchers, in
this order: the table's entry for the exact shape ("table"), a tuned-shapes file's entry for
the exact shape ("file"), a file's entry for (N, K) and the M bucket of M ("bucket": the
smallest power of two >= M, at most M_BUCKET_CAP), else, on a chip without FP4 MMA from
`vendor_gemm_from_m(arch)` on, DEQUANT_CONFIG (the "dequant" path), else
`heuristic_config(arch, ...)` (both "heuristic": the rules of the arch's family, HEURISTICS;
sm_90's serve the hopper path up to M = HOPPER_MAX_M).
So the task shapes keep the table's entries whatever a file holds. Arch keys are Triton
target names: "gfx950" (MI355X), "sm_90" (H100/H200); the interpreter uses the gfx950 entries
so that CPU tests run the production tiling. The table's entries are data in
launchers.config_table, each with a note on where it comes from (tools.tune rewrites an arch's
entries there); a file's entries (launchers.tuned_shapes) are added by `add_entries`.

`note_untuned(arch, m, n, k, config)` prints one stderr line the first time an (N, K, M bucket)
takes the heuristic, naming it and the command that would tune it (MXFP4_MM_QUIET=1 silences
it); `untuned_shapes()` lists those seen.
"""

import os
import re
import sys
from dataclasses import dataclass, fields
from typing import Optional

import triton

from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.preshuffle_gemm import SCALED_MFMA_K
from mxfp4_mm.launchers.config_table import CONFIG_TABLE

TEST_SHAPES = ((8, 2112, 7168), (16, 3072, 1536), (64, 3072, 1536), (256, 2880, 512))
BENCHMARK_SHAPES = ((4, 2880, 512), (16, 2112, 7168), (32, 4096, 512), (32, 2880, 512),
                    (64, 7168, 2048), (256, 3072, 1536))
TASK_SHAPES = TEST_SHAPES + BENCHMARK_SHAPES
# The seeds the runner's task.yml gives each shape (its tests, then its benchmarks).
TASK_SEEDS = dict(zip(TASK_SHAPES, (124, 6635, 45, 78, 4565, 15, 457, 54, 687, 7856)))
# The launchers a config can choose (launchers.paths.build_launcher): "preshuffle", the fused
# GEMM of kernels.preshuffle_gemm; "dequant", A quantized, A and B dequantized to bf16 and the
# vendor GEMM (launchers.dequant); "aiter", aiter's quantize + gemm_a4w4 (launchers.aiter_path,
# where aiter imports); "hopper", kernels.hopper_gemm's fused GEMM for GPUs without FP4 MMA
# (CUDA only: it dequantizes both operands to bf16 for tl.dot).
GEMM_PATHS = ("preshuffle", "dequant", "aiter", "hopper")
TILE_FIELDS = ("block_m", "block_n", "block_k")
# The fields a path other than "preshuffle" reads (every other field keeps GemmConfig's
# default), and the values a config of it takes where they are left out (config_from_fields).
# "dequant" reads the tiles and warps of its dequantize kernel (kernels.dequantize): block_m
# rows of A, block_n rows of B and block_k columns a program (32 x 256 in 8 warps: 84 VGPRs
# on gfx950, where 64 x 256 in 4 warps needs 330 and 128 x 256 spills); "aiter" reads none.
PATH_FIELDS = {"dequant": TILE_FIELDS + ("num_warps",), "aiter": ()}
PATH_DEFAULTS = {"dequant": dict(block_m=32, block_n=32, block_k=256, num_warps=8),
                 "aiter": dict(block_m=16, block_n=32, block_k=256)}


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1                 # requested K splits
    split_k_reduce: str = "kernel"   # who sums the splits: "kernel" (a 2nd launch) or "last_program"
    group_m: int = 1
    num_warps: int = 4
    num_stages: int = 1
    cache_modifier: Optional[str] = None   # for the B and B-scale loads
    waves_per_eu: int = 0            # HIP only
    matrix_instr_nonkdim: int = 16   # HIP only
    reduce_block_m: int = 16
    reduce_block_n: int = 64
    num_xcds: int = 1                # > 1: remap programs so that neighbours share an XCD's L2
    store_modifier: Optional[str] = None   # for the C and partials stores, e.g. ".wt"
    b_scales_first: Optional[bool] = None  # the B-scale load before A and B; None: see below
    quantize_a_once: bool = False    # A quantized by a kernel of its own, then the GEMM on it
    wave_split_k: int = 1            # K slices of each K tile, one per group of waves
    path: str = "preshuffle"         # which launcher serves it (GEMM_PATHS)
    swap_ab: bool = False            # "hopper" only: each tile computed as C^T = B @ A^T

    def __post_init__(self):
        problems = []
        if self.block_n <= 0 or self.block_n % 32 or 256 % self.block_n:
            problems.append(f"block_n={self.block_n} must be a multiple of 32 dividing 256")
        if self.block_k < 256 or self.block_k & (self.block_k - 1):
            problems.append(f"block_k={self.block_k} must be a power of two >= 256")
        if self.block_m < 16 or self.block_m & (self.block_m - 1):
            problems.append(f"block_m={self.block_m} must be a power of two >= 16")
        if self.split_k < 1 or self.group_m < 1:
            problems.append("split_k and group_m must be >= 1")
        if self.split_k_reduce not in ("kernel", "last_program"):
            problems.append(f"split_k_reduce={self.split_k_reduce!r} is not 'kernel' or 'last_program'")
        if self.cache_modifier not in (None, ".cg", ".ca", ".cv"):
            problems.append(f"cache_modifier={self.cache_modifier!r} is not a load modifier")
        if self.store_modifier not in (None, ".wb", ".cg", ".cs", ".wt"):
            problems.append(f"store_modifier={self.store_modifier!r} is not a store modifier")
        if (self.wave_split_k < 1 or self.wave_split_k & (self.wave_split_k - 1)
                or self.block_k // self.wave_split_k < SCALED_MFMA_K):
            problems.append(f"wave_split_k={self.wave_split_k} must be a power of two leaving "
                            f">= {SCALED_MFMA_K} of block_k={self.block_k} to a slice")
        if self.num_xcds < 1:
            problems.append(f"num_xcds={self.num_xcds} must be >= 1")
        if self.swap_ab and self.path != "hopper":
            problems.append("swap_ab needs path='hopper'")
        if self.path not in GEMM_PATHS:
            problems.append(f"path={self.path!r} is not one of {', '.join(GEMM_PATHS)}")
        elif self.path in PATH_FIELDS:
            fixed = PATH_DEFAULTS[self.path]
            unread = [f.name for f in fields(self)
                      if f.name not in PATH_FIELDS[self.path] + ("path",)
                      and getattr(self, f.name) != fixed.get(f.name, f.default)]
            if unread:
                problems.append(f"path={self.path!r} reads only "
                                f"{', '.join(PATH_FIELDS[self.path]) or 'no field'}; leave "
                                f"{', '.join(unread)} out")
        if problems:
            raise ValueError("bad GemmConfig: " + "; ".join(problems))

    @property
    def label(self) -> str:
        """Short form, e.g. "16x128x512 sk14/lp w4 s1 .cg" (lp/rk: who reduces the splits);
        "dequant 32x32x256 w8" and "aiter" for the other paths."""
        if self.path == "aiter":
            return "aiter"
        if self.path == "dequant":
            return f"dequant {self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps}"
        text = f"{self.block_m}x{self.block_n}x{self.block_k} sk{self.split_k}"
        if self.split_k > 1:
            text += "/lp" if self.split_k_reduce == "last_program" else "/rk"
        text += f" w{self.num_warps} s{self.num_stages}"
        options = (self.cache_modifier, self.waves_per_eu and f"wpe{self.waves_per_eu}",
                   self.num_xcds > 1 and f"xcd{self.num_xcds}",
                   self.store_modifier and f"store{self.store_modifier}",
                   self.b_scales_first is not None
                   and ("bs-first" if self.b_scales_first else "bs-last"),
                   self.quantize_a_once and "a-once",
                   self.wave_split_k > 1 and f"wk{self.wave_split_k}",
                   self.path == "hopper" and "hopper",
                   self.swap_ab and "swap")
        return " ".join([text] + [option for option in options if option])

    @property
    def loads_b_scales_first(self) -> bool:
        """Whether each K tile loads B's scales before A and B. By default where their
        conversion to the MFMA layout needs no LDS (BLOCK_N >= 128): issued after B, the load
        starts only once B's conversion has waited for B, a second round trip. Narrower tiles
        convert them through LDS first, where loading them first costs a round trip instead.
        The compiler can still wait for them before issuing the rest (tools.isa shows the
        round trips), which is why a config may choose."""
        return self.block_n >= 128 if self.b_scales_first is None else self.b_scales_first

    def splits_for(self, k: int) -> tuple:
        """(number of splits actually launched, K elements per split) for this K."""
        size = formats.pad_to(formats.cdiv(k, self.split_k), self.block_k)
        return formats.cdiv(k, size), size


def config_from_fields(config_fields: dict) -> GemmConfig:
    """GemmConfig(**config_fields), a path other than "preshuffle" taking its PATH_DEFAULTS
    where they are left out (a tuned-shapes file may say {"path": "aiter"})."""
    defaults = PATH_DEFAULTS.get(config_fields.get("path"), {})
    return GemmConfig(**{**defaults, **config_fields})


DEQUANT_CONFIG = config_from_fields({"path": "dequant"})
AITER_CONFIG = config_from_fields({"path": "aiter"})


def non_default_fields(config: GemmConfig) -> dict:
    """The fields of `config` that differ from GemmConfig's defaults (the tiles always)."""
    return {f.name: getattr(config, f.name) for f in fields(config)
            if getattr(config, f.name) != f.default}


def _table(entries: dict) -> dict:
    return {shape: GemmConfig(**{k: v for k, v in fields.items() if k != "note"})
            for shape, fields in entries.items()}


# The arch whose entries another arch uses.
ENTRIES_OF_ARCH = {"interpreter": "gfx950"}
GEMM_CONFIGS = {arch: _table(entries) for arch, entries in CONFIG_TABLE.items()}
GEMM_CONFIGS.update({arch: GEMM_CONFIGS[source] for arch, source in ENTRIES_OF_ARCH.items()})
M_BUCKET_CAP = 8192          # every M above it shares the cap's bucket
# A tuned-shapes file's entries (add_entries): {arch: {(m, n, k): GemmConfig}} for exact
# shapes, {arch: {(n, k, m bucket): GemmConfig}} for buckets.
FILE_SHAPES = {}
FILE_BUCKETS = {}


def config_note(arch: str, shape: tuple) -> str:
    """Why the table holds what it holds for (arch, shape): reasoning, or the tuner's figure."""
    return CONFIG_TABLE.get(arch, {}).get(tuple(shape), {}).get("note", "")


# From this M on, the heuristics quantize A once: the fused GEMM quantizes each row of A once
# per N tile, cdiv(N, BLOCK_N) times over, which outgrows the MMA work as M grows.
QUANTIZE_ONCE_MIN_M = 1024
# The last config of our own the ladder tries (launchers.ladder): small tiles, one stage, no
# split; it fits every target's shared memory and spills on none (tests/test_fit.py).
FITTING_CONFIG = GemmConfig(16, 32, 256, num_warps=4, num_stages=1)
_GFX950_TARGET_WORKGROUPS = 128
SM90_PROCESSORS = 132   # an H100 SXM's SMs (the H200's too)
_SM90_K_TILES_PER_SPLIT = 4


# From this M on, config_lookup serves the "dequant" path (vendor_gemm_from_m) where the chip
# has no FP4 MMA. Measured on an H100 (`python -m tools.bench --vendor-gemm`, docs/results.md):
# the dequant path won at M = 256 on N,K 4096,4096 and 6144,4096 and at every M from 512 to
# 2048 timed on 4096,4096 and 7168,2048; at M = 64 and 128 the fused GEMM won.
VENDOR_GEMM_FROM_M = 256
_NVIDIA_ARCH = re.compile(r"sm_(\d+)")
FP4_MMA_FROM_SM = 100     # NVIDIA's FP4 MMA (tcgen05 block-scaled) starts with sm_100


def vendor_gemm_from_m(arch: str) -> Optional[int]:
    """The M from which config_lookup serves the "dequant" path for arch (after the table's
    and a file's entries): VENDOR_GEMM_FROM_M on NVIDIA chips without FP4 MMA (before sm_100,
    where tl.dot_scaled is an emulation); None elsewhere."""
    match = _NVIDIA_ARCH.fullmatch(arch)
    if match and int(match.group(1)) < FP4_MMA_FROM_SM:
        return VENDOR_GEMM_FROM_M
    return None


def gfx950_heuristic(m: int, n: int, k: int) -> GemmConfig:
    """gfx950 (and AMD): small M tiles, wide N tiles, split-K when the grid is small, BLOCK_K
    256 for 64-row tiles (512 spills there under the fused quantizer); from
    QUANTIZE_ONCE_MIN_M on, A quantized once and large tiles."""
    block_k = 512 if k % 512 == 0 else 256
    if m >= QUANTIZE_ONCE_MIN_M:
        # The tiles the gfx950 sweep of public model shapes chose most (docs/results.md).
        wide = n >= 256
        if m >= 4096:
            block_m, block_n, block_k, warps = 256, 256 if wide else 128, 256, 8
        elif wide and k % 512 == 0:
            block_m, block_n, block_k, warps = 128, 256, 512, 8
        else:
            block_m, block_n, block_k, warps = 128, 128, 256, 4
        return GemmConfig(block_m, block_n, block_k, num_warps=warps,
                          num_stages=2 if k > block_k else 1, quantize_a_once=True)
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    block_n = 128 if n >= 2048 else 64
    if block_m == 64:
        block_k = 256
    tiles = formats.cdiv(m, block_m) * formats.cdiv(n, block_n)
    k_tiles = formats.cdiv(k, block_k)
    split_k = 1
    if tiles < _GFX950_TARGET_WORKGROUPS // 2 and k_tiles >= 4:
        split_k = min(k_tiles, formats.cdiv(_GFX950_TARGET_WORKGROUPS, tiles), 16)
    return GemmConfig(block_m, block_n, block_k, split_k=split_k,
                      num_stages=1 if k_tiles // split_k <= 1 else 2)


# The hopper path serves untuned sm_90 shapes up to this M, where hopper_config's tiles end: on
# an H100 it measured faster than sm90_preshuffle's configs on each Llama-3-8B decode shape at
# M = 1, 8, 32 and 64 (docs/results.md); from VENDOR_GEMM_FROM_M the dequant path serves.
HOPPER_MAX_M = 64
# Split K (powers of two) while the grid stays within this many programs: about three per SM
# of an H100 or H200 (132 SMs), where the decode shapes measured fastest.
_HOPPER_MAX_PROGRAMS = 400


def hopper_config(m: int, n: int, k: int) -> GemmConfig:
    """The sm_90 rule of the hopper path (kernels.hopper_gemm) for M up to 64, from the
    measurements in docs/results.md: up to 64 rows of A a tile, the tile transposed (N fills
    the MMA's 64 rows), BLOCK_K 256, three stages at BLOCK_M 16 (one above: two spilled), and
    K split, summed by the last program, while the grid stays within _HOPPER_MAX_PROGRAMS."""
    block_m = min(max(16, triton.next_power_of_2(m)), 64)
    block_n = 128 if block_m == 64 else 64
    tiles = formats.cdiv(m, block_m) * formats.cdiv(n, block_n)
    k_tiles = formats.cdiv(k, 256)
    split_k = 1
    while 2 * split_k <= k_tiles and 2 * split_k * tiles <= _HOPPER_MAX_PROGRAMS:
        split_k *= 2
    return GemmConfig(block_m, block_n, 256, split_k=split_k, split_k_reduce="last_program",
                      num_warps=8 if block_m == 64 else 4, num_stages=3 if block_m == 16 else 1,
                      swap_ab=True, path="hopper")


def sm90_heuristic(m: int, n: int, k: int) -> GemmConfig:
    """sm_90 (and NVIDIA): the hopper path up to M = HOPPER_MAX_M, else sm90_preshuffle."""
    if m <= HOPPER_MAX_M:
        return hopper_config(m, n, k)
    return sm90_preshuffle(m, n, k)


def sm90_preshuffle(m: int, n: int, k: int) -> GemmConfig:
    """The preshuffle GEMM on sm_90: BLOCK_K 256 and tiles that compile without spilling under Triton
    3.6.0 (255 registers a thread; tools.tune's sm_90 winners, or their nearest neighbour
    that does not spill): 16x64 with 4 warps up to M = 16, 32x64 with 8 warps up to 32,
    64x64 with 8 warps below QUANTIZE_ONCE_MIN_M, then A quantized once and 128x64 tiles.
    Split-K, summed by the last program, gives each split about _SM90_K_TILES_PER_SPLIT K
    tiles, as the tuned configs do, while the fp32 partials (8 bytes an element of C, written
    and read) stay under the weight's bytes (half a byte an element): splits <= K / (16 M)."""
    if m >= QUANTIZE_ONCE_MIN_M:
        return GemmConfig(128, 64, 256, num_warps=8, num_stages=3, quantize_a_once=True)
    if m <= 16:
        block_m, block_n, warps, stages = 16, 64, 4, 1
    elif m <= 32:
        block_m, block_n, warps, stages = 32, 64, 8, 2
    else:
        block_m, block_n, warps, stages = 64, 64, 8, 2
    k_tiles = formats.cdiv(k, 256)
    split_k = max(1, min(formats.cdiv(k_tiles, _SM90_K_TILES_PER_SPLIT), 16, k // (16 * m)))
    return GemmConfig(block_m, block_n, 256, split_k=split_k,
                      split_k_reduce="last_program" if split_k > 1 else "kernel",
                      num_warps=warps, num_stages=stages, cache_modifier=".cg")


# Each arch family's heuristic: an arch without rules of its own takes its vendor's
# ("sm_*": sm_90's, else gfx950's); the interpreter runs gfx950's.
HEURISTICS = {"gfx950": gfx950_heuristic, "sm_90": sm90_heuristic}


def heuristic_arch(arch: str) -> str:
    """The key of HEURISTICS whose rules serve `arch`."""
    arch = ENTRIES_OF_ARCH.get(arch, arch)
    if arch in HEURISTICS:
        return arch
    return "sm_90" if arch.startswith("sm_") else "gfx950"


def heuristic_config(arch: str, m: int, n: int, k: int) -> GemmConfig:
    """A config for any shape on `arch`, by the rules of its family (HEURISTICS)."""
    return HEURISTICS[heuristic_arch(arch)](m, n, k)


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
    arch = ENTRIES_OF_ARCH.get(arch, arch)
    for source, entries, key in (("table", GEMM_CONFIGS, (m, n, k)),
                                 ("file", FILE_SHAPES, (m, n, k)),
                                 ("bucket", FILE_BUCKETS, (n, k, m_bucket(m)))):
        config = entries.get(arch, {}).get(key)
        if config is not None:
            return config, source
    vendor_from_m = vendor_gemm_from_m(arch)
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
