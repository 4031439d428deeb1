"""tools.mutation: its summary (the product, kernels/ and launchers/, and the tools scored
apart); the mutants --only's globs select, reported alone; the tests --tests gives mutmut in
place of its selection (under the package's name in mutmut's copy), a missing one refused; a
mutmut run fails the tool where mutmut says in that run that its tests failed, not where the
deadline cut it short, and what it forked ends with it; the selection mutmut is told of
exists."""

import time

from mxfp4_mm.tools import mutation

SURVIVOR_DIFF = "--- a\n+++ b\n-    x = 1\n+    x = 2\n"


def test_modules_and_files_are_product_or_tools():
    assert mutation.area("launchers.tuner.x_select__mutmut_3") == "product"
    assert mutation.area("kernels.formats.x_pack_nibbles__mutmut_1") == "product"
    assert mutation.area("kernels/preshuffle_gemm.py") == "product"
    assert mutation.area("tools.bundle.x_build__mutmut_2") == "tools"


def test_the_summary_scores_product_and_tools_apart_and_lists_equivalents_as_such():
    results = {
        "launchers.a.x_f__mutmut_1": (1, ""),                 # killed
        "launchers.a.x_f__mutmut_2": (0, SURVIVOR_DIFF),      # survived
        "launchers.a.x_g__mutmut_1": (0, SURVIVOR_DIFF),      # equivalent
        "tools.b.x_h__mutmut_1": (0, SURVIVOR_DIFF),          # survived
        "tools.b.x_h__mutmut_2": (None, ""),                  # not run
    }
    kernels = {"k-killed": "killed", "k-survived": "survived", "k-late": None}
    equivalents = {("launchers.a.x_g", "x = 2"): "why"}
    lines, scores = mutation.summarize(results, kernels, equivalents, 12.0,
                                       {k: "kernels/preshuffle_gemm.py" for k in kernels})
    assert scores == {"product": 100.0 * 2 / 4, "tools": 0.0, "all": 100.0 * 2 / 5}
    product = next(line for line in lines if line.startswith("product (kernels/, launchers/)"))
    assert "killed: 2 (kernels 1), survived: 2, equivalent: 1, not run (budget): 1" in product
    tools = next(line for line in lines if line.startswith("tools (tools/)"))
    assert "killed: 0 (kernels 0), survived: 1, equivalent: 0, not run (budget): 1" in tools
    assert "survived (product): launchers.a.x_f__mutmut_2" in lines
    assert "survived (tools): tools.b.x_h__mutmut_1" in lines
    assert "survived (product): kernel mutant k-survived" in lines
    assert not any("x_g__mutmut_1" in line for line in lines)


def test_every_test_mutmut_is_told_to_select_exists():
    """A renamed test left in [tool.mutmut]'s selection makes mutmut's first run fail."""
    import subprocess
    import sys
    from pathlib import Path

    import pytest
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    selected = config["pytest_add_cli_args_test_selection"]
    assert all((root / name.split("::")[0]).is_file() for name in selected)
    node_ids = [name for name in selected if "::" in name]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                "-p", "no:cacheprovider", *node_ids], cwd=root,
                               capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-1000:] + collected.stderr[-1000:]


def test_only_runs_the_mutants_matching_any_of_its_globs_and_reports_those_alone(monkeypatch,
                                                                                 tmp_path):
    """--only with --sample 0: mutmut runs the globs (with the package's name), and the results
    hold their mutants only, not every mutant mutmut generated (those would count as not run)."""
    generated = {"launchers.a.x_f__mutmut_1": (1, ""), "launchers.b.x_g__mutmut_1": (0, "d"),
                 "tools.c.x_h__mutmut_1": (None, "")}
    asked = []
    monkeypatch.setattr(mutation, "_mutmut", lambda tree, workers, names, log, deadline=None:
                        asked.append(names))
    monkeypatch.setattr(mutation, "_results", lambda tree, log: dict(generated))
    only = ["launchers.a.*", "launchers.b.x_g*"]
    results = mutation.run_mutmut(tmp_path, 2, only, 0, None)
    assert asked == [only]
    assert results == {name: generated[name] for name in ("launchers.a.x_f__mutmut_1",
                                                          "launchers.b.x_g__mutmut_1")}
    assert mutation.run_mutmut(tmp_path, 2, [], 0, None) == generated
    assert mutation.selected("tools.c.x_h__mutmut_1", []) and \
        not mutation.selected("tools.c.x_h__mutmut_1", only)


def test_the_tests_asked_for_replace_mutmuts_selection_in_its_copy(tmp_path):
    import pytest
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    package = tmp_path / mutation.PACKAGE
    (package / "tests").mkdir(parents=True)
    (package / "launchers").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (package / "tests" / name).write_text("def test_x():\n    pass\n")
    (package / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n[tool.mutmut]\n'
        'source_paths = ["launchers/"]\nalso_copy = []\n'
        'pytest_add_cli_args_test_selection = [\n    "tests/test_a.py",\n]\n')
    mutation.select_tests(package, ["tests/test_b.py::test_x", "tests/test_a.py"])
    with pytest.raises(SystemExit):
        mutation.select_tests(package, ["tests/test_c.py"])
    mutation.mutmut_layout(tmp_path)
    mutmut = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert mutmut["pytest_add_cli_args_test_selection"] == [
        "mxfp4_mm/tests/test_b.py::test_x", "mxfp4_mm/tests/test_a.py"]
    assert mutmut["source_paths"] == ["mxfp4_mm/launchers/"]


FAKE_MUTMUT = """
import os, sys, time
what = os.environ["FAKE_MUTMUT"]
if what == "fails":
    print("failed to collect stats. runner returned 1", flush=True)
    sys.exit(1)
if what == "slow":              # its stats run in a forked child, as mutmut's is
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    open(os.environ["FAKE_MUTMUT_CHILD"], "w").write(str(child))
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("failed to collect stats. runner returned 2", flush=True)
        sys.exit(1)
print("done", flush=True)
"""


def _ended(pid: int, wait_s: float = 10.0) -> bool:
    """Whether process pid ends (or is a zombie) within wait_s: a killed process takes a moment."""
    stop = time.monotonic() + wait_s
    while True:
        try:
            state = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > stop:
            return False
        time.sleep(0.05)


def test_a_mutmut_run_fails_the_tool_only_where_mutmut_says_its_tests_failed_in_this_run(
        monkeypatch, tmp_path, capsys):
    """Where mutmut says its tests failed, the tool fails naming the log; not where the log
    said so before this run (a kernel mutant's output), nor where the deadline cut mutmut short
    (it then says its stats failed): the run is cut, and the child it forked ended with it."""
    import pytest
    fake = tmp_path / "fake" / "mutmut"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_MUTMUT)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    child = tmp_path / "child"
    monkeypatch.setenv("FAKE_MUTMUT_CHILD", str(child))
    with open(tmp_path / "log.txt", "w") as log:
        log.write("--- kernel mutant k: failed to collect stats\n")
        monkeypatch.setenv("FAKE_MUTMUT", "ok")
        assert mutation._mutmut(tmp_path, 2, ["x"], log) is False
        monkeypatch.setenv("FAKE_MUTMUT", "slow")
        assert mutation._mutmut(tmp_path, 2, ["x"], log, time.monotonic() + 3) is True
        assert _ended(int(child.read_text()))
        monkeypatch.setenv("FAKE_MUTMUT", "fails")
        with pytest.raises(SystemExit):
            mutation._mutmut(tmp_path, 2, ["x"], log)
    assert "tools.mutation: mutmut: failed to collect stats (the tests fail in mutmut's copy; " \
           f"see {tmp_path / 'log.txt'})" in capsys.readouterr().err


def test_the_deadline_interrupts_mutmut_where_this_process_ignores_sigint(monkeypatch, tmp_path):
    """Started as a shell's background job, the tool inherits SIGINT ignored; mutmut still
    takes the deadline's SIGINT as Ctrl-C (its interrupted line in the log), well before the
    kill that follows MUTMUT_STOP_S."""
    import signal
    fake = tmp_path / "fake" / "mutmut"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_MUTMUT)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    monkeypatch.setenv("FAKE_MUTMUT_CHILD", str(tmp_path / "child"))
    monkeypatch.setenv("FAKE_MUTMUT", "slow")
    monkeypatch.setattr(mutation, "MUTMUT_STOP_S", 30)
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with open(tmp_path / "log.txt", "w") as log:
            start = time.monotonic()
            assert mutation._mutmut(tmp_path, 2, ["x"], log, time.monotonic() + 3) is True
            assert time.monotonic() - start < 20
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert "failed to collect stats. runner returned 2" in (tmp_path / "log.txt").read_text()
