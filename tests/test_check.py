"""tools.check: a run on a small shape, and usage errors in one line with exit code 2."""

import sys

import pytest
from conftest import FlushRecorder

from mxfp4_mm.tools import check


@pytest.mark.own_device
def test_small_shape_passes_with_its_seed_and_the_next_ones(capsys):
    assert check.main(["--shapes", "4,64,256,7", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "4    64   256 seed     7: pass" in out and "seed    20: pass" in out
    assert "2 passed, 0 failed" in out
    # The interpreter runs no asm: the software quantizer's rung serves the shape.
    assert "software quantizer" in out.split("served by")[1]


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "64,512,1000"], "tools.check: shape 64,512,1000: K must be a multiple of 64"),
    (["--shapes", "8,250,512"], "tools.check: shape 8,250,512: N must be a multiple of 16"),
    (["--shapes", "4,64,256,7,1"], "tools.check: --shapes: expected one of tests, benchmarks, "
                                   "all or M,N,K or M,N,K,seed; got '4,64,256,7,1'"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert check.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_a_seed_count_below_1_is_refused_where_it_is_parsed(capsys):
    with pytest.raises(SystemExit) as exit_:
        check.main(["--seeds", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("tools.check: argument --seeds: expected an integer of "
                                       "at least 1, got '0'\n")
    assert check.build_parser().parse_args(["--seeds", "1"]).seeds == 1


def test_task_shapes_default_to_the_runners_seeds(monkeypatch, capsys):
    """Without a seed, a task shape takes task.yml's; the run stops before any kernel."""
    from mxfp4_mm import reference
    seen = []

    def generate_input(m, n, k, seed):
        seen.append(seed)
        raise KeyboardInterrupt

    monkeypatch.setattr(reference, "generate_input", generate_input)
    with pytest.raises(KeyboardInterrupt):
        check.main(["--shapes", "benchmarks"])
    assert seen == [4565]


# ---------------------------------------------------------------------------------------
# tools.check's handling of inputs, with a fake submission (no kernel runs). Decisions:
# - the seeds of a shape: its own, then + LEADERBOARD_SEED_STEP each, --seeds of them;
# - a check that fails counts once, prints FAIL with its message, and the exit code is 1;
# - a line when each shape and seed starts, and one with its time when it ends;
# - per shape, the launcher launcher_for serves for the last input: direct or standard, its
#   splits, rung and config label (the aiter path's too).
# ---------------------------------------------------------------------------------------

class FakeLauncher:
    def __init__(self, is_direct, splits, rung, config):
        self.is_direct, self.splits, self.rung, self.config = is_direct, splits, rung, config


@pytest.fixture
def fake_submission(monkeypatch):
    import torch

    from mxfp4_mm import launchers
    from mxfp4_mm import reference
    from mxfp4_mm import submission
    from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    seen = {"seeds": [], "launchers": []}

    def generate_input(m, n, k, seed):
        seen["seeds"].append(seed)
        return (torch.full((m, k), float(seed)), None, None, None, None)

    def check_implementation(data, output):
        seed = int(data[0][0, 0])
        return (seed not in seen.get("failing", ()), f"seed {seed} is off")

    def launcher_for(a, n):
        seen["launchers"].append((int(a[0, 0]), n))
        if n == 64:
            return FakeLauncher(True, 2, "software quantizer", GemmConfig(16, 64, 256, split_k=2))
        return FakeLauncher(False, 1, "aiter", AITER_CONFIG)

    monkeypatch.setattr(reference, "generate_input", generate_input)
    monkeypatch.setattr(reference, "check_implementation", check_implementation)
    monkeypatch.setattr(submission, "custom_kernel", lambda data: data[0])
    monkeypatch.setattr(launchers, "launcher_for", launcher_for)
    return seen


def test_the_seeds_step_by_the_leaderboards_step(fake_submission, capsys):
    assert check.main(["--shapes", "4,64,256,7", "8,96,512,1", "--seeds", "3"]) == 0
    step = check.LEADERBOARD_SEED_STEP
    assert fake_submission["seeds"] == [7, 7 + step, 7 + 2 * step, 1, 1 + step, 1 + 2 * step]
    assert fake_submission["launchers"] == [(7 + 2 * step, 64), (1 + 2 * step, 96)]
    assert "6 passed, 0 failed" in capsys.readouterr().out


def test_a_failing_seed_fails_the_run(fake_submission, capsys):
    fake_submission["failing"] = {7 + check.LEADERBOARD_SEED_STEP}
    assert check.main(["--shapes", "4,64,256,7", "--seeds", "2"]) == 1
    out = capsys.readouterr().out
    assert f"seed    {7 + check.LEADERBOARD_SEED_STEP}: FAIL seed 20 is off" in out
    assert "seed     7: pass" in out and "1 passed, 1 failed" in out


def test_each_shape_and_seed_prints_a_line_when_it_starts_and_one_with_its_time_at_its_end(
        fake_submission, capsys):
    import re
    assert check.main(["--shapes", "4,64,256,7", "8,96,512,1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " seed " in line]
    assert [line.split(":")[0].split() for line in lines] == [
        ["4", "64", "256", "seed", "7"]] * 2 + [["8", "96", "512", "seed", "1"]] * 2
    assert lines[0].endswith(": started") and lines[2].endswith(": started")
    for end in (lines[1], lines[3]):
        assert re.search(r": pass \(\d+\.\d\d s\)$", end), end


def test_the_table_names_each_shapes_launch_splits_rung_and_config(fake_submission, capsys):
    assert check.main(["--shapes", "4,64,256,7", "8,96,512,1"]) == 0
    rows = capsys.readouterr().out.split("served by")[1].splitlines()[1:3]
    assert rows[0].split() == ["4", "64", "256", "direct", "2", "software", "quantizer", "16x64x256",
                               "sk2/rk", "w4", "s1"]
    assert rows[1].split() == ["8", "96", "512", "standard", "1", "aiter", "aiter"]


def test_progress_lines_reach_a_pipe_as_they_happen(fake_submission, monkeypatch):
    """Each line is flushed when printed: through a pipe (block-buffered) a shape's start, and
    the interpreter's notice, show before its minutes of work, not at the end."""
    stdout = FlushRecorder()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert check.main(["--shapes", "4,64,256,7"]) == 0
    flushed = stdout.flushed_lines()
    assert flushed[0] == "no GPU: running through the Triton interpreter, which is slow"
    assert flushed[1] == "    4    64   256 seed     7: started"
    assert flushed[2].startswith("    4    64   256 seed     7: pass (")


def test_every_option_has_the_help_docs_tools_md_shows():
    import re
    from pathlib import Path
    from mxfp4_mm.tools import docs
    tools_md = (Path(check.__file__).resolve().parents[1] / "docs" / "tools.md").read_text()
    shown = re.search(r"options:tools\.check -->\n(.*?)\n<!-- end", tools_md, re.S).group(1)
    assert shown == docs.options_markdown("tools.check")
    assert all(action.help for action in check.build_parser()._actions)


def test_the_usage_names_the_shapes_option_and_its_words():
    from mxfp4_mm.tools import check
    assert "--shapes SHAPES [SHAPES ...]" in check.build_parser().format_usage()
