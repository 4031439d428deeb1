"""Shared test setup: the interpreter on machines without a GPU, and the device to test on."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def device():
    """Where the kernels run: the GPU when one is present and not interpreting, else the CPU."""
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return "cuda"
    return "cpu"
