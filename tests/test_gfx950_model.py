"""tools.gfx950.model: each member of the family fits reproducibly from the data, its held-out
and out-of-sample errors are the ones computed (and the ones printed), and what costs more
models slower under every member."""

import copy
import json

import numpy as np
import pytest

from mxfp4_mm.tools.gfx950 import model

DATA = model.load_points()


FAMILY = model.family(DATA)


def _base(call, fixed):
    return model.floor_us(call.shape, DATA) + sum(c * model.TERMS[t](call, DATA) for t, c in fixed)


def _lstsq(calls, terms, fixed=()):
    rows = np.array([[model.TERMS[t](call, DATA) for t in terms] for _, call, _ in calls])
    targets = np.array([us - _base(call, fixed) for _, call, us in calls])
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


@pytest.mark.parametrize("member", list(model.FAMILY))
def test_each_member_reproduces_from_the_data_by_an_independent_solver(member):
    fit = FAMILY.fits[member]
    every = fit.terms + tuple(t for t, _ in fit.fixed)
    calls = model.calibration_calls(DATA, every)
    expected, rows, targets = _lstsq(calls, fit.terms, fit.fixed)
    assert fit.coefficients == pytest.approx(expected, rel=1e-9)
    residual = rows @ expected - targets
    assert fit.residual.rms == pytest.approx(np.sqrt(np.mean(residual ** 2)))
    assert fit.points == len(calls) and fit.shapes == len({c.shape for _, c, _ in calls})
    # aiter's split-K-14 point (its reduce kernel walked) is among them
    assert "s2_lib" in [point_id for point_id, _, _ in calls]


def test_the_issue_member_prices_an_instruction_and_a_launch_plausibly():
    fit = FAMILY.fits["issue"]
    # about 1.6 ns per instruction of issue (3.9 cycles at 2.4 GHz), about 3 µs a launch
    assert 1.2e-3 < fit.coefficients[0] < 2.0e-3 and 2.0 < fit.coefficients[1] < 4.0
    latency = FAMILY.fits["latency, sync 1x"]
    # the cycle walk's µs scaled by about 0.8: the walk is the right size
    assert 0.5 < latency.coefficients[0] < 1.2


@pytest.mark.parametrize("member", list(model.FAMILY))
def test_the_held_out_and_out_of_sample_errors_are_recomputed(member):
    fit = FAMILY.fits[member]
    every = fit.terms + tuple(t for t, _ in fit.fixed)
    calls = model.calibration_calls(DATA, every)
    point_out = []
    for i in range(len(calls)):
        coefficients, _, _ = _lstsq(calls[:i] + calls[i + 1:], fit.terms, fit.fixed)
        row, target = _lstsq([calls[i]], fit.terms, fit.fixed)[1:]
        point_out.append(float(row[0] @ coefficients - target[0]))
    shape_out = []
    for shape in sorted({c.shape for _, c, _ in calls}):
        # numpy's least-norm answer gives a term absent from the rest (the second launch,
        # with the one two-launch shape held out) the coefficient 0, as the model does
        coefficients, _, _ = _lstsq([c for c in calls if c[1].shape != shape], fit.terms,
                                    fit.fixed)
        _, rows, targets = _lstsq([c for c in calls if c[1].shape == shape], fit.terms, fit.fixed)
        shape_out += list(rows @ coefficients - targets)
    assert fit.leave_one_point_out.rms == pytest.approx(np.sqrt(np.mean(np.square(point_out))))
    assert fit.leave_one_point_out.max == pytest.approx(np.max(np.abs(point_out)))
    assert fit.leave_one_shape_out.rms == pytest.approx(np.sqrt(np.mean(np.square(shape_out))))
    assert fit.leave_one_shape_out.max == pytest.approx(np.max(np.abs(shape_out)))
    # out of sample: every walked point without a published leaderboard-mode time, against the
    # mean of its times, apart by whether its mode is known
    known, unknown = [], []
    for point in DATA["points"]:
        call = model._walked_call(point)
        if call is None or any(t["mode"] == "LB" and t["kind"] == "published"
                               for t in point["times"]):
            continue
        mean = np.mean([t["us"] for t in point["times"]])
        residual = fit.predict(call, DATA) - mean
        (unknown if all(t["mode"] == "?" for t in point["times"]) else known).append(residual)
    assert fit.out_of_sample.count == len(known) == 9 and fit.unknown_mode.count == len(unknown)
    assert fit.out_of_sample.mean == pytest.approx(np.mean(known))
    assert fit.out_of_sample.rms == pytest.approx(np.sqrt(np.mean(np.square(known))))
    assert fit.unknown_mode.mean == pytest.approx(np.mean(unknown))


@pytest.mark.parametrize("member", list(model.FAMILY))
def test_the_description_prints_the_computed_errors(member):
    fit = FAMILY.fits[member]
    text = fit.describe()
    assert f"one point {fit.leave_one_point_out.rms:.2f} µs RMS" in text
    assert f"one shape {fit.leave_one_shape_out.rms:.2f} µs RMS" in text
    assert f"{fit.points} leaderboard-mode points" in text
    assert (f"{fit.out_of_sample.count} points of benchmark mode or converted: mean "
            f"{fit.out_of_sample.mean:+.2f} µs, RMS {fit.out_of_sample.rms:.2f}") in text
    assert f"{fit.unknown_mode.count} of unknown mode: mean {fit.unknown_mode.mean:+.2f}" in text


def test_no_alternative_is_better_on_both_held_out_errors_by_more_than_the_noise():
    """The issue member stays as simple as the data supports: no other feature set improves
    both held-out errors by 0.1 µs RMS or more (a resubmission moves a point by about 0.3)."""
    fits = dict(model.compare(DATA))
    chosen = fits[model.MODEL_TERMS]
    for terms, other in fits.items():
        if terms != model.MODEL_TERMS:
            assert not (other.leave_one_point_out.rms < chosen.leave_one_point_out.rms - 0.1
                        and other.leave_one_shape_out.rms
                        < chosen.leave_one_shape_out.rms - 0.1), terms
    assert fits[("issue",)].leave_one_point_out.rms > chosen.leave_one_point_out.rms


def test_the_members_fit_about_as_well_as_each_other():
    """Each member's held-out error by shape is within 0.5 µs of the best member's."""
    by_shape = {name: fit.leave_one_shape_out.rms for name, fit in FAMILY.fits.items()}
    assert max(by_shape.values()) - min(by_shape.values()) < 0.5, by_shape


BASE = model.Call((64, 7168, 2048), 1490, 1, 224, 5, (8000, 8900))


@pytest.mark.parametrize("member", list(model.FAMILY))
def test_one_more_launch_or_a_longer_path_models_slower_under_every_member(member):
    fit = FAMILY.fits[member]
    predict = lambda call: fit.predict(call, DATA)    # noqa: E731
    assert predict(BASE._replace(launches=2)) > predict(BASE) + 1.0
    longer = BASE._replace(issue=BASE.issue + 100, cycles=tuple(c + 400 for c in BASE.cycles))
    assert predict(longer) > predict(BASE)
    assert predict(BASE) > model.floor_us(BASE.shape, DATA)


def test_a_sync_op_or_an_extra_round_trip_models_slower_where_a_member_sees_it():
    """A sync op costs a load's latency at 1x and two at 2x: the same call with one more waited
    sync op models slower at 2x than at 1x; one more serialized round trip models slower in
    the round-trip member and in the latency members (whose walk it lengthens)."""
    figures = FAMILY.figures(BASE, DATA)
    more_sync = BASE._replace(cycles=(BASE.cycles[0], BASE.cycles[1] + 864))
    assert FAMILY.figures(more_sync, DATA)["latency, sync 2x"] > figures["latency, sync 2x"]
    trip = BASE._replace(round_trips=BASE.round_trips + 1,
                         cycles=tuple(c + 868 for c in BASE.cycles))
    more = FAMILY.figures(trip, DATA)
    for member in ("round trips", "latency, sync 1x", "latency, sync 2x"):
        assert more[member] > figures[member] + 0.2, member
    assert more["issue"] == pytest.approx(figures["issue"])


def test_the_range_names_its_ends_and_marks_terms_outside_the_calibration_data():
    found = FAMILY.range(BASE, DATA)
    figures = FAMILY.figures(BASE, DATA)
    assert found.low == min(figures.values()) == figures[found.low_member]
    assert found.high == max(figures.values()) == figures[found.high_member]
    assert FAMILY.worst(BASE, DATA) == found.high
    assert found.outside == ()
    short = BASE._replace(issue=100)          # below every calibration kernel's path
    assert ("issue", "issue") in FAMILY.range(short, DATA).outside


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
    assert model.family(model.load_points(path)).fits["latency, sync 1x"].coefficients != \
        FAMILY.fits["latency, sync 1x"].coefficients


def test_best_public_takes_the_fastest_point_of_known_mode_per_shape():
    best = model.best_public(DATA)
    assert best[(4, 2880, 512)][0] == "s1_m4_k256"
    assert best[(64, 7168, 2048)][0] == "s5_m16_k256"
    assert best[(16, 2112, 7168)][0] == "s2_sk7_m8_r16"
    assert len(best) == 6


def test_aiters_own_configs_are_the_lib_points():
    aiter = model.aiter_points(DATA)
    assert len(aiter) == 6
    point, call = aiter[(16, 2112, 7168)]
    assert point["id"] == "s2_lib" and call.launches == 2 and call.issue == 1188 + 1470


def test_geomean():
    assert model.geomean([2.0, 8.0]) == pytest.approx(4.0)
