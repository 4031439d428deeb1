"""The tools' command lines: shared shape words, a prog of `python -m tools.X`, help for every
option, and tools.timing refusing to run as a command."""

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.configs import BENCHMARK_SHAPES, TASK_SHAPES, TEST_SHAPES
from tools import cli

ROOT = Path(__file__).resolve().parents[1]
TOOLS_WITH_OPTIONS = ("check", "evaluate", "bundle", "soak", "bench", "tune", "profile")


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


class _Parsed(Exception):
    pass


@pytest.mark.parametrize("name", TOOLS_WITH_OPTIONS)
def test_prog_and_help_of_every_option(name, monkeypatch):
    parsers = []

    def capture(parser, args=None, namespace=None):
        parsers.append(parser)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    tool = importlib.import_module(f"tools.{name}")
    with pytest.raises(_Parsed):
        tool.main(["test"] if name == "evaluate" else [])
    parser, = parsers
    assert parser.prog == f"python -m tools.{name}"
    for action in parser._actions:
        assert action.help, f"tools.{name} {action.option_strings or action.dest} has no help"


def test_timing_is_not_a_command():
    result = subprocess.run([sys.executable, "-m", "tools.timing", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("tools.timing is a library")
