"""Shared fixtures: run device-dependent tests on every available device."""

import pytest
import torch

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device")])]


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """Each test that takes ``device`` runs on the CPU, and on CUDA when present (skipped otherwise)."""
    return torch.device(request.param)


def tolerance(dtype: torch.dtype) -> dict:
    """assert_close tolerances by dtype."""
    return {torch.float64: dict(rtol=1e-10, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5),
            torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}[dtype]
