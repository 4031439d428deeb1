"""submission.py's import-time work, with the GPU and the launchers' work faked: pre-warm and
tuning when imported, the pre-warm alone when run as a script (the runner's step before each
mode), nothing under the interpreter."""

import runpy
from pathlib import Path

import pytest
import torch

from mxfp4_mm import launchers
from mxfp4_mm.launchers import tuner

SUBMISSION = Path(__file__).resolve().parents[1] / "submission.py"


@pytest.fixture
def work(monkeypatch):
    done = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(launchers, "interpreting", lambda: False)
    monkeypatch.setattr(launchers, "prewarm", lambda: done.append("prewarm"))
    monkeypatch.setattr(launchers, "tune_launchers", lambda: done.append("tune"))
    monkeypatch.setattr(tuner, "tuning_enabled", lambda: True)
    return done


def test_imported_it_prewarms_and_tunes(work):
    runpy.run_path(str(SUBMISSION), run_name="submission")
    assert work == ["prewarm", "tune"]


def test_run_as_a_script_it_prewarms_only(work):
    runpy.run_path(str(SUBMISSION), run_name="__main__")
    assert work == ["prewarm"]


def test_under_the_interpreter_it_does_nothing_at_import(work, monkeypatch):
    monkeypatch.setattr(launchers, "interpreting", lambda: True)
    runpy.run_path(str(SUBMISSION), run_name="submission")
    assert work == []
