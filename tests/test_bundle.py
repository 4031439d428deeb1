"""The one-file bundle: its checks, and the same outputs as the package (custom_kernel and the
torch op, the bundle imported twice), alone in a folder."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers.configs import config_for
from mxfp4_mm.submission import custom_kernel
from mxfp4_mm.tools import bundle as bundle_module
from mxfp4_mm.tools.bundle import BundleError, build_bundle, check_bundle

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(4, 96, 512), (1, 64, 4096)]    # single-pass, and split-K through the heuristic

CHILD = """
import sys
sys.path.insert(0, sys.argv[2])
from mxfp4_mm.tools.evaluate import hide_project_modules
hide_project_modules(sys.argv[2], ".")     # as on the runner, whatever the install
import torch
try:
    from mxfp4_mm import kernels
    sys.exit("the project package is importable beside the bundle")
except ImportError:
    pass
import submission
for i in range(int(sys.argv[1])):
    data = torch.load(f"in{i}.pt")
    torch.save(submission.custom_kernel(data), f"out{i}.pt")
import importlib.util                      # the bundle again: its op is registered once
spec = importlib.util.spec_from_file_location("submission_again", "submission.py")
spec.loader.exec_module(importlib.util.module_from_spec(spec))
a, _, _, b_shuffle, b_scale_sh = torch.load("in0.pt")
torch.save(torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh), "op0.pt")
"""


@pytest.fixture(scope="module")
def bundle():
    return build_bundle(ROOT)


def test_header_and_checks(bundle):
    assert bundle.startswith("#!POPCORN leaderboard amd-mxfp4-mm\n#!POPCORN gpu MI355X\n")
    assert ("str" + "eam") not in bundle.lower()
    assert "chr(" not in bundle
    assert len(bundle.encode()) <= 1_000_000
    ast.parse(bundle)


def test_imports_only_stdlib_torch_triton_task_and_aiter_in_a_try(bundle):
    tree = ast.parse(bundle)
    in_try = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and t.handlers
              for statement in t.body for n in ast.walk(statement)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                root = name.split(".")[0]
                if root == "aiter":
                    assert id(node) in in_try, ast.unparse(node)
                else:
                    assert root in {"torch", "triton", "task"} or \
                        root in sys.stdlib_module_names, name


def test_optional_aiter_import_is_allowed_only_in_a_try():
    guarded = "try:\n    import aiter\nexcept ImportError:\n    aiter = None\n"
    check_bundle(guarded)
    with pytest.raises(BundleError, match=r"bundle line 1 \(the header\): imports aiter outside"):
        check_bundle("import aiter\n")
    with pytest.raises(BundleError, match="imports numpy"):
        check_bundle("try:\n    import numpy\nexcept ImportError:\n    pass\n")


def test_two_builds_are_byte_identical(bundle):
    assert build_bundle(ROOT) == bundle


def test_header_flags(bundle):
    text = build_bundle(ROOT, leaderboard="other-board", gpu="B200")
    assert text.startswith("#!POPCORN leaderboard other-board\n#!POPCORN gpu B200\n")


def _tree_copy(tmp_path):
    copy = tmp_path / "tree"
    for name in ("kernels", "launchers"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "submission.py", copy)
    return copy


@pytest.mark.parametrize("module, appended, message", [
    ("kernels.formats", "NOTE = 'a " + "STR" + "EAM of bytes'",
     "contains the word the runner forbids"),
    ("launchers.bypass", "LETTER = " + "ch" + "r(115)", r"calls chr\(\)"),
])
def test_a_refused_source_line_fails_the_build_naming_file_and_line(module, appended, message,
                                                                   tmp_path):
    copy = _tree_copy(tmp_path)
    path = copy.joinpath(*module.split(".")).with_suffix(".py")
    line = len(path.read_text().splitlines()) + 2
    with open(path, "a") as f:
        f.write(f"\n{appended}\n")
    relative = "/".join(module.split(".")) + ".py"
    with pytest.raises(BundleError,
                       match=rf"{relative} \(module {module}\) line {line}: {message}"):
        build_bundle(copy)


def test_chr_in_the_bundle_names_its_line_and_part():
    with pytest.raises(BundleError, match=r"bundle line 3 \(the header\): calls chr\(\)"):
        check_bundle("#!POPCORN a\n#!POPCORN b\nx = " + "ch" + "r(1)\n")


@pytest.mark.parametrize("line, message", [("x = " + "ch" + "r(1)", r"calls chr\(\)"),
                                           ("import numpy", "imports numpy"),
                                           ("import aiter", "imports aiter outside a try")])
def test_a_refused_line_is_named_by_the_module_it_sits_in_not_a_later_one(line, message):
    text = (f"#!POPCORN a\n{bundle_module.MODULE_MARKER}kernels.formats\n{line}\n"
            f"{bundle_module.MODULE_MARKER}submission\nY = 2\n")
    with pytest.raises(BundleError, match=rf"bundle line 3 \(module kernels.formats\): {message}"):
        check_bundle(text)


def test_a_usage_error_is_one_line_naming_the_tool(capsys):
    with pytest.raises(SystemExit):
        bundle_module.main(["--gpu", "B200"])
    assert capsys.readouterr().err.startswith("tools.bundle: argument --gpu: invalid choice")


def test_the_size_cap_is_the_runners_1000000_bytes():
    padding = "#" * 1_000_000
    check_bundle("import torch\n" + padding[:1_000_000 - 13])        # exactly 1,000,000 bytes
    with pytest.raises(BundleError, match="1,000,001 bytes, over the runner's 1,000,000"):
        check_bundle("import torch\n" + padding[:1_000_000 - 12])


def test_each_external_import_appears_once(bundle):
    tree = ast.parse(bundle)
    from_modules = [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert len(from_modules) == len(set(from_modules)), from_modules
    names = [(node.module, alias.name) for node in tree.body if isinstance(node, ast.ImportFrom)
             for alias in node.names]
    assert ("typing", "NamedTuple") in names and len(names) == len(set(names))


def test_forbidden_word_in_the_header_names_the_header():
    with pytest.raises(BundleError, match=r"bundle line 2 \(the header\)"):
        build_bundle(ROOT, gpu="my" + "str" + "eamer")


def test_name_collision_fails_the_build(tmp_path):
    copy = _tree_copy(tmp_path)
    with open(copy / "launchers" / "bypass.py", "a") as f:
        f.write("\ndef cdiv(a, b):\n    return a // b\n")
    with pytest.raises(BundleError, match="cdiv"):
        build_bundle(copy)


def test_split_k_shape_is_split():
    assert config_for("interpreter", *SHAPES[1]).split_k > 1
    assert config_for("interpreter", *SHAPES[0]).split_k == 1


def test_bundle_alone_gives_the_package_outputs(bundle, tmp_path, device):
    """The child runs where this process does: compiled on the GPU, else in the interpreter."""
    (tmp_path / "submission.py").write_text(bundle)
    shutil.copy(ROOT / "task.py", tmp_path)
    expected = []
    gen = torch.Generator().manual_seed(21)
    for i, (m, n, k) in enumerate(SHAPES):
        a = torch.randn(m, k, generator=gen).bfloat16()
        codes, scales = formats.quantize_mxfp4(torch.randn(n, k, generator=gen).bfloat16())
        data = tuple(None if x is None else x.to(device) for x in (
            a, None, None, formats.shuffle_weight(codes), formats.e8m0_shuffle(scales, 0xFF)))
        torch.save(data, tmp_path / f"in{i}.pt")
        expected.append(custom_kernel(data))
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "TRITON_INTERPRET")}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    subprocess.run([sys.executable, "-c", CHILD, str(len(SHAPES)), str(ROOT)], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=600)
    for i, want in enumerate(expected):
        assert torch.equal(torch.load(tmp_path / f"out{i}.pt"), want)
    assert torch.equal(torch.load(tmp_path / "op0.pt"), expected[0])


# ---------------------------------------------------------------------------------------
# tools.bundle's decisions on small texts and trees (no whole-project build). Decisions:
# - refused in the bundle: the forbidden word in any case, `chr(`, more than MAX_BYTES bytes
#   (bytes, not characters), an import of anything but the standard library, torch, triton,
#   task and (inside a try with an except) aiter; each error names the line and its part
#   (the header or the module);
# - refused in a module's source: the forbidden word or `chr(`, naming the file, module and
#   every line;
# - the module order: dependencies first, each once, an import cycle refused.
# ---------------------------------------------------------------------------------------

from mxfp4_mm.tools import bundle as bundle_module  # noqa: E402

HEADER = "#!POPCORN leaderboard x\n"


def bundle_error(text):
    with pytest.raises(BundleError) as error:
        check_bundle(text)
    return str(error.value)


def test_chr_anywhere_is_refused_naming_its_line_and_module():
    text = HEADER + "import os\n# ---- kernels.x\nx = 1\ny = chr (1) + chr(2)\n"
    assert bundle_error(text) == ("bundle line 5 (module kernels.x): calls chr(), which the "
                                  "runner treats as evasion")
    check_bundle(HEADER + "chr = 1\n")


def test_the_forbidden_word_in_any_case_is_refused_naming_the_header():
    word = bundle_module.FORBIDDEN.upper()
    assert bundle_error(f"# {word}\nx = 1\n") == ("bundle line 1 (the header): contains the "
                                                   "word the runner forbids")


def test_the_size_cap_counts_bytes_and_allows_exactly_the_cap():
    line = "x = 1\n#"
    fill = bundle_module.MAX_BYTES - len(line.encode())
    check_bundle(line + "a" * fill)
    assert "1,000,001 bytes" in bundle_error(line + "a" * (fill + 1))
    assert "over the runner's 1,000,000" in bundle_error(line + "é" * (fill // 2 + 1))


@pytest.mark.parametrize("text, ok", [
    ("import os, json\nfrom collections import OrderedDict\n", True),
    ("import torch.nn\nimport triton.language as tl\nfrom task import input_t\n", True),
    ("try:\n    import aiter\nexcept ImportError:\n    pass\n", True),
    ("try:\n    from aiter.ops import x\nexcept Exception:\n    pass\n", True),
    ("import aiter\n", False),
    ("try:\n    import aiter\nfinally:\n    pass\n", False),
    ("try:\n    pass\nexcept ImportError:\n    import aiter\n", False),
    ("import numpy\n", False),
    ("from numpy import zeros\n", False),
    ("import os, numpy\n", False),
    ("from . import sibling\n", False),
])
def test_which_imports_a_bundle_may_hold(text, ok):
    if ok:
        check_bundle(text)
    else:
        assert bundle_error(text).startswith("bundle line ")


def test_an_import_error_names_its_line_and_module():
    text = HEADER + "# ---- launchers.y\nimport os\n\nimport numpy as np\n"
    assert bundle_error(text) == "bundle line 5 (module launchers.y): imports numpy"


def write_tree(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_source_with_chr_or_the_word_is_refused_naming_every_line(tmp_path):
    write_tree(tmp_path, {"kernels/__init__.py": "", "kernels/bad.py": "a = 1\nb = chr(3)\nc = chr(4)\n"})
    with pytest.raises(BundleError, match=r"kernels/bad.py \(module kernels.bad\) line 2, 3: "
                                          r"calls chr\(\)"):
        bundle_module.check_source(tmp_path, "kernels.bad")
    write_tree(tmp_path, {"kernels/bad.py": f"# {bundle_module.FORBIDDEN.title()}\n"})
    with pytest.raises(BundleError, match="line 1: contains the word"):
        bundle_module.check_source(tmp_path, "kernels.bad")


def test_the_module_order_puts_dependencies_first_once(tmp_path):
    write_tree(tmp_path, {
        "submission.py": "from mxfp4_mm.launchers.fake_b import f\nimport mxfp4_mm.kernels.fake_a; from mxfp4_mm import kernels\n",
        "launchers/fake_b.py": "from mxfp4_mm.kernels.fake_a import g\n",
        "kernels/fake_a.py": "import os\n"})
    assert bundle_module.module_order(tmp_path) == ["kernels.fake_a", "launchers.fake_b",
                                                    "submission"]


def test_an_import_cycle_is_refused(tmp_path):
    write_tree(tmp_path, {
        "submission.py": "import mxfp4_mm.kernels.fake_a; from mxfp4_mm import kernels\n",
        "kernels/fake_a.py": "import mxfp4_mm.kernels.fake_c; from mxfp4_mm import kernels\n",
        "kernels/fake_c.py": "import mxfp4_mm.kernels.fake_a; from mxfp4_mm import kernels\n"})
    with pytest.raises(BundleError, match="import cycle through kernels.fake_a"):
        bundle_module.module_order(tmp_path)


def test_relative_imports_are_followed_as_those_through_mxfp4_mm(tmp_path):
    write_tree(tmp_path, {
        "submission.py": "from mxfp4_mm.launchers.fake_b import f\n",
        "launchers/__init__.py": "",
        "launchers/fake_b.py": "from ..kernels.fake_a import g\nfrom . import fake_d\n",
        "launchers/fake_d.py": "from ..kernels import fake_a\n",
        "kernels/__init__.py": "",
        "kernels/fake_a.py": "import os\n"})
    assert bundle_module.module_order(tmp_path) == ["kernels.fake_a", "launchers.fake_d",
                                                    "launchers.fake_b", "submission"]


def _two_forms(relative: bool) -> dict:
    """One small tree, its imports (submission.py's too) relative or through mxfp4_mm."""
    def form(relative_text, absolute_text):
        return relative_text if relative else absolute_text
    return {
        "submission.py": form("from .launchers import run\nfrom .task import input_t\n",
                              "from mxfp4_mm.launchers import run\nfrom mxfp4_mm.task import "
                              "input_t\n") +
                         "\n\ndef custom_kernel(data: input_t):\n    return run(data)\n",
        "launchers/__init__.py":
            form("from . import helper\nfrom ..kernels import fmt\nfrom ..kernels.fmt import SCALE\n",
                 "from mxfp4_mm.launchers import helper\nfrom mxfp4_mm.kernels import fmt\n"
                 "from mxfp4_mm.kernels.fmt import SCALE\n") +
            "import math\n\n\ndef run(data):\n    return helper.twice(data) * fmt.ONE * SCALE * math.e\n",
        "launchers/helper.py": form("from ..kernels.fmt import ONE\n",
                                    "from mxfp4_mm.kernels.fmt import ONE\n") +
            "\n\ndef twice(x):\n    return 2 * x * ONE\n",
        "kernels/__init__.py": "",
        "kernels/fmt.py": "ONE = 1\nSCALE = 3\n"}


def test_a_tree_with_relative_imports_gives_the_bundle_of_its_absolute_form(tmp_path):
    write_tree(tmp_path / "relative", _two_forms(relative=True))
    write_tree(tmp_path / "absolute", _two_forms(relative=False))
    text = build_bundle(tmp_path / "relative")
    assert text == build_bundle(tmp_path / "absolute")
    assert "return twice(data) * ONE * SCALE * math.e" in text
    assert "from task import input_t" in text and "from ." not in text


def test_a_relative_import_above_the_root_is_refused_naming_file_and_line(tmp_path):
    write_tree(tmp_path, {"submission.py": "from mxfp4_mm.launchers.fake_b import f\n",
                          "launchers/fake_b.py": "import os\nfrom ...elsewhere import f\n"})
    with pytest.raises(BundleError, match=r"fake_b.py \(module launchers.fake_b\) line 2: a "
                                          r"relative import above the project's root"):
        bundle_module.module_order(tmp_path)
    write_tree(tmp_path, {"submission.py": "from .launchers.fake_b import f\nfrom .. import g\n"})
    with pytest.raises(BundleError, match=r"submission.py \(module submission\) line 2: a "
                                          r"relative import above the project's root"):
        bundle_module.module_order(tmp_path)


def test_a_module_imported_whole_is_bundled_and_what_uses_an_unbundled_name_left_out(tmp_path):
    """`import mxfp4_mm.kernels.x as alias` bundles the module, its uses flattened; statements
    that use a name imported from an unbundled module (by its own name or its alias) are left
    out."""
    write_tree(tmp_path, {
        "submission.py": "import mxfp4_mm.kernels.fake_a as fa\n"
                         "from mxfp4_mm.launchers.tuned_shapes import TUNED as T\n"
                         "from mxfp4_mm.launchers.tuned_shapes import OTHER\n"
                         "X = T\nY = OTHER\nZ = 1\n\n"
                         "def custom_kernel(data):\n    return fa.f(data)\n",
        "kernels/fake_a.py": "def f(x):\n    return x\n"})
    text = build_bundle(tmp_path)
    assert "def f(x):" in text and "return f(data)" in text and "Z = 1" in text
    assert "mxfp4_mm" not in text.split("do not edit.")[1]
    assert "X = T" not in text and "Y = OTHER" not in text


def test_a_small_trees_bundle_imports_once_per_module_and_its_header_hashes_its_code(tmp_path):
    """The names imported from one module on one line; the header's sha256 is the first 16
    hex digits of the code below it."""
    import hashlib
    write_tree(tmp_path, {"submission.py": "from os import path\nfrom os import sep\n"
                                           "def custom_kernel(data):\n    return path, sep\n"})
    text = build_bundle(tmp_path)
    header, code = text.split("; do not edit.\n")
    assert "from os import path, sep\n" in code
    assert header.endswith(f"(sources sha256 {hashlib.sha256(code.encode()).hexdigest()[:16]})")


def test_a_name_defined_in_two_modules_is_refused_naming_both(tmp_path):
    write_tree(tmp_path, {"submission.py": "from mxfp4_mm.kernels.fake_a import f\n\n"
                                           "def f(x):\n    return x\n",
                          "kernels/fake_a.py": "def f(x):\n    return x\n"})
    with pytest.raises(BundleError) as error:
        build_bundle(tmp_path)
    assert str(error.value) == ("top-level name 'f' is defined in both kernels.fake_a and "
                                "submission")


@pytest.fixture
def repository(tmp_path):
    """A git repository with submission.py and launchers/configs.py tracked, dist/ not."""
    root = tmp_path / "repo"
    (root / "launchers").mkdir(parents=True)
    (root / "docs").mkdir()
    for name in ("submission.py", "launchers/configs.py", "docs/a.md", "untracked.py"):
        (root / name).write_text("")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "submission.py", "launchers/configs.py",
                    "docs/a.md"], check=True)
    return root


def test_git_tracked_files_are_told_from_the_rest(repository, tmp_path):
    tracked = bundle_module.tracked_by_git
    assert tracked(repository / "submission.py", repository)
    assert tracked(repository / "launchers" / "configs.py", repository)
    assert not tracked(repository / "untracked.py", repository)
    assert not tracked(repository / "dist" / "submission.py", repository)
    assert not tracked(tmp_path / "submission.py", repository)          # outside it
    assert not tracked(tmp_path / "submission.py", tmp_path)            # no repository


def test_git_is_asked_about_this_checkout_by_default_and_says_nothing(repository, monkeypatch,
                                                                     capfd):
    """Without a root, the repository asked is ROOT's; git's own words (an untracked file's
    error) stay out of the terminal."""
    monkeypatch.setattr(bundle_module, "ROOT", repository)
    assert bundle_module.tracked_by_git(repository / "submission.py")
    assert not bundle_module.tracked_by_git(repository / "untracked.py")
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("word, refused", [
    ("dist/submission.py", None),
    ("untracked.py", None),
    ("submission.py", "submission.py is a file of the repository"),
    ("launchers/configs.py", "launchers/configs.py is a file of the repository"),
    ("docs", "docs is a directory; name a file"),
])
def test_the_output_is_neither_a_tracked_file_nor_a_folder(repository, word, refused,
                                                            monkeypatch):
    import argparse
    monkeypatch.setattr(bundle_module, "ROOT", repository)
    monkeypatch.chdir(repository)
    if refused is None:
        assert bundle_module.bundle_output(word) == word
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=refused):
            bundle_module.bundle_output(word)


def test_the_header_names_only_the_problems_leaderboard_and_gpu():
    parser = bundle_module.build_parser()
    args = parser.parse_args([])
    assert (args.leaderboard, args.gpu) == ("amd-mxfp4-mm", "MI355X")
    actions = {a.dest: a for a in parser._actions}
    assert list(actions["leaderboard"].choices) == ["amd-mxfp4-mm"]
    assert list(actions["gpu"].choices) == ["MI355X"]


def test_main_writes_the_bundle_where_o_says_making_its_folders(monkeypatch, tmp_path, capsys):
    roots = []
    monkeypatch.setattr(bundle_module, "build_bundle", lambda root, leaderboard, gpu: roots.append(
        root) or f"# {leaderboard} {gpu}\n")
    monkeypatch.setattr(bundle_module, "module_order", lambda root: ["kernels.formats", "submission"])
    out = tmp_path / "new" / "bundle.py"
    assert bundle_module.main(["-o", str(out)]) == 0
    assert roots == [bundle_module.ROOT]        # the bundle of this tree
    assert out.read_text() == "# amd-mxfp4-mm MI355X\n"
    assert capsys.readouterr().out == f"wrote {out} (22 bytes) from kernels.formats, submission\n"


def test_main_refuses_to_overwrite_a_file_of_the_project_before_building(monkeypatch, capsys):
    monkeypatch.setattr(bundle_module, "build_bundle",
                        lambda root, leaderboard, gpu: pytest.fail("built"))
    monkeypatch.chdir(bundle_module.ROOT)
    with pytest.raises(SystemExit) as exit:
        bundle_module.main(["-o", "submission.py"])
    assert exit.value.code == 2
    assert "submission.py is a file of the repository" in capsys.readouterr().err


def test_a_relative_import_in_the_bundle_is_refused():
    with pytest.raises(BundleError) as error:
        bundle_module.check_bundle("from . import x\n")
    assert str(error.value) == "bundle line 1 (the header): imports "


def test_main_reports_a_bundle_error_in_one_line_and_writes_nothing(monkeypatch, tmp_path,
                                                                     capsys):
    def failing(root, leaderboard, gpu):
        raise BundleError("kernels/x.py:3: chr( is not allowed")
    monkeypatch.setattr(bundle_module, "build_bundle", failing)
    out = tmp_path / "bundle.py"
    assert bundle_module.main(["-o", str(out)]) == 1
    assert capsys.readouterr().err == "tools.bundle: kernels/x.py:3: chr( is not allowed\n"
    assert not out.exists()


def test_every_option_has_the_help_docs_tools_md_shows():
    import re
    from mxfp4_mm.tools import docs
    tools_md = (ROOT / "docs" / "tools.md").read_text()
    shown = re.search(r"options:tools\.bundle -->\n(.*?)\n<!-- end", tools_md, re.S).group(1)
    assert shown == docs.options_markdown("tools.bundle")
    assert all(action.help for action in bundle_module.build_parser()._actions)


def test_a_modules_docstring_is_dropped_and_every_other_statement_kept(tmp_path):
    (tmp_path / "submission.py").write_text(
        '"""The entry\'s docstring."""\nimport torch\nX = "kept"\n"""a later string"""\n\n'
        'def custom_kernel(data):\n    """Its docstring."""\n    return data\n')
    text = build_bundle(tmp_path)
    assert "The entry's docstring." not in text
    for kept in ("X = 'kept'", "'a later string'", "Its docstring.", "import torch"):
        assert kept in text, kept


def test_a_module_that_does_not_parse_is_named(tmp_path):
    (tmp_path / "submission.py").write_text("def custom_kernel(data:\n")
    with pytest.raises(SyntaxError) as error:
        build_bundle(tmp_path)
    assert error.value.filename == str(tmp_path / "submission.py")


def test_outside_a_git_checkout_every_file_of_the_tree_but_dist_counts_as_the_projects(
        repository, tmp_path, monkeypatch):
    """A copy of the tree without .git (CI's, an unpacked archive): git cannot tell what is
    tracked, so any existing file there is refused, a new one or one under dist/ is not."""
    import argparse
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(repository, copy, ignore=shutil.ignore_patterns(".git"))
    (copy / "dist").mkdir()
    (copy / "dist" / "submission.py").write_text("")
    assert bundle_module.project_file(copy / "submission.py", copy)
    assert bundle_module.project_file(copy / "untracked.py", copy)
    assert not bundle_module.project_file(copy / "dist" / "submission.py", copy)
    assert not bundle_module.project_file(copy / "new.py", copy)
    assert not bundle_module.project_file(repository / "untracked.py", repository)  # git says
    monkeypatch.setattr(bundle_module, "ROOT", copy)
    monkeypatch.chdir(copy)
    with pytest.raises(argparse.ArgumentTypeError, match="submission.py is a file of the"):
        bundle_module.bundle_output("submission.py")


def _copy_inside_another_repository(tmp_path):
    outer = tmp_path / "outer"
    copy = outer / "vendored" / "mxfp4-mm"
    for name in ("kernels", "launchers", "tools", "mxfp4_mm"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "submission.py", copy)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    return copy


def test_a_tree_copied_inside_another_repository_counts_its_files_as_its_own(tmp_path):
    """The enclosing checkout (which tracks none of the copy's files) is not the tree's own:
    the copy counts as no checkout, its every file outside dist/ the project's."""
    copy = _copy_inside_another_repository(tmp_path)
    assert bundle_module.project_file(copy / "submission.py", copy)
    assert bundle_module.project_file(copy / "launchers" / "configs.py", copy)
    assert not bundle_module.project_file(copy / "dist" / "submission.py", copy)


def test_a_tree_copied_inside_another_repository_refuses_to_overwrite_its_entry_point(tmp_path):
    """`python -m tools.bundle -o submission.py` in such a copy is refused; the file stays."""
    copy = _copy_inside_another_repository(tmp_path)
    entry = (copy / "submission.py").read_text()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "tools.bundle", "-o", "submission.py"],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "submission.py is a file of the repository" in done.stderr
    assert (copy / "submission.py").read_text() == entry


def test_main_makes_the_output_folders_and_writes_there_again(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bundle_module, "build_bundle", lambda root, leaderboard, gpu: "bundle\n")
    out = tmp_path / "a" / "b" / "submission.py"
    assert bundle_module.main(["-o", str(out)]) == 0
    assert bundle_module.main(["-o", str(out)]) == 0
    assert out.read_text() == "bundle\n"


def test_the_parser_writes_to_dist_by_default_and_says_what_it_does():
    parser = bundle_module.build_parser()
    assert parser.parse_args([]).output == "dist/submission.py"
    assert parser.description == bundle_module.__doc__.splitlines()[0]


def test_a_checkout_other_than_this_one_is_asked_about_its_own_files(repository):
    assert bundle_module.project_file(repository / "submission.py", repository)
    assert not bundle_module.project_file(repository / "untracked.py", repository)


def test_packages_imported_from_mxfp4_mm_are_bundled_and_their_uses_flattened(tmp_path):
    """`from mxfp4_mm import kernels` and `from mxfp4_mm import launchers as L` bundle each
    package's __init__, and `kernels.NAME`, `L.NAME` become NAME: the bundle alone runs."""
    write_tree(tmp_path, {
        "submission.py": "from mxfp4_mm import kernels\nfrom mxfp4_mm import launchers as L\n\n"
                         "def custom_kernel(data):\n    return kernels.ONE + L.TWO + data\n",
        "kernels/__init__.py": "ONE = 1\n",
        "launchers/__init__.py": "TWO = 2\n"})
    namespace = {}
    exec(compile(build_bundle(tmp_path), "bundle", "exec"), namespace)
    assert namespace["custom_kernel"](4) == 7


def test_a_subpackage_imported_from_its_package_is_bundled_as_a_module(tmp_path):
    """`from mxfp4_mm.launchers import rules` where rules is a package (its __init__.py) bundles
    it as a module, its uses flattened, beside a module imported from it."""
    write_tree(tmp_path, {
        "submission.py": "from mxfp4_mm.launchers import rules\n"
                         "from mxfp4_mm.launchers.rules import table\n\n"
                         "def custom_kernel(data):\n    return rules.THREE + table.FOUR + data\n",
        "launchers/__init__.py": "",
        "launchers/rules/__init__.py": "THREE = 3\n",
        "launchers/rules/table.py": "FOUR = 4\n"})
    namespace = {}
    exec(compile(build_bundle(tmp_path), "bundle", "exec"), namespace)
    assert namespace["custom_kernel"](1) == 8


def test_another_distributions_module_is_not_the_projects():
    assert bundle_module.project_module("mxfp4_mm") == ""
    assert bundle_module.project_module("mxfp4_mm.launchers.gemm") == "launchers.gemm"
    assert bundle_module.project_module("numpy.random") is None
    assert bundle_module.project_module("mxfp4_mmx.kernels") is None
