"""tools.evaluate: shape parsing, statistics, stopping rule, table, and runs through the child."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FlushRecorder

from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES, TEST_SHAPES
from mxfp4_mm.tools import evaluate

SMALL = "4,64,256,7"
BROKEN = """
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data[0], data[1]
    return torch.zeros((a.shape[0], b.shape[0]), dtype=torch.bfloat16, device=a.device)
"""


# ----------------------------------------------------------------------------- parsing

def test_named_shape_sets_get_fixed_seeds():
    specs = evaluate.parse_shapes(["tests"])
    assert [(s["m"], s["n"], s["k"]) for s in specs] == list(TEST_SHAPES)
    # task.yml's seeds of the runner's test shapes, in the task's order
    assert [s["seed"] for s in specs] == [124, 6635, 45, 78]
    assert len(evaluate.parse_shapes(["benchmarks"])) == len(BENCHMARK_SHAPES)
    assert len(evaluate.parse_shapes(["all"])) == len(TEST_SHAPES) + len(BENCHMARK_SHAPES)


def test_custom_shapes_with_and_without_seed():
    specs = evaluate.parse_shapes(["4,64,256,7", "8,128,512"])
    assert specs == [{"m": 4, "n": 64, "k": 256, "seed": 7},
                     {"m": 8, "n": 128, "k": 512, "seed": 4243}]


@pytest.mark.parametrize("word", ["4,64", "4,64,256,7,9", "a,b,c", "tests2", "4,64,100", "0,64,256",
                                  "8,250,512"])
def test_bad_shapes_are_refused(word):
    with pytest.raises(evaluate.UsageError):
        evaluate.parse_shapes([word])


def test_runner_test_file_format(tmp_path):
    path = tmp_path / "cases.txt"
    path.write_text("m: 8; n: 2112; k: 7168; seed: 124\n\n# a comment\n"
                    "  m: 16 ;n:3072; k: 1536; seed: -5 \nm: 4; n: 64; k: 256\n")
    specs = evaluate.parse_test_file(path.read_text())
    assert specs == [{"m": 8, "n": 2112, "k": 7168, "seed": 124},
                     {"m": 16, "n": 3072, "k": 1536, "seed": -5},
                     {"m": 4, "n": 64, "k": 256, "seed": 4244}]


@pytest.mark.parametrize("text", ["m: 8; n: 2112", "m: 8; n: 64; k: 256; dtype: 3",
                                  "m 8; n: 64; k: 256", "m: x; n: 64; k: 256", ""])
def test_bad_test_files_are_refused(text):
    with pytest.raises(evaluate.UsageError):
        evaluate.parse_test_file(text)


def test_shapes_file_through_main_reports_bad_line(tmp_path, capsys):
    path = tmp_path / "cases.txt"
    path.write_text("m: 8; n: 2112; k: seven\n")
    assert evaluate.main(["test", "--shapes-file", str(path)]) == 2
    assert "line 1" in capsys.readouterr().err


# ----------------------------------------------------------------------------- statistics

def test_stats_on_known_numbers():
    stats = evaluate.calculate_stats([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert stats["n"] == 8
    assert stats["mean"] == pytest.approx(5.0)
    assert stats["std"] == pytest.approx(math.sqrt(32 / 7))       # sample std, n - 1
    assert stats["err"] == pytest.approx(math.sqrt(32 / 7) / math.sqrt(8))
    assert (stats["best"], stats["worst"]) == (2.0, 9.0)
    single = evaluate.calculate_stats([3.5])
    assert (single["mean"], single["std"], single["err"]) == (3.5, 0.0, 0.0)


def test_stopping_rule():
    stop = evaluate.should_stop
    # never before three calls, even with zero spread or past the wall time
    assert not stop([5.0, 5.0], 0.0, 100)
    assert not stop([5.0, 9.0], 1e6, 100)
    # from three calls: relative error of the mean under 0.001
    assert stop([5.0, 5.0, 5.0], 0.0, 100)
    assert not stop([5.0, 6.0, 7.0], 0.0, 100)
    tight = [10.0, 10.01, 9.99] * 20          # err / mean ~ 1e-4
    assert stop(tight, 0.0, 1000)
    # the wall-time cap, and the call cap
    assert stop([5.0, 6.0, 7.0], 10.5, 100, max_wall_s=10.0)
    assert not stop([5.0, 6.0, 7.0], 9.5, 100, max_wall_s=10.0)
    assert stop([5.0, 6.0, 7.0, 8.0], 0.0, 4)
    assert stop([5.0], 0.0, 1)


def test_geomean():
    assert evaluate.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert evaluate.geomean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    assert evaluate.geomean([]) is None
    baselines = evaluate.AITER_BASELINES_US.values()
    assert evaluate.geomean(baselines) == pytest.approx(11.50, abs=0.005)    # task.md


def _timed_row(m, n, k, mean):
    stats = evaluate.calculate_stats([mean - 1, mean, mean + 1])
    return evaluate.make_row({"m": m, "n": n, "k": k, "seed": 1}, True, "", stats)


def test_table_has_ratios_and_geomean_row():
    rows = [_timed_row(4, 2880, 512, 8.198 * 2), _timed_row(16, 2112, 7168, 20.873 / 2),
            _timed_row(8, 64, 256, 3.0)]
    assert rows[0]["ratio"] == pytest.approx(2.0)
    assert rows[1]["ratio"] == pytest.approx(0.5)
    assert rows[2]["baseline_us"] is None and rows[2]["ratio"] is None
    summary = evaluate.summarize(rows)
    assert summary["shapes"] == 3 and summary["baseline_shapes"] == 2
    assert summary["ratio"] == pytest.approx(1.0)
    assert summary["mean_us"] == pytest.approx((8.198 * 2 * 20.873 / 2 * 3.0) ** (1 / 3))
    assert summary["baseline_us"] == pytest.approx(math.sqrt(8.198 * 20.873))
    table = evaluate.format_table(rows, summary)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["M", "N", "K", "mean"]
    assert "2.000" in lines[1] and "8.198" in lines[1]
    assert "0.500" in lines[2] and "20.873" in lines[2]
    geo = next(line for line in lines if line.startswith("geomean"))
    assert f"{summary['mean_us']:.3f}" in geo and "1.000" in geo
    assert f"{summary['baseline_us']:.3f}" in geo
    assert "2 of 3 shapes" in table


def test_failed_row_shows_in_table():
    failed = evaluate.make_row({"m": 4, "n": 2880, "k": 512, "seed": 1}, False, "bad")
    rows = [_timed_row(32, 4096, 512, 9.462), failed]
    table = evaluate.format_table(rows, evaluate.summarize(rows))
    assert "FAIL" in table.splitlines()[2]


# ----------------------------------------------------------------------------- runs

def test_test_mode_end_to_end(capsys, tmp_path):
    report = tmp_path / "report.json"
    assert evaluate.main(["test", "--shapes", SMALL, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "4    64   256 seed     7: pass" in out
    assert "1 passed, 0 failed" in out
    data = json.loads(report.read_text())
    assert data["exit_code"] == 0 and data["rows"][0]["ok"] is True


def test_broken_submission_fails(capsys, tmp_path):
    broken = tmp_path / "broken" / "submission.py"
    broken.parent.mkdir()
    broken.write_text(BROKEN)
    assert evaluate.main(["test", "--submission", str(broken), "--shapes", SMALL]) == 1
    out = capsys.readouterr().out
    assert "seed     7: FAIL" in out and "mismatch" in out
    assert "alone (as on the runner)" in out     # a copy of the file, without the project root
    assert "0 passed, 1 failed" in out


def test_non_self_contained_submission_is_refused_in_one_line(capsys, tmp_path):
    """A file outside the root that imports the project (the unbundled submission.py, say)
    is refused before it runs, with what to do instead."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text("from mxfp4_mm.launchers import launcher_for\n\ndef custom_kernel(data):\n    pass\n")
    assert evaluate.main(["test", "--submission", str(leaky), "--shapes", SMALL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tools.evaluate: --submission: ")
    assert "imports the project's packages (launchers)" in err and "python -m tools.bundle" in err


def test_project_import_at_call_time_fails_the_shape(capsys, tmp_path):
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def custom_kernel(data):\n    from submission_helpers import run\n"
                    "    return run(data)\n")
    (tmp_path / "submission_helpers.py").write_text("from mxfp4_mm.kernels import formats\n")
    assert evaluate.main(["test", "--submission", str(lazy), "--shapes", SMALL]) == 1
    out = capsys.readouterr().out
    assert "seed     7: FAIL" in out
    assert out.rstrip().splitlines()[-1] == "0 passed, 1 failed"


HIDE_CHILD = """
import importlib.machinery, sys
root, folder = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
from mxfp4_mm.tools.evaluate import hide_project_modules
import mxfp4_mm.kernels.formats; from mxfp4_mm import kernels


class EditableInstall:          # what `pip install -e .` puts last in sys.meta_path
    def find_spec(self, name, path=None, target=None):
        if path is None and name in ("kernels", "launchers", "reference"):
            return importlib.machinery.PathFinder.find_spec(name, [root])


sys.meta_path.append(EditableInstall())
hide_project_modules(root, folder)
for name in ("kernels", "kernels.formats", "launchers", "tools", "reference"):
    try:
        __import__(name)
    except ModuleNotFoundError as error:
        assert "No module named" in str(error), error
    else:
        sys.exit(f"{name} is importable")
import submission
assert submission.__file__.startswith(folder), submission.__file__
"""


def test_hidden_project_modules_stay_hidden_from_an_editable_install(tmp_path):
    (tmp_path / "submission.py").write_text("VALUE = 1\n")
    result = subprocess.run([sys.executable, "-c", HIDE_CHILD, str(evaluate.ROOT),
                             str(tmp_path.resolve())], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("mode", ["benchmark", "leaderboard", "profile", "ranked"])
def test_timing_modes_need_a_gpu(mode, monkeypatch, capsys):
    monkeypatch.setattr(evaluate, "gpu_available", lambda: False)
    assert evaluate.main([mode] + (["--shapes", SMALL] if mode != "ranked" else [])) == 2
    assert f"{mode} mode needs a GPU" in capsys.readouterr().err


def test_plot_without_matplotlib_exits_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import fails
    code = evaluate.main(["benchmark", "--shapes", SMALL, "--plot", str(tmp_path / "p.png")])
    assert code == 2
    assert "needs matplotlib" in capsys.readouterr().err


def test_missing_submission_file_exits_2(capsys, tmp_path):
    assert evaluate.main(["test", "--submission", str(tmp_path / "none.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_timing_mode_report_from_child_messages(monkeypatch, capsys, tmp_path):
    """The parent side of a benchmark run, fed the messages a GPU child would send."""
    specs = evaluate.parse_shapes(["4,2880,512", "32,4096,512", "64,128,512"])
    stats = [evaluate.calculate_stats(t) for t in ([8.0, 8.2, 8.4], [9.0, 9.5, 10.0])]

    def fake_child(mode, got_specs, submission, clear_bytes, max_wall_s, max_calls, env):
        assert mode == "leaderboard" and got_specs == specs and clear_bytes == 1 << 30
        yield {"type": "ready", "submission_file": "x/submission.py", "import_s": 1.0,
               "device": "NVIDIA H200", "l2_bytes": 60 << 20, "isolated": False}
        yield {"type": "warmup", "stats": stats[0], "message": ""}
        yield {"type": "result", "index": 0, "ok": True, "message": "", "stats": stats[0]}
        yield {"type": "result", "index": 1, "ok": True, "message": "", "stats": stats[1]}
        yield {"type": "result", "index": 2, "ok": False, "message": "timed call 4: bad",
               "stats": None}

    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.setattr(evaluate, "run_child", fake_child)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    report = tmp_path / "r.json"
    assert evaluate.main(["leaderboard", "--shapes", "4,2880,512", "32,4096,512",
                          "64,128,512", "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "1.00 GiB" in out and "60 MiB" in out
    assert "seed  4565: pass; mean 8.200 µs" in out
    assert "seed  4244: FAIL timed call 4: bad" in out
    assert f"{8.2 / 8.198:.3f}" in out and f"{9.5 / 9.462:.3f}" in out
    assert "geomean" in out and "2 passed, 1 failed" in out
    data = json.loads(report.read_text())
    assert data["geomean"]["mean_us"] == pytest.approx(math.sqrt(8.2 * 9.5))
    assert data["exit_code"] == 1 and len(data["rows"]) == 3


def test_small_cache_clear_warns(monkeypatch, capsys):
    def fake_child(*args):
        yield {"type": "ready", "submission_file": "s.py", "import_s": 0.0, "device": "gpu",
               "l2_bytes": 60 << 20, "isolated": False}
        yield {"type": "warmup", "stats": None, "message": "x"}
        yield {"type": "result", "index": 0, "ok": True, "message": "",
               "stats": evaluate.calculate_stats([1.0, 1.0, 1.0])}

    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.setattr(evaluate, "run_child", fake_child)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert evaluate.main(["benchmark", "--shapes", SMALL, "--clear-bytes", str(100 << 20)]) == 0
    assert "warning: --clear-bytes is under 4x the L2" in capsys.readouterr().out


def test_a_child_that_fails_importing_the_project_before_it_is_ready_says_why(monkeypatch):
    """No ready message came, so the child counts as isolated (a --submission file outside
    the root, imported alone): the hint follows the failure, flushed as it is printed."""
    def fake_child(*args):
        yield {"type": "fatal", "message": "ModuleNotFoundError: No module named 'kernels'"}
        yield {"type": "exit", "code": 1}

    stdout = FlushRecorder()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(evaluate, "gpu_available", lambda: False)
    monkeypatch.setattr(evaluate, "run_child", fake_child)
    assert evaluate.main(["test", "--shapes", SMALL]) == 1
    assert ("(a --submission file outside the project root is imported alone, as on the runner: "
            "it must not import the project's packages)") in stdout.flushed_lines()


def test_without_a_gpu_the_test_mode_says_it_runs_the_interpreter(monkeypatch, capsys):
    monkeypatch.setattr(evaluate, "gpu_available", lambda: False)
    monkeypatch.setattr(evaluate, "run_mode", lambda args, mode, specs, env: REPORT)
    assert evaluate.main(["test", "--shapes", SMALL]) == 0
    assert capsys.readouterr().out.startswith(
        "no GPU: running the submission through the Triton interpreter, which is slow ")


def test_the_test_mode_runs_on_a_gpu_under_the_interpreter_too(monkeypatch, capsys):
    """Only the timing modes refuse TRITON_INTERPRET."""
    envs = []
    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(evaluate, "run_mode",
                        lambda args, mode, specs, env: envs.append(env) or REPORT)
    assert evaluate.main(["test", "--shapes", SMALL]) == 0
    assert envs[0]["TRITON_INTERPRET"] == "1"


def test_timing_refused_under_the_interpreter(monkeypatch, capsys):
    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert evaluate.main(["benchmark", "--shapes", SMALL]) == 2
    assert "TRITON_INTERPRET is set" in capsys.readouterr().err



# ----------------------------------------------------------------------------- ranked

def _ranked_fakes(monkeypatch, failing_mode=None):
    """A GPU, the script run and the children faked; returns the list of steps they saw."""
    seen = []

    def fake_script(submission, env):
        seen.append("script")
        return 2.5, "exit code 0"

    def fake_child(mode, specs, submission, clear_bytes, max_wall_s, max_calls, env):
        seen.append((mode, [(s["m"], s["n"], s["k"]) for s in specs]))
        yield {"type": "ready", "submission_file": "s.py", "import_s": 7.0, "device": "gpu",
               "l2_bytes": 0, "isolated": True}
        for index in range(len(specs)):
            ok = mode != failing_mode
            yield {"type": "result", "index": index, "ok": ok, "message": "" if ok else "bad",
                   "stats": evaluate.calculate_stats([1.0, 1.0, 1.0])}

    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.setattr(evaluate, "run_as_script", fake_script)
    monkeypatch.setattr(evaluate, "run_child", fake_child)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return seen


def test_ranked_runs_the_three_modes_each_after_a_script_run(monkeypatch, capsys, tmp_path):
    seen = _ranked_fakes(monkeypatch)
    report = tmp_path / "ranked.json"
    assert evaluate.main(["ranked", "--json", str(report)]) == 0
    assert seen == ["script", ("test", list(TEST_SHAPES)), "script",
                    ("benchmark", list(BENCHMARK_SHAPES)), "script",
                    ("leaderboard", list(BENCHMARK_SHAPES))]
    out = capsys.readouterr().out
    assert "test: python submission.py" in out and "leaderboard: eval" in out
    assert f"\n{'step':<30} {'wall s':>8} {'import s':>9} {'limit s':>8}\n" in out
    assert f"wrote {report}" in out
    data = json.loads(report.read_text())
    assert [step["import_s"] for step in data["steps"]] == [None, 7.0] * 3
    assert [step["limit_s"] for step in data["steps"][1::2]] == [420, 420, 600]
    assert data["exit_code"] == 0 and set(data["modes"]) == {"test", "benchmark", "leaderboard"}


def test_ranked_stops_at_the_first_failing_mode(monkeypatch, capsys):
    seen = _ranked_fakes(monkeypatch, failing_mode="test")
    assert evaluate.main(["ranked"]) == 1
    assert seen == ["script", ("test", list(TEST_SHAPES))]


def test_ranked_fails_a_mode_over_the_runners_limit(monkeypatch, capsys):
    seen = _ranked_fakes(monkeypatch)
    monkeypatch.setitem(evaluate.RUNNER_LIMITS_S, "benchmark", 0)
    assert evaluate.main(["ranked"]) == 1
    assert seen[-1][0] == "benchmark"
    assert "FAIL: benchmark took" in capsys.readouterr().out


def test_ranked_takes_no_shapes(capsys):
    assert evaluate.main(["ranked", "--shapes", SMALL]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tools.evaluate: ranked runs the task's shapes") and err.count("\n") == 1


def test_the_script_run_runs_the_file_as_main_beside_task_py(tmp_path, capfd):
    script = tmp_path / "mine.py"
    script.write_text("import task\nprint('ran as', __name__, task.__name__)\n")
    seconds, ending = evaluate.run_as_script(script, dict(os.environ))
    assert ending == "exit code 0" and seconds > 0
    assert "ran as __main__ task" in capfd.readouterr().out


def test_the_projects_own_file_runs_as_a_script_with_its_packages():
    env = dict(os.environ, TRITON_INTERPRET="1")     # on a GPU too: no pre-warm here
    assert evaluate.run_as_script(evaluate.ROOT / "submission.py", env)[1] == "exit code 0"


def test_the_script_run_is_killed_at_the_runners_timeout(tmp_path, monkeypatch):
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(evaluate, "SCRIPT_RUN_TIMEOUT_S", 1)
    assert evaluate.run_as_script(script, {})[1] == "killed at 1 s, as the runner does"


# ----------------------------------------------------------------------------- the child, in process
# What the evaluator's child does with the inputs (test mode, fakes for the reference and the
# submission): the submission gets a copy, so one that writes into its inputs is checked
# against the inputs as generated; an exception fails its shape only, with the traceback's
# last lines; a check that returns an error string (not a tuple) passes when it is empty.

import types  # noqa: E402

import torch  # noqa: E402


@pytest.fixture
def fake_child(monkeypatch, tmp_path):
    """Runs evaluate._child_run in this process with fake reference and submission modules;
    returns (run(specs, custom_kernel, check) -> messages, what check saw)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    seen = []

    def run(specs, custom_kernel, check=None, isolated=False, mode="test", max_calls=1):
        def generate_input(m, n, k, seed):
            return (torch.full((m, k), float(seed)), n)

        def check_implementation(data, output):
            seen.append(data[0].clone())
            return check(data, output) if check else \
                (torch.equal(output, data[0] + 1), "off by something")
        monkeypatch.setitem(sys.modules, "reference", types.SimpleNamespace(
            generate_input=generate_input, check_implementation=check_implementation,
            __file__="reference.py"))
        monkeypatch.setitem(sys.modules, "submission", types.SimpleNamespace(
            custom_kernel=custom_kernel, __file__="submission.py"))
        messages = []
        job = dict(workdir=str(tmp_path), root=str(evaluate.ROOT), isolated=isolated, mode=mode,
                   specs=specs, clear_bytes=4, max_wall_s=60.0, max_calls=max_calls)
        assert evaluate._child_run(job, lambda kind, **fields: messages.append((kind, fields))) == 0
        return messages
    return run, seen


SPECS = [dict(m=2, n=16, k=4, seed=3), dict(m=2, n=16, k=4, seed=5)]


def writes_into_its_inputs(data):
    data[0].add_(1)
    return data[0].clone()


def test_a_submission_that_writes_into_its_inputs_is_checked_against_the_generated_ones(
        fake_child):
    run, seen = fake_child
    messages = run(SPECS, writes_into_its_inputs)
    assert [kind for kind, _ in messages] == ["ready", "result", "result"]
    assert all(fields["ok"] for kind, fields in messages[1:])
    assert [float(a[0, 0]) for a in seen] == [3.0, 5.0]


def test_an_exception_fails_its_shape_only_with_the_tracebacks_end(fake_child):
    run, _ = fake_child

    def custom_kernel(data):
        if float(data[0][0, 0]) == 3.0:
            raise ValueError("no kernel for this one")
        return data[0] + 1
    (_, ready), (_, first), (_, second) = run(SPECS, custom_kernel)
    assert ready["isolated"] is False and ready["submission_file"] == "submission.py"
    assert not first["ok"] and first["message"].startswith("raised ")
    assert first["message"].endswith("ValueError: no kernel for this one")
    assert first["message"].count(" | ") == 2
    assert second["ok"] and second["index"] == 1


@pytest.mark.parametrize("returned, ok, message", [("", True, ""), ("bad row 3", False, "bad row 3"),
                                                   ((False, "why"), False, "why")])
def test_a_check_may_return_an_error_string_or_a_tuple(fake_child, returned, ok, message):
    run, _ = fake_child
    (_, _), (_, first), _ = run(SPECS, lambda data: data[0], lambda data, output: returned)
    assert (first["ok"], first["message"]) == (ok, message)


def test_the_device_says_interpreter_when_interpreting(fake_child, monkeypatch):
    run, _ = fake_child
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert run(SPECS[:1], lambda data: data[0] + 1)[0][1]["device"] == "cpu (Triton interpreter)"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    assert run(SPECS[:1], lambda data: data[0] + 1)[0][1]["device"] == gpu


def test_the_ready_message_gives_the_import_time_and_no_l2_in_the_interpreter(fake_child,
                                                                               monkeypatch):
    run, _ = fake_child
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (kind, ready), _ = run(SPECS[:1], lambda data: data[0] + 1)
    assert kind == "ready" and ready["import_s"] >= 0 and ready["l2_bytes"] == 0


def test_an_isolated_child_hides_the_project_from_the_submissions_folder(fake_child, monkeypatch,
                                                                         tmp_path):
    run, _ = fake_child
    hidden = []
    monkeypatch.setattr(evaluate, "hide_project_modules",
                        lambda root, folder: hidden.append((root, folder)))
    (_, ready), _ = run(SPECS[:1], lambda data: data[0] + 1, isolated=True)
    assert hidden == [(evaluate.ROOT.resolve(), tmp_path.resolve())] and ready["isolated"]


class FakeEvent:
    """torch.cuda.Event with the durations given, in turn (ms)."""
    durations_ms = []

    def __init__(self, enable_timing):
        assert enable_timing

    def record(self):
        pass

    def elapsed_time(self, end):
        return FakeEvent.durations_ms.pop(0)


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda's timing, synchronize and the cache clear's allocation, faked on the CPU."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(evaluate, "cache_clear_buffer", lambda numel: torch.empty(numel))
    monkeypatch.setenv("TRITON_INTERPRET", "1")      # no GPU name or L2 asked for


@pytest.mark.parametrize("mode", ["benchmark", "leaderboard"])
def test_a_timing_mode_times_each_shape_up_to_its_call_cap_within_the_wall_time(
        fake_child, fake_cuda, mode):
    """Durations alternating 1 and 3 µs never meet the error target: the warm-up and each shape
    run to the call cap (the wall time, 60 s, is far); the leaderboard checks every timed call
    on a new seed."""
    run, seen = fake_child
    calls, step = evaluate.MIN_CALLS + 2, evaluate.LEADERBOARD_SEED_STEP
    FakeEvent.durations_ms = [0.001, 0.003] * (3 * calls)
    messages = run(SPECS, lambda data: data[0] + 1, mode=mode, max_calls=calls)
    assert [kind for kind, _ in messages] == ["ready", "warmup", "result", "result"]
    assert messages[1][1]["stats"]["n"] == calls
    results = [fields for kind, fields in messages if kind == "result"]
    assert [r["index"] for r in results] == [0, 1] and all(r["ok"] for r in results)
    assert [r["stats"]["n"] for r in results] == [calls, calls]
    assert {r["stats"]["best"] for r in results} == {1.0}
    checked = [float(a[0, 0]) for a in seen]
    if mode == "benchmark":
        assert checked == [3.0, 3.0, 5.0]
    else:
        assert checked == [3.0] + [3.0 + i * step for i in range(calls + 1)] + \
            [5.0 + i * step for i in range(calls + 1)]


def test_the_profile_mode_gives_the_top_20_kernels_by_their_own_gpu_time(fake_child,
                                                                         monkeypatch):
    import torch.profiler
    asked = []

    class Profile:
        def __init__(self, activities):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def key_averages(self):
            return self

        def table(self, **options):
            asked.append(options)
            return "a table"
    monkeypatch.setattr(torch.profiler, "profile", Profile)
    run, _ = fake_child
    messages = run(SPECS[:1], lambda data: data[0] + 1, mode="profile")
    assert messages[1][1]["table"] == "a table" and messages[1][1]["ok"]
    assert asked == [{"sort_by": "self_cuda_time_total", "row_limit": 20}]


# ----------------------------------------------------------------------------- boundaries
# The stopping rule's boundaries (a relative error of exactly the target, a wall time of exactly
# the limit, one call short of MIN_CALLS) and check_standalone's choice of what counts as
# importing the project (absolute imports of its packages from a file outside the root).

def test_the_stopping_rule_at_its_boundaries():
    stop = evaluate.should_stop
    spread = [1.0, 1.0 + 2e-3 * 3 ** 0.5 * 2 ** -0.5, 1.0 - 2e-3 * 3 ** 0.5 * 2 ** -0.5]
    ratio = evaluate.calculate_stats(spread)
    assert ratio["err"] / ratio["mean"] > evaluate.REL_ERR_TARGET
    assert not stop(spread, 10.0, 100, max_wall_s=10.0)
    assert stop(spread, 10.0 + 1e-9, 100, max_wall_s=10.0)
    assert not stop([5.0] * (evaluate.MIN_CALLS - 1), 1e9, 100)
    assert stop([5.0] * evaluate.MIN_CALLS, 0.0, 100)
    assert stop([0.0] * evaluate.MIN_CALLS, 0.0, 100)          # a mean of 0 stops
    assert not stop([5.0, 6.0], 0.0, 3) and stop([5.0, 6.0, 7.0], 0.0, 3)


def test_geomean_refuses_zero_and_negative_values():
    for values in ([1.0, 0.0], [2.0, -1.0]):
        with pytest.raises(ValueError, match="non-positive"):
            evaluate.geomean(values)


@pytest.mark.parametrize("source, refused", [
    ("import torch\nimport os\n", None),
    ("import mxfp4_mm.kernels.formats; from mxfp4_mm import kernels\n", "kernels"),
    ("from mxfp4_mm.launchers.ladder import proven_launcher\n", "launchers"),
    ("import torch; from mxfp4_mm import launchers\nfrom mxfp4_mm.kernels import formats\n", "kernels, launchers"),
    ("from . import launchers\n", None),
    ("def f():\n    from mxfp4_mm import launchers\n", "launchers"),
])
def test_check_standalone_refuses_absolute_imports_of_the_project(tmp_path, source, refused):
    path = tmp_path / "submission.py"
    path.write_text(source + "def custom_kernel(data):\n    return data\n")
    if refused is None:
        evaluate.check_standalone(path)
    else:
        with pytest.raises(evaluate.UsageError, match=rf"imports the project's packages "
                                                      rf"\({refused}\)"):
            evaluate.check_standalone(path)


@pytest.mark.parametrize("source, defines", [
    ("def custom_kernel(data):\n    return data\n", True),
    ("async def custom_kernel(data):\n    return data\n", True),
    ("class custom_kernel:\n    pass\n", True),
    ("custom_kernel = print\n", True),
    ("custom_kernel: object = print\n", True),
    ("kernel, custom_kernel = print, print\n", True),
    ("[kernel, *custom_kernel] = print, print\n", True),
    ("from os.path import join as custom_kernel\n", True),
    ("import custom_kernel\n", True),
    ("def kernel(data):\n    return data\n", False),
    ("def f():\n    def custom_kernel(data):\n        pass\n", False),
    ("from os.path import custom_kernel as join\n", False),
    ("custom_kernel.x = 1\n", False),
    ("custom_kernel[0] = 1\n", False),
])
def test_check_standalone_refuses_a_file_without_a_top_level_custom_kernel(tmp_path, source,
                                                                           defines):
    path = tmp_path / "entry.py"
    path.write_text(source)
    if defines:
        evaluate.check_standalone(path)
    else:
        with pytest.raises(evaluate.UsageError, match="defines no custom_kernel at its top level"):
            evaluate.check_standalone(path)


def test_a_file_in_the_root_may_import_the_project():
    evaluate.check_standalone(evaluate.ROOT / "submission.py")


def test_make_row_has_a_ratio_only_with_stats_and_a_baseline():
    stats = evaluate.calculate_stats([8.0, 8.198, 8.396])
    with_baseline = evaluate.make_row(dict(m=4, n=2880, k=512, seed=1), True, "", stats)
    assert with_baseline["ratio"] == pytest.approx(stats["mean"] / 8.198)
    assert evaluate.make_row(dict(m=4, n=64, k=512, seed=1), True, "", stats)["ratio"] is None
    assert evaluate.make_row(dict(m=4, n=2880, k=512, seed=1), False, "x")["ratio"] is None
    summary = evaluate.summarize([with_baseline, evaluate.make_row(
        dict(m=4, n=64, k=512, seed=1), True, "", stats), evaluate.make_row(
        dict(m=4, n=2880, k=512, seed=1), False, "x")])
    assert (summary["shapes"], summary["baseline_shapes"]) == (2, 1)


# ----------------------------------------------------------------------------- a mode's verdict
# run_mode's decisions on the child's messages: a fatal error counts once however the process
# then exits, an exit code alone fails the run, fewer results than shapes fail it (when nothing
# else did), the missing-module hint only for a file imported alone; and the child's timed
# loop: a warm-up on the first shape, benchmark timing one input, leaderboard a fresh seed
# (LEADERBOARD_SEED_STEP apart) checked after every timed call, the first failing shape ending
# the run.

def run_mode_with(monkeypatch, messages, specs=2):
    shapes = evaluate.parse_shapes(["4,64,256,7", "8,64,256,9"][:specs])

    def fake_child(*args):
        yield from messages
    monkeypatch.setattr(evaluate, "run_child", fake_child)
    args = evaluate.build_parser().parse_args(["test"])
    return evaluate.run_mode(args, "test", shapes, {})


READY = {"type": "ready", "submission_file": "s.py", "import_s": 0.5, "device": "cpu",
         "l2_bytes": 0, "isolated": True}


def result(index, ok=True, message=""):
    return {"type": "result", "index": index, "ok": ok, "message": message, "seconds": 1.25}


def test_a_fatal_error_counts_once_and_hints_at_imports_when_alone(monkeypatch, capsys):
    fatal = {"type": "fatal", "message": "ModuleNotFoundError: No module named 'kernels'"}
    outcome = run_mode_with(monkeypatch, [READY, fatal, {"type": "exit", "code": 1}])
    out = capsys.readouterr().out
    assert outcome["code"] == 1 and out.count("FAIL: the submission process failed:\n") == 1
    assert "exited with code" not in out
    assert "must not import the project's packages" in out
    assert "0 passed, 0 failed, 2 not run; FAIL: the submission process failed" in out
    run_mode_with(monkeypatch, [dict(READY, isolated=False), fatal])
    assert "must not import" not in capsys.readouterr().out


def test_an_exit_code_alone_fails_the_run(monkeypatch, capsys):
    outcome = run_mode_with(monkeypatch, [READY, result(0), result(1),
                                          {"type": "exit", "code": 3}])
    out = capsys.readouterr().out
    assert outcome["code"] == 1 and "exited with code 3" in out
    assert "2 passed, 0 failed; FAIL" in out


def test_missing_results_fail_the_run(monkeypatch, capsys):
    outcome = run_mode_with(monkeypatch, [READY, result(0)])
    out = capsys.readouterr().out
    assert outcome["code"] == 1 and "FAIL: only 1 of 2 shapes reported" in out
    assert "1 passed, 0 failed, 1 not run" in out
    assert run_mode_with(monkeypatch, [READY, result(0), result(1)])["code"] == 0
    out = capsys.readouterr().out
    assert "pass (1.2 s)" in out and "2 passed, 0 failed\n" in out and "not run" not in out


def test_a_failed_shape_is_named_with_its_message(monkeypatch, capsys):
    outcome = run_mode_with(monkeypatch, [READY, result(0, False, "off by 2"), result(1)])
    out = capsys.readouterr().out
    assert outcome["code"] == 1 and ": FAIL off by 2" in out and "1 passed, 1 failed" in out
    assert "alone (as on the runner) in 0.5 s; device: cpu" in out


@pytest.fixture
def fake_gpu(monkeypatch):
    """CUDA calls of the timed loop made harmless on the CPU; each event pair 2 µs apart."""
    class Event:
        clock = [0.0]

        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            Event.clock[0] += 0.001
            self.at = Event.clock[0]

        def elapsed_time(self, end):
            return 0.002
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(evaluate, "cache_clear_buffer", lambda numel: torch.empty(1))


@pytest.mark.parametrize("mode", ["benchmark", "leaderboard"])
def test_the_timed_loop_checks_fresh_seeds_in_leaderboard_mode_only(fake_child, fake_gpu,
                                                                     monkeypatch, mode):
    run, seen = fake_child
    step = evaluate.LEADERBOARD_SEED_STEP
    monkeypatch.setattr(evaluate, "MIN_CALLS", 10 ** 6)    # the call cap alone stops the loop
    calls = []

    def kernel(data):
        calls.append(float(data[0][0, 0]))
        return data[0] + 1
    run([], kernel)                                          # installs the fake modules
    got = []
    job = dict(workdir=str(evaluate.ROOT), root=str(evaluate.ROOT), isolated=False, mode=mode,
               specs=[dict(m=2, n=16, k=4, seed=3)], clear_bytes=4, max_wall_s=1e9, max_calls=3)
    evaluate._child_run(job, lambda kind, **fields: got.append((kind, fields)))
    assert [kind for kind, _ in got] == ["ready", "warmup", "result"]
    assert got[1][1]["stats"]["n"] == 3
    assert got[2][1]["ok"] and got[2][1]["stats"]["n"] == 3
    assert got[2][1]["stats"]["mean"] == pytest.approx(2.0)
    assert calls[:4] == [3.0] * 4                            # warm-up: one checked, 3 timed
    fresh = [3.0 + step * i for i in (1, 2, 3)]
    assert calls[4:] == [3.0] + (fresh if mode == "leaderboard" else [3.0] * 3)
    checked = [float(a[0, 0]) for a in seen]
    assert checked == [3.0, 3.0] + (fresh if mode == "leaderboard" else [])


def test_the_first_failing_shape_ends_a_timed_run(fake_child, fake_gpu):
    run, _ = fake_child
    run([], lambda data: data[0])                            # wrong: installs the fakes
    got = []
    job = dict(workdir=str(evaluate.ROOT), root=str(evaluate.ROOT), isolated=False,
               mode="benchmark", specs=[dict(m=2, n=16, k=4, seed=3), dict(m=2, n=16, k=4, seed=5)],
               clear_bytes=4, max_wall_s=1e9, max_calls=2)
    evaluate._child_run(job, lambda kind, **fields: got.append((kind, fields)))
    assert [kind for kind, _ in got] == ["ready", "warmup", "result"]
    assert got[1][1]["stats"] is None and got[1][1]["message"] == "off by something"
    assert not got[2][1]["ok"] and got[2][1]["stats"] is None


# ----------------------------------------------------------------------------- the parent's edges
# What main writes to --json and hands to write_plot, where the child runs and what it is told,
# how the child's messages travel, and which of the project's modules an isolated child sees.

REPORT = {"code": 0, "rows": [{"m": 4, "stats": {"mean": 2.0}}],
          "summary": {"shapes": 1, "mean_us": 2.0}, "info": {"device": "cpu (Triton interpreter)"},
          "tables": ["a profile"]}


def test_main_writes_the_modes_report_to_json_and_runs_the_interpreter_without_a_gpu(
        monkeypatch, tmp_path):
    envs = []
    monkeypatch.setattr(evaluate, "gpu_available", lambda: False)
    monkeypatch.setattr(evaluate, "run_mode", lambda args, mode, specs, env: envs.append(env)
                        or REPORT)
    out = tmp_path / "report.json"
    assert evaluate.main(["test", "--shapes", "4,64,256", "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == {
        "mode": "test", "submission": str((evaluate.ROOT / "submission.py").resolve()),
        "device": "cpu (Triton interpreter)", "clear_bytes": evaluate.DEFAULT_CLEAR_BYTES,
        "rows": REPORT["rows"], "geomean": REPORT["summary"], "profiles": ["a profile"],
        "exit_code": 0}
    assert envs[0]["TRITON_INTERPRET"] == "1"


def test_main_writes_each_ranked_modes_report_to_json(monkeypatch, tmp_path):
    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    steps = [{"step": "test: eval"}]
    monkeypatch.setattr(evaluate, "run_ranked", lambda args, env: (1, steps, {"test": REPORT}))
    out = tmp_path / "ranked.json"
    assert evaluate.main(["ranked", "--json", str(out)]) == 1
    written = json.loads(out.read_text())
    assert written["steps"] == steps and written["exit_code"] == 1
    assert written["modes"] == {"test": {"rows": REPORT["rows"], "geomean": REPORT["summary"],
                                         "exit_code": 0}}


@pytest.mark.parametrize("shapes, plotted", [(1, True), (0, False)])
def test_main_plots_the_timings_it_has(monkeypatch, tmp_path, shapes, plotted):
    stdout = FlushRecorder()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(evaluate, "gpu_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(evaluate, "require_matplotlib", lambda: None)
    report = dict(REPORT, summary=dict(REPORT["summary"], shapes=shapes))
    monkeypatch.setattr(evaluate, "run_mode", lambda args, mode, specs, env: report)
    plots = []
    monkeypatch.setattr(evaluate, "write_plot", lambda *args: plots.append(args))
    path = str(tmp_path / "p.png")
    assert evaluate.main(["benchmark", "--shapes", "4,64,256", "--plot", path]) == 0
    if plotted:
        assert plots == [(path, report["rows"], report["summary"],
                          "amd-mxfp4-mm benchmark on cpu (Triton interpreter)")]
        assert f"wrote {path}" in stdout.flushed_lines()
    else:
        assert plots == [] and "no timings to plot" in stdout.flushed_lines()


def test_run_mode_says_what_it_runs_and_prints_the_warm_up_and_a_profile(monkeypatch):
    stdout = FlushRecorder()
    monkeypatch.setattr(sys, "stdout", stdout)
    warmup = {"type": "warmup", "stats": {"mean": 1.5, "n": 3}, "message": ""}
    profiled = {"type": "result", "index": 0, "ok": True, "message": "", "table": "TABLE"}
    outcome = run_mode_with(monkeypatch, [READY, warmup, profiled])
    lines = stdout.flushed_lines()
    assert lines[0] == f"test: 2 shape(s), submission {evaluate.ROOT / 'submission.py'}"
    assert any(line.startswith("warm-up on ") and line.endswith(": mean 1.500 µs over 3 calls")
               for line in lines)
    assert "TABLE" in lines and outcome["tables"] == ["TABLE"]
    assert "FAIL: only 1 of 2 shapes reported" in lines
    assert lines[-1].startswith("1 passed, 0 failed, 1 not run")


def test_a_failed_warm_up_prints_its_message(monkeypatch, capsys):
    run_mode_with(monkeypatch, [READY, {"type": "warmup", "stats": None, "message": "off"}])
    assert ": failed (off)" in capsys.readouterr().out


def test_run_as_script_gives_the_projects_own_file_its_packages(monkeypatch):
    envs = []

    def run(command, cwd, env, timeout):
        envs.append((env, Path(cwd, "submission.py").exists()))
        return subprocess.CompletedProcess(command, 0)
    monkeypatch.setattr(evaluate.subprocess, "run", run)
    seconds, ending = evaluate.run_as_script(evaluate.ROOT / "submission.py",
                                             {"PYTHONPATH": "elsewhere", "KEEP": "1"})
    assert ending == "exit code 0" and seconds >= 0
    env, prepared = envs[0]
    assert prepared and env["KEEP"] == "1"
    assert env["PYTHONPATH"] == os.pathsep.join([str(evaluate.ROOT), "elsewhere"])


def test_run_ranked_records_each_eval_steps_ending(monkeypatch):
    monkeypatch.setattr(evaluate, "run_as_script", lambda submission, env: (0.5, "exit code 0"))
    monkeypatch.setattr(evaluate, "run_mode", lambda args, mode, specs, env: dict(
        REPORT, code=0 if mode == "test" else 1, info={"import_s": 0.25}))
    args = evaluate.build_parser().parse_args(["ranked"])
    code, steps, reports = evaluate.run_ranked(args, {})
    assert code == 1 and list(reports) == ["test", "benchmark"]
    assert [(s["step"], s["ending"]) for s in steps] == [
        ("test: python submission.py", "exit code 0"), ("test: eval", "exit code 0"),
        ("benchmark: python submission.py", "exit code 0"), ("benchmark: eval", "exit code 1")]
    assert steps[1]["import_s"] == 0.25 and steps[1]["limit_s"] == evaluate.RUNNER_LIMITS_S["test"]


def test_the_geomean_row_has_the_tables_columns():
    rows = [evaluate.make_row(dict(m=4, n=64, k=256, seed=1), True, "",
                              {"mean": 2.0, "best": 1.0, "worst": 3.0, "n": 5, "err": 0.0})]
    summary = {"mean_us": 2.0, "baseline_us": None, "ratio": None, "shapes": 1,
               "baseline_shapes": 1}
    geomean = evaluate.format_table(rows, summary).splitlines()[-1]
    assert geomean.split() == ["geomean", "2.000", "-", "-"]


def test_a_submission_that_does_not_parse_is_named_with_its_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef custom_kernel(data:\n")
    with pytest.raises(evaluate.UsageError, match=r"broken.py does not parse: line 2: "):
        evaluate.check_standalone(broken)


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(evaluate.UsageError) as error:
        evaluate.require_matplotlib()
    assert str(error.value) == ("--plot needs matplotlib, which is not installed here (pip "
                                "install matplotlib, or pip install -e '.[plot]')")


def test_the_parser_refuses_a_negative_call_cap_and_a_plot_into_a_folder(tmp_path, capsys):
    for argv in (["test", "--max-calls", "-1"], ["benchmark", "--plot", str(tmp_path)]):
        with pytest.raises(SystemExit):
            evaluate.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert "--max-calls: expected an integer of at least 0" in err and "is a directory" in err


def test_child_main_sends_each_message_as_a_json_line_and_a_crash_as_fatal(monkeypatch):
    def read(job_run):
        monkeypatch.setattr(evaluate, "_child_run", job_run)
        read_fd, write_fd = os.pipe()
        code = evaluate.child_main(json.dumps({"mode": "test"}), write_fd)
        with os.fdopen(read_fd) as channel:
            return code, [json.loads(line) for line in channel]

    def fine(job, send):
        send("ready", mode=job["mode"])
        return 0

    def crashing(job, send):
        raise KeyError("boom")
    assert read(fine) == (0, [{"mode": "test", "type": "ready"}])
    code, messages = read(crashing)
    assert code == 1 and [m["type"] for m in messages] == ["fatal"]
    assert "KeyError: 'boom'" in messages[0]["message"]


def test_run_child_prepares_the_folder_tells_the_child_its_job_and_reports_its_exit(
        monkeypatch, tmp_path):
    submission = tmp_path / "entry.py"
    submission.write_text("def custom_kernel(data):\n    return data\n")
    started = []

    class Child:
        def __init__(self, command, cwd, env, pass_fds):
            started.append((json.loads(command[4]), Path(cwd), env))
            assert (Path(cwd) / "submission.py").read_text() == submission.read_text()
            os.write(pass_fds[0], b'{"type": "ready"}\nnot json\n')

        def wait(self):
            return 3
    monkeypatch.setattr(evaluate.subprocess, "Popen", Child)
    specs = [{"m": 4, "n": 64, "k": 256, "seed": 1}]
    messages = list(evaluate.run_child("test", specs, submission, 8, 1.5, 2, {"E": "1"}))
    assert messages == [{"type": "ready"}, {"type": "exit", "code": 3}]
    job, cwd, env = started[0]
    assert job == {"mode": "test", "specs": specs, "workdir": str(cwd),
                   "root": str(evaluate.ROOT), "isolated": True, "clear_bytes": 8,
                   "max_wall_s": 1.5, "max_calls": 2}
    assert env == {"E": "1"}


def test_the_project_modules_are_its_py_files_and_packages(tmp_path):
    (tmp_path / "alpha.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "notes.txt").write_text("")
    assert evaluate.project_module_names(tmp_path) == {"alpha", "pkg"}
    assert {"mxfp4_mm", "kernels", "task"} <= evaluate.project_module_names(evaluate.ROOT)


def test_the_folder_only_finder_finds_project_modules_in_its_folder_alone(tmp_path):
    (tmp_path / "alpha.py").write_text("")
    finder = evaluate._FromFolderOnly({"alpha", "beta"}, tmp_path)
    assert Path(finder.find_spec("alpha").origin) == tmp_path / "alpha.py"
    assert finder.find_spec("json") is None                      # not the project's
    assert finder.find_spec("alpha", path=[str(tmp_path)]) is None   # a submodule's search
    with pytest.raises(ModuleNotFoundError, match="only the files beside the submission"):
        finder.find_spec("beta")


def test_hiding_the_project_forgets_its_modules_drops_its_root_and_finds_them_in_the_folder(
        tmp_path, monkeypatch):
    root, folder = tmp_path / "root", tmp_path / "folder"
    root.mkdir(), folder.mkdir()
    (root / "mxfp4_probe_module.py").write_text("WHERE = 'root'\n")
    (folder / "mxfp4_probe_module.py").write_text("WHERE = 'folder'\n")
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", ["", str(root), str(tmp_path)])
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    stale = types.SimpleNamespace(__file__=str(root / "mxfp4_probe_module.py"))
    monkeypatch.setitem(sys.modules, "mxfp4_probe_module", stale)
    evaluate.hide_project_modules(root, folder)
    assert sys.path == [str(tmp_path)]
    assert isinstance(sys.meta_path[0], evaluate._FromFolderOnly)
    assert sys.modules.get("mxfp4_probe_module") is not stale
    import importlib
    assert importlib.import_module("mxfp4_probe_module").WHERE == "folder"


def test_every_option_has_the_help_docs_tools_md_shows():
    import re
    from mxfp4_mm.tools import docs
    tools_md = (evaluate.ROOT / "docs" / "tools.md").read_text()
    shown = re.search(r"options:tools\.evaluate -->\n(.*?)\n<!-- end", tools_md, re.S).group(1)
    assert shown == docs.options_markdown("tools.evaluate")
    assert all(action.help for action in evaluate.build_parser()._actions)


@pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")
def test_profile_mode_sends_each_shapes_table_and_check(fake_child):
    run, _ = fake_child
    run([], lambda data: data[0] + 1)                        # installs the fake modules
    got = []
    job = dict(workdir=str(evaluate.ROOT), root=str(evaluate.ROOT), isolated=False,
               mode="profile", specs=SPECS, clear_bytes=4, max_wall_s=1.0, max_calls=1)
    assert evaluate._child_run(job, lambda kind, **fields: got.append((kind, fields))) == 0
    results = [fields for kind, fields in got if kind == "result"]
    assert [(r["index"], r["ok"]) for r in results] == [(0, True), (1, True)]
    assert all("Self CPU" in r["table"] for r in results)


def test_test_mode_sends_each_shapes_own_seconds(fake_child, monkeypatch):
    run, _ = fake_child
    ticks = iter(range(10 ** 6, 10 ** 7))                    # a clock one second a reading
    monkeypatch.setattr(evaluate.time, "perf_counter", lambda: float(next(ticks)))
    messages = run(SPECS, lambda data: data[0] + 1)
    seconds = [fields["seconds"] for kind, fields in messages if kind == "result"]
    assert len(seconds) == 2 and all(0 < s < 10 for s in seconds), seconds


def test_the_timed_loop_clears_the_bytes_asked_and_warms_up_at_the_warm_up_cap(
        fake_child, fake_gpu, monkeypatch):
    """--clear-bytes of fp32 written each timed call, into one buffer made once; without
    --max-calls the warm-up runs MAX_CALLS["warmup"] calls and each shape its mode's cap; a
    GPU's L2 size reaches the parent."""
    run, _ = fake_child
    run([], lambda data: data[0] + 1)
    monkeypatch.setattr(evaluate, "MIN_CALLS", 10 ** 6)
    monkeypatch.setattr(evaluate, "MAX_CALLS", {"benchmark": 2, "leaderboard": 2, "warmup": 3})
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(L2_cache_size=1 << 20))
    made, cleared = [], []

    class Buffer:
        def normal_(self):
            cleared.append(self)
    monkeypatch.setattr(evaluate, "cache_clear_buffer",
                        lambda numel: made.append(numel) or Buffer())
    got = []
    job = dict(workdir=str(evaluate.ROOT), root=str(evaluate.ROOT), isolated=False,
               mode="benchmark", specs=[dict(m=2, n=16, k=4, seed=3)], clear_bytes=400,
               max_wall_s=1e9, max_calls=0)
    evaluate._child_run(job, lambda kind, **fields: got.append((kind, fields)))
    assert got[0][1]["device"] == "Fake GPU" and got[0][1]["l2_bytes"] == 1 << 20
    assert got[1][1]["stats"]["n"] == 3 and got[2][1]["stats"]["n"] == 2
    # one buffer of --clear-bytes for the process, written before each of the 5 timed calls
    assert made == [100] and len(cleared) == 5 and len(set(map(id, cleared))) == 1


def test_the_plot_draws_each_timed_shape_beside_its_baseline(monkeypatch, tmp_path):
    """write_plot through a stand-in for matplotlib that records what is drawn."""
    drawn = []

    class Axes:
        def __getattr__(self, name):
            return lambda *args, **kwargs: drawn.append((name, args, kwargs))

    class Figure(Axes):
        pass
    figure, axes = Figure(), Axes()
    pyplot = types.SimpleNamespace(subplots=lambda figsize: (figure, axes),
                                   close=lambda fig: drawn.append(("close", (fig,), {})))
    matplotlib = types.SimpleNamespace(use=lambda backend: None, pyplot=pyplot)
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    rows = [dict(m=4, n=64, k=256, stats=dict(mean=2.0, best=1.5, worst=3.0), baseline_us=8.0),
            dict(m=8, n=64, k=256, stats=None, baseline_us=9.0),
            dict(m=16, n=64, k=256, stats=dict(mean=4.0, best=4.0, worst=5.0), baseline_us=None)]
    path = tmp_path / "plot.png"
    evaluate.write_plot(path, rows, {"mean_us": 2.828}, "title")
    calls = {name: (args, kwargs) for name, args, kwargs in drawn if name != "bar"}
    bars = [(args, kwargs) for name, args, kwargs in drawn if name == "bar"]
    assert bars[0][0] == ([-0.2, 0.8], [2.0, 4.0], 0.4)
    assert bars[0][1]["yerr"] == [[0.5, 0.0], [1.0, 1.0]]
    assert bars[1][0] == ([0.2, 1.2], [8.0, 0.0], 0.4)
    assert calls["set_xticklabels"][0] == (["4x64x256", "16x64x256"],)
    assert calls["set_ylabel"][0] == ("µs",)
    assert calls["set_title"][0] == ("title: geomean 2.828 µs",)
    assert calls["savefig"] == ((path,), {"dpi": 120}) and calls["close"][0] == (figure,)


@pytest.mark.parametrize("mode, shapes", [("test", "TEST_SHAPES"), ("benchmark", "BENCHMARK_SHAPES"),
                                          ("leaderboard", "BENCHMARK_SHAPES")])
def test_without_shapes_a_mode_takes_its_own_set(mode, shapes):
    from types import SimpleNamespace
    from mxfp4_mm.launchers import task_shapes
    from mxfp4_mm.tools import evaluate
    specs = evaluate.resolve_specs(SimpleNamespace(shapes_file=None, shapes=None, mode=mode))
    assert [(s["m"], s["n"], s["k"]) for s in specs] == list(getattr(task_shapes, shapes))


def test_the_plot_is_drawn_off_screen_a_pair_of_bars_per_timed_shape(monkeypatch, tmp_path):
    """matplotlib faked: the Agg backend (no display needed), this submission's mean beside
    aiter's baseline for each timed row, the geomean in the title, the file written."""
    from unittest import mock
    backends, pyplot = [], mock.MagicMock()
    figure, axes = mock.MagicMock(), mock.MagicMock()
    pyplot.subplots.return_value = (figure, axes)
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use, matplotlib.pyplot = backends.append, pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    stats = evaluate.calculate_stats([8.0, 9.0, 10.0])
    rows = [evaluate.make_row(dict(m=4, n=2880, k=512, seed=1), True, "", stats),
            evaluate.make_row(dict(m=8, n=64, k=256, seed=1), False, "bad")]
    evaluate.write_plot(tmp_path / "p.png", rows, {"mean_us": 9.0}, "benchmark")
    assert backends == ["Agg"]
    ours, baseline = axes.bar.call_args_list
    assert ours.args[1] == [9.0] and ours.kwargs["yerr"] == [[1.0], [1.0]]
    assert baseline.args[1] == [evaluate.AITER_BASELINES_US[(4, 2880, 512)]]
    axes.set_title.assert_called_once_with("benchmark: geomean 9.000 µs")
    figure.savefig.assert_called_once_with(tmp_path / "p.png", dpi=120)
