"""Run a submission the way the popcorn runner's eval.py does (test, benchmark, leaderboard, profile), or a ranked submission's whole run (ranked).

    python -m tools.evaluate MODE [--submission FILE] [--shapes tests|benchmarks|all|M,N,K[,seed] ...
                                  | --shapes-file FILE] [--json FILE] [--plot FILE.png]
                                  [--clear-bytes N] [--max-wall S] [--max-calls N]

MODE is one of test, benchmark, leaderboard, profile, ranked. Default shapes: the test shapes
for `test`, the benchmark shapes otherwise; each shape gets the runner's seed for it (task.yml's),
or for a shape the task does not list 4242 + its index in the list, unless written as
M,N,K,seed (tools.cli). --shapes-file reads the runner's test-file format, one case
a line: `m: 8; n: 2112; k: 7168; seed: 124` (blank lines and lines starting with # skipped).

How the submission runs (this tool's reading of eval.py):
- In a fresh child process (`child_main` of this file), with its working directory a temporary
  folder holding copies of the submission (as submission.py), task.py and reference.py.
  `import submission` there loads the copy, so import-time work (compilation, pre-warm) is not
  timed. The project's own submission.py (the default) imports with the project root on
  sys.path. Any other file (e.g. a dist/submission.py bundle) is imported alone, as the runner
  has only that one file: after reference.py is loaded (it uses kernels.formats), the
  project's modules are hidden for the rest of the run (`hide_project_modules`: they import
  from the temporary folder only, whatever the install, an editable one included), so a file
  that still reaches them fails with ModuleNotFoundError.
- test: per shape one call on a clone of the inputs, checked with reference.check_implementation.
- benchmark: a warm-up (the timed loop on the first shape, up to 100 calls, unchecked), then
  per shape one checked call and up to 1000 timed calls on the same inputs.
- leaderboard: the same warm-up, then per shape one checked call and up to 100 timed calls;
  before each timed call the seed grows by 13 and inputs are generated afresh (new tensors),
  and every output is checked after its timing. A failure stops the run with its message.
- ranked: what a ranked submission runs, each step in a fresh process: per mode of test,
  benchmark, leaderboard (on the task's shapes for it), first the file run as a script
  (`python submission.py`, killed after 120 s, its outcome ignored: kernelbot's step before
  each mode), then the mode; the first mode that fails or passes the runner's limit (420, 420,
  600 s) ends it. A table gives each step's wall time and import time.
- profile: per shape one call under torch.profiler (CPU and GPU activities); prints the
  key_averages table sorted by self GPU time, then checks the output.
- Each timed call: torch.cuda.synchronize(); cache clear (--clear-bytes of fp32 on the GPU
  written with normal values, as the runner's clear_l2_cache_large writes 67 GB with
  torch.randn, into one buffer made at a process's first timed call: a clear freed and made
  anew each call lets the allocator split its cached block for the next shape's tensors, and
  the next clear then needs a second block, which a clear of the runner's size cannot have
  beside the first on an 80 GB card); start event
  record; out = custom_kernel(data); end event record; torch.cuda.synchronize(); the time is
  start.elapsed_time(end), reported in µs. The default 1 GiB is well over 4x the H200's 60 MB
  L2 (and 4x the MI355X's 256 MB Infinity Cache); a smaller size than 4x L2 gets a warning.
- Stopping rules per shape: at most 1000 timed calls (benchmark) or 100 (leaderboard, warm-up);
  from the third call on, stop when the relative error of the mean, (std/sqrt(n))/mean, drops
  below 0.001, or when the wall time of the timed loop passes --max-wall (default 10 s; the
  runner's own cap is 120 s, plus a cap on the summed event times, 50 s or 30 s, that
  µs-scale kernels never reach).
- Statistics: n, mean, std (sample, n-1), err = std/sqrt(n), best, worst, all in µs.

Output: one line per shape as it completes; for the timing modes a table (M N K, mean, best,
worst, n, the aiter baseline (docs/task.md) where the shape has one, mean/baseline) ending in a
geometric-mean row. --json writes the rows and the geomean; --plot a PNG bar chart (needs
matplotlib). Without a GPU, `test` runs through the Triton interpreter (slow) and the other
modes stop with exit code 2. Exit code 0 when every check passed, 1 when any failed, 2 for
usage errors and modes that cannot run here.
"""

import ast
import importlib.abc
import importlib.machinery
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .cli import (LEADERBOARD_SEED_STEP, ArgumentParser, UsageError, assign_seeds,
                  check_fault_variable, clear_bytes, non_negative_int, output_file, parse_shapes,
                  positive_float, usage_error)

ROOT = Path(__file__).resolve().parents[1]
MODES = ("test", "benchmark", "leaderboard", "profile", "ranked")
TIMING_MODES = ("benchmark", "leaderboard")
RANKED_MODES = ("test", "benchmark", "leaderboard")   # a ranked submission's eval.py runs, in order
# The runner's wall-time limit per eval.py run (task.yml's test_timeout, benchmark_timeout and
# ranked_timeout), and per run of the file as a script before each (kernelbot's), in s.
RUNNER_LIMITS_S = {"test": 420, "benchmark": 420, "leaderboard": 600}
SCRIPT_RUN_TIMEOUT_S = 120

# aiter's times on the MI355X for the ranked shapes (docs/task.md), in µs.
AITER_BASELINES_US = {
    (4, 2880, 512): 8.198,
    (16, 2112, 7168): 20.873,
    (32, 4096, 512): 9.462,
    (32, 2880, 512): 9.173,
    (64, 7168, 2048): 12.738,
    (256, 3072, 1536): 12.219,
}

MAX_CALLS = {"benchmark": 1000, "leaderboard": 100, "warmup": 100}
MIN_CALLS = 3
REL_ERR_TARGET = 0.001
DEFAULT_MAX_WALL_S = 10.0
DEFAULT_CLEAR_BYTES = 1 << 30
# The child: argv is (root, job, fd); the project root goes first on sys.path for tools.cli.
CHILD_PROGRAM = ("import sys; sys.path.insert(0, sys.argv[1]); from mxfp4_mm.tools.evaluate import "
                 "child_main; sys.exit(child_main(sys.argv[2], int(sys.argv[3])))")

_CASE_PART = re.compile(r"\s*([a-zA-Z_]\w*):\s*([+-]?[0-9]+)\s*")
_SPEC_KEYS = ("m", "n", "k", "seed")


# ----------------------------------------------------------------------------- shapes

def parse_test_file(text):
    """The runner's test-file format: `m: 8; n: 2112; k: 7168; seed: 124` per line."""
    cases = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        case = {}
        for part in line.split(";"):
            match = _CASE_PART.fullmatch(part)
            if not match:
                raise UsageError(f"shapes file line {number}: bad part {part!r} in {line!r}")
            key, value = match[1], int(match[2])
            if key not in _SPEC_KEYS:
                raise UsageError(f"shapes file line {number}: unknown key {key!r} "
                                 f"(expected {', '.join(_SPEC_KEYS)})")
            case[key] = value
        missing = [key for key in ("m", "n", "k") if key not in case]
        if missing:
            raise UsageError(f"shapes file line {number}: missing {', '.join(missing)}")
        cases.append((case["m"], case["n"], case["k"], case.get("seed")))
    if not cases:
        raise UsageError("shapes file holds no cases")
    return assign_seeds(cases)


# ----------------------------------------------------------------------------- statistics

def calculate_stats(durations):
    """Stats of a list of times (µs): n, mean, std (n-1), err = std/sqrt(n), best, worst."""
    n = len(durations)
    if n == 0:
        raise ValueError("no durations")
    mean = sum(durations) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in durations) / (n - 1)) if n > 1 else 0.0
    return {"n": n, "mean": mean, "std": std, "err": std / math.sqrt(n),
            "best": min(durations), "worst": max(durations)}


def should_stop(durations, elapsed_s, max_calls, max_wall_s=DEFAULT_MAX_WALL_S):
    """The stopping rule after each timed call: call cap; from MIN_CALLS on, error or wall time."""
    n = len(durations)
    if n >= max_calls:
        return True
    if n < MIN_CALLS:
        return False
    stats = calculate_stats(durations)
    if stats["mean"] <= 0 or stats["err"] / stats["mean"] < REL_ERR_TARGET:
        return True
    return elapsed_s > max_wall_s


def geomean(values):
    values = list(values)
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("geomean of non-positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(rows):
    """Geometric means: of the means over timed rows; of baselines and ratios over those with one."""
    timed = [row for row in rows if row.get("stats")]
    based = [row for row in timed if row.get("baseline_us")]
    return {
        "shapes": len(timed),
        "mean_us": geomean(row["stats"]["mean"] for row in timed),
        "baseline_shapes": len(based),
        "baseline_us": geomean(row["baseline_us"] for row in based),
        "ratio": geomean(row["ratio"] for row in based),
    }


def make_row(spec, ok, message="", stats=None):
    key = (spec["m"], spec["n"], spec["k"])
    baseline = AITER_BASELINES_US.get(key)
    row = dict(spec, ok=ok, message=message, stats=stats, baseline_us=baseline, ratio=None)
    if stats and baseline:
        row["ratio"] = stats["mean"] / baseline
    return row


def _num(value, width, digits=3):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def format_table(rows, summary):
    lines = [f"{'M':>5} {'N':>5} {'K':>5} {'mean µs':>9} {'best µs':>9} {'worst µs':>9} "
             f"{'n':>5} {'aiter µs':>9} {'ratio':>6}"]
    for row in rows:
        stats = row.get("stats")
        shape = f"{row['m']:>5} {row['n']:>5} {row['k']:>5}"
        if not stats:
            lines.append(f"{shape} {'FAIL':>9}")
            continue
        lines.append(f"{shape} {_num(stats['mean'], 9)} {_num(stats['best'], 9)} "
                     f"{_num(stats['worst'], 9)} {stats['n']:>5} {_num(row['baseline_us'], 9)} "
                     f"{_num(row['ratio'], 6)}")
    lines.append(f"{'geomean':<17} {_num(summary['mean_us'], 9)} {'':>9} {'':>9} "
                 f"{'':>5} {_num(summary['baseline_us'], 9)} "
                 f"{_num(summary['ratio'], 6)}")
    if summary["baseline_shapes"] != summary["shapes"]:
        lines.append(f"(aiter and ratio geomeans over the {summary['baseline_shapes']} of "
                     f"{summary['shapes']} shapes that have an aiter baseline)")
    return "\n".join(lines)


def _describe(spec):
    return f"{spec['m']:>5} {spec['n']:>5} {spec['k']:>5} seed {spec['seed']:>5}"


def write_plot(path, rows, summary, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [row for row in rows if row.get("stats")]
    labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in timed]
    means = [r["stats"]["mean"] for r in timed]
    lows = [r["stats"]["mean"] - r["stats"]["best"] for r in timed]
    highs = [r["stats"]["worst"] - r["stats"]["mean"] for r in timed]
    baselines = [r["baseline_us"] or 0.0 for r in timed]
    xs = range(len(timed))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(timed) + 2), 4.5))
    ax.bar([x - 0.2 for x in xs], means, 0.4, yerr=[lows, highs], capsize=3,
           label="this submission (mean; bars: best..worst)")
    ax.bar([x + 0.2 for x in xs], baselines, 0.4, label="aiter baseline (MI355X)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=20)
    ax.set_ylabel("µs")
    geo = summary["mean_us"]
    ax.set_title(f"{title}: geomean {geo:.3f} µs" if geo else title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- child process

def cache_clear_buffer(numel: int):
    """The cache clear's buffer: numel fp32 on the GPU, made once a process."""
    import torch
    return torch.empty(numel, dtype=torch.float32, device="cuda")


def _clone(data):
    return tuple(x.clone() if hasattr(x, "clone") else x for x in data)


def _error_text():
    lines = traceback.format_exc().strip().splitlines()
    return "raised " + " | ".join(lines[-3:])


def child_main(job_text, fd):
    job = json.loads(job_text)
    channel = os.fdopen(fd, "w")

    def send(kind, **fields):
        channel.write(json.dumps(dict(fields, type=kind)) + "\n")
        channel.flush()

    try:
        return _child_run(job, send)
    except BaseException:
        send("fatal", message=traceback.format_exc())
        return 1
    finally:
        channel.close()


def project_module_names(root) -> set:
    """The top-level modules of the project tree: its packages and its .py files, and for this
    project's own tree its installed name (tools.bundle.PACKAGE), which a wheel's tree lacks."""
    from .bundle import PACKAGE
    root = Path(root)
    return {path.stem for path in root.glob("*.py")} | \
        {path.parent.name for path in root.glob("*/__init__.py")} | \
        ({PACKAGE} if root.resolve() == ROOT else set())


class _FromFolderOnly(importlib.abc.MetaPathFinder):
    """Finds the project's top-level modules in one folder only, before any other finder (an
    editable install's finder included): the runner has only the files beside the submission."""

    def __init__(self, names, folder):
        self.names, self.folder = names, str(folder)

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [self.folder])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} (only the files beside the "
                                      f"submission can be imported, as on the runner)", name=name)
        return spec


def hide_project_modules(root, folder) -> None:
    """From now on in this process, the project's modules import only from `folder`: those
    already imported from elsewhere are forgotten, the root leaves sys.path and a finder that
    looks in `folder` alone goes first in sys.meta_path."""
    root, folder = Path(root).resolve(), Path(folder).resolve()
    names = project_module_names(root)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.split(".")[0] in names and not (file and Path(file).resolve().parent == folder):
            del sys.modules[name]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != root]
    sys.meta_path.insert(0, _FromFolderOnly(names, folder))


def _child_run(job, send):
    workdir, root = Path(job["workdir"]).resolve(), Path(job["root"]).resolve()
    isolated = job["isolated"]
    sys.path[:] = [str(workdir), str(root)] + \
        [p for p in sys.path if Path(p or ".").resolve() not in (workdir, root)]

    import random
    import torch
    random.seed(42)
    torch.manual_seed(42)

    import reference              # top-level name, as on the runner: the copy in workdir
    if isolated:
        hide_project_modules(root, workdir)
    start = time.perf_counter()
    import submission             # top-level name, as on the runner: the copy in workdir
    import_s = time.perf_counter() - start

    custom_kernel = submission.custom_kernel
    interpreting = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    gpu = torch.cuda.is_available() and not interpreting
    device, l2 = "cpu (Triton interpreter)" if interpreting else "cpu", 0
    if gpu:
        device = torch.cuda.get_device_name()
        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()),
                         "L2_cache_size", 0))
    send("ready", submission_file=submission.__file__, reference_file=reference.__file__,
         import_s=import_s, device=device, l2_bytes=l2, isolated=isolated)

    def sync():
        if gpu:
            torch.cuda.synchronize()

    def check(data, output):
        result = reference.check_implementation(data, output)
        return result if isinstance(result, tuple) else (not result, str(result))

    clear_numel = max(1, job["clear_bytes"] // 4)
    clear = []      # the cache clear's buffer, made at the first timed call

    def clear_caches():
        if not clear:
            clear.append(cache_clear_buffer(clear_numel))
        clear[0].normal_()

    def timed_calls(spec, recheck, max_calls):
        """One checked call, then the timed loop: (durations in µs, "") or (None, message)."""
        args = dict(spec)
        data = reference.generate_input(**args)
        check_copy = _clone(data)
        output = custom_kernel(data)
        sync()
        ok, message = check(check_copy, output)
        if not ok:
            return None, message
        del output
        durations = []
        loop_start = time.perf_counter()
        for call in range(max_calls):
            if recheck:
                args["seed"] += LEADERBOARD_SEED_STEP
                data = reference.generate_input(**args)
                check_copy = _clone(data)
            torch.cuda.synchronize()
            clear_caches()
            start_event = torch.cuda.Event(enable_timing=True)
            end_event = torch.cuda.Event(enable_timing=True)
            start_event.record()
            output = custom_kernel(data)
            end_event.record()
            torch.cuda.synchronize()
            if recheck:
                ok, message = check(check_copy, output)
                if not ok:
                    return None, f"timed call {call + 1} (seed {args['seed']}): {message}"
            del output
            durations.append(start_event.elapsed_time(end_event) * 1000.0)
            if should_stop(durations, time.perf_counter() - loop_start, max_calls,
                           job["max_wall_s"]):
                break
        return durations, ""

    mode, specs = job["mode"], job["specs"]
    if mode == "test":
        for index, spec in enumerate(specs):
            start = time.perf_counter()
            try:
                data = reference.generate_input(**spec)
                sync()
                output = custom_kernel(_clone(data))
                sync()
                ok, message = check(data, output)
            except Exception:
                ok, message = False, _error_text()
            send("result", index=index, ok=ok, message=message,
                 seconds=time.perf_counter() - start)
        return 0

    if mode == "profile":
        from torch.profiler import ProfilerActivity, profile
        for index, spec in enumerate(specs):
            table = ""
            try:
                data = reference.generate_input(**spec)
                sync()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    output = custom_kernel(data)
                    sync()
                table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=20)
                ok, message = check(data, output)
            except Exception:
                ok, message = False, _error_text()
            send("result", index=index, ok=ok, message=message, table=table)
        return 0

    max_calls = job["max_calls"] or MAX_CALLS[mode]
    try:
        durations, message = timed_calls(specs[0], False, job["max_calls"] or MAX_CALLS["warmup"])
    except Exception:
        durations, message = None, _error_text()
    send("warmup", stats=calculate_stats(durations) if durations else None, message=message)
    for index, spec in enumerate(specs):
        try:
            durations, message = timed_calls(spec, mode == "leaderboard", max_calls)
        except Exception:
            durations, message = None, _error_text()
        stats = calculate_stats(durations) if durations else None
        send("result", index=index, ok=stats is not None, message=message, stats=stats)
        if stats is None:
            break
    return 0


# ----------------------------------------------------------------------------- parent

def gpu_available():
    import torch
    return torch.cuda.is_available()


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed here "
                         "(pip install matplotlib, or pip install -e '.[plot]')")


def _bound_names(target) -> set:
    """The names an assignment target binds (an attribute or an item binds none)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*map(_bound_names, target.elts))
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return set()


def _top_level_names(tree: ast.Module) -> set:
    """The names a module binds at its top level: defs, classes, assignments, imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(*map(_bound_names, targets))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def check_standalone(submission) -> None:
    """The file must parse (a syntax error is one line here, not a traceback in the child) and
    define custom_kernel at its top level. A file outside the project root runs alone, as on
    the runner: refuse one that imports the project's packages (the unbundled submission.py),
    saying what to run instead."""
    from .bundle import PACKAGE, PROJECT_PACKAGES, project_module
    path = Path(submission).resolve()
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as error:
        raise UsageError(f"--submission: {submission} does not parse: line {error.lineno}: "
                         f"{error.msg}") from None
    if "custom_kernel" not in _top_level_names(tree):
        raise UsageError(f"--submission: {submission} defines no custom_kernel at its top "
                         f"level (the runner calls custom_kernel(data))")
    if path.parent == ROOT:
        return
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == PACKAGE:
            imported.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
    # the project's packages by their own names or through mxfp4_mm
    tops = {(project_module(name) or name).split(".")[0] for name in imported}
    found = sorted(tops & set(PROJECT_PACKAGES))
    if found:
        raise UsageError(f"--submission: {submission} imports the project's packages "
                         f"({', '.join(found)}), which the runner does not have; build the "
                         f"one-file submission with `python -m tools.bundle` and pass "
                         f"--submission dist/submission.py")


def _prepare_workdir(workdir, submission):
    shutil.copyfile(submission, workdir / "submission.py")
    for name in ("task.py", "reference.py"):
        shutil.copyfile(ROOT / name, workdir / name)


def run_child(mode, specs, submission, clear_bytes, max_wall_s, max_calls, env):
    """Run the submission in a fresh process; yields the child's messages as they arrive."""
    submission = Path(submission).resolve()
    isolated = submission.parent != ROOT
    with tempfile.TemporaryDirectory(prefix="evaluate-") as workdir:
        workdir = Path(workdir)
        _prepare_workdir(workdir, submission)
        job = {"mode": mode, "specs": specs, "workdir": str(workdir), "root": str(ROOT),
               "isolated": isolated, "clear_bytes": clear_bytes, "max_wall_s": max_wall_s,
               "max_calls": max_calls}
        read_fd, write_fd = os.pipe()
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", CHILD_PROGRAM, str(ROOT), json.dumps(job),
                 str(write_fd)], cwd=workdir, env=env, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd) as channel:
            for line in channel:
                try:
                    message = json.loads(line)
                except ValueError:          # a line cut short by a dying child
                    continue
                yield message
        code = process.wait()
        if code:
            yield {"type": "exit", "code": code}


def build_parser():
    parser = ArgumentParser("tools.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES,
                        help="test: one checked call per shape; benchmark: timed calls on one "
                             "input per shape; leaderboard: fresh inputs and a check for every "
                             "timed call; profile: one call per shape under torch.profiler; "
                             "ranked: test, benchmark and leaderboard as a ranked submission "
                             "runs them, each in a fresh process after a run of the file as a "
                             "script, with each step's wall and import time")
    parser.add_argument("--submission", default=str(ROOT / "submission.py"),
                        help="the file to run as submission.py (default: the project's)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--shapes", nargs="+", metavar="SHAPES",
                       help="tests, benchmarks, all, M,N,K or M,N,K,seed (several allowed)")
    group.add_argument("--shapes-file", metavar="FILE",
                       help="the runner's format: `m: 8; n: 2112; k: 7168; seed: 124` a line")
    parser.add_argument("--json", metavar="FILE", type=output_file,
                        help="write the rows and the geomean to this file")
    parser.add_argument("--plot", metavar="FILE", type=output_file,
                        help="write a PNG bar chart of the timings (needs matplotlib)")
    parser.add_argument("--clear-bytes", type=clear_bytes, default=DEFAULT_CLEAR_BYTES,
                        help=f"cache-clear buffer per timed call (default {DEFAULT_CLEAR_BYTES})")
    parser.add_argument("--max-wall", type=positive_float, default=DEFAULT_MAX_WALL_S,
                        help=f"seconds of timed loop per shape before stopping "
                             f"(default {DEFAULT_MAX_WALL_S:g})")
    parser.add_argument("--max-calls", type=non_negative_int, default=0,
                        help=f"timed calls per shape at most (default: {MAX_CALLS['benchmark']} "
                             f"benchmark, {MAX_CALLS['leaderboard']} leaderboard)")
    return parser


def resolve_specs(args):
    if args.shapes_file:
        try:
            text = Path(args.shapes_file).read_text()
        except OSError as error:
            raise UsageError(f"cannot read --shapes-file: {error}")
        return parse_test_file(text)
    return parse_shapes(args.shapes or (["tests"] if args.mode == "test" else ["benchmarks"]))


def run_mode(args, mode, specs, env) -> dict:
    """One mode in a fresh process, reported as it goes: {"code", "rows", "summary", "info",
    "tables"}."""
    print(f"{mode}: {len(specs)} shape(s), submission {args.submission}", flush=True)
    rows, tables, failures, info, fatal = [], [], 0, {}, False
    for message in run_child(mode, specs, args.submission, args.clear_bytes,
                             args.max_wall, args.max_calls, env):
        kind = message["type"]
        if kind == "ready":
            info = message
            how = ("alone (as on the runner)" if message["isolated"]
                   else "with the project root on sys.path")
            print(f"imported {message['submission_file']} {how} in {message['import_s']:.1f} s; "
                  f"device: {message['device']}", flush=True)
            if mode in TIMING_MODES:
                l2 = message["l2_bytes"]
                print(f"cache clear before each timed call: normal values written to "
                      f"{args.clear_bytes // 4} fp32 ({args.clear_bytes / 2**30:.2f} GiB, one "
                      f"buffer a process); device L2 "
                      f"{l2 / 2**20:.0f} MiB", flush=True)
                if l2 and args.clear_bytes < 4 * l2:
                    print(f"warning: --clear-bytes is under 4x the L2 ({4 * l2} bytes): inputs "
                          f"may stay cached between calls", flush=True)
        elif kind == "warmup":
            stats = message["stats"]
            text = (f"mean {stats['mean']:.3f} µs over {stats['n']} calls" if stats
                    else f"failed ({message['message']})")
            print(f"warm-up on {_describe(specs[0])}: {text}", flush=True)
        elif kind == "result":
            spec = specs[message["index"]]
            row = make_row(spec, message["ok"], message["message"], message.get("stats"))
            rows.append(row)
            failures += not row["ok"]
            if message.get("table"):
                tables.append(message["table"])
                print(f"\nprofile of {_describe(spec)}:\n{message['table']}", flush=True)
            stats = row["stats"]
            if not row["ok"]:
                text = "FAIL " + row["message"]
            elif stats:
                text = (f"pass; mean {stats['mean']:.3f} µs, best {stats['best']:.3f}, worst "
                        f"{stats['worst']:.3f}, n {stats['n']}, err "
                        f"{100 * stats['err'] / stats['mean']:.2f}%")
            else:
                text = "pass"
                if "seconds" in message:
                    text += f" ({message['seconds']:.1f} s)"
            print(f"{_describe(spec)}: {text}", flush=True)
        elif kind == "fatal":
            failures, fatal = failures + 1, True
            print(f"FAIL: the submission process failed:\n{message['message']}", flush=True)
            if "ModuleNotFoundError" in message["message"] and info.get("isolated", True):
                print("(a --submission file outside the project root is imported alone, as on "
                      "the runner: it must not import the project's packages)", flush=True)
        elif kind == "exit":
            if not fatal:
                failures += 1
                print(f"FAIL: the submission process exited with code {message['code']}",
                      flush=True)

    stopped = len(rows) < len(specs)
    if stopped and not failures:
        failures += 1
        print(f"FAIL: only {len(rows)} of {len(specs)} shapes reported", flush=True)
    summary = summarize(rows)
    if mode in TIMING_MODES and rows:
        print("\n" + format_table(rows, summary), flush=True)
    passed = sum(row["ok"] for row in rows)
    failed_rows = len(rows) - passed
    counts = (f"{passed} passed, {failed_rows} failed"
              + (f", {len(specs) - len(rows)} not run" if stopped else ""))
    if failures > failed_rows:
        counts += "; FAIL: the submission process failed (above)"
    print(f"\n{counts}", flush=True)
    code = 1 if failures else 0
    return {"code": code, "rows": rows, "summary": summary, "info": info, "tables": tables}


def run_as_script(submission, env):
    """The runner's step before each mode: `python submission.py` in a folder holding the file
    (as submission.py) and task.py, killed after SCRIPT_RUN_TIMEOUT_S; (seconds, how it ended).
    Its output passes through; its outcome, as on the runner, fails nothing."""
    submission = Path(submission).resolve()
    if submission.parent == ROOT:        # the project's own file needs the project's packages
        env = dict(env, PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])))
    with tempfile.TemporaryDirectory(prefix="evaluate-") as workdir:
        workdir = Path(workdir)
        _prepare_workdir(workdir, submission)
        start = time.perf_counter()
        try:
            code = subprocess.run([sys.executable, "submission.py"], cwd=workdir, env=env,
                                  timeout=SCRIPT_RUN_TIMEOUT_S).returncode
            ending = f"exit code {code}"
        except subprocess.TimeoutExpired:
            ending = f"killed at {SCRIPT_RUN_TIMEOUT_S} s, as the runner does"
        return time.perf_counter() - start, ending


def run_ranked(args, env) -> tuple:
    """A ranked submission as the runner runs it: per mode of RANKED_MODES, the file run as a
    script, then the mode in a fresh process on the task's shapes for it; the first mode that
    fails (or passes its limit) ends the run. (exit code, [steps], {mode: run_mode's report})."""
    steps, reports, code = [], {}, 0
    for mode in RANKED_MODES:
        print(f"\n== {mode}: `python submission.py` first, as the runner does", flush=True)
        seconds, ending = run_as_script(args.submission, env)
        print(f"`python submission.py`: {seconds:.1f} s, {ending}", flush=True)
        steps.append({"step": f"{mode}: python submission.py", "wall_s": seconds,
                      "import_s": None, "limit_s": SCRIPT_RUN_TIMEOUT_S, "ending": ending})
        start = time.perf_counter()
        report = run_mode(args, mode, parse_shapes(["tests" if mode == "test" else "benchmarks"]),
                          env)
        seconds, limit = time.perf_counter() - start, RUNNER_LIMITS_S[mode]
        reports[mode] = report
        steps.append({"step": f"{mode}: eval", "wall_s": seconds,
                      "import_s": report["info"].get("import_s"), "limit_s": limit,
                      "ending": f"exit code {report['code']}"})
        if seconds > limit:
            print(f"FAIL: {mode} took {seconds:.0f} s, over the runner's {limit} s", flush=True)
        if report["code"] or seconds > limit:
            code = 1
            break
    print(f"\n{'step':<30} {'wall s':>8} {'import s':>9} {'limit s':>8}", flush=True)
    for step in steps:
        import_s = "-" if step["import_s"] is None else f"{step['import_s']:.1f}"
        print(f"{step['step']:<30} {step['wall_s']:>8.1f} {import_s:>9} {step['limit_s']:>8}")
    print(f"{'total':<30} {sum(step['wall_s'] for step in steps):>8.1f}", flush=True)
    return code, steps, reports


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.mode == "ranked" and (args.shapes or args.shapes_file):
            raise UsageError("ranked runs the task's shapes (the tests, then the benchmarks); "
                             "drop --shapes and --shapes-file")
        specs = None if args.mode == "ranked" else resolve_specs(args)
        if args.plot and args.mode not in TIMING_MODES:
            raise UsageError("--plot needs a timing mode (benchmark or leaderboard)")
        if args.plot:
            require_matplotlib()
        if not Path(args.submission).is_file():
            raise UsageError(f"--submission: no such file {args.submission}")
        check_standalone(args.submission)
        check_fault_variable()
    except UsageError as error:
        return usage_error("tools.evaluate", error)

    env = dict(os.environ)
    if not gpu_available():
        if args.mode != "test":
            print(f"tools.evaluate: {args.mode} mode needs a GPU (CUDA or ROCm); none is "
                  f"available here. Only `test` runs without one (through the Triton "
                  f"interpreter).", file=sys.stderr)
            return 2
        env["TRITON_INTERPRET"] = "1"
        print("no GPU: running the submission through the Triton interpreter, which is slow "
              "(seconds to minutes per shape)", flush=True)
    elif args.mode != "test" and env.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("tools.evaluate: TRITON_INTERPRET is set; unset it to time compiled kernels",
              file=sys.stderr)
        return 2

    submission = str(Path(args.submission).resolve())
    if args.mode == "ranked":
        code, steps, reports = run_ranked(args, env)
        result = {"mode": "ranked", "submission": submission, "steps": steps,
                  "modes": {mode: {"rows": report["rows"], "geomean": report["summary"],
                                   "exit_code": report["code"]}
                            for mode, report in reports.items()},
                  "exit_code": code}
    else:
        report = run_mode(args, args.mode, specs, env)
        code, rows, summary, info = (report[key] for key in ("code", "rows", "summary", "info"))
        result = {"mode": args.mode, "submission": submission, "device": info.get("device"),
                  "clear_bytes": args.clear_bytes, "rows": rows, "geomean": summary,
                  "profiles": report["tables"], "exit_code": code}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)
    if args.plot:
        if summary["shapes"]:
            write_plot(args.plot, rows, summary, f"amd-mxfp4-mm {args.mode} on {info.get('device')}")
            print(f"wrote {args.plot}", flush=True)
        else:
            print("no timings to plot", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
