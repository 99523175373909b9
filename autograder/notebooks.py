"""Where a chapter's sources and derived files are, for the grader: for ``chNN_name``, the template
``notebooks/templates/chNN_name.py``, the reference ``solutions/chNN_name.py`` (the student's part of each exercise
between :data:`BEGIN` and :data:`END`), the release notebook ``notebooks/chNN_name.ipynb`` and the sample
submissions ``autograder/samples/chNN_name/`` (the builder that writes them: ``scripts/build_notebooks/``).
"""

from __future__ import annotations

import pathlib

from .releases import (  # noqa: F401 - KERNELSPEC, checks_module: re-exported
    KERNELSPEC,
    checks_module,
)

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
RELEASE_DIR = ROOT / "notebooks"
# The notebooks' sources live beside the notebooks; an installed package carries them as autograder/_release/templates/.
TEMPLATES = next(
    (d for d in (RELEASE_DIR / "templates", PACKAGE_DIR / "_release" / "templates") if d.is_dir()),
    RELEASE_DIR / "templates",
)
SAMPLES = PACKAGE_DIR / "samples"

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def chapters() -> list[str]:
    """Chapter stems that have a notebook template, in course order."""
    return sorted(p.stem for p in TEMPLATES.glob("ch[0-9][0-9]_*.py"))
