"""tools.soak on the CPU: the memory verdict, the random shape ranges, the exit without a GPU."""

import random

import pytest
import torch

from mxfp4_mm.tools import soak
from mxfp4_mm.tools.model_shapes import MODEL_LAYERS


@pytest.mark.parametrize("requested, verdict", [
    ([100], "flat"),
    ([100, 200, 200, 200], "flat"),            # the first checkpoint may absorb warm-up
    ([100, 200, 201, 200], "GREW"),
    ([200, 200, 200, 300], "GREW"),
    ([200, 300, 200, 300], "GREW"),            # requested bytes must not move at all
])
def test_memory_verdict(requested, verdict):
    assert soak.memory_verdict(requested) == verdict


def test_random_shapes_stay_in_their_ranges_and_take_model_layers():
    layers = {shape for model in MODEL_LAYERS.values() for shape in model.values()}
    shapes = soak.random_shapes(500, random.Random(3))
    assert len(shapes) == 500
    for m, n, k in shapes:
        assert 1 <= m <= soak.MAX_RANDOM_M and n % 16 == 0 and k % 64 == 0
        assert (n, k) in layers or (16 <= n <= 8192 and 64 <= k <= 8192)
    assert max(m for m, _, _ in shapes) > 8192 and min(m for m, _, _ in shapes) < 16
    assert 150 < sum((n, k) in layers for _, n, k in shapes) < 350
    assert any(n % 64 for _, n, _ in shapes)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the exit without a GPU")
def test_main_without_a_gpu_exits_2(capsys):
    assert soak.main(["--random-shapes", "1"]) == 2
    assert "needs a GPU" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--random-shapes", "--calls", "--iterations"])
def test_negative_counts_are_a_usage_error(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        soak.main([option, "-1"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"tools.soak: argument {option}: expected an integer of "
                                       f"at least 0, got '-1'\n")
    assert getattr(soak.build_parser().parse_args([option, "0"]),
                   option[2:].replace("-", "_")) == 0


def test_every_option_has_help(capsys):
    with pytest.raises(SystemExit):
        soak.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m tools.soak")
    text = " ".join(out.split())
    for option, help_start in (("--random-shapes COUNT", "how many random shapes"),
                               ("--calls CALLS", "calls with fresh inputs"),
                               ("--iterations ITERATIONS", "leaderboard-style calls"),
                               ("--seed SEED", "seed of the random shapes")):
        assert f"{option} {help_start}" in text
