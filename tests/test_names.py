"""The project's one top-level name, mxfp4_mm, beside another distribution named like one of the
checkout's folders: a stand-in for Hugging Face's `kernels` (transformers imports it when it is
installed), in a folder on PYTHONPATH. From the checkout's root and from an installed wheel,
`from kernels import CUDAProperties` gets the stand-in, whether the project was imported before
or not; the project's op, its layer and every tool work beside it; the wheel adds mxfp4_mm alone
to the folder it is installed into. Inside the package, a reader of the import graph maps every
project import to a file."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = '''"""A stand-in for Hugging Face's kernels."""
__version__ = "0.0.1"


class CUDAProperties:
    pass
'''
# The root's commands (tools.timing, a library, says so when run), named as `python -m` takes
# them from the root.
TOOLS = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts)
               for path in (ROOT / "tools").rglob("*.py")
               if 'if __name__ == "__main__":' in path.read_text() and
               "ArgumentParser(" in path.read_text())

# argv: where the stand-in's folder is, whether the project is imported first, then the tools
# to run with --help. The stand-in is the module the name `kernels` gives, found and versioned
# as transformers finds it (importlib.util.find_spec, then importlib.metadata).
CLIENT = """# top-level name: another distribution's kernels, imported as transformers does
import contextlib, importlib.metadata, importlib.util, io, os, runpy, sys
os.environ["MXFP4_MM_QUIET"] = "1"
stand_in, ours_first, tools = sys.argv[1], sys.argv[2] == "ours-first", sys.argv[3:]


def the_stand_in():
    assert importlib.util.find_spec("kernels") is not None
    assert importlib.metadata.version("kernels") == "0.0.1"
    from kernels import CUDAProperties
    import kernels
    assert kernels.__file__.startswith(stand_in), kernels.__file__
    assert CUDAProperties.__module__ == "kernels"


if not ours_first:
    the_stand_in()
import torch
import mxfp4_mm.launchers
from mxfp4_mm import reference
from mxfp4_mm.kernels.formats import prepare_weight
from mxfp4_mm.launchers.linear import MXFP4Linear
print("mxfp4_mm from", os.path.dirname(mxfp4_mm.launchers.__file__))
the_stand_in()

interpreting = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
device = "cuda" if torch.cuda.is_available() and not interpreting else "cpu"
data = reference.generate_input(2, 32, 64, seed=1, device=device)
a, _, _, b_shuffle, b_scale_sh = data
c = torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh)
ok, message = reference.check_implementation(data, c)
assert ok, message
linear = torch.nn.Linear(64, 32, dtype=torch.bfloat16, device=device)
layer = MXFP4Linear.from_linear(linear)
weight = prepare_weight(linear.weight.detach())
with torch.no_grad():
    assert torch.equal(layer(a), torch.ops.mxfp4_mm.gemm(a, *weight) + linear.bias)
print("op and layer: ok")

for tool in tools:
    sys.argv = [tool, "--help"]
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        try:
            runpy.run_module(tool, run_name="__main__", alter_sys=True)
        except SystemExit as done:
            assert done.code in (0, None), (tool, done.code)
    assert "usage:" in shown.getvalue(), tool
    print(tool, "--help: ok")
the_stand_in()
"""


def write_stand_in(folder: Path) -> Path:
    """An installed distribution named kernels: its package and its metadata."""
    (folder / "kernels").mkdir(parents=True)
    (folder / "kernels" / "__init__.py").write_text(STAND_IN)
    (folder / "kernels-0.0.1.dist-info").mkdir()
    (folder / "kernels-0.0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kernels\nVersion: 0.0.1\n")
    return folder


def run_client(cwd, pythonpath, stand_in, ours_first, tools):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
    done = subprocess.run([sys.executable, "-c", CLIENT, str(stand_in),
                           "ours-first" if ours_first else "stand-in-first", *tools],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_every_tool_is_found():
    assert {"tools.check", "tools.bundle", "tools.evaluate", "tools.gfx950.cross_compile"} <= \
        set(TOOLS)


def test_from_the_root_kernels_is_the_other_distribution_and_the_project_works(tmp_path):
    stand_in = write_stand_in(tmp_path / "site")
    out = run_client(ROOT, [stand_in], stand_in, True, TOOLS)
    assert f"mxfp4_mm from {ROOT / 'launchers'}" in out
    assert out.count("--help: ok") == len(TOOLS)
    run_client(ROOT, [stand_in], stand_in, False, [])


def test_from_the_root_the_tests_collect_beside_the_other_distribution(tmp_path):
    """README's second command, as far as its imports go."""
    stand_in = write_stand_in(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=str(stand_in))
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "tests"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_without_another_distribution_the_checkouts_kernels_stays(tmp_path):
    """Where nothing else is named kernels, the name stays the folder's (as before), and
    importing it loads nothing of the project's. Without site-packages (`-S`), since the test
    extra's transformers installs another distribution named kernels there."""
    code = ("# top-level name: the checkout's own folder\nimport sys, kernels; print(kernels.__file__); "
            "print(sorted(m for m in sys.modules if m.startswith(('mxfp4_mm.', 'kernels.'))))")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(ROOT / "kernels" / "__init__.py"), "[]"]


@pytest.mark.parametrize("other_distribution", [True, False])
def test_importing_kernels_from_the_root_leaves_sys_path_in_its_order(tmp_path,
                                                                      other_distribution):
    """step_aside takes the root's entries (here two: the script's folder and PYTHONPATH's)
    off sys.path while it looks for another kernels and puts each back in its place."""
    pythonpath = [ROOT] + ([write_stand_in(tmp_path / "site")] if other_distribution else [])
    code = ("# top-level name: the checkout's own folder, or another distribution's\n"
            "import sys; before = list(sys.path); import kernels; print(kernels.__file__); "
            "print(sys.path == before)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    found = pythonpath[-1] if other_distribution else ROOT
    assert done.stdout.splitlines() == [str(found / "kernels" / "__init__.py"), "True"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The project's wheel, built offline from a copy of the tree (setuptools from the test
    extra) and installed with pip into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for path in ROOT.iterdir():
        if path.name in ("pyproject.toml", "README.md", "LICENSE") or \
                (path.suffix == ".py" and path.is_file()):
            (source / path.name).write_bytes(path.read_bytes())
        elif (path / "__init__.py").is_file():
            subprocess.run(["cp", "-r", str(path), str(source / path.name)], check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-w", str(work / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    target = work / "site-packages"
    wheel, = (work / "dist").glob("*.whl")
    subprocess.run(pip + ["install", "--no-deps", "--no-index", "--target", str(target),
                          str(wheel)], check=True, capture_output=True, timeout=300)
    return target


def test_the_wheel_adds_only_mxfp4_mm(installed):
    names = {path.name for path in installed.iterdir()}
    assert {name for name in names if not name.endswith(".dist-info")} == {"mxfp4_mm"}
    assert [name for name in names if name.endswith(".dist-info")][0].startswith("mxfp4_mm-")
    package = {path.name for path in (installed / "mxfp4_mm").iterdir()}
    assert {"kernels", "launchers", "tools", "submission.py", "reference.py", "task.py"} <= package
    assert "mxfp4_mm" not in package and "tests" not in package and "__init__.py" not in package


def test_from_the_wheel_kernels_is_the_other_distribution_and_the_project_works(installed,
                                                                                tmp_path):
    stand_in = write_stand_in(tmp_path / "site")
    tools = [f"mxfp4_mm.{tool}" for tool in TOOLS]
    out = run_client(tmp_path, [installed, stand_in], stand_in, True, tools)
    assert f"mxfp4_mm from {installed / 'mxfp4_mm' / 'launchers'}" in out
    assert out.count("--help: ok") == len(tools)


# ---------------------------------------------------------------------------------------
# The package's imports as an import-graph reader sees them: the reader maps a relative import
# to a file by the importing file's folder, an absolute one by the root as its source root (so
# mxfp4_mm.X, the root mapped onto mxfp4_mm by pyproject, names no file for it). Inside the
# package every project import is relative, but where the importing module is also imported by
# its root folder's own name (tools, under `python -m tools.NAME`): there `..` does not exist,
# and tools import the rest of the root through mxfp4_mm. The root's .py files are imported as
# top-level modules (the runner, tools.evaluate's child) and import through mxfp4_mm too.
# ---------------------------------------------------------------------------------------

PACKAGE = "mxfp4_mm"
BARE_PACKAGES = ("tools",)            # imported by their own name too, with their modules
ROOT_NAMES = {path.stem for path in ROOT.glob("*.py")} | \
    {path.parent.name for path in ROOT.glob("*/__init__.py")}
PACKAGE_FILES = sorted(path for folder in ROOT.iterdir()
                       if (folder / "__init__.py").is_file() and folder.name not in ("tests", PACKAGE)
                       for path in folder.rglob("*.py"))


def names_a_file(parts) -> bool:
    path = ROOT.joinpath(*parts)
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file()


def import_problems(path: Path, source: str) -> list:
    """Each project import of the file at `path` (its text `source`) that a reader cannot map
    to a file, or that the file could write relatively and does not; a line that says
    `# top-level name` imports the root's file by its own name on purpose (tools.evaluate's
    child, as on the runner)."""
    package = path.parent.relative_to(ROOT).parts
    lines = source.splitlines()
    problems = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [alias.name for alias in node.names], []
        else:
            continue
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            target = base + tuple(filter(None, modules[0].split(".")))
            if node.level - 1 > len(package):
                problems.append(f"{where}: climbs above the root")
            elif package[0] in BARE_PACKAGES and base[:1] != package[:1]:
                problems.append(f"{where}: climbs out of {package[0]}, which is also imported "
                                f"by its own name")
            elif not names_a_file(target) and not all(names_a_file(target + (name,))
                                                      for name in names):
                problems.append(f"{where}: {'.' * node.level}{modules[0]} names no file")
            continue
        for module in modules:
            top, *target = module.split(".")
            if top in ROOT_NAMES - {PACKAGE} and "# top-level name" not in lines[node.lineno - 1]:
                problems.append(f"{where}: imports the root's {module} by its own name")
            if top != PACKAGE:
                continue
            files = [target] if target else [[name] for name in names if names_a_file([name])]
            if not all(names_a_file(parts) for parts in files):
                problems.append(f"{where}: {module} names no file of the root")
            elif files and (package[0] not in BARE_PACKAGES or
                            all(parts[0] == package[0] for parts in files)):
                problems.append(f"{where}: {module} is not relative (a reader maps no file)")
    return problems


def test_every_folder_of_the_package_is_read():
    assert {"kernels", "launchers", "tools"} <= {path.relative_to(ROOT).parts[0]
                                                  for path in PACKAGE_FILES}
    assert ROOT / "tools" / "gfx950" / "report.py" in PACKAGE_FILES


def test_a_reader_maps_every_project_import_of_the_package_to_a_file():
    problems = [problem for path in PACKAGE_FILES
                for problem in import_problems(path, path.read_text())]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("folder, source, problem", [
    ("launchers", "from .configs import GemmConfig\nfrom ..kernels import formats\n", None),
    ("launchers", "from mxfp4_mm.kernels import formats\n", "mxfp4_mm.kernels is not relative"),
    ("launchers", "from kernels import formats\n", "imports the root's kernels by its own name"),
    ("launchers", "from .nowhere import x\n", ".nowhere names no file"),
    ("launchers", "from ...elsewhere import x\n", "climbs above the root"),
    ("tools", "from .cli import ArgumentParser\nfrom mxfp4_mm.launchers import ladder\n", None),
    ("tools", "from ..launchers import ladder\n", "climbs out of tools"),
    ("tools", "from mxfp4_mm.tools.cli import ArgumentParser\n", "is not relative"),
    ("tools", "from mxfp4_mm import reference\n", None),
    ("tools", "import reference              # top-level name, as on the runner\n", None),
    ("kernels", "from mxfp4_mm import step_aside\nfrom . import formats\n", None),
])
def test_which_imports_the_reader_maps(folder, source, problem):
    problems = import_problems(ROOT / folder / "reader_case.py", source)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems
