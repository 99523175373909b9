"""The grading kernel's form of a chapter's checks: the questions without the answers.

:func:`kernel_form` cuts each check, and each helper that calls into the answer, down to the statements its calls
depend on (their inputs, the control flow around them, the state they change): no comparison, oracle, hint or course
version of an exercise, and a ``raise`` keeps only its place. :func:`stage_checks` writes the ``autograder`` package
a grading kernel imports, every chapter's checks in that form; :func:`reference_sources` gives the source of each
course version of an exercise with what it needs, for the worker to hand to the recorder. Design:
docs/grading-design.md ("The kernel holds questions, never answers"); held to it by tests/test_questions.py.
"""

from __future__ import annotations

import ast
import compileall
import copy
import pathlib
import shutil
from collections.abc import Mapping
from typing import Any

# Calls that run the student's code: the trace's own, and the shared property checks that call the answer themselves.
CALLING = frozenset({"call", "observe", "expect_seeded", "expect_dropout_modes", "expect_half_precision"})
# Calls that only read (and a module's helpers named ``_expect…``/``_compare…`` that make no call into the answer).
COMPARISONS = frozenset({"expect_close", "expect_equal", "expect_shape", "expect_true"})
_STATE_ROOTS = frozenset({"torch"})  # method calls on them change state a later call sees (``torch.manual_seed``)
_STOP = "_KernelStop"  # what a kept ``raise`` raises in the kernel form (the check stops; its message is the worker's)


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _calls(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _target_names(target: ast.AST) -> set[str]:
    """Names a store to ``target`` defines or changes: ``a``, ``a, b``, ``a[i]`` and ``a.x`` (a change of ``a``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        base = target.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return {base.id} if isinstance(base, ast.Name) else set()
    return set()


def _receivers(expr: ast.AST) -> set[str]:
    """``{"q"}`` for ``q.requires_grad_()``, ``{"torch"}`` for ``torch.manual_seed(0)``: the names whose state the
    method calls of an expression statement may change (``a.f(), b.g()`` too)."""
    found = set()
    for node in expr.elts if isinstance(expr, ast.Tuple) else [expr]:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                base = base.func if isinstance(base, ast.Call) else base.value
            if isinstance(base, ast.Name):
                found.add(base.id)
    return found


def _outer_calls(node: ast.AST, calling: frozenset[str]) -> list[ast.Call] | None:
    """The outermost calls into the answer inside expression ``node``, in the order Python evaluates them, when
    none is inside a lambda (then None: the expression is kept whole)."""
    found: list[ast.Call] = []

    def visit(n: ast.AST) -> bool:
        if isinstance(n, ast.Lambda):
            return not (_calls(n) & calling)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in calling:
            found.append(n)
            return True
        return all(visit(c) for c in ast.iter_child_nodes(n))

    return found if visit(node) else None


class _Slicer:
    """One function's body cut to the statements its calls into the answer depend on (see the module docstring).

    ``live``: the names a kept statement reads, grown to a fixed point (a name read anywhere keeps every statement
    that defines or changes it: loops make the order of statements no guide)."""

    def __init__(self, calling: frozenset[str], comparisons: frozenset[str] = COMPARISONS):
        self.calling = calling
        self.comparisons = comparisons
        self.live: set[str] = set()

    def essential(self, node: ast.AST) -> bool:
        return bool(_calls(node) & self.calling)

    def body(self, stmts: list[ast.stmt]) -> tuple[list[ast.stmt], bool]:
        out, needed = [], False
        for s in stmts:
            kept, need = self.stmt(s)
            if kept is not None:
                out.append(kept)
                needed = needed or need
        return out, needed

    def stmt(self, s: ast.stmt) -> tuple[ast.stmt | None, bool]:
        """(the statement as kept or None, whether it is needed on its own). A ``raise``, ``break`` or ``return``
        of nothing essential is kept only inside a block kept for another statement."""
        if isinstance(s, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Try)):
            return self.compound(s)
        if isinstance(s, ast.Raise):  # the check stops here, as it did; what it said is the worker's to say
            return ast.Raise(exc=None if s.exc is None else ast.Name(_STOP, ast.Load()), cause=None), False
        if isinstance(s, (ast.Break, ast.Continue, ast.Pass, ast.Global, ast.Nonlocal)):
            return s, False
        if isinstance(s, ast.Return):
            if s.value is None:
                return s, False
            self.live |= _loads(s.value)
            return s, self.essential(s.value)
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            defined = set().union(*(_target_names(t) for t in targets))
            if defined & self.live:
                self.live |= _loads(s) | (defined if not isinstance(s, ast.Assign) else set())
                return s, True
            if self.essential(s) and s.value is not None:
                return self.reduced(s, s.value)
            return None, False
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):  # a docstring: the check's label
                return s, False
            outer = s.value.func.id if isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name) else ""
            if self.essential(s) and outer in self.comparisons:
                return self.reduced(s, s.value)
            if (
                self.essential(s)
                or _receivers(s.value) & (_STATE_ROOTS | self.live)
                or (outer not in self.comparisons and _loads(s.value) & self.live)
            ):
                self.live |= _loads(s)
                return s, True
            return None, False
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if self.essential(s) and isinstance(s, ast.FunctionDef):
                s = _Slicer(self.calling, self.comparisons).function(s)
            elif not self.essential(s) and s.name not in self.live:
                return None, False
            self.live |= _loads(s)
            return s, True
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            names = {(a.asname or a.name).split(".")[0] for a in s.names}
            return (s, True) if names & self.live else (None, False)
        return None, False  # assert, del, ...: a reading of the answer, the worker's

    def compound(self, s: Any) -> tuple[ast.stmt | None, bool]:
        """A block statement with its blocks cut, kept when one of them holds a needed statement (a loop also when
        its target is live); what its head reads becomes live."""
        new, needed = copy.copy(s), False
        for field in ("body", "orelse", "finalbody"):
            if hasattr(s, field):
                kept, need = self.body(getattr(s, field))
                setattr(new, field, kept or ([ast.Pass()] if field == "body" else []))
                needed = needed or need
        if isinstance(s, ast.Try):
            new.handlers = []
            for h in s.handlers:
                kept, need = self.body(h.body)
                new.handlers.append(ast.ExceptHandler(type=h.type, name=h.name, body=kept or [ast.Pass()]))
                needed = needed or need
        if not (needed or isinstance(s, (ast.For, ast.AsyncFor)) and _target_names(s.target) & self.live):
            return None, False
        if isinstance(s, ast.Try):
            heads = [h.type for h in s.handlers if h.type is not None]
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            heads = [item.context_expr for item in s.items]
        else:
            heads = [s.iter if isinstance(s, (ast.For, ast.AsyncFor)) else s.test]
        for head in heads:
            self.live |= _loads(head)
        return new, True

    def reduced(self, s: ast.stmt, value: ast.AST) -> tuple[ast.stmt, bool]:
        """``s``, essential: whole when it is itself a call into the answer (or one is in a lambda), else only its
        calls into the answer (an ``expect_*`` fed by one: the call stays, the comparison and its expected value go)."""
        whole = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in self.calling
        calls = None if whole else _outer_calls(value, self.calling)
        kept: ast.stmt = s
        if calls:
            exprs: list[ast.stmt] = [ast.copy_location(ast.Expr(c), s) for c in calls]
            kept = exprs[0] if len(exprs) == 1 else ast.If(ast.Constant(True), exprs, [])
        self.live |= _loads(kept)
        return kept, True

    def function(self, fn: ast.FunctionDef) -> ast.FunctionDef:
        doc = _docstring(fn.body)
        while True:
            before = set(self.live)
            body, _ = self.body(fn.body[len(doc) :])
            if self.live == before:
                break
        new = copy.copy(fn)
        new.body, new.returns = doc + body or [ast.Pass()], None
        return new


def _docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    """The docstring statement of ``body`` (a list of one), or []."""
    return body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []


def _decorator_name(fn: ast.FunctionDef) -> str:
    """``check`` for ``@EXERCISES.check(...)``, ``reference`` for ``@EXERCISES.reference(...)``, else ""."""
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "EXERCISES":
            return f.attr
    return ""


def _registered_reference(s: ast.stmt) -> tuple[str, str] | None:
    """``(exercise, name)`` for a module-level ``EXERCISES.reference("exercise")(name)`` (a class registered as the
    course's version), else None."""
    match s:
        case ast.Expr(
            ast.Call(ast.Call(ast.Attribute(ast.Name("EXERCISES"), "reference"), [exercise]), [ast.Name(name)])
        ):
            return ast.literal_eval(exercise), name
    return None


def _defines(s: ast.stmt) -> set[str]:
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {s.name}
    if isinstance(s, ast.Assign):
        return set().union(*(_target_names(t) for t in s.targets))
    if isinstance(s, (ast.AugAssign, ast.AnnAssign)):
        return _target_names(s.target)
    if isinstance(s, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in s.names}
    return set()


def _calling_functions(tree: ast.Module) -> frozenset[str]:
    """The module's functions that call into the answer, directly or through one another (and :data:`CALLING`)."""
    fns = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    calling = set(CALLING)
    while True:
        more = {name for name, fn in fns.items() if name not in calling and _calls(fn) & calling}
        if not more:
            return frozenset(calling)
        calling |= more


class _DropArguments(ast.NodeTransformer):
    """Calls to the module's helpers with ``None`` for the arguments their kernel form does not read (an oracle
    handed to a helper that compares with it: the comparison is gone, so is the oracle)."""

    def __init__(self, unused: dict[str, tuple[set[int], set[str]]]):
        self.unused = unused

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.unused:
            positions, names = self.unused[node.func.id]
            node.args = [ast.Constant(None) if i in positions and not isinstance(a, ast.Starred) else a for i, a in enumerate(node.args)]  # fmt: skip
            node.keywords = [ast.keyword(k.arg, ast.Constant(None)) if k.arg in names else k for k in node.keywords]
        return node


def _unused_parameters(fn: ast.FunctionDef) -> tuple[set[int], set[str]]:
    """(positions, names) of ``fn``'s parameters its body does not read."""
    read = _loads(ast.Module(body=fn.body, type_ignores=[]))
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    positions = {i for i, a in enumerate(params) if a not in read}
    names = {a for a in params + [k.arg for k in fn.args.kwonlyargs] if a not in read}
    return positions, names


def _calling_parameters(tree: ast.Module, calling: frozenset[str]) -> dict[str, frozenset[str]]:
    """Function name -> its parameters that some call site hands a function calling into the answer (a lambda with
    ``call`` in it, a nested function that calls, a calling helper): calling such a parameter calls the answer."""
    fns = {s.name: s for s in ast.walk(tree) if isinstance(s, ast.FunctionDef)}

    def calls_answer(arg: ast.AST) -> bool:
        if isinstance(arg, ast.Lambda):
            return bool(_calls(arg) & calling)
        if isinstance(arg, ast.Name):
            return arg.id in calling or (arg.id in fns and bool(_calls(fns[arg.id]) & calling))
        return False

    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in fns):
            continue
        fn = fns[node.func.id]
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        for i, arg in enumerate(node.args):
            if i < len(params) and calls_answer(arg):
                found.setdefault(fn.name, set()).add(params[i])
        for k in node.keywords:
            if k.arg and calls_answer(k.value):
                found.setdefault(fn.name, set()).add(k.arg)
    return {name: frozenset(ps) for name, ps in found.items()}


def _slice_functions(tree: ast.Module, calling: frozenset[str]) -> dict[int, ast.FunctionDef]:
    """Statement index -> kernel form of each module function that calls into the answer (checks included), with
    the arguments the helpers they call do not read passed as None (to a fixed point)."""
    fns = {i: s for i, s in enumerate(tree.body) if isinstance(s, ast.FunctionDef) and s.name in calling}
    handed = _calling_parameters(tree, calling)
    comparisons = COMPARISONS | {
        s.name
        for s in tree.body
        if isinstance(s, ast.FunctionDef) and s.name not in calling and s.name.startswith(("_expect", "_compare"))
    }
    unused: dict[str, tuple[set[int], set[str]]] = {}
    while True:
        source = {i: _DropArguments(unused).visit(copy.deepcopy(fn)) for i, fn in fns.items()}
        sliced = {i: _Slicer(calling | handed.get(fn.name, frozenset()), comparisons).function(fn) for i, fn in source.items()}  # fmt: skip
        now = {fns[i].name: _unused_parameters(fn) for i, fn in sliced.items() if _decorator_name(fn) != "check"}
        if now == unused:
            return sliced
        unused = now


def kernel_form(source: str) -> str:
    """The kernel form of a checks module's ``source`` (module docstring)."""
    tree = ast.parse(source)
    calling = _calling_functions(tree)
    sliced = _slice_functions(tree, calling)
    kept: dict[int, ast.stmt] = {}  # statement index -> kept form
    live = {"EXERCISES", "CheckFailed"}
    for i, s in enumerate(tree.body):
        if isinstance(s, ast.FunctionDef) and _decorator_name(s) == "check":
            kept[i] = sliced[i]
            live |= _loads(kept[i])
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) or isinstance(s, ast.ImportFrom) and s.module == "__future__":  # fmt: skip
            kept[i] = s
        elif isinstance(s, (ast.Expr, ast.If, ast.Try, ast.With, ast.For, ast.While)) and not _registered_reference(s):
            kept[i] = s  # what the module does when imported (registers a class, sets the environment): as it is
            live |= _loads(s)
        elif isinstance(s, ast.Assign) and _defines(s) == {"__all__"}:
            kept[i] = ast.Assign(targets=s.targets, value=ast.List([ast.Constant("EXERCISES")], ast.Load()), lineno=0)
    kept = _with_what_it_uses(tree, kept, live, sliced)
    body = [kept[i] for i in sorted(kept)]
    doc = _docstring(body)
    future = [s for s in body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    stop = ast.parse(f"from .core import CheckFailed as {_STOP}").body
    rest = [s for s in body if s not in doc and s not in future]
    module = ast.Module(body=doc + future + stop + rest, type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def reference_sources(source: str) -> dict[str, str]:
    """Exercise name -> the source of the course's version of it (a function decorated ``@EXERCISES.reference(name)``,
    undecorated, or a class registered with ``EXERCISES.reference(name)(cls)``), preceded by the module's statements
    it needs (imports, helpers, constants) and nothing else, and ending ``_course_version = <it>``; run with the
    package ``autograder`` (relative imports)."""
    tree = ast.parse(source)
    wanted: list[tuple[str, int, ast.stmt]] = []  # (exercise, its place in the module or -1, its definition)
    for s in tree.body:
        if isinstance(s, ast.FunctionDef) and _decorator_name(s) == "reference":
            dec = next(d for d in s.decorator_list if isinstance(d, ast.Call))
            fn = copy.copy(s)
            fn.decorator_list = []
            wanted.append((ast.literal_eval(dec.args[0]), -1, fn))
        elif (registered := _registered_reference(s)) is not None:
            exercise, name = registered
            j = next(j for j, t in enumerate(tree.body) if _defines(t) == {name} and not isinstance(t, ast.Expr))
            wanted.append((exercise, j, tree.body[j]))
    out: dict[str, str] = {}
    for exercise, place, obj in wanted:
        chosen = _with_what_it_uses(tree, {place: obj}, _loads(obj))
        tail = ast.parse(f"_course_version = {next(iter(_defines(obj)))}").body
        parts = [chosen[i] for i in sorted(chosen) if i != place] + [obj] + tail
        out[exercise] = ast.unparse(ast.fix_missing_locations(ast.Module(body=parts, type_ignores=[]))) + "\n"
    return out


def _with_what_it_uses(
    tree: ast.Module, kept: dict[int, ast.stmt], live: set[str], forms: Mapping[int, ast.stmt] | None = None
) -> dict[int, ast.stmt]:
    """``kept`` (statement index -> kept form) grown by the module's statements that define a name a kept statement
    uses, to a fixed point (never a check or a course version; a statement in its form in ``forms`` if there), and
    its imports cut to the names used."""
    while True:
        before = set(live)
        for i, s in enumerate(tree.body):
            if i in kept or not (_defines(s) & live) or isinstance(s, ast.FunctionDef) and _decorator_name(s):
                continue
            kept[i] = (forms or {}).get(i, s)
            live |= _loads(kept[i])
        if live == before:
            break
    for i, s in kept.items():
        if isinstance(s, (ast.Import, ast.ImportFrom)) and getattr(s, "module", None) != "__future__":
            names = [a for a in s.names if (a.asname or a.name).split(".")[0] in live]
            kept[i] = type(s)(**{**{f: getattr(s, f) for f in s._fields}, "names": names})
    return kept


def package_dir() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[1]


def chapter_modules(package: pathlib.Path | None = None) -> list[pathlib.Path]:
    """The chapters' checks modules (``autograder/chNN_*.py``)."""
    return sorted((package or package_dir()).glob("ch[0-9][0-9]_*.py"))


def stage_checks(stage: pathlib.Path) -> pathlib.Path:
    """``stage/autograder``: a copy of the package (no sample submissions, no compiled files of the course's) with
    every chapter's checks module in its kernel form, compiled, readable by every uid. Returns the folder."""
    src, dst = package_dir(), stage / "autograder"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "samples", "*.pyc"))
    for module in chapter_modules(dst):
        module.write_text(kernel_form(module.read_text()))
    compileall.compile_dir(str(dst), quiet=2)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst
