"""The gfx950 config space of one shape, searched by modelled time (tools.gfx950.model).

`search(shape, quantizer)` compiles whole calls (the GEMM and, for a two-launch split-K, its
reduce) with Triton's HIP backend and ranks them by their modelled µs under the worst member
of the model family (so the first is the minimax call), in two stages:
  1. tiles: BLOCK_M x BLOCK_N x BLOCK_K and the split-K count (one launch: the splits summed
     by the last program), with warps, stages, the B-load cache modifier and waves_per_eu at
     the values below;
  2. around each of the REFINE_TOP best: one field changed at a time (warps, stages,
     waves_per_eu, a second launch for the split-K sum, the cache modifier, the XCD remap,
     the order of the B-scale load, K split across the waves); repeated REFINE_ROUNDS times around the best so far, so
     that changes that pay together are found.
A config is eligible when it compiles without spills or scratch, its LDS fits a CU's
(LDS_PER_CU, 160 KiB), it has no hazard, its in-kernel
split-K reduce (if any) is release-ordered, and its quantizer's fast path spends at most
MAX_FAST_PATH_INSTRUCTIONS per element of the BLOCK_M-row tile the MFMA takes (short K tiles
spread the quantizer's fixed costs over fewer elements; a program that quantizes only the
fewer rows M has keeps the full tile's budget); `ranked(calls)` orders the eligible calls, `members_best(calls)` gives
each member's own best. The refinement goes around the REFINE_TOP calls of the ranking and
around each member's best. The space is data (the tuples below); the table takes the minimax
call, and the import-time candidates include each member's own best (launchers/candidates.py),
so that the tuner on the chip decides among them.
"""

import dataclasses
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers.gemm_config import GemmConfig
from .critical_path import CUS
from .report import LDS_PER_CU, call_rows

BLOCKS_M = (16, 32, 64)
BLOCKS_N = (32, 64, 128, 256)
BLOCKS_K = (256, 512, 1024)
SPLITS = (1, 2, 3, 4, 7, 8, 14, 16)
WARPS = (1, 2, 4, 8)
STAGES = (1, 2, 3)
WAVES_PER_EU = (0, 1, 2)
WAVE_SPLITS_K = (1, 2, 4)
MAX_TILE_ELEMENTS = 64 * 256 * 1024   # past it the tile spills under every option
MAX_ROUNDS = 4                        # workgroups past 4 per CU are not worth compiling
REFINE_TOP = 4
REFINE_ROUNDS = 2
WORKERS = 2
MAX_FAST_PATH_INSTRUCTIONS = {"hardware": 8.0, "hardware-f32": 9.0}   # per A element


def _default_warps(block_m: int, block_n: int) -> int:
    return 8 if block_m * block_n >= 32 * 256 else 4


def tile_configs(shape) -> list:
    """Stage 1: every tile shape and split count of the space that fits the shape."""
    m, n, k = shape
    found = {}
    for bm in BLOCKS_M:
        if bm > max(16, m):
            continue
        for bn in BLOCKS_N:
            for bk in BLOCKS_K:
                if bk > formats.pad_to(k, 256) or bm * bn * bk > MAX_TILE_ELEMENTS:
                    continue
                for split in SPLITS:
                    reduce = "last_program" if split > 1 else "kernel"
                    config = GemmConfig(bm, bn, bk, split_k=split, split_k_reduce=reduce,
                                        num_warps=_default_warps(bm, bn),
                                        cache_modifier=".cg")
                    splits, size = config.splits_for(k)
                    tiles = formats.cdiv(m, bm) * formats.cdiv(n, bn)
                    if splits != split or splits * tiles > MAX_ROUNDS * CUS:
                        continue
                    stages = 2 if size // bk > 1 else 1
                    found[config.label] = dataclasses.replace(config, num_stages=stages)
    return list(found.values())


def neighbours(config: GemmConfig, k: int) -> list:
    """Stage 2: the config with one field changed at a time."""
    per_split = config.splits_for(k)[1] // config.block_k
    changes = ([dict(num_warps=w) for w in WARPS]
               + [dict(num_stages=s) for s in STAGES if per_split > 1 or s == 1]
               + [dict(waves_per_eu=w) for w in WAVES_PER_EU]
               + [dict(wave_split_k=w) for w in WAVE_SPLITS_K]
               + [dict(cache_modifier=None), dict(num_xcds=8),
                  dict(b_scales_first=not config.loads_b_scales_first)])
    if config.split_k > 1:
        changes.append(dict(split_k_reduce="kernel"))
    found = {}
    for change in changes:
        try:
            varied = dataclasses.replace(config, **change)
        except ValueError:   # a change GemmConfig refuses (e.g. wave slices under one MFMA's K)
            continue
        if varied != config:
            found[varied.label + str(varied.waves_per_eu)] = varied
    return list(found.values())


def eligible(rows) -> bool:
    bar = MAX_FAST_PATH_INSTRUCTIONS.get(rows[0]["quantizer"], float("inf"))
    return all("error" not in r and "critical_path" in r and not r["scratch_bytes"]
               and r["lds_bytes"] <= LDS_PER_CU
               and not r["vgpr_spills"] and not r["sgpr_spills"] and not r["hazards"]
               and r.get("release_ordered", True)
               and r.get("fast_path_instructions_per_tile_element", 0) <= bar for r in rows)


def worst_first(rows) -> tuple:
    """A call's modelled µs under each member of the model family, the worst first: ordering
    by it ranks by the worst member, ties by the next worst, and so on (lexicographic
    minimax)."""
    return tuple(sorted(rows[0]["modelled_us_by_member"].values(), reverse=True))


def ranked(calls) -> list:
    """The eligible calls (each a list of rows), by their modelled µs under the worst member
    of the model family (row "modelled_us"), ties by the next worst (worst_first), fastest
    first: the first is the minimax call."""
    return sorted((rows for rows in calls if eligible(rows)), key=worst_first)


def members_best(calls) -> dict:
    """{member: the eligible call that member models fastest}, for each member of the family."""
    best = {}
    for rows in calls:
        if not eligible(rows):
            continue
        for member, us in rows[0]["modelled_us_by_member"].items():
            if member not in best or us < best[member][0]["modelled_us_by_member"][member]:
                best[member] = rows
    return best


def _compile_call(job):
    shape, config, quantizer = job
    return call_rows(shape, config, quantizer)


def _compile_all(jobs, label: str) -> list:
    done = []
    with ProcessPoolExecutor(WORKERS, mp_context=get_context("fork")) as pool:
        for index, rows in enumerate(pool.map(_compile_call, jobs)):
            done.append(rows)
            print(f"tools.isa: {label} {index + 1}/{len(jobs)}", file=sys.stderr, flush=True)
    return done


def search(shape, quantizer: str) -> list:
    """Every call compiled for `shape` (a list of lists of rows), stage 1 then stage 2."""
    shape = tuple(shape)
    name = "x".join(map(str, shape))
    calls = _compile_all([(shape, c, quantizer) for c in tile_configs(shape)],
                         f"{name} tiles")
    seen = {GemmConfig(**rows[0]["config"]) for rows in calls}
    for round_ in range(REFINE_ROUNDS):
        refine = []
        for rows in ranked(calls)[:REFINE_TOP] + list(members_best(calls).values()):
            for config in neighbours(GemmConfig(**rows[0]["config"]), shape[2]):
                if config not in seen:
                    seen.add(config)
                    refine.append((shape, config, quantizer))
        calls += _compile_all(refine, f"{name} refine {round_ + 1}")
    return calls
