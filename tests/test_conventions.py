"""Code conventions of CONTRIBUTING.md that no other test covers."""

import importlib
import inspect
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = sorted(p.stem for p in (ROOT / "solutions").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("stem", MODULES)
def test_public_functions_and_classes_have_docstrings(stem):
    """Every public function and class a solution module defines says what it takes and returns."""
    module = importlib.import_module(f"solutions.{stem}")
    missing = [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
        and not (obj.__doc__ or "").strip()
    ]
    assert not missing, f"solutions/{stem}.py: no docstring on {missing}"
