"""No private torch name without a fallback: every private torch name the course package uses (``torch._*``,
``torch.utils._*``, a ``_name`` of a public torch module) is on a short allow-list that says either which torch
releases it is known present in, or the fallback the code has where it is missing.

"Known present" is checked, not claimed: here on the development torch (whose release must be on the entry's list),
and on the torch of Colab's runtimes (``tests/platforms.toml``) by ``tests/test_colab_surface.py``, which imports
each of them in the Colab-like virtualenv. A name is found by reading the code (AST): imports, ``from`` imports and
attribute chains from a name bound to torch or one of its modules, in ``solutions/`` and ``autograder/``.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
from dataclasses import dataclass

import pytest
import torch
from packaging.version import Version

from tests import platforms

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("solutions", "autograder")
SKIP = ("autograder/samples/",)  # submissions, not the package's code


@dataclass(frozen=True)
class Private:
    """Torch releases the name is known present in (checked by the tests), or the code's fallback where it is not."""

    present_in: tuple[str, ...] = ()
    fallback: str = ""


# Checked on torch 2.11.0 (Colab's runtimes, tests/test_colab_surface.py) and 2.13.0 (development).
KNOWN = ("2.11.0", "2.13.0")
ALLOWED: dict[str, Private] = {
    # The device checks (autograder/checks/device.py): PyTorch's fake tensors decide what would fail on a GPU.
    # (Its FakeTensorDeviceMismatchError, torch 2.12 and later, is looked up with getattr, with a fallback for 2.11.)
    "torch._subclasses.fake_tensor": Private(KNOWN),
    "torch._subclasses.fake_tensor.FakeTensorMode": Private(KNOWN),
    "torch._C._dispatch_tls_is_dispatch_key_excluded": Private(KNOWN),
    "torch._C.DispatchKey.Python": Private(KNOWN),
    "torch.utils._device.DeviceContext": Private(KNOWN),
    # Walking nested outputs and watching the ops an answer runs (autograder/checks/).
    "torch.utils._pytree": Private(KNOWN),
    "torch.utils._pytree.tree_leaves": Private(KNOWN),
    "torch.utils._python_dispatch.TorchDispatchMode": Private(KNOWN),
    # Chapter 12: score_mod over the whole grid as flex_attention's eager path evaluates it.
    "torch._dynamo._trace_wrapped_higher_order_op.TransformGetItemToIndex": Private(KNOWN),
    "torch.nn.attention.flex_attention._vmap_for_bhqkv": Private(KNOWN),
}


def _is_private(dotted: str) -> bool:
    return dotted.split(".")[0] == "torch" and any(
        p.startswith("_") and not p.startswith("__") for p in dotted.split(".")
    )


class _Names(ast.NodeVisitor):
    """Private torch names a module's code uses, each with its first line."""

    def __init__(self):
        self.aliases: dict[str, str] = {}  # local name -> the torch module or object it is bound to
        self.found: dict[str, int] = {}

    def _add(self, dotted: str, line: int) -> None:
        if _is_private(dotted):
            self.found.setdefault(dotted, line)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "torch":
                self._add(alias.name, node.lineno)
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    self.aliases["torch"] = "torch"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and node.module.split(".")[0] == "torch":
            for alias in node.names:
                self._add(f"{node.module}.{alias.name}", node.lineno)
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain, inner = [], node
        while isinstance(inner, ast.Attribute):
            chain.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and inner.id in self.aliases:
            self._add(".".join([self.aliases[inner.id], *reversed(chain)]), node.lineno)
            return  # the inner attributes are prefixes of this chain
        self.generic_visit(node)


def used_private_names() -> dict[str, list[str]]:
    """``{private torch name: ["path:line", ...]}`` over the package's modules."""
    used: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(SKIP):
                continue
            names = _Names()
            names.visit(ast.parse(path.read_text(), filename=rel))
            for name, line in names.found.items():
                used.setdefault(name, []).append(f"{rel}:{line}")
    return used


def resolve(dotted: str):
    """The object ``dotted`` names: the longest importable module prefix, then attributes. Raises where missing."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_private_torch_name_the_package_uses_is_allowed():
    used = used_private_names()
    unlisted = {name: where for name, where in used.items() if name not in ALLOWED}
    assert not unlisted, (
        "private torch names not on tests/test_private_torch_names.py's ALLOWED (each needs the releases it is known "
        f"present in, checked, or a fallback in the code): {unlisted}"
    )
    stale = sorted(set(ALLOWED) - set(used))
    assert not stale, f"ALLOWED names no longer used (remove them): {stale}"


def test_the_allow_list_covers_the_platforms_torch():
    """Every entry without a fallback is known present in each torch a platform runs."""
    for platform, version in platforms.torch_versions().items():
        for name, entry in ALLOWED.items():
            assert entry.fallback or version.public in entry.present_in, (platform, str(version), name)


@pytest.mark.parametrize("name", [n for n, e in ALLOWED.items() if not e.fallback])
def test_each_allowed_name_is_in_this_torch(name):
    """Checked here on the development torch, which must be one of the releases the entry lists."""
    assert Version(torch.__version__).public in ALLOWED[name].present_in, (torch.__version__, name)
    resolve(name)


def test_the_scan_finds_private_imports_and_attributes(tmp_path):
    source = (
        "import torch\nimport torch.utils._pytree as pt\nfrom torch._x.y import Z\nfrom torch.nn import _private\n"
        "from torch.nn import Linear\nx = torch._C._f(pt.tree_map, torch.nn.functional.relu)\n"
    )
    names = _Names()
    names.visit(ast.parse(source))
    assert sorted(names.found) == [
        "torch._C._f",
        "torch._x.y.Z",
        "torch.nn._private",
        "torch.utils._pytree",
        "torch.utils._pytree.tree_map",
    ]
