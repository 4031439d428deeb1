"""The tools' command lines: shared shape words, a prog of `python -m tools.X`, help for every
option, and tools.timing refusing to run as a command."""

import argparse
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES, TASK_SHAPES, TEST_SHAPES
from mxfp4_mm.tools import cli

ROOT = Path(__file__).resolve().parents[1]
TOOLS_WITH_OPTIONS = ("check", "evaluate", "bundle", "soak", "bench", "tune", "profile", "isa",
                      "mutation", "docs")


def test_named_sets_and_shapes():
    assert cli.parse_plain_shapes(["tests"]) == list(TEST_SHAPES)
    assert cli.parse_plain_shapes(["benchmarks", "4,64,256"]) == \
        list(BENCHMARK_SHAPES) + [(4, 64, 256)]
    assert cli.parse_plain_shapes(["all"]) == list(TASK_SHAPES)
    assert cli.parse_shapes(["4,64,256,7", "8,128,512"]) == [
        {"m": 4, "n": 64, "k": 256, "seed": 7}, {"m": 8, "n": 128, "k": 512, "seed": 4243}]


@pytest.mark.parametrize("word, message", [
    ("64,512,1000", "K must be a multiple of 64"),
    ("8,250,512", "N must be a multiple of 16"),
    ("0,64,256", "must be positive"),
    ("4,64,256,7", "expected one of tests, benchmarks, all or M,N,K;"),
    ("4x64x256", "got '4x64x256'"),
])
def test_bad_words_are_usage_errors(word, message):
    with pytest.raises(cli.UsageError, match=message):
        cli.parse_plain_shapes([word])


@pytest.mark.parametrize("name", TOOLS_WITH_OPTIONS)
def test_prog_and_help_of_every_option(name, monkeypatch):
    # tools.isa drops TRITON_INTERPRET when imported (it compiles); later tests need it kept.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    parser = importlib.import_module(f"mxfp4_mm.tools.{name}").build_parser()
    assert isinstance(parser, cli.ArgumentParser)
    assert parser.prog == f"python -m tools.{name}"
    for action in parser._actions:
        assert action.help, f"tools.{name} {action.option_strings or action.dest} has no help"


BAD_USAGES = [
    # (tool, argv, extra environment, what stderr must say after "tools.NAME: ")
    ("evaluate", ["bogus"], {}, "argument mode: invalid choice: 'bogus'"),
    ("check", ["--seeds", "two"], {}, "argument --seeds: expected an integer of at least 1, got 'two'"),
    ("check", ["--shapes", "-4,64,256"], {}, "shape -4,64,256: M, N and K must be positive"),
    ("check", ["--bogus"], {}, "unrecognized arguments: --bogus"),
    ("isa", ["--triton", "3.6"], {}, "argument --triton: expected a Triton release like 3.6.0"),
    ("tune", ["--shapes", "1,2,3,4"], {},
     "--shapes: expected one of tests, benchmarks, all, M,N,K, N,K or a model"),
    ("tune", ["--shapes", "64,100"], {}, "N,K 64,100: K must be a multiple of 64"),
    ("tune", ["--m", "8,x"], {}, "argument --m: expected positive integers"),
    ("evaluate", ["test", "--submission", "SYNTAX_ERROR"], {},
     "does not parse: line 1: '(' was never closed"),
    ("check", [], {"MXFP4_MM_FAULT": "bogus"},
     "MXFP4_MM_FAULT: expected KIND:M,N,K with KIND one of compile, wrong, got 'bogus'"),
    ("evaluate", ["test"], {"MXFP4_MM_FAULT": "wrong:4,64"},
     "MXFP4_MM_FAULT: expected KIND:M,N,K"),
    ("evaluate", ["test", "--submission", "NO_CUSTOM_KERNEL"], {},
     "defines no custom_kernel at its top level"),
    ("evaluate", ["test", "--json", "A_FILE/rows.json"], {},
     "argument --json: A_FILE/rows.json: A_FILE is not a directory"),
    ("evaluate", ["test", "--max-wall", "0"], {}, "argument --max-wall: expected a number above 0, got '0'"),
    ("evaluate", ["benchmark", "--clear-bytes", "2"], {},
     "argument --clear-bytes: expected an integer of at least 4"),
    ("isa", ["--json", "A_FILE/rows.json"], {}, "argument --json: A_FILE/rows.json: A_FILE is not"),
    ("isa", ["--json", "TMP"], {}, "argument --json: TMP is a directory; name a file"),
    ("isa", ["--asm-dir", "A_FILE/asm"], {}, "argument --asm-dir: A_FILE/asm: A_FILE is not a"),
    ("isa", ["--sweep", "foo"], {}, "--sweep: expected one of tests, benchmarks, all, M,N,K, N,K or a model"),
    ("bundle", ["-o", "TMP"], {}, "argument -o/--output: TMP is a directory; name a file"),
    ("bundle", ["-o", "submission.py"], {}, "submission.py is a file of the repository"),
    ("bundle", ["-o", "A_FILE/submission.py"], {}, "A_FILE is not a directory"),
    ("bundle", ["--gpu", ""], {}, "argument --gpu: invalid choice: ''"),
    ("bundle", ["--leaderboard", "amd-fp8-mm"], {},
     "argument --leaderboard: invalid choice: 'amd-fp8-mm'"),
    ("check", ["--seeds", "0"], {}, "argument --seeds: expected an integer of at least 1"),
    ("bench", ["--calls", "0"], {}, "argument --calls: expected an integer of at least 1"),
    ("bench", ["--png", "A_FILE/plot.png"], {}, "argument --png: A_FILE/plot.png"),
    ("tune", ["--workers", "0"], {}, "argument --workers: expected an integer of at least 1"),
    ("profile", ["--csv", "TMP"], {}, "argument --csv: TMP is a directory"),
    ("soak", ["--iterations", "-1"], {}, "argument --iterations: expected an integer of at least 0"),
    ("mutation", ["--sample", "-1"], {}, "argument --sample: expected an integer of at least 0"),
    ("mutation", ["--root", "TMP"], {}, "argument --root: TMP is not a git checkout"),
]


@pytest.mark.parametrize("name, argv, env, message", BAD_USAGES,
                         ids=[f"{u[0]}-{'-'.join(u[1]) or next(iter(u[2]))}" for u in BAD_USAGES])
def test_each_bad_usage_is_one_line_and_exit_code_2(name, argv, env, message, tmp_path):
    """As a user runs them: a fresh process, argparse's errors and the two that used to end in
    a traceback (a submission that does not parse, a bad MXFP4_MM_FAULT) included."""
    placeholders = {"SYNTAX_ERROR": tmp_path / "broken.py",
                    "NO_CUSTOM_KERNEL": tmp_path / "no_kernel.py",
                    "A_FILE": tmp_path / "a_file", "TMP": tmp_path}
    placeholders["SYNTAX_ERROR"].write_text("def custom_kernel(data:\n")
    placeholders["NO_CUSTOM_KERNEL"].write_text("def kernel(data):\n    return data\n")
    placeholders["A_FILE"].write_text("")

    def filled(text):
        for word, path in placeholders.items():
            text = text.replace(word, str(path))
        return text
    tracked = {path: path.read_bytes() for path in (ROOT / "submission.py", ROOT / "README.md")}
    try:
        result = subprocess.run([sys.executable, "-m", f"tools.{name}", *map(filled, argv)],
                                cwd=ROOT, env=dict(os.environ, **env), capture_output=True,
                                text=True, timeout=300)
        overwritten = [path for path, data in tracked.items() if path.read_bytes() != data]
    finally:    # a refusal that failed must not leave the project's files overwritten
        for path, data in tracked.items():
            path.write_bytes(data)
    assert overwritten == []
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"tools.{name}: "), result.stderr
    assert filled(message) in result.stderr, result.stderr
    assert result.stdout == "", result.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_file", "broken.py",
                                                               "no_kernel.py"]


def test_a_triton_release_the_index_lacks_is_one_line_before_any_install(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setattr(os, "environ", os.environ.copy())
    from mxfp4_mm.tools import isa
    from mxfp4_mm.tools.gfx950 import cross_compile
    monkeypatch.setattr(cross_compile, "SIDE_TRITONS", tmp_path)
    monkeypatch.setattr(cross_compile, "index_releases", lambda: ["3.6.0", "3.9.0"])
    assert isa.main(["--triton", "9.9.9"]) == 2
    err = capsys.readouterr().err
    assert err == ("tools.isa: --triton: triton 9.9.9 is not on the package index (it has "
                   "3.6.0, 3.9.0)\n")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_side_install_is_one_error_and_leaves_no_partial_folder(tmp_path,
                                                                         monkeypatch):
    """Where the index cannot be listed, pip's own refusal is the error's last words."""
    import subprocess as sp
    from mxfp4_mm.tools.gfx950 import cross_compile
    monkeypatch.setattr(cross_compile, "SIDE_TRITONS", tmp_path)
    monkeypatch.setattr(cross_compile, "index_releases", lambda: [])

    def pip(*args):
        Path(args[args.index("--target") + 1]).mkdir()
        return sp.CompletedProcess(args, 1, "", "WARNING: x\nERROR: No matching distribution "
                                                "found for triton==9.9.9\n")
    monkeypatch.setattr(cross_compile, "_pip", pip)
    with pytest.raises(cross_compile.SideInstallError,
                       match="pip could not install triton==9.9.9: ERROR: No matching"):
        cross_compile.side_triton("9.9.9")
    assert list(tmp_path.iterdir()) == []


def test_mutation_without_mutmut_says_how_to_install_it_and_leaves_no_folder(tmp_path, capsys,
                                                                              monkeypatch):
    import importlib.util
    import tempfile
    from mxfp4_mm.tools import mutation
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "mutmut" else real(name, *args))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        mutation.main([])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[mutation]"' in err, err
    assert list(tmp_path.iterdir()) == []


def test_timing_is_not_a_command():
    result = subprocess.run([sys.executable, "-m", "tools.timing", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("tools.timing: a library")


def _stderr_prints(tree):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
                and any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr"
                        for k in node.keywords)):
            yield node


@pytest.mark.parametrize("path", sorted((ROOT / "tools").glob("*.py")), ids=lambda p: p.stem)
def test_every_stderr_line_of_a_tool_starts_with_its_name(path):
    """One prefix style for what the tools say on stderr: `tools.NAME: ...`."""
    for call in _stderr_prints(ast.parse(path.read_text())):
        first = call.args[0]
        text = first.value if isinstance(first, ast.Constant) else (
            first.values[0].value if isinstance(first, ast.JoinedStr)
            and isinstance(first.values[0], ast.Constant) else "")
        if path.stem == "cli":    # usage_error prints the prog its caller names
            continue
        assert text.startswith(f"tools.{path.stem}: "), (path.name, call.lineno, text)


@pytest.mark.parametrize("name, argv", [
    ("check", ["--shapes", "4,64,100"]), ("evaluate", ["test", "--shapes", "4,64,100"]),
    ("bench", ["--shapes", "4,64,100"]), ("isa", ["--sweep", "4,64,100"]),
])
def test_usage_errors_are_prefixed_with_the_tool(name, argv, capsys, monkeypatch):
    # tools.isa drops TRITON_INTERPRET when imported (it compiles); later tests need it kept.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    tool = importlib.import_module(f"mxfp4_mm.tools.{name}")
    assert tool.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tools.{name}: ") and err.count("\n") == 1, err


def test_the_plot_options_name_an_extra_that_installs_matplotlib():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("matplotlib") for dep in extras["plot"])
    assert 'pip install -e ".[plot]"' in (ROOT / "README.md").read_text()
    for tool in ("bench", "evaluate"):
        assert "pip install -e '.[plot]'" in (ROOT / "tools" / f"{tool}.py").read_text(), tool


def test_the_side_install_message_states_the_size_it_takes():
    """tools.gfx950.cross_compile's install message and README give one figure; where the runner's
    Triton is installed, it is within 10 % of the folder's real size."""
    import re
    from mxfp4_mm.tools.gfx950.cross_compile import RUNNER_TRITON, SIDE_TRITONS
    stated = re.findall(r"about (\d+) MiB", (ROOT / "tools" / "gfx950" / "cross_compile.py").read_text())
    assert len(stated) == 1
    assert f"about {stated[0]} MiB" in (ROOT / "README.md").read_text()
    folder = SIDE_TRITONS / RUNNER_TRITON
    if not (folder / "triton").is_dir():
        pytest.skip(f"no side install of Triton {RUNNER_TRITON} to measure")
    size_mib = sum(path.stat().st_size for path in folder.rglob("*")
                   if path.is_file() and not path.is_symlink()) / 2**20
    assert abs(size_mib - int(stated[0])) <= 0.1 * size_mib, size_mib


@pytest.mark.parametrize("parse, accepted, refused", [
    (cli.positive_int, ["1", "12"], ["0", "-1", "1.5", "x"]),
    (cli.non_negative_int, ["0", "3"], ["-1", "x"]),
    (cli.positive_float, ["0.001", "10"], ["0", "-0.5", "nan", "x"]),
    (cli.clear_bytes, ["4", "1073741824"], ["3", "0", "x"]),
])
def test_option_values_are_checked_at_their_bounds(parse, accepted, refused):
    for word in accepted:
        assert parse(word) == type(parse(word))(word)
    for word in refused:
        with pytest.raises(argparse.ArgumentTypeError, match=f"got {word!r}"):
            parse(word)


def test_an_output_file_needs_a_writable_folder_and_is_no_folder(tmp_path):
    (tmp_path / "a_file").write_text("")
    assert cli.output_file(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    assert cli.output_file(str(tmp_path / "a_file")) == str(tmp_path / "a_file")
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory; name a file"):
        cli.output_file(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match="is not a directory"):
        cli.output_file(str(tmp_path / "missing" / "x.json"))
    assert cli.output_file(str(tmp_path / "missing" / "x.json"), make_folders=True)
    with pytest.raises(argparse.ArgumentTypeError, match="a_file is not a directory"):
        cli.output_file(str(tmp_path / "a_file" / "deeper" / "x.json"), make_folders=True)


def test_an_output_folder_may_be_made_below_a_folder_but_not_below_a_file(tmp_path):
    (tmp_path / "a_file").write_text("")
    assert cli.output_folder(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" / "deeper")
    with pytest.raises(argparse.ArgumentTypeError, match="a_file is not a directory"):
        cli.output_folder(str(tmp_path / "a_file" / "asm"))
    assert not (tmp_path / "new").exists()
