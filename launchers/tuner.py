"""Bounded tuning at import, on the device: choose among proven candidates by the runner's timing.

`tune(shapes, device)` runs after the pre-warm on GPU backends, unless MXFP4_MM_TUNE=0. Per
benchmark shape whose table entry was served by a quantizer rung of the ladder, it builds the
candidates of launchers.candidates (the table's entry first, then the table's entry with the
other quantizers listed for the served one, then the other paths at large M: "dequant" on
chips without FP4 MMA, "aiter" on gfx950 where it imports), proves each as the ladder does
(one that fails is dropped, never timed), and times the proven ones round-robin with the
runner's protocol (launchers.timing: synchronize, a 1 GiB cache-clearing write, events around
one call), at least MIN_CALLS calls each, on the project's own inputs. A candidate replaces the
table's entry only if its mean is lower by more than the noise measured in the same run: twice
the standard error of the difference of the two means. The budget (MXFP4_MM_TUNE_S seconds,
default DEFAULT_BUDGET_S) is checked before each build and each shape's timing; what it does not
reach keeps the table's entry. At the end one stderr block gives every candidate's mean µs per
shape and the winner as a line in launchers/config_table.py syntax, ready to paste to pin it.
Only the chosen launchers are kept.
"""

import math
import os
import statistics
import sys
import time
from typing import NamedTuple, Optional

import torch

from .candidates import CANDIDATES, QUANTIZER_CANDIDATES, path_candidates
from .configs import config_for
from .gemm_config import GemmConfig, config_from_fields
from .heuristics import heuristic_config
from .paths import build_launcher
from .ladder import QUANTIZER_RUNGS, Rung, prove_rung
from .proof import proof_cases
from .timing import RunnerLoop

TUNE_VARIABLE = "MXFP4_MM_TUNE"
BUDGET_VARIABLE = "MXFP4_MM_TUNE_S"
DEFAULT_BUDGET_S = 60.0
MIN_CALLS = 20
TUNED_RUNGS = tuple(QUANTIZER_RUNGS.values())
MAX_CANDIDATES = 8
_CONFIG_FIELDS = tuple(GemmConfig.__dataclass_fields__)


class Candidate(NamedTuple):
    config: GemmConfig
    quantizer: str               # kernels.quantize.QUANTIZERS

    @property
    def label(self) -> str:
        return f"{self.config.label} {self.quantizer}"


class Timed(NamedTuple):
    candidate: Candidate
    times: Optional[list]        # µs per call; None when the candidate was not timed
    reason: str = ""             # why it was not timed


class ShapeResult(NamedTuple):
    shape: tuple
    rows: list                   # [Timed], the table's entry first
    winner: int                  # index into rows


def tuning_enabled() -> bool:
    return os.environ.get(TUNE_VARIABLE, "1") not in ("0", "")


def budget_s() -> float:
    text = os.environ.get(BUDGET_VARIABLE, "")
    if not text:
        return DEFAULT_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"{BUDGET_VARIABLE}: expected a number of seconds >= 0, got {text!r}")
    return value


def candidate_configs(arch: str, shape: tuple) -> list:
    """The table's entry, then the alternatives that differ from it (at most MAX_CANDIDATES in
    all): the other paths at this M (launchers.candidates.path_candidates), the listed
    configs, and where the table's entry is another path, the heuristic's fused config."""
    configs = [config_for(arch, *shape)]
    listed = CANDIDATES.get(arch, {}).get(tuple(shape), [])
    alternatives = ([config_from_fields(fields) for fields in path_candidates(arch, shape[0])]
                    + [GemmConfig(**fields) for fields in listed])
    if configs[0].path != "preshuffle":
        alternatives.append(heuristic_config(arch, *shape))
    for config in alternatives:
        if config not in configs:
            configs.append(config)
    return configs[:MAX_CANDIDATES]


def candidates(arch: str, shape: tuple, quantizer: str) -> list:
    """[Candidate]: the table's entry with `quantizer` (the served launcher's), the table's
    entry with each quantizer QUANTIZER_CANDIDATES lists for it, then candidate_configs'
    alternatives with `quantizer` (at most MAX_CANDIDATES in all)."""
    table, *alternatives = candidate_configs(arch, shape)
    found = [Candidate(table, quantizer)]
    found += [Candidate(table, other) for other in QUANTIZER_CANDIDATES.get(quantizer, ())]
    found += [Candidate(config, quantizer) for config in alternatives]
    return found[:MAX_CANDIDATES]


def noise_us(a: list, b: list) -> float:
    """Twice the standard error of mean(a) - mean(b)."""
    return 2.0 * math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


def select(rows: list) -> int:
    """Index of the winner: the fastest timed candidate that beats the table's entry (rows[0])
    by more than the noise, else 0."""
    table = rows[0].times
    if table is None:
        return 0
    best, best_mean = 0, statistics.fmean(table)
    for index, row in enumerate(rows[1:], start=1):
        if row.times is None:
            continue
        mean = statistics.fmean(row.times)
        if statistics.fmean(table) - mean > noise_us(table, row.times) and mean < best_mean:
            best, best_mean = index, mean
    return best


def table_line(shape: tuple, config: GemmConfig, note: str) -> str:
    """`(M, N, K): {fields}` as launchers/config_table.py writes an entry (defaults left out)."""
    defaults = GemmConfig(config.block_m, config.block_n, config.block_k)
    fields = {name: getattr(config, name) for name in _CONFIG_FIELDS
              if name in ("block_m", "block_n", "block_k")
              or getattr(config, name) != getattr(defaults, name)}
    fields["note"] = note
    return f"{tuple(shape)!r}: {fields!r},"


def _mean_text(row: Timed) -> str:
    return f"{statistics.fmean(row.times):8.2f} µs" if row.times else f"  not timed: {row.reason}"


def report(results: list, arch: str) -> str:
    lines = [f"mxfp4-mm: import-time tuning on {arch} (mean µs of the runner's timed call):"]
    for result in results:
        m, n, k = result.shape
        for index, row in enumerate(result.rows):
            mark = "*" if index == result.winner else " "
            origin = "table" if index == 0 else f"cand {index}"
            lines.append(f"  {m}x{n}x{k} {mark} {origin:<7} {_mean_text(row)}  "
                         f"{row.candidate.label}")
        chosen = result.rows[result.winner]
        table = result.rows[0]
        note = (f"import-time tuner on {arch}: {statistics.fmean(chosen.times):.2f} µs against "
                f"the table's {statistics.fmean(table.times):.2f} µs" if chosen.times and table.times
                else f"import-time tuner on {arch}: the table's entry")
        if chosen.candidate.quantizer != table.candidate.quantizer:
            note += f", with the {chosen.candidate.quantizer} quantizer"
        lines.append(f"  pin: {table_line(result.shape, chosen.candidate.config, note)}")
    return "\n".join(lines)


def tune_shape(shape, candidates, build, time_calls, clock, deadline) -> tuple:
    """(ShapeResult, the winner's launcher). build(candidate) -> proven launcher (raises if it
    cannot be built or proven); time_calls(launchers) -> [[µs per call] per launcher];
    clock() -> seconds, compared with deadline before each build and before the timing."""
    built, rows = {}, []
    for candidate in candidates:
        if clock() > deadline:
            rows.append(Timed(candidate, None, "budget spent"))
            continue
        try:
            built[len(rows)] = build(candidate)
            rows.append(Timed(candidate, None,
                              "proven, not timed (budget spent or nothing to compare)"))
        except Exception as error:   # compiling, launching or the proof failed
            reason = " ".join(f"{type(error).__name__}: {error}".split())[:120]
            rows.append(Timed(candidate, None, reason))
    if len(built) > 1 and clock() <= deadline:
        for index, times in zip(built, time_calls(list(built.values()))):
            rows[index] = Timed(rows[index].candidate, times)
    winner = select(rows)
    return ShapeResult(tuple(shape), rows, winner), built.get(winner)


def tune(shapes, served_launcher, device, arch, backend, clock=time.monotonic) -> dict:
    """{shape: launcher} for the shapes whose winner is not the table's entry.

    served_launcher(shape) -> the launcher the ladder chose for the table's entry at A
    strides (K, 1); only shapes it served with a quantizer rung are tuned."""
    deadline = clock() + budget_s()
    results, replacements = [], {}
    loop = None
    for shape in shapes:
        m, n, k = shape
        served = served_launcher(shape)
        if (served.rung not in TUNED_RUNGS
                or (arch not in CANDIDATES and not path_candidates(arch, m))):
            continue
        loop = loop or RunnerLoop(device=device)
        a, b_shuffle, b_scale_sh, _, _ = proof_cases(m, n, k, (k, 1), device, seed=1)[0]

        def build(candidate, m=m, n=n, k=k, served=served):
            if candidate == Candidate(served.config, served.quantizer):
                return served
            config, quantizer = candidate
            rung = Rung(QUANTIZER_RUNGS[quantizer], lambda: build_launcher(
                config, backend, m, n, k, (k, 1), device, quantizer))
            return prove_rung(rung, m, n, k, (k, 1), device)

        def time_calls(launchers, a=a, b_shuffle=b_shuffle, b_scale_sh=b_scale_sh):
            calls = [lambda launcher=launcher: launcher(a, b_shuffle, b_scale_sh)
                     for launcher in launchers]
            return loop.time_interleaved(calls, MIN_CALLS)

        result, winner = tune_shape(shape, candidates(arch, shape, served.quantizer), build,
                                    time_calls, clock, deadline)
        results.append(result)
        if result.winner != 0:
            replacements[tuple(shape)] = winner
    del loop
    torch.cuda.empty_cache()
    if results:
        print(report(results, arch), file=sys.stderr, flush=True)
    return replacements
