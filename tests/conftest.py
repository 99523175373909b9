"""Shared fixtures: run device-dependent tests on every available device."""

import os

import pytest
import torch

from autograder.grading import jail

# The development machines and CI run as root with a Python installation under /root, where a kernel cannot drop
# to its own uid: the tests of fallback mode (no jail) accept kernels as root; test_jail.py checks the refusal.
os.environ.setdefault(jail.ROOT_KERNELS, "allow")

from autograder.core import default_tolerance

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]
    ),
]


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """Each test that takes ``device`` runs on the CPU, and on CUDA when present (skipped otherwise)."""
    return torch.device(request.param)


def tolerance(dtype: torch.dtype) -> dict:
    """assert_close tolerances by dtype: the autograder's one table (``autograder.core.default_tolerance``)."""
    rtol, atol = default_tolerance(dtype)
    return dict(rtol=rtol, atol=atol)


# Six toy English-French pairs that the chapter 1 and 2 models must learn by heart (overfitting tests).
TINY_PAIRS = [
    ("one two three", "un deux trois"),
    ("three two", "trois deux"),
    ("two two one", "deux deux un"),
    ("one", "un"),
    ("three one two one", "trois un deux un"),
    ("two", "deux"),
]
