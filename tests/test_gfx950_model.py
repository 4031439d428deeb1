"""tools.gfx950.model: the fit reproduces from the data, its held-out errors are the ones
computed (and the ones printed), and what costs more models slower."""

import copy
import json

import numpy as np
import pytest

from tools.gfx950 import model

DATA = model.load_points()


def _lstsq(calls, terms):
    rows = np.array([[model.TERMS[t](call, DATA) for t in terms] for _, call, _ in calls])
    targets = np.array([us - model.floor_us(call.shape, DATA) for _, call, us in calls])
    return np.linalg.lstsq(rows, targets, rcond=None)[0], rows, targets


def test_the_data_keeps_its_sources_and_the_calibration_points_are_the_published_lb_ones():
    assert "source" in DATA["about"] or "Source" in DATA["about"]
    for point in DATA["points"]:
        assert point["times"] and all(t["source"] for t in point["times"]), point["id"]
    calls = model.calibration_calls(DATA)
    ids = [point_id for point_id, _, _ in calls]
    published_lb = [p["id"] for p in DATA["points"]
                    if any(t["mode"] == "LB" and t["kind"] == "published" for t in p["times"])]
    # every published leaderboard-mode point whose kernels the walk covered, and no other
    assert set(ids) <= set(published_lb)
    left_out = set(published_lb) - set(ids)
    assert all(any("busiest_simd_issue" not in k for k in p["kernels"])
               for p in DATA["points"] if p["id"] in left_out)
    s1 = next(us for point_id, _, us in calls if point_id == "s1_m4_k256")
    assert s1 == pytest.approx(np.mean([6.43, 6.32, 6.35, 6.29, 6.34, 6.2, 6.25]))


def test_the_fit_reproduces_from_the_data_by_an_independent_solver():
    fit = model.fit(DATA)
    calls = model.calibration_calls(DATA)
    expected, rows, targets = _lstsq(calls, fit.terms)
    assert fit.coefficients == pytest.approx(expected, rel=1e-9)
    residual = rows @ expected - targets
    assert fit.residual.rms == pytest.approx(np.sqrt(np.mean(residual ** 2)))
    assert fit.points == len(calls) and fit.shapes == len({c.shape for _, c, _ in calls})
    # about 1.6 ns per instruction of issue (3.8 cycles at 2.4 GHz), about 2.5 µs a launch
    assert 1.2e-3 < fit.coefficients[0] < 2.0e-3 and 2.0 < fit.coefficients[1] < 3.0


def test_the_held_out_errors_are_recomputed():
    fit = model.fit(DATA)
    calls = model.calibration_calls(DATA)
    point_out = []
    for i in range(len(calls)):
        coefficients, _, _ = _lstsq(calls[:i] + calls[i + 1:], fit.terms)
        row, target = _lstsq([calls[i]], fit.terms)[1:]
        point_out.append(float(row[0] @ coefficients - target[0]))
    shape_out = []
    for shape in sorted({c.shape for _, c, _ in calls}):
        # numpy's least-norm answer gives a term absent from the rest (the second launch,
        # with the one two-launch shape held out) the coefficient 0, as the model does
        coefficients, _, _ = _lstsq([c for c in calls if c[1].shape != shape], fit.terms)
        _, rows, targets = _lstsq([c for c in calls if c[1].shape == shape], fit.terms)
        shape_out += list(rows @ coefficients - targets)
    assert fit.leave_one_point_out.rms == pytest.approx(np.sqrt(np.mean(np.square(point_out))))
    assert fit.leave_one_point_out.max == pytest.approx(np.max(np.abs(point_out)))
    assert fit.leave_one_shape_out.rms == pytest.approx(np.sqrt(np.mean(np.square(shape_out))))
    assert fit.leave_one_shape_out.max == pytest.approx(np.max(np.abs(shape_out)))
    assert fit.leave_one_point_out.rms < fit.leave_one_shape_out.rms


def test_the_description_prints_the_computed_errors():
    fit = model.fit(DATA)
    text = fit.describe()
    assert f"one point {fit.leave_one_point_out.rms:.2f} µs RMS" in text
    assert f"one shape {fit.leave_one_shape_out.rms:.2f} µs RMS" in text
    assert f"{fit.points} leaderboard-mode points" in text


def test_no_alternative_is_better_on_both_held_out_errors():
    """The model stays as simple as the data supports."""
    fits = dict(model.compare(DATA))
    chosen = fits[model.MODEL_TERMS]
    for terms, other in fits.items():
        if terms != model.MODEL_TERMS:
            assert not (other.leave_one_point_out.rms < chosen.leave_one_point_out.rms
                        and other.leave_one_shape_out.rms < chosen.leave_one_shape_out.rms), terms
    assert fits[("issue",)].leave_one_point_out.rms > chosen.leave_one_point_out.rms


def test_one_more_launch_or_a_longer_path_models_slower():
    fit = model.fit(DATA)
    base = model.Call((64, 7168, 2048), 1490, 1, 224)
    assert fit.predict(base._replace(launches=2), DATA) > fit.predict(base, DATA) + 1.0
    assert fit.predict(base._replace(issue=1491), DATA) > fit.predict(base, DATA)
    assert fit.predict(base, DATA) > model.floor_us(base.shape, DATA)


def test_the_floor_is_the_harness_plus_each_operand_once_at_hbm_speed():
    m, n, k = 64, 7168, 2048
    moved = 2 * m * k + n * k // 2 + 7168 * (2048 // 32) + 2 * m * n
    assert model.hbm_bytes(m, n, k) == moved
    assert model.floor_us((m, n, k), DATA) == pytest.approx(5.8 + moved / 8e6)
    # padded scales: N to 256 rows, K/32 to 8 columns
    assert model.hbm_bytes(4, 2880, 512) == 2 * 4 * 512 + 2880 * 256 + 3072 * 16 + 2 * 4 * 2880


def test_a_changed_time_changes_the_fit(tmp_path):
    changed = copy.deepcopy(DATA)
    point = next(p for p in changed["points"] if p["id"] == "s5_m16_k256")
    for t in point["times"]:
        t["us"] += 3.0
    path = tmp_path / "points.json"
    path.write_text(json.dumps(changed))
    assert model.fit(model.load_points(path)).coefficients != model.fit(DATA).coefficients


def test_best_public_takes_the_fastest_point_of_known_mode_per_shape():
    best = model.best_public(DATA)
    assert best[(4, 2880, 512)][0] == "s1_m4_k256"
    assert best[(64, 7168, 2048)][0] == "s5_m16_k256"
    assert best[(16, 2112, 7168)][0] == "s2_sk7_m8_r16"
    assert len(best) == 6


def test_geomean():
    assert model.geomean([2.0, 8.0]) == pytest.approx(4.0)
