"""Which Triton chapter 11 installs beside the installed torch, where none is installed. Imports no Triton (the
chapter's own module does, at import), so the notebook's set-up and the chapter's error message can ask it first.

Source: the ``Requires-Dist`` lines of PyTorch's Linux wheels on PyPI, release by release.
"""

from __future__ import annotations

import re

# The Triton that PyTorch's Linux wheels of each release require (their `Requires-Dist: triton...` on PyPI). PyTorch's
# CPU-only wheels (`2.11.0+cpu`, Colab's CPU runtime) require none, but torch imports the Triton it finds (torch._dynamo
# does), and each release is built and tested against its own.
TRITON_FOR_TORCH = {
    (2, 10): "triton==3.6.0",
    (2, 11): "triton==3.6.0",
    (2, 12): "triton==3.7.0",
    (2, 13): "triton==3.7.1",
    (2, 14): "triton~=3.8.0",
}
TRITON_VERSION = "3.9.0"  # the newest Triton the chapter is tested with (requirements.txt); 3.6 to 3.9 all work


def triton_requirement(torch_version: str | None = None, torch_requires: list[str] | None = None) -> str:
    """The Triton to install beside this torch, where none is installed: the one this torch was released with.

    Chapter 11's kernels are tested with Triton 3.6 to 3.9 (under the interpreter). The rule, in order: the Triton that
    the installed torch's own metadata requires (a torch from PyPI on Linux; it is normally installed with it); else
    the Triton that the Linux wheels of the same torch release require, from :data:`TRITON_FOR_TORCH` (torch 2.11
    gives ``triton==3.6.0``: Colab's CPU runtime, whose ``torch 2.11.0+cpu`` comes without Triton); else, for a torch
    release not listed, ``triton==`` :data:`TRITON_VERSION`.

    Args:
        torch_version: e.g. ``"2.11.0+cpu"`` (default: the installed torch's ``torch.__version__``).
        torch_requires: torch's ``Requires-Dist`` lines (default: the installed torch's, from its metadata).

    Returns:
        A pip requirement, e.g. ``"triton==3.6.0"``.
    """
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    if torch_requires is None:
        from importlib import metadata

        try:
            torch_requires = metadata.requires("torch") or []
        except metadata.PackageNotFoundError:  # torch built from source
            torch_requires = []
    for line in torch_requires:
        requirement, _, marker = line.partition(";")
        requirement = requirement.replace(" ", "")
        if re.fullmatch(r"triton([=~<>!].*)?", requirement) and "extra" not in marker:
            return requirement
    major, minor = (int(n) for n in torch_version.split("+", 1)[0].split(".")[:2])
    return TRITON_FOR_TORCH.get((major, minor), f"triton=={TRITON_VERSION}")


__all__ = ["TRITON_FOR_TORCH", "TRITON_VERSION", "triton_requirement"]
