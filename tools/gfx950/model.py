"""Modelled time of one call through the leaderboard runner's harness on an MI355X, from the
walked gfx950 figures of the kernels it launches.

    t = harness floor + HBM bytes / HBM bandwidth          (fixed, not fitted)
        + us_per_issue   x busiest-SIMD issue              (summed over the call's launches)
        + us_per_launch  x (launches - 1)

The busiest-SIMD issue of a launch is the instructions on one wave's path times the waves the
busiest SIMD runs (tools.gfx950.critical_path: workgroups dealt over the CUs, in rounds where
occupancy does not hold them all at once). The two coefficients are fitted by least squares on
the public MI355X points in `mi355x_public_timings.json` (beside this file, with their sources):
aiter's Triton `gemm_a16wfp4_preshuffle` under configs one entrant submitted, each point the
mean of its published leaderboard-mode medians. Points with a kernel the walk did not cover are
left out. `fit()` also computes the model's held-out error: every point predicted by the fit
on the others (leave one point out), and every shape's points by the fit on the other shapes
(leave one shape out). `ALTERNATIVES` lists the other feature sets tried; none has a smaller
held-out error on these data (`compare()`), so the model stays this simple.

What it cannot see: latency hidden by a second wave on a SIMD, bytes per CU, cycles of
`s_nop N`, MFMA passes, and how a kernel family other than aiter's carries over; every point
it is fitted on is aiter's kernel. Read its figures as a ranking with an error bar, never as a
measurement.
"""

import functools
import json
import math
from pathlib import Path
from typing import NamedTuple

from kernels import formats

DATA = Path(__file__).with_name("mi355x_public_timings.json")
CUS = 256


def load_points(path: Path = DATA) -> dict:
    return json.loads(path.read_text())


def hbm_bytes(m: int, n: int, k: int) -> int:
    """Bytes one call moves at least once: A bf16, B fp4, B's padded E8M0 scales, C bf16."""
    rows, cols = formats.scales_padded_shape(n, k)
    return 2 * m * k + n * k // 2 + rows * cols + 2 * m * n


class Call(NamedTuple):
    """What the model reads off one call: its shape, the busiest-SIMD issue summed over its
    launches, its launches, and the GEMM's workgroups."""
    shape: tuple
    issue: int
    launches: int
    workgroups: int


def floor_us(shape, data: dict) -> float:
    return data["harness_floor_us"] + hbm_bytes(*shape) / (data["hbm_tb_s"] * 1e6)


# Terms of the fitted part: name -> the term's value for a call.
TERMS: dict = {
    "issue": lambda call, data: call.issue,
    "extra_launches": lambda call, data: call.launches - 1,
    "constant": lambda call, data: 1.0,
    "bytes_per_cu": lambda call, data: hbm_bytes(*call.shape) / min(call.workgroups, CUS) / 1e6,
}
MODEL_TERMS = ("issue", "extra_launches")
ALTERNATIVES = (("issue",), ("issue", "extra_launches", "constant"),
                ("issue", "extra_launches", "bytes_per_cu"))


def _measured(point) -> float:
    """The mean of a point's published leaderboard-mode medians, or None."""
    times = [t["us"] for t in point["times"] if t["mode"] == "LB" and t["kind"] == "published"]
    return sum(times) / len(times) if times else None


def _walked_call(point):
    """The Call of a public point, or None where the walk did not cover one of its kernels."""
    kernels = point["kernels"]
    if any("busiest_simd_issue" not in k for k in kernels):
        return None
    return Call(tuple(point["shape"]), sum(k["busiest_simd_issue"] for k in kernels),
                len(kernels), kernels[0]["workgroups"])


def calibration_calls(data: dict) -> list:
    """[(point id, Call, measured µs)] of the points the model is fitted on."""
    found = []
    for point in data["points"]:
        measured, call = _measured(point), _walked_call(point)
        if measured is not None and call is not None:
            found.append((point["id"], call, measured))
    return found


def _least_squares(rows: list, targets: list) -> list:
    """Coefficients minimising the squared error of rows @ coefficients against targets
    (normal equations, Gauss-Jordan with partial pivoting: a handful of terms). A term that is
    zero on every row is not determined by them: it gets 0 (held out, the shape with two
    launches leaves the second launch's cost unknown to the fit)."""
    used = [i for i in range(len(rows[0])) if any(r[i] for r in rows)]
    size = len(used)
    system = [[sum(r[i] * r[j] for r in rows) for j in used]
              + [sum(r[i] * t for r, t in zip(rows, targets))] for i in used]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(system[r][col]))
        system[col], system[pivot] = system[pivot], system[col]
        if abs(system[col][col]) < 1e-12 * max(1.0, abs(system[col][-1])):
            raise ValueError("the calibration points do not determine every term")
        for r in range(size):
            if r != col:
                factor = system[r][col] / system[col][col]
                system[r] = [a - factor * b for a, b in zip(system[r], system[col])]
    solved = dict(zip(used, (system[i][size] / system[i][i] for i in range(size))))
    return [solved.get(i, 0.0) for i in range(len(rows[0]))]


class Error(NamedTuple):
    rms: float
    max: float

    @classmethod
    def of(cls, residuals) -> "Error":
        residuals = list(residuals)
        return cls(math.sqrt(sum(r * r for r in residuals) / len(residuals)),
                   max(abs(r) for r in residuals))


class Fit(NamedTuple):
    harness_floor_us: float
    hbm_tb_s: float
    terms: tuple
    coefficients: tuple      # µs per unit of each term
    points: int
    shapes: int
    residual: Error          # in-sample
    leave_one_point_out: Error
    leave_one_shape_out: Error

    def predict(self, call: Call, data: dict) -> float:
        return floor_us(call.shape, data) + sum(
            c * TERMS[t](call, data) for t, c in zip(self.terms, self.coefficients))

    def describe(self) -> str:
        names = {"issue": "busiest-SIMD issue", "extra_launches": "(launches - 1)",
                 "constant": "1", "bytes_per_cu": "MB per CU"}
        parts = [f"{c * 1000:.3f} ns x issue" if t == "issue" else f"{c:.2f} µs x {names[t]}"
                 for t, c in zip(self.terms, self.coefficients)]
        return (f"t = {self.harness_floor_us:g} µs + HBM bytes at {self.hbm_tb_s:g} TB/s + "
                f"{' + '.join(parts)}; fitted on "
                f"{self.points} leaderboard-mode points of aiter's kernel ({self.shapes} shapes); "
                f"held out: one point {self.leave_one_point_out.rms:.2f} µs RMS (max "
                f"{self.leave_one_point_out.max:.2f}), one shape {self.leave_one_shape_out.rms:.2f}"
                f" µs RMS (max {self.leave_one_shape_out.max:.2f})")


def fit(data: dict = None, terms: tuple = MODEL_TERMS) -> Fit:
    data = load_points() if data is None else data
    calls = calibration_calls(data)

    def solve(chosen):
        rows = [[TERMS[t](call, data) for t in terms] for _, call, _ in chosen]
        return _least_squares(rows, [us - floor_us(call.shape, data) for _, call, us in chosen])

    def residuals(coefficients, chosen):
        return [floor_us(call.shape, data)
                + sum(c * TERMS[t](call, data) for t, c in zip(terms, coefficients)) - us
                for _, call, us in chosen]

    coefficients = solve(calls)
    point_out = [residuals(solve(calls[:i] + calls[i + 1:]), [calls[i]])[0]
                 for i in range(len(calls))]
    shapes = sorted({call.shape for _, call, _ in calls})
    shape_out = []
    for shape in shapes:
        held = [c for c in calls if c[1].shape == shape]
        shape_out += residuals(solve([c for c in calls if c[1].shape != shape]), held)
    return Fit(data["harness_floor_us"], data["hbm_tb_s"], tuple(terms), tuple(coefficients), len(calls), len(shapes),
               Error.of(residuals(coefficients, calls)), Error.of(point_out), Error.of(shape_out))


@functools.lru_cache(maxsize=1)
def calibrated() -> tuple:
    """(the public points, the model's fit on them), read and fitted once per process."""
    data = load_points()
    return data, fit(data)


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


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))
