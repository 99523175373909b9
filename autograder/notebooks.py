"""Where a chapter's notebook sources and derived files are, for the grader (the notebook builder that writes them
is the maintainers' ``scripts/build_notebooks/``, not part of the installed package).

For a chapter ``chNN_name``: the template ``notebooks/templates/chNN_name.py`` (jupytext percent format), the
reference ``solutions/chNN_name.py`` (the student's part of each exercise between :data:`BEGIN` and :data:`END`),
the checks ``autograder/chNN_name.py``, and the derived release notebook ``notebooks/chNN_name.ipynb`` and sample
submissions ``autograder/samples/chNN_name/*.ipynb``.
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
