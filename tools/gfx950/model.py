"""Modelled time of one call through the leaderboard runner's harness on an MI355X, from the
walked gfx950 figures of the kernels it launches: a family of models that fit the public
points about equally well, and disagree where the data is thin.

    t = harness floor + HBM bytes / HBM bandwidth          (fixed, not fitted)
        + the member's fitted terms (FAMILY):
    "issue"            a x busiest-SIMD issue + b x (launches - 1)
    "round trips"      the same + ROUND_TRIP_US x (serialized global round trips beyond two),
                       a price the fit cannot tell (see ROUND_TRIP_US) and so takes as given
    "latency, sync 1x" a x busiest-SIMD cycles + b x (launches - 1), where a wave's cycles come
                       from tools.gfx950.critical_path's cycle walk (each memory op completes a
                       latency after it issues, waits stall) with an atomic, buffer_wbl2 or
                       buffer_inv as slow as a global load
    "latency, sync 2x" the same with them twice as slow

The busiest-SIMD issue of a launch is the instructions on one wave's path times the waves the
busiest SIMD runs (tools.gfx950.critical_path: workgroups dealt over the CUs, in rounds where
occupancy does not hold them all at once); its cycles, each round's cycle walk plus the issue
of the round's other waves. The round trips are those of one program's path (the last
program's where split-K is summed in the kernel), summed over the launches. Each member's
coefficients are fitted by least squares on the public MI355X points in
`mi355x_public_timings.json` (beside this file, with their sources; tools.gfx950.calibration
writes the walked figures of their kernels): aiter's Triton `gemm_a16wfp4_preshuffle` and its
split-K reduce kernel under configs one entrant submitted, each point the mean of its
published leaderboard-mode medians. `fit()` also computes a member's held-out error: every
point predicted by the fit on the others (leave one point out), and every shape's points by
the fit on the other shapes (leave one shape out), and its error out of sample: the walked
public points left out of the fit, each against the mean of its times, those of a known mode
(benchmark mode, converted) apart from those of unknown mode. `family()` fits every member;
`Family.range(call)` gives a call's figure under each, names the members at either end and the
terms outside the calibration points' range (an extrapolation); decisions take the family's
maximum (`Family.worst`). `ALTERNATIVES` lists other feature sets tried (`compare()`).

What none of them can see: how much latency a second wave on a SIMD hides (the cycle walk
charges its issue only), bytes per CU, MFMA passes beyond their issue, what an atomic or a
cache writeback really costs on gfx950 (no calibration kernel has one: hence the 1x and 2x
members), and how a kernel family other than aiter's carries over; every point they are
fitted on is aiter's kernel. Read their figures as a ranking with an error bar, never as a
measurement.
"""

import functools
import json
import math
from pathlib import Path
from typing import NamedTuple, Optional

from mxfp4_mm.kernels import formats
from .critical_path import CLOCK_GHZ, CUS, SYNC_MULTIPLIERS

DATA = Path(__file__).with_name("mi355x_public_timings.json")


def load_points(path: Path = DATA) -> dict:
    return json.loads(path.read_text())


def hbm_bytes(m: int, n: int, k: int) -> int:
    """Bytes one call moves at least once: A bf16, B fp4, B's padded E8M0 scales, C bf16."""
    rows, cols = formats.scales_padded_shape(n, k)
    return 2 * m * k + n * k // 2 + rows * cols + 2 * m * n


class Call(NamedTuple):
    """What the models read off one call: its shape, the busiest-SIMD issue summed over its
    launches, its launches, the GEMM's workgroups, the global round trips on one program's
    path summed over the launches, and the busiest-SIMD cycles summed over the launches (one
    figure per SYNC_MULTIPLIERS; None where the cycle walk did not cover a kernel)."""
    shape: tuple
    issue: int
    launches: int
    workgroups: int
    round_trips: int = 0
    cycles: Optional[tuple] = None


def floor_us(shape, data: dict) -> float:
    return data["harness_floor_us"] + hbm_bytes(*shape) / (data["hbm_tb_s"] * 1e6)


# Terms of the fitted part: name -> the term's value for a call.
def _cycles_us(multiple: int):
    index = SYNC_MULTIPLIERS.index(multiple)
    return lambda call, data: (None if call.cycles is None
                               else call.cycles[index] / (CLOCK_GHZ * 1e3))


# Terms of the fitted part: name -> the term's value for a call (None: not known for it).
TERMS: dict = {
    "issue": lambda call, data: call.issue,
    "extra_launches": lambda call, data: call.launches - 1,
    "trips_beyond_two": lambda call, data: max(0, call.round_trips - 2),
    "cycles_sync_1x": _cycles_us(1),
    "cycles_sync_2x": _cycles_us(2),
    "constant": lambda call, data: 1.0,
    "bytes_per_cu": lambda call, data: hbm_bytes(*call.shape) / min(call.workgroups, CUS) / 1e6,
}
TERM_NAMES = {"issue": "busiest-SIMD issue", "extra_launches": "(launches - 1)",
              "trips_beyond_two": "(round trips - 2)+", "cycles_sync_1x": "µs of cycle walk",
              "cycles_sync_2x": "µs of cycle walk", "constant": "1", "bytes_per_cu": "MB per CU"}
# The price of a serialized global round trip: the one pair of public points that isolates
# round trips (s3_m8_k256 and s3_m8_k256_ns1: the same tile with one pipeline stage instead of
# two, 2 more round trips on the path) measured about 1.8 µs apart in benchmark mode. Fitted
# instead, the price hinges on one or two points (held out, one point's error passes 10 µs):
# elsewhere in the data round trips rise with instructions.
ROUND_TRIP_US = 0.9


class Member(NamedTuple):
    terms: tuple             # fitted
    fixed: tuple = ()        # (term, µs per unit): given, not fitted


FAMILY = {
    "issue": Member(("issue", "extra_launches")),
    "round trips": Member(("issue", "extra_launches"), (("trips_beyond_two", ROUND_TRIP_US),)),
    "latency, sync 1x": Member(("cycles_sync_1x", "extra_launches")),
    "latency, sync 2x": Member(("cycles_sync_2x", "extra_launches")),
}
MODEL_TERMS = FAMILY["issue"].terms
ALTERNATIVES = (("issue",), ("issue", "extra_launches", "constant"),
                ("issue", "extra_launches", "bytes_per_cu"))


def _is_calibration_time(time) -> bool:
    return time["mode"] == "LB" and time["kind"] == "published"


def _measured(point) -> float:
    """The mean of a point's published leaderboard-mode medians, or None."""
    times = [t["us"] for t in point["times"] if _is_calibration_time(t)]
    return sum(times) / len(times) if times else None


def launches_call(shape, launches: list, workgroups: int) -> Call:
    """The Call of one call from the walked figures of its launches (each with
    "busiest_simd_issue", "global_round_trips" and, where the cycle walk covered every launch,
    "busiest_simd_cycles"); workgroups: the GEMM's."""
    cycles = None
    if all("busiest_simd_cycles" in launch for launch in launches):
        cycles = tuple(map(sum, zip(*(launch["busiest_simd_cycles"] for launch in launches))))
    return Call(tuple(shape), sum(launch["busiest_simd_issue"] for launch in launches),
                len(launches), workgroups,
                sum(launch["global_round_trips"] for launch in launches), cycles)


def _walked_call(point):
    """The Call of a public point, or None where the walk did not cover one of its kernels."""
    kernels = point["kernels"]
    if any("busiest_simd_issue" not in k for k in kernels):
        return None
    return launches_call(point["shape"], kernels, kernels[0]["workgroups"])


def _known(call: Call, terms: tuple, data: dict) -> bool:
    return all(TERMS[t](call, data) is not None for t in terms)


def calibration_calls(data: dict, terms: tuple = MODEL_TERMS) -> list:
    """[(point id, Call, measured µs)] of the points a model of `terms` is fitted on: those
    with published leaderboard-mode times whose kernels the walk covered."""
    found = []
    for point in data["points"]:
        measured, call = _measured(point), _walked_call(point)
        if measured is not None and call is not None and _known(call, terms, data):
            found.append((point["id"], call, measured))
    return found


def out_of_sample_calls(data: dict, terms: tuple = MODEL_TERMS,
                        unknown_mode: bool = False) -> list:
    """[(point id, Call, mean µs)] of the public points left out of the fit (no published
    leaderboard-mode time), each against the mean of its times: those of a known mode
    (benchmark mode, converted, a leaderboard mode not confirmed), or with unknown_mode those
    whose mode is unknown."""
    found = []
    for point in data["points"]:
        call = _walked_call(point)
        if _measured(point) is not None or call is None or not _known(call, terms, data):
            continue
        unknown = all(t["mode"] == "?" for t in point["times"])
        if unknown != unknown_mode:
            continue
        times = [t["us"] for t in point["times"]]
        found.append((point["id"], call, sum(times) / len(times)))
    return found


def _least_squares(rows: list, targets: list) -> tuple:
    """(coefficients minimising the squared error of rows @ coefficients against targets, the
    indices of the terms the rows do not determine). Normal equations, Gauss-Jordan with
    partial pivoting (a handful of terms). A term the rows do not determine (zero on every row,
    or a combination of the others on these rows) gets 0: held out, the points left may not
    separate it (the shape with two launches leaves the second launch's cost unknown)."""
    terms = len(rows[0])
    used = [i for i in range(terms) if any(r[i] for r in rows)]
    while True:
        system = [[sum(r[i] * r[j] for r in rows) for j in used]
                  + [sum(r[i] * t for r, t in zip(rows, targets))] for i in used]
        scale = [system[i][i] for i in range(len(used))]
        dependent = None
        for col in range(len(used)):
            pivot = max(range(col, len(used)), key=lambda r: abs(system[r][col]))
            system[col], system[pivot] = system[pivot], system[col]
            if abs(system[col][col]) < 1e-9 * scale[col]:
                dependent = col
                break
            for r in range(len(used)):
                if r != col:
                    factor = system[r][col] / system[col][col]
                    system[r] = [a - factor * b for a, b in zip(system[r], system[col])]
        if dependent is None:
            break
        used = used[:dependent] + used[dependent + 1:]
    solved = dict(zip(used, (system[i][-1] / system[i][i] for i in range(len(used)))))
    return [solved.get(i, 0.0) for i in range(terms)], [i for i in range(terms) if i not in solved]


class Error(NamedTuple):
    rms: float
    max: float
    mean: float = 0.0
    count: int = 0

    @classmethod
    def of(cls, residuals) -> "Error":
        residuals = list(residuals)
        return cls(math.sqrt(sum(r * r for r in residuals) / len(residuals)),
                   max(abs(r) for r in residuals), sum(residuals) / len(residuals),
                   len(residuals))


class Fit(NamedTuple):
    harness_floor_us: float
    hbm_tb_s: float
    terms: tuple
    coefficients: tuple      # µs per unit of each term
    fixed: tuple             # (term, µs per unit) added as given
    points: int
    shapes: int
    residual: Error          # in-sample
    leave_one_point_out: Error
    leave_one_shape_out: Error
    out_of_sample: Error     # predicted minus the mean time of each point left out of the fit
    unknown_mode: Error      # the same on the points of unknown mode
    term_ranges: tuple       # per term, (min, max) of its value over the calibration points

    def predict(self, call: Call, data: dict) -> float:
        return _base_us(call, data, self.fixed) + sum(
            c * TERMS[t](call, data) for t, c in zip(self.terms, self.coefficients))

    def outside_calibration(self, call: Call, data: dict) -> list:
        """The terms whose value for `call` lies outside the calibration points' range."""
        terms = self.terms + tuple(t for t, _ in self.fixed)
        return [t for t, (low, high) in zip(terms, self.term_ranges)
                if not low <= TERMS[t](call, data) <= high]

    def describe(self) -> str:
        parts = [f"{c * 1000:.3f} ns x issue" if t == "issue"
                 else f"{c:.2f} x {TERM_NAMES[t]}" if t.startswith("cycles")
                 else f"{c:.2f} µs x {TERM_NAMES[t]}"
                 for t, c in zip(self.terms, self.coefficients)]
        parts += [f"{c:.2f} µs x {TERM_NAMES[t]} (given)" for t, c in self.fixed]
        oos, unknown = self.out_of_sample, self.unknown_mode
        return (f"t = {self.harness_floor_us:g} µs + HBM bytes at {self.hbm_tb_s:g} TB/s + "
                f"{' + '.join(parts)}; fitted on "
                f"{self.points} leaderboard-mode points of aiter's kernel ({self.shapes} shapes); "
                f"held out: one point {self.leave_one_point_out.rms:.2f} µs RMS (max "
                f"{self.leave_one_point_out.max:.2f}), one shape {self.leave_one_shape_out.rms:.2f}"
                f" µs RMS (max {self.leave_one_shape_out.max:.2f}); out of sample, "
                f"{oos.count} points of benchmark mode or converted: mean {oos.mean:+.2f} µs, "
                f"RMS {oos.rms:.2f}; {unknown.count} of unknown mode: mean {unknown.mean:+.2f}, "
                f"RMS {unknown.rms:.2f}")


def _base_us(call: Call, data: dict, fixed: tuple) -> float:
    """The floor plus the given (not fitted) terms."""
    return floor_us(call.shape, data) + sum(c * TERMS[t](call, data) for t, c in fixed)


def fit(data: dict = None, terms: tuple = MODEL_TERMS, fixed: tuple = ()) -> Fit:
    """The least-squares fit of `terms` on the calibration points, over the floor and the
    `fixed` terms ((term, µs per unit) pairs), with its held-out and out-of-sample errors."""
    data = load_points() if data is None else data
    every = terms + tuple(t for t, _ in fixed)
    calls = calibration_calls(data, every)

    def solve(chosen):
        rows = [[TERMS[t](call, data) for t in terms] for _, call, _ in chosen]
        return _least_squares(rows, [us - _base_us(call, data, fixed)
                                     for _, call, us in chosen])[0]

    def residuals(coefficients, chosen):
        return [_base_us(call, data, fixed)
                + sum(c * TERMS[t](call, data) for t, c in zip(terms, coefficients)) - us
                for _, call, us in chosen]

    if not calls:
        raise ValueError(f"no calibration point has every term of {every}")
    coefficients, undetermined = _least_squares(
        [[TERMS[t](call, data) for t in terms] for _, call, _ in calls],
        [us - _base_us(call, data, fixed) for _, call, us in calls])
    if undetermined:
        raise ValueError(f"the calibration points do not determine "
                         f"{', '.join(terms[i] for i in undetermined)}")
    point_out = [residuals(solve(calls[:i] + calls[i + 1:]), [calls[i]])[0]
                 for i in range(len(calls))]
    shapes = sorted({call.shape for _, call, _ in calls})
    shape_out = []
    for shape in shapes:
        held = [c for c in calls if c[1].shape == shape]
        shape_out += residuals(solve([c for c in calls if c[1].shape != shape]), held)
    values = [[TERMS[t](call, data) for _, call, _ in calls] for t in every]
    return Fit(data["harness_floor_us"], data["hbm_tb_s"], tuple(terms), tuple(coefficients),
               tuple(fixed), len(calls), len(shapes), Error.of(residuals(coefficients, calls)),
               Error.of(point_out), Error.of(shape_out),
               Error.of(residuals(coefficients, out_of_sample_calls(data, every))),
               Error.of(residuals(coefficients, out_of_sample_calls(data, every, True))),
               tuple((min(v), max(v)) for v in values))


class Range(NamedTuple):
    low: float
    high: float
    low_member: str
    high_member: str
    outside: tuple           # (member, term) pairs whose term lies outside the calibration data


class Family(NamedTuple):
    """Every member of FAMILY fitted on the public points."""
    fits: dict               # member name -> Fit

    def figures(self, call: Call, data: dict) -> dict:
        """{member: modelled µs} for the members that can model `call`."""
        return {name: f.predict(call, data) for name, f in self.fits.items()
                if _known(call, f.terms + tuple(t for t, _ in f.fixed), data)}

    def range(self, call: Call, data: dict) -> Range:
        figures = self.figures(call, data)
        low, high = min(figures, key=figures.get), max(figures, key=figures.get)
        outside = tuple((name, term) for name, f in self.fits.items() if name in figures
                        for term in f.outside_calibration(call, data))
        return Range(figures[low], figures[high], low, high, outside)

    def worst(self, call: Call, data: dict) -> float:
        return self.range(call, data).high


def family(data: dict = None) -> Family:
    data = load_points() if data is None else data
    return Family({name: fit(data, member.terms, member.fixed)
                   for name, member in FAMILY.items()})


@functools.lru_cache(maxsize=1)
def calibrated() -> tuple:
    """(the public points, the family fitted on them), read and fitted once per process."""
    data = load_points()
    return data, family(data)


def compare(data: dict = None) -> list:
    """[(terms, Fit)] for the model and each alternative feature set."""
    data = load_points() if data is None else data
    return [(terms, fit(data, terms)) for terms in (MODEL_TERMS,) + ALTERNATIVES]


def best_public(data: dict) -> dict:
    """{shape: (point id, Call, measured µs)}: per shape, the public point measured fastest (the
    mean of its times) among those whose mode is known (leaderboard or benchmark, published or
    converted) and whose kernels the walk covered."""
    found = {}
    for point in data["points"]:
        times = [t["us"] for t in point["times"] if t["mode"] in ("LB", "BM")]
        call = _walked_call(point)
        if not times or call is None:
            continue
        mean = sum(times) / len(times)
        if call.shape not in found or mean < found[call.shape][2]:
            found[call.shape] = (point["id"], call, mean)
    return found


def aiter_points(data: dict) -> dict:
    """{shape: (point, Call)} of aiter's kernel under its own gfx950 configs: the points the data
    file names `<shape>_lib`, whose kernels the walk covered."""
    found = {}
    for point in data["points"]:
        call = _walked_call(point)
        if point["id"].endswith("_lib") and call is not None:
            found[call.shape] = (point, call)
    return found


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))
