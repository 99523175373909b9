"""Scaffold a new chapter: ``python -m scripts.scaffold ch09_sparse_attention "Sparse attention"`` (a contributor's
tool: it is not in the package students and graders install).

Writes the four parts of CONTRIBUTING.md's table plus the chapter's test file and its Chinese catalogue, each holding a small, working
placeholder (a function exercise and a class exercise, with checks, two catalogued bugs, a notebook template, a
book page with a figure and oracle tests), and adds the page to ``_toc.yml``. Every "TODO" marks what the
chapter's author replaces. The placeholders pass the chapter-wide tests except the ones that need the real
chapter: ``tests/test_checks.py::test_catalogue_size`` fails until the catalogue has 8 bugs. Then
``python -m scripts.build_notebooks`` generates the notebook, samples and nbgrader source.

Existing files are never overwritten.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

STEM = re.compile(r"ch(\d\d)_[a-z][a-z0-9_]*")

SOLUTION = '''"""{title} — TODO: the chapter's idea in a paragraph, in the order of the book page.

TODO: the source (author year, section, equation numbers); every formula below cites it.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["example_function", "ExampleModule"]


def example_function(x: torch.Tensor) -> torch.Tensor:
    """TODO: replace with the chapter's first exercise (a function). Softmax over the last dimension.

    Args:
        x: ``(..., T)`` float tensor.

    Returns:
        ``(..., T)``, same dtype and device; each row sums to 1.

    Raises:
        ValueError: if ``x`` is 0-dimensional (the message names its shape).

    Source: TODO (paper, equation).
    """
    if x.ndim == 0:
        raise ValueError(f"x must have at least one dimension, got shape {{tuple(x.shape)}}")
    ### BEGIN SOLUTION
    return torch.softmax(x, dim=-1)  # (..., T)
    ### END SOLUTION


class ExampleModule(nn.Module):
    """TODO: replace with the chapter's second exercise (a class). One linear map ``d_model -> d_model``.

    Args:
        d_model: model width.

    Forward: ``x`` ``(B, T, d_model)`` -> ``(B, T, d_model)``, same dtype and device.

    Source: TODO (paper, equation).
    """

    def __init__(self, d_model: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.proj = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.proj(x)  # (B, T, d_model)
        ### END SOLUTION
'''

CHECKS = '''"""Checks for {title} (notebook ``notebooks/{stem}.ipynb``).

TODO: say which independent oracles the references come from (PyTorch, Hugging Face, a formula). They are bound
here at import time, so that a student cell that rebinds them does not change the reference.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.functional import linear as _linear

from .core import Exercises, call, expect_close, expect_true, rng
from .wording import Message

_softmax = torch.softmax

EXERCISES = Exercises("{stem}")


# ---------------------------------------------------------------- exercise 1: example_function (TODO)
@EXERCISES.check("example_function", points=2)
def _function_matches_softmax(fn):
    """example_function(x) equals torch.softmax(x, dim=-1) for x of shape (2, 3, 5)"""
    x = torch.randn(2, 3, 5, generator=rng(0))
    expect_close("example_function(x)", call("example_function(x)", fn, x), _softmax(x, dim=-1))


@EXERCISES.check(
    "example_function",
    hidden=True,
    requires="works for another shape and float64",  # TODO what this check requires, one short sentence
)
def _function_other_shape(fn):
    """example_function on another shape and float64"""
    x = torch.randn(4, 7, generator=rng(1), dtype=torch.float64)
    expect_close("example_function(x)", call("example_function(x)", fn, x), _softmax(x, dim=-1), hidden=True)


# ---------------------------------------------------------------- exercise 2: ExampleModule (TODO)
def _module_case(cls, d_model: int, seed: int, hidden: bool = False) -> None:
    torch.manual_seed(seed)
    module = call(Message("ExampleModule({{d_model}})", d_model=d_model), cls, d_model)
    expect_true(
        isinstance(getattr(module, "proj", None), nn.Linear),
        "ExampleModule should keep its projection as an nn.Linear attribute named proj.",
    )
    x = torch.randn(2, 3, d_model, generator=rng(seed))
    expected = _linear(x, module.proj.weight, module.proj.bias).detach()
    expect_close("ExampleModule(x)", call("ExampleModule.forward", module, x), expected, hidden=hidden)


@EXERCISES.check("ExampleModule", points=2)
def _module_matches_linear(cls):
    """ExampleModule(8) applies its proj to x of shape (2, 3, 8)"""
    _module_case(cls, 8, seed=0)


@EXERCISES.check(
    "ExampleModule",
    hidden=True,
    requires="works for another width",  # TODO
)
def _module_other_width(cls):
    """ExampleModule with another width"""
    _module_case(cls, 6, seed=1, hidden=True)


# TODO checks for the blind-spot classes (CONTRIBUTING.md): expect_dropout_modes, expect_seeded (generator=),
# expect_half_precision (float16/bfloat16), every input form the docstring allows; tensors made without device= are
# caught by call() itself. An exercise that calls another one needs @EXERCISES.reference("that one").
'''

CATALOGUE = '''"""The catalogue of {stem}'s checks (see catalogue/__init__.py): bugs each caught by some check, correct
answers each given full marks."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# The bug catalogue: typical mistakes, each caught by some check (tests/test_checks.py). TODO: at least 12, covering
# dropout, generator=, device, half precision and inputs the docstring allows where the exercises have them; the
# first is the bug of the sample submissions, which must cost some points but not all.
MUTANTS = [
    Mutant(
        "softmax over the wrong dimension",
        "example_function",
        (("dim=-1", "dim=0"),),
        "normalises over the first dimension instead of the last",
    ),
    Mutant("projection skipped", "ExampleModule", (("return self.proj(x)", "return x"),), "forward ignores proj"),
]

# Valid answers written differently from the reference, each getting full marks (tests/test_checks.py). TODO: at
# least 4 (einsum for @, torch.where for masked_fill, float64 inside, other reshapes, functional calls, ...).
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "softmax by logsumexp",
        "example_function",
        (("torch.softmax(x, dim=-1)", "torch.exp(x - x.logsumexp(dim=-1, keepdim=True))"),),
        "the softmax written out through logsumexp",
    ),
]

# Whole answers written from the page and the notebook, not from the reference (tests/test_alternatives_graded.py).
# TODO: at least 3 per exercise; each starts from the exercise's stub as the release notebook gives it (head).
REWRITES: list[Rewrite] = [
    Rewrite(
        "softmax written out",
        "example_function",
        head("{stem}", "example_function") + "    e = torch.exp(x - x.amax(dim=-1, keepdim=True))\\n"
        "    return e / e.sum(dim=-1, keepdim=True)\\n",
        "the softmax by exp and a sum, shifted by the row maximum",
    ),
]
'''

# The chapter's Chinese (tests/test_catalogues.py): every message of the checks above, keyed by its English.
LOCALE_ZH = """{{
 "example_function(x) equals torch.softmax(x, dim=-1) for x of shape (2, 3, 5)": "（TODO 译文）example_function(x) 等于 torch.softmax(x, dim=-1)，x 的形状为 (2, 3, 5)",
 "example_function(x)": "example_function(x)",
 "works for another shape and float64": "（TODO 译文）适用于其他形状和 float64",
 "example_function on another shape and float64": "（TODO 译文）example_function 作用于其他形状和 float64",
 "ExampleModule should keep its projection as an nn.Linear attribute named proj.": "（TODO 译文）ExampleModule 应把它的投影保存为名为 proj 的 nn.Linear 属性。",
 "ExampleModule(x)": "ExampleModule(x)",
 "ExampleModule(8) applies its proj to x of shape (2, 3, 8)": "（TODO 译文）ExampleModule(8) 把它的 proj 作用于形状为 (2, 3, 8) 的 x",
 "works for another width": "（TODO 译文）适用于其他宽度",
 "ExampleModule with another width": "（TODO 译文）其他宽度的 ExampleModule"
}}
"""

TEMPLATE = """# %% [markdown]
# # {title}: exercises
#
# TODO: what the student writes, in the order the book explains it:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `example_function(x)` — TODO | 2 |
# | 2 | `ExampleModule` — TODO | 2 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import torch
from torch import nn

torch.manual_seed(0)

# %% [markdown]
# ## Exercise 1 — TODO (2 points)
#
# TODO: the formula and the shapes: `x: (..., T)` -> `(..., T)`.

# %% exercise="example_function"

# %% [markdown]
# ## Exercise 2 — TODO (2 points)
#
# TODO: `ExampleModule(d_model)` keeps an `nn.Linear` named `proj`; `forward(x)` maps `(B, T, d_model)` to
# `(B, T, d_model)`.

# %% exercise="ExampleModule"

# %% [markdown]
# ## Try it
#
# TODO: a short demonstration that uses the exercises.

# %%
print(example_function(torch.tensor([1.0, 2.0, 3.0])))
"""

PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {number}. {title}

*TODO: the Chinese name (中文)*

TODO: the chapter's story, in the order of `solutions/{stem}.py`.

| | |
|---|---|
| Code | `solutions/{stem}.py` |
| Exercises | `notebooks/{stem}.ipynb` (the Colab button above opens it) |
| Paper | TODO (author year, section, equation) |

```{{code-cell}} ipython3
:tags: [remove-cell]
import matplotlib.pyplot as plt
import torch

plt.style.use("figures.mplstyle")
```

```{{code-cell}} ipython3
from solutions.{stem} import example_function

x = torch.linspace(-3, 3, 7)
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(range(len(x)), example_function(x))
ax.set_xlabel("position")
ax.set_ylabel("weight")
ax.set_title("TODO: a figure drawn by this page's code")
fig.tight_layout()
```

**References, terms and notation.** Every paper cited on this page, with links, is in the [bibliography](bibliography.md); its terms, with their Chinese names, are in the [glossary](glossary.md) (术语表); the symbols and shape letters are in the [notation](notation.md) table.
"""

TESTS = '''"""The {stem} solution against independent oracles, on every device. TODO: the chapter's real oracles."""

import torch
import torch.nn.functional as F

from solutions.{stem} import ExampleModule, example_function
from tests.conftest import tolerance


def test_example_function_matches_torch_softmax(device):
    x = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0)).to(device)
    torch.testing.assert_close(example_function(x), F.softmax(x, dim=-1), **tolerance(x.dtype))


def test_example_module_matches_f_linear(device):
    module = ExampleModule(8).to(device)
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1)).to(device)
    expected = F.linear(x, module.proj.weight, module.proj.bias)
    torch.testing.assert_close(module(x), expected, **tolerance(x.dtype))
'''


def _toc_with(toc: str, stem: str) -> str:
    """``_toc.yml`` with ``book/<stem>`` after the last chapter page that sorts before it (or the first)."""
    lines = toc.splitlines(keepends=True)
    entries = [(i, m[1]) for i, line in enumerate(lines) if (m := re.match(r"\s*- file: book/(ch\d\d_\w+)\s*$", line))]
    if not entries:
        raise ValueError("_toc.yml lists no chapter page (- file: book/chNN_name)")
    before = [(i, s) for i, s in entries if s < stem]
    i, _ = before[-1] if before else entries[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    new = f"{indent}- file: book/{stem}\n"
    at = i + 1 if before else i
    return "".join(lines[:at] + [new] + lines[at:])


def scaffold(root: pathlib.Path, stem: str, title: str) -> list[pathlib.Path]:
    """Write the chapter's files under ``root`` and list it in ``_toc.yml``; return the paths written.

    Raises:
        ValueError: if ``stem`` is not ``chNN_name`` (lower case) or any of the files already exists.
    """
    m = STEM.fullmatch(stem)
    if not m:
        raise ValueError(f"chapter stem {stem!r} must look like ch09_sparse_attention (chNN_ + lower-case name)")
    fields = {"stem": stem, "title": title, "number": int(m[1])}
    files = {
        root / "solutions" / f"{stem}.py": SOLUTION,
        root / "autograder" / f"{stem}.py": CHECKS,
        root / "catalogue" / f"{stem}.py": CATALOGUE,
        root / "notebooks" / "templates" / f"{stem}.py": TEMPLATE,
        root / "book" / f"{stem}.md": PAGE,
        root / "tests" / f"test_{stem}.py": TESTS,
        root / "autograder" / "locale" / "zh" / f"{stem}.json": LOCALE_ZH,
    }
    existing = [str(p.relative_to(root)) for p in files if p.exists()]
    if existing:
        raise ValueError(f"{stem} already has {', '.join(existing)}: nothing written")
    toc = root / "_toc.yml"
    text = toc.read_text()
    if f"book/{stem}\n" in text:
        raise ValueError(f"_toc.yml already lists book/{stem}: nothing written")
    for path, content in files.items():
        path.write_text(content.format(**fields))
    toc.write_text(_toc_with(text, stem))
    return [*files, toc]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.scaffold", description=__doc__.split("\n\n")[0])
    parser.add_argument("stem", help="chapter stem, e.g. ch09_sparse_attention")
    parser.add_argument("title", help='the page title, e.g. "Sparse attention"')
    parser.add_argument("--root", default=None, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.root is None:
        from autograder import notebooks

        root = notebooks.ROOT
    else:
        root = pathlib.Path(args.root)
    try:
        written = scaffold(root, args.stem, args.title)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print("wrote", path.relative_to(root))
    print(
        f"Next: replace every TODO (CONTRIBUTING.md lists the rules the tests enforce), catalogue at least 8 bugs,\n"
        f"add the chapter to the README's table, then `python -m scripts.build_notebooks {args.stem}` and run the tests."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
