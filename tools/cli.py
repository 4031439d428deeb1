"""What the tools' command lines share: the --shapes words, usage errors and their exit code.

Every tool that takes shapes takes the same words: `tests`, `benchmarks` or `all` (the task's
shape sets, launchers.configs) and `M,N,K`, several at once; tools.evaluate also takes
`M,N,K,seed` (and tools.check). A shape given without a seed takes the runner's seed for it
(task.yml's, launchers.task_shapes.TASK_SEEDS) where it is a task shape, else SEED_BASE + its index
in the list. A shape the input format cannot hold (K not a multiple of 64, N not a multiple
of 16, a size below 1) is a usage error: one line on stderr and exit code 2.

Every tool's parser is an ArgumentParser of this module, so argparse's own errors (an unknown
option, a value of the wrong type) are such a line too, and `build_parser()` in each tool gives
its parser without running it (tools.docs lists the options from it). Option values are checked
where they are parsed, by the argparse types here (counts, seconds, a file or a folder to
write), so that a bad one is refused before any work starts.
"""

import argparse
import os
import re
import sys
from pathlib import Path

SHAPE_SETS = ("tests", "benchmarks", "all")
SHAPES_HELP = "tests, benchmarks, all or M,N,K (several allowed)"
SEED_BASE = 4242          # default seed of shape i when it is no task shape: SEED_BASE + i
LEADERBOARD_SEED_STEP = 13   # the runner's leaderboard mode: seed growth before each timed call
USAGE_EXIT_CODE = 2


class UsageError(Exception):
    """A bad command line or shapes file: reported in one line with exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the tools' prog, `python -m tools.NAME`, and their errors: one line on
    stderr, `tools.NAME: message`, exit code 2 (where argparse would print its usage block
    first; --help still prints the whole usage)."""

    def __init__(self, name: str, **kwargs):
        super().__init__(prog=f"python -m {name}", **kwargs)
        self.name = name
        # A value such as -4,64,256 is an argument (a shape, refused as one), not an option.
        self._negative_number_matcher = re.compile(r"^-\.?\d[\d,.]*$")

    def error(self, message):
        self.exit(USAGE_EXIT_CODE, f"{self.name}: {message}\n")


def _number(word: str, kind, least, above: bool = False):
    """word as kind (int or float), at least `least` (above it with above=True); else an
    argparse error naming what was expected."""
    noun = "an integer" if kind is int else "a number"
    bound = f"above {least}" if above else f"of at least {least}"
    try:
        value = kind(word)
    except ValueError:
        value = None
    if value is None or not value >= least or (above and value == least):
        raise argparse.ArgumentTypeError(f"expected {noun} {bound}, got {word!r}")
    return value


def positive_int(word: str) -> int:
    return _number(word, int, 1)


def non_negative_int(word: str) -> int:
    return _number(word, int, 0)


def positive_float(word: str) -> float:
    return _number(word, float, 0, above=True)


def clear_bytes(word: str) -> int:
    """argparse type of --clear-bytes: the cache-clear buffer holds at least one fp32."""
    return _number(word, int, 4)


def _writable_folder(folder: Path, word: str) -> None:
    """folder, or its nearest existing parent where it is still to be made, must be a folder
    this process may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{word}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{word}: {existing} is not writable")


def output_file(word: str, make_folders: bool = False) -> str:
    """argparse type of a file a tool writes, checked before the tool's work starts: not a
    directory, in a writable folder (with make_folders, one the tool may still make)."""
    path = Path(word)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{word} is a directory; name a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{word} is not writable")
    folder = path.parent
    if not make_folders and not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{word}: {folder} is not a directory")
    _writable_folder(folder, word)
    return word


def output_folder(word: str) -> str:
    """argparse type of a folder a tool writes files into (made if missing)."""
    _writable_folder(Path(word), word)
    return word


def usage_error(prog: str, error) -> int:
    """Print `prog: error` on stderr (prog: "tools.NAME", every tool's prefix); the exit code
    of a usage error."""
    print(f"{prog}: {error}", file=sys.stderr)
    return USAGE_EXIT_CODE


def check_fault_variable() -> None:
    """MXFP4_MM_FAULT (launchers.ladder) parsed before anything is built, so that a bad value
    is a usage error rather than a traceback from deep in the first call."""
    from mxfp4_mm.launchers.ladder import FAULT_VARIABLE, parse_faults
    try:
        parse_faults(os.environ.get(FAULT_VARIABLE, ""))
    except ValueError as error:
        raise UsageError(str(error)) from None


def check_shape(m: int, n: int, k: int) -> None:
    from mxfp4_mm.kernels.formats import WEIGHT_TILE_N
    from mxfp4_mm.launchers.inputs import K_MULTIPLE
    if m < 1 or n < 1 or k < 1:
        raise UsageError(f"shape {m},{n},{k}: M, N and K must be positive")
    if k % K_MULTIPLE:
        raise UsageError(f"shape {m},{n},{k}: K must be a multiple of {K_MULTIPLE}")
    if n % WEIGHT_TILE_N:
        raise UsageError(f"shape {m},{n},{k}: N must be a multiple of {WEIGHT_TILE_N} "
                         f"(the weight's (16, 16) shuffle)")


def shape_cases(words, with_seed: bool = False, option: str = "--shapes") -> list:
    """--shapes words (given to `option`) -> [(m, n, k, seed or None)], every shape checked."""
    from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES, TASK_SHAPES, TEST_SHAPES
    named = {"tests": TEST_SHAPES, "benchmarks": BENCHMARK_SHAPES, "all": TASK_SHAPES}
    sizes = (3, 4) if with_seed else (3,)
    cases = []
    for word in words:
        if word in named:
            cases.extend((m, n, k, None) for m, n, k in named[word])
            continue
        try:
            values = [int(x) for x in word.split(",")]
        except ValueError:
            values = []
        if len(values) not in sizes:
            forms = "M,N,K or M,N,K,seed" if with_seed else "M,N,K"
            raise UsageError(f"{option}: expected one of {', '.join(SHAPE_SETS)} or {forms}; "
                             f"got {word!r}")
        check_shape(*values[:3])
        cases.append(tuple(values[:3]) + (values[3] if len(values) == 4 else None,))
    return cases


def default_seed(m: int, n: int, k: int, index: int) -> int:
    """The runner's seed of a task shape, else SEED_BASE + its index in the list."""
    from mxfp4_mm.launchers.task_shapes import TASK_SEEDS
    return TASK_SEEDS.get((m, n, k), SEED_BASE + index)


def assign_seeds(cases) -> list:
    """[(m, n, k, seed or None)] -> [{"m", "n", "k", "seed"}]; a missing seed is default_seed's."""
    specs = []
    for index, (m, n, k, seed) in enumerate(cases):
        check_shape(m, n, k)
        specs.append({"m": m, "n": n, "k": k,
                      "seed": default_seed(m, n, k, index) if seed is None else seed})
    return specs


def parse_shapes(words) -> list:
    """--shapes words (M,N,K,seed allowed) -> [{"m", "n", "k", "seed"}]."""
    return assign_seeds(shape_cases(words, with_seed=True))


def parse_plain_shapes(words, option: str = "--shapes") -> list:
    """--shapes words -> [(m, n, k)], for tools that choose their own seeds."""
    return [case[:3] for case in shape_cases(words, option=option)]


MODEL_SHAPES_HELP = ("tests, benchmarks, all, M,N,K, or N,K and model names "
                     "(tools/model_shapes.py: {}) taken with each M of --m")


def parse_m_list(text: str) -> tuple:
    """--m's value, e.g. "1,8,32" -> (1, 8, 32)."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers such as 1,8,32; got {text!r}")
    return values


def parse_model_shapes(words, ms, option: str = "--shapes") -> list:
    """`option`'s words, where a model name or N,K stands for (M, N, K) with each M of `ms`,
    the others as parse_plain_shapes -> [(m, n, k)], each once, in order."""
    from .model_shapes import MODEL_LAYERS, model_pairs
    found = []
    for word in words:
        pairs = model_pairs([word]) if word in MODEL_LAYERS else None
        if pairs is None and word.count(",") == 1:
            try:
                pairs = [tuple(int(x) for x in word.split(","))]
            except ValueError:
                pairs = None
        if pairs is None:
            try:
                shapes = parse_plain_shapes([word], option)
            except UsageError:
                models = ", ".join(MODEL_LAYERS)
                raise UsageError(f"{option}: expected one of {', '.join(SHAPE_SETS)}, M,N,K, "
                                 f"N,K or a model ({models}); got {word!r}") from None
        else:
            for n, k in pairs:
                try:
                    check_shape(1, n, k)
                except UsageError as error:
                    raise UsageError(f"N,K {n},{k}: {str(error).split(': ', 1)[1]}") from None
            shapes = [(m, n, k) for n, k in pairs for m in ms]
        for shape in shapes:
            check_shape(*shape)
            if shape not in found:
                found.append(shape)
    return found
