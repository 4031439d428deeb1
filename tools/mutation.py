"""Mutation testing of the suite: how many seeded one-line bugs do the tests catch?

    python -m tools.mutation [--workers 2] [--sample 300] [--budget-s 3300] [--only GLOB ...]
                             [--tests TEST ...] [--root PATH] [--no-kernels] [--keep]

Runs in a copy of the tree (the files git tracks or would track, taken from --root, default
this checkout), never in the tree itself; mutmut's copy holds it as mxfp4_mm/, so that mutmut's
names for the mutated functions are the modules the tests import:

1. The jit kernels, which mutmut cannot rewrite, get the hand-written mutants of
   mutation/kernel_mutants.toml: each applied to a fresh copy, its tests run, --workers at once.
2. mutmut (the `mutation` extra; config in pyproject.toml's [tool.mutmut]) mutates every
   function of launchers/, kernels/formats.py, kernels/layouts/, kernels/hopper_prepared_gemm.py
   and tools/{bundle,evaluate,check,fit,tune,bench,sm90_loop}.py but the @triton.jit ones, and
   runs, per mutant, only the tests that call the mutated function (mutmut's map of which tests
   reach which function; of its selection, or of --tests), --workers mutants at once.
--budget-s bounds the whole run: what it leaves unrun is reported as not run.

A surviving mutant listed in mutation/equivalent.toml (same function, same changed line) counts
as equivalent: it changes nothing the program does. The summary gives killed, survived,
equivalent, the score (killed over non-equivalent mutants) for the product (kernels/,
launchers/) and for the tools (tools/) apart, then for all, the wall time, each unlisted
survivor's diff, and the path of the equivalents file. Not part of CI (tens of minutes).
"""

import concurrent.futures
import fnmatch
import importlib.util
import json
import os
import random
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = ROOT / "mutation" / "equivalent.toml"
KERNEL_MUTANTS_FILE = ROOT / "mutation" / "kernel_mutants.toml"
KERNEL_TEST_TIMEOUT_S = 600
MUTMUT_STOP_S = 120     # how long mutmut, interrupted, may take to save what it has
DEFAULT_SAMPLE = 300
DEFAULT_BUDGET_S = 3300.0
PRODUCT = ("kernels", "launchers")   # the submission's code; everything else is tools
# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), the kills and the timeouts
KILLED_CODES = {1, 3, 24, -24, 152, 255, 36}
SURVIVED_CODES = {0, 5, 33}
SAMPLE_SEED = 2026
NO_MUTANT = "no-mutant-is-named-this*"
# mutmut's copy holds the tree as tree/PACKAGE (mutmut_layout); its mutant names start with it.
PACKAGE = "mxfp4_mm"
_SUMMARY_SCRIPT = """
import json, sys
from pathlib import Path
from mutmut.configuration import config
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.utils.file_utils import walk_mutatable_files
out = {}
for path in walk_mutatable_files():
    data = SourceFileMutationData(path=path)
    data.load()
    for name, code in data.exit_code_by_key.items():
        diff = get_diff_for_mutant(name, path=path) if code in (0, 5, 33) else ""
        out[name] = (code, diff)
json.dump(out, sys.stdout)
"""


def fail(message: str):
    print(f"tools.mutation: {message}", file=sys.stderr)
    sys.exit(2)


def copy_tree(root: Path, destination: Path) -> None:
    """The files git tracks or would track under root (no ignored ones) into destination, and a
    link to this checkout's side Triton install (tools.gfx950.cross_compile), which git ignores."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    link_side_tritons(destination)


def link_side_tritons(destination: Path) -> None:
    """destination/.triton: a link to this checkout's side Triton installs, where it has some."""
    if (ROOT / ".triton").is_dir():
        destination.mkdir(parents=True, exist_ok=True)
        (destination / ".triton").symlink_to(ROOT / ".triton")


def _selection_span(text: str) -> tuple:
    """(start, end) of the mutmut test selection's list in a pyproject.toml's text."""
    start = text.index("pytest_add_cli_args_test_selection = [")
    return start, text.index("]", start) + 1


def select_tests(tree: Path, tests) -> None:
    """tree's mutmut test selection replaced by `tests` (paths or node ids of tree's tests),
    refused where one is no file of tree."""
    missing = [test for test in tests if not (tree / test.partition("::")[0]).is_file()]
    if missing:
        fail(f"--tests: no such test file: {', '.join(missing)}")
    text = (tree / "pyproject.toml").read_text()
    start, end = _selection_span(text)
    listed = ", ".join(json.dumps(test) for test in tests)
    (tree / "pyproject.toml").write_text(
        text[:start] + f"pytest_add_cli_args_test_selection = [{listed}]" + text[end:])


def use_config_of_this_checkout(tree: Path) -> None:
    """This checkout's pyproject.toml in tree, its mutmut test selection cut to the tests that
    tree has."""
    text = (ROOT / "pyproject.toml").read_text()
    start, end = _selection_span(text)
    selection = tomllib.loads(text[start:end])["pytest_add_cli_args_test_selection"]

    def present(test):
        path, _, function = test.partition("::")
        return (tree / path).is_file() and (not function or
                                            f"def {function}(" in (tree / path).read_text())
    kept = ", ".join(json.dumps(test) for test in selection if present(test))
    text = text[:start] + f"pytest_add_cli_args_test_selection = [{kept}]" + text[end:]
    (tree / "pyproject.toml").write_text(text)


def mutmut_layout(tree: Path) -> None:
    """tree/PACKAGE's pyproject.toml moved up into tree, each path in its pytest and mutmut
    tables that names a file of tree/PACKAGE prefixed with PACKAGE: mutmut, run in tree, names
    a mutant by its file's path (mxfp4_mm/launchers/tuner.py: mxfp4_mm.launchers.tuner), which
    is the module the tests import, and runs the tests by their ids from tree."""
    text = (tree / PACKAGE / "pyproject.toml").read_text()
    (tree / PACKAGE / "pyproject.toml").unlink()
    start = text.index("[tool.pytest.ini_options]")

    def prefixed(match):
        first = match[1].split("::")[0].split("/")[0]
        return f'"{PACKAGE}/{match[1]}"' if first and (tree / PACKAGE / first).exists() \
            else match[0]
    tail = re.sub(r'"([^"\n]*)"', prefixed, text[start:])
    # mutmut runs the tests in its own copy, to which it adds tests/ (not there here); child
    # processes of the tests, in the copy's root, find mxfp4_mm there through its folder
    tail = tail.replace("also_copy = [", f'also_copy = ["{PACKAGE}/tests/", "{PACKAGE}/{PACKAGE}/", ', 1)
    (tree / "pyproject.toml").write_text(text[:start] + tail)


def changed_line(diff: str) -> str:
    """The first added line of a mutmut diff, stripped: what the mutant changed."""
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


def function_of(mutant: str) -> str:
    """"launchers.tuner.x_select__mutmut_3" -> "launchers.tuner.x_select"."""
    return mutant.rpartition("__mutmut_")[0]


def load_equivalents(path: Path) -> dict:
    """{(function, changed line): reason} from the equivalents file."""
    entries = tomllib.loads(path.read_text()).get("mutant", []) if path.exists() else []
    return {(entry["function"], entry["change"].strip()): entry["reason"] for entry in entries}


def area(module: str) -> str:
    """"product" for a module (dotted, or a file path) of kernels/ or launchers/, else
    "tools"."""
    return "product" if module.replace("/", ".").split(".")[0] in PRODUCT else "tools"


# mutmut's words for a run that could not run the tests in its copy
MUTMUT_SETUP_FAILURES = ("failed to collect stats", "Failed to run clean test",
                         "Failed to run pytest with args")


def _interruptible():
    """In mutmut's process, before it starts: SIGINT's default action, which a shell's
    background job (`... &`, nohup) inherits as ignored, so that the deadline's SIGINT stops
    it as Ctrl-C does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _mutmut(tree: Path, workers: int, names: list, log, deadline=None) -> bool:
    """mutmut run in tree, in a process group of its own; at the deadline (monotonic s)
    interrupted as Ctrl-C interrupts it (it keeps what it has), and whatever it forked that
    outlives it ended (an interrupted run leaves the child running its tests). Returns whether
    the deadline cut it short. Fails where mutmut, not cut short, says in this run's output
    that it could not run the tests in its copy."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONDONTWRITEBYTECODE="1")
    log.flush()
    start = os.path.getsize(log.name)
    process = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children",
                                str(workers), *(f"{PACKAGE}.{name}" for name in names)],
                               cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=_interruptible)
    cut = False
    try:
        process.wait(None if deadline is None else max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        cut = True
    finally:                          # also where tools.mutation itself is interrupted
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(MUTMUT_STOP_S)
            except subprocess.TimeoutExpired:
                pass                  # ended with the rest of its group below
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:    # nothing of it left
            pass
        process.wait()
    with open(log.name, "rb") as output:
        output.seek(start)
        text = output.read().decode(errors="replace")
    for failure in MUTMUT_SETUP_FAILURES:
        if failure in text and not cut:
            fail(f"mutmut: {failure} (the tests fail in mutmut's copy; see {log.name})")
    return cut


def _results(tree: Path, log) -> dict:
    """{mutant: (exit code or None, diff of a survivor)} of every mutant mutmut generated."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    listed = subprocess.run([sys.executable, "-c", _SUMMARY_SCRIPT], cwd=tree, env=env,
                            capture_output=True, text=True)
    if listed.returncode:
        fail(f"reading mutmut's results failed (see {log.name}): {listed.stderr.strip()[-300:]}")
    return {name.removeprefix(f"{PACKAGE}."): tuple(value)
            for name, value in json.loads(listed.stdout).items()}


def selected(name: str, only) -> bool:
    """Whether mutant `name` matches one of the globs `only` (any mutant when there are
    none)."""
    return not only or any(fnmatch.fnmatch(name, glob) for glob in only)


def run_mutmut(tree: Path, workers: int, only, sample: int, log, deadline=None) -> dict:
    """{mutant: (exit code, diff)} after mutmut ran in tree: every mutant matching one of
    the globs `only` (all when there are none), or a fixed random sample of `sample` of them;
    those the deadline left unrun have exit code None."""
    if not sample:
        _mutmut(tree, workers, list(only), log, deadline)
        return {name: result for name, result in _results(tree, log).items()
                if selected(name, only)}
    cut = _mutmut(tree, workers, [NO_MUTANT], log, deadline)   # the mutants and the test map
    names = sorted(name for name in _results(tree, log) if selected(name, only))
    chosen = random.Random(SAMPLE_SEED).sample(names, min(sample, len(names)))
    print(f"tools.mutation: {len(chosen)} of {len(names)} mutants sampled", file=log, flush=True)
    if not cut:
        _mutmut(tree, workers, chosen, log, deadline)
    results = _results(tree, log)
    return {name: results[name] for name in chosen}


def _run_kernel_mutant(root: Path, work: Path, entry: dict, deadline) -> tuple:
    """(result, log text) of one kernel mutant on its own fresh copy of root: "killed",
    "survived", "stale", or None when the deadline came first."""
    if deadline is not None and time.monotonic() >= deadline:
        return None, ""
    tree = work / f"kernel-{entry['id']}"
    copy_tree(root, tree)
    try:
        target = tree / entry["file"]
        source = target.read_text()
        if source.count(entry["find"]) != 1:
            return "stale", ""
        target.write_text(source.replace(entry["find"], entry["replace"]))
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                   *entry["tests"]]
        timeout = KERNEL_TEST_TIMEOUT_S if deadline is None else max(
            1.0, min(KERNEL_TEST_TIMEOUT_S, deadline - time.monotonic()))
        try:
            done = subprocess.run(command, cwd=tree, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", f"--- kernel mutant {entry['id']}: timed out\n"
        # 0: the tests pass; 4, 5: none of them exists in this tree
        result = "survived" if done.returncode in (0, 4, 5) else "killed"
        return result, (f"--- kernel mutant {entry['id']}: {' '.join(command)}\n"
                        + done.stdout + done.stderr)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def run_kernel_mutants(root: Path, work: Path, mutants: list, log, workers: int = 1,
                       deadline=None) -> dict:
    """{mutant id: "killed" | "survived" | "stale" | None (not run: the deadline came first)},
    `workers` mutants at once, each on a fresh copy of root."""
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
        futures = {entry["id"]: pool.submit(_run_kernel_mutant, root, work, entry, deadline)
                   for entry in mutants}
        results = {}
        for name, future in futures.items():
            results[name], text = future.result()
            log.write(text)
    log.flush()
    return results


def _tally(results: dict, kernel_results: dict, equivalents: dict) -> dict:
    """Counts of one set of mutants: killed, survived (not listed as equivalent), equivalent,
    not run, other, and the survivors' names."""
    survivors = {name: diff for name, (code, diff) in results.items() if code in SURVIVED_CODES}
    equivalent = {name for name, diff in survivors.items()
                  if (function_of(name), changed_line(diff)) in equivalents}
    kernel_survived = sorted(k for k, v in kernel_results.items() if v == "survived")
    killed = sum(code in KILLED_CODES for code, _ in results.values())
    not_run = sum(code is None for code, _ in results.values())
    return dict(killed=killed + sum(v == "killed" for v in kernel_results.values()),
                kernel_killed=sum(v == "killed" for v in kernel_results.values()),
                survived=len(survivors) - len(equivalent) + len(kernel_survived),
                equivalent=len(equivalent),
                not_run=not_run + sum(v is None for v in kernel_results.values()),
                other=len(results) - killed - len(survivors) - not_run,
                stale=sorted(k for k, v in kernel_results.items() if v == "stale"),
                survivors=sorted(set(survivors) - equivalent), kernel_survivors=kernel_survived)


def _score(tally: dict) -> float:
    return 100.0 * tally["killed"] / max(1, tally["killed"] + tally["survived"])


def summarize(results: dict, kernel_results: dict, equivalents: dict, wall_s: float,
              kernel_files=None) -> tuple:
    """(summary lines, {"product": score, "tools": score, "all": score} in %). kernel_files:
    {kernel mutant id: the file it changes} (default: all of kernels/)."""
    kernel_files = kernel_files or {}
    tallies = {}
    for name in ("product", "tools"):
        tallies[name] = _tally(
            {m: r for m, r in results.items() if area(m) == name},
            {k: v for k, v in kernel_results.items() if area(kernel_files.get(k, "kernels")) == name},
            equivalents)
    tallies["all"] = _tally(results, kernel_results, equivalents)
    lines = [f"mutants: {len(results)} (mutmut) + {len(kernel_results)} (kernels)"]
    titles = {"product": "product (kernels/, launchers/)", "tools": "tools (tools/)", "all": "all"}
    for name, tally in tallies.items():
        lines.append(f"{titles[name]}: score {_score(tally):.1f} % of non-equivalent mutants "
                     f"killed; killed: {tally['killed']} (kernels {tally['kernel_killed']}), "
                     f"survived: {tally['survived']}, equivalent: {tally['equivalent']}, not run "
                     f"(budget): {tally['not_run']}, other (suspicious/segfault/skipped): "
                     f"{tally['other']}"
                     + (f", stale kernel mutants: {', '.join(tally['stale'])}"
                        if tally["stale"] else ""))
    lines += [f"wall time: {wall_s:.0f} s", f"equivalents file: {EQUIVALENT_FILE}"]
    survivors = {name: diff for name, (code, diff) in results.items()}
    for name in tallies["all"]["survivors"]:
        lines += [f"survived ({area(name)}): {name}",
                  *("    " + line for line in survivors[name].splitlines()
                    if line[:1] in "+-" and line[:3] not in ("+++", "---"))]
    lines += [f"survived (product): kernel mutant {name}"
              for name in tallies["all"]["kernel_survivors"]]
    return lines, {name: _score(tally) for name, tally in tallies.items()}


def git_checkout(word: str) -> Path:
    """argparse type of --root: a folder holding a git checkout."""
    import argparse
    root = Path(word).resolve()
    if not (root / ".git").exists():
        raise argparse.ArgumentTypeError(f"{root} is not a git checkout")
    return root


def build_parser():
    from .cli import ArgumentParser, non_negative_int, positive_float, positive_int
    parser = ArgumentParser("tools.mutation", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=git_checkout, default=ROOT,
                        help="the tree to test (default this checkout); its mutmut config, kernel "
                             "mutants and equivalents are this checkout's")
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="mutants run at once, mutmut's and the kernels' (default 2)")
    parser.add_argument("--only", nargs="+", default=[], metavar="GLOB",
                        help="mutmut mutant-name globs, e.g. 'launchers.tuner.*' "
                             "'tools.bench.x_host_*' (a mutant matching any of them runs; skips "
                             "the kernels)")
    parser.add_argument("--sample", type=non_negative_int, default=DEFAULT_SAMPLE,
                        help=f"run a fixed random sample of this many mutmut mutants (default "
                             f"{DEFAULT_SAMPLE}; 0: all of them, about 13,000, hours on 2 cores)")
    parser.add_argument("--budget-s", type=positive_float, default=DEFAULT_BUDGET_S,
                        help=f"stop after this many seconds in all, keeping what ran (default "
                             f"{DEFAULT_BUDGET_S:.0f}; the mutants left, the slowest mutmut ones "
                             f"among them, are reported not run)")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="the tests mutmut may run (paths or node ids), instead of "
                             "[tool.mutmut]'s selection: per mutant those of them that call its "
                             "function; fewer tests, a faster run and a lower score at most")
    parser.add_argument("--no-kernels", action="store_true", help="skip the kernel mutants")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    root = args.root.resolve()
    if importlib.util.find_spec("mutmut") is None:
        fail("mutmut is not installed here: pip install -e \".[mutation]\" (docs/testing.md)")
    work = Path(tempfile.mkdtemp(prefix="mxfp4-mutation-"))
    log_path = work / "log.txt"
    started = time.monotonic()
    tree = work / "tree"
    copy_tree(root, tree / PACKAGE)
    if root != ROOT:   # another tree (a baseline) is measured with this checkout's config
        use_config_of_this_checkout(tree / PACKAGE)
    if args.tests:
        select_tests(tree / PACKAGE, args.tests)
    mutmut_layout(tree)
    link_side_tritons(tree / "mutants" / PACKAGE)     # mutmut's own copy, where the tests run
    print(f"tools.mutation: working in {work} (log {log_path})", flush=True)
    with open(log_path, "w") as log:
        deadline = started + args.budget_s
        kernel_mutants = [] if args.only or args.no_kernels else \
            tomllib.loads(KERNEL_MUTANTS_FILE.read_text())["mutant"]
        kernel_results = run_kernel_mutants(root, work, kernel_mutants, log, args.workers,
                                            deadline)
        results = run_mutmut(tree, args.workers, args.only, args.sample, log, deadline)
    lines, _ = summarize(results, kernel_results, load_equivalents(EQUIVALENT_FILE),
                         time.monotonic() - started,
                         {entry["id"]: entry["file"] for entry in kernel_mutants})
    if args.tests:
        lines.insert(1, f"tests: {' '.join(args.tests)} (not [tool.mutmut]'s selection)")
    (work / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not args.keep:
        shutil.rmtree(tree, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
