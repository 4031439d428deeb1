"""tools.check: a run on a small shape, and usage errors in one line with exit code 2."""

import pytest

from tools import check


def test_small_shape_passes_with_its_seed_and_the_next_ones(capsys):
    assert check.main(["--shapes", "4,64,256,7", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "4    64   256 seed     7: pass" in out and "seed    20: pass" in out
    assert "2 passed, 0 failed" in out
    # The interpreter runs no asm: the software quantizer's rung serves the shape.
    assert "software quantizer" in out.split("served by")[1]


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "tools.check: --seeds: expected at least 1, got 0"),
    (["--shapes", "64,512,1000"], "tools.check: shape 64,512,1000: K must be a multiple of 64"),
    (["--shapes", "8,250,512"], "tools.check: shape 8,250,512: N must be a multiple of 16"),
    (["--shapes", "4,64,256,7,1"], "tools.check: --shapes: expected one of tests, benchmarks, "
                                   "all or M,N,K or M,N,K,seed; got '4,64,256,7,1'"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert check.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_task_shapes_default_to_the_runners_seeds(monkeypatch, capsys):
    """Without a seed, a task shape takes task.yml's; the run stops before any kernel."""
    import reference
    seen = []

    def generate_input(m, n, k, seed):
        seen.append(seed)
        raise KeyboardInterrupt

    monkeypatch.setattr(reference, "generate_input", generate_input)
    with pytest.raises(KeyboardInterrupt):
        check.main(["--shapes", "benchmarks"])
    assert seen == [4565]
