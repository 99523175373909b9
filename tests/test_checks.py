"""The graders are tested too: for every chapter, the reference passes every check (visible and hidden),
the untouched stub fails every exercise, every bug in the chapter's catalogue is caught by some check, and every
catalogued valid alternative passes every check."""

import dataclasses
import functools
import importlib
import inspect
import pathlib
import re
import textwrap
import types
from typing import Any

import pytest
import torch

import catalogue
from autograder import notebooks
from autograder.core import CheckFailed, dependencies
from catalogue import figures
from catalogue.entries import check_failures

MIN_BUGS, MIN_ALTERNATIVES = 12, 4

CHAPTERS = notebooks.chapters()
CASES = [(c, ex.name) for c in CHAPTERS for ex in notebooks.checks_module(c).EXERCISES]
MUTANT_CASES = [(c, m) for c in CHAPTERS for m in catalogue.mutants(c)]
ALTERNATIVE_CASES = [(c, a) for c in CHAPTERS for a in [*catalogue.alternatives(c), *catalogue.rewrites(c)]]


def test_there_are_chapters():
    assert "ch03_self_attention" in CHAPTERS


@pytest.mark.parametrize("chapter, name", CASES)
def test_reference_passes_every_check(chapter, name):
    exercises = notebooks.checks_module(chapter).EXERCISES
    obj = getattr(notebooks.solution_module(chapter), name)
    exercises.run(name, obj, verbose=False)
    exercises.run(name, obj, hidden=True, verbose=False)
    assert exercises[name].visible, f"{name} has no visible check: students need one before submitting"


@pytest.mark.parametrize("chapter, name", CASES)
def test_stub_fails_visible_checks(chapter, name):
    """The release notebook's stub (raise NotImplementedError) fails, with a message saying so."""
    exercises = notebooks.checks_module(chapter).EXERCISES
    source = notebooks.exercise_source(chapter, name)
    lines, out, inside = source.splitlines(), [], False
    for line in lines:
        if line.strip() == notebooks.BEGIN:
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}raise NotImplementedError()")
        elif line.strip() == notebooks.END:
            inside = False
        elif not inside:
            out.append(line)
    namespace = dict(vars(notebooks.solution_module(chapter)))
    exec(compile("\n".join(out), f"<stub {name}>", "exec"), namespace)
    with pytest.raises(CheckFailed, match="NotImplementedError"):
        exercises.run(name, namespace[name], verbose=False)


@pytest.mark.parametrize("chapter, mutant", MUTANT_CASES, ids=lambda x: getattr(x, "name", x))
def test_every_catalogued_bug_is_caught(chapter, mutant):
    exercises = notebooks.checks_module(chapter).EXERCISES
    failures = check_failures(exercises, mutant, notebooks.solution_module(chapter))
    assert failures, f"bug '{mutant.name}' ({mutant.description}) passes every check of {mutant.target}"


@pytest.mark.parametrize("chapter, alternative", ALTERNATIVE_CASES, ids=lambda x: getattr(x, "name", x))
def test_every_catalogued_alternative_gets_full_marks(chapter, alternative):
    """A correct answer written differently from the reference passes every visible and hidden check."""
    exercises = notebooks.checks_module(chapter).EXERCISES
    failures = check_failures(exercises, alternative, notebooks.solution_module(chapter))
    assert not failures, f"valid '{alternative.name}' ({alternative.description}) is rejected:\n" + "\n".join(failures)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_check_of_extremes_lets_another_stable_formula_through(chapter):
    """Issue 38: a check at the edge of the dtype's range (``extremes=True``) names, in the chapter's catalogue
    (``STABLE_FOR``), correct answers of its exercise that compute by another stable formula; they are alternatives or
    rewrites, so the test above grades them against every check, this one among them."""
    exercises = notebooks.checks_module(chapter).EXERCISES
    extremes = {
        fn.__name__: ex.name for ex in exercises for fn in [*ex.visible, *ex.hidden] if fn in exercises.extremes
    }
    stable = getattr(importlib.import_module(f"catalogue.{chapter}"), "STABLE_FOR", {})
    assert set(stable) == set(extremes), f"STABLE_FOR should name exactly the checks marked extremes={sorted(extremes)}"
    entries = {e.name: e.target for e in [*catalogue.alternatives(chapter), *catalogue.rewrites(chapter)]}
    for check, names in stable.items():
        assert names, f"{check}: no correct answer by another formula"
        for name in names:
            assert entries.get(name) == extremes[check], f"{check}: {name!r} is no alternative of {extremes[check]}"


def test_catalogue_size():
    for chapter in CHAPTERS:
        assert len(catalogue.mutants(chapter)) >= MIN_BUGS, f"{chapter}: fewer than {MIN_BUGS} catalogued bugs"
        assert len(catalogue.alternatives(chapter)) >= MIN_ALTERNATIVES, (
            f"{chapter}: fewer than {MIN_ALTERNATIVES} catalogued valid alternatives"
        )


def test_readme_catalogue_table_is_current():
    """The README's table is the output of `python -m catalogue` (so it cannot go stale)."""
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^\| chapter \| bugs caught \|.*?(?=\n(?!\|))", readme, re.S | re.M)
    assert found, "README.md has no catalogue table: paste the output of `python -m catalogue`"
    # every case is checked on its own above: with all of them green, the command prints figures.sizes' table
    assert found.group(0).strip() == figures.table(figures_of=figures.sizes), (
        "README.md's catalogue table is stale: paste the output of `python -m catalogue`"
    )


def test_hidden_messages_carry_no_values():
    """A hidden check's failure names the property, never the reference numbers."""
    import solutions.ch03_self_attention as sol
    from autograder.ch03_self_attention import EXERCISES
    from catalogue.ch03_self_attention import MUTANTS

    buggy = next(m for m in MUTANTS if m.name == "no scaling").build(sol)
    with pytest.raises(CheckFailed) as err:
        EXERCISES.run("scaled_dot_product_attention", buggy, hidden=True, verbose=False)
    assert "tensor(" not in str(err.value) and "expected:" not in str(err.value)


# A hint names the real cause when the answer matches a known mistake, and stays generic otherwise.
HINTS = [
    ("ch03_self_attention", "scale by sqrt(d_model)", "divided by sqrt(d_model)", "W_q"),
    ("ch03_self_attention", "mask polarity inverted", "polarity is inverted", None),
    ("ch05_transformer", "encoder mask not passed", "pass the mask on", "LayerNorm(x"),
    ("ch05_transformer", "sin and cos concatenated", "all sines first", None),
    ("ch05_transformer", "frequency 10000^(i/d)", "PE(pos, 2i)", "sines first"),
    ("ch02_bahdanau_attention", "no tanh", "tanh", None),
    ("ch02_bahdanau_attention", "mask polarity inverted", "polarity is inverted", "before"),
    ("ch03_self_attention", "padding mask inverted", "polarity is inverted", None),
]


@pytest.mark.parametrize("chapter, name, says, never", HINTS, ids=[h[1] for h in HINTS])
def test_hints_name_the_real_cause(chapter, name, says, never):
    checks = notebooks.checks_module(chapter)
    mutant = next(m for m in catalogue.mutants(chapter) if m.name == name)
    with pytest.raises(CheckFailed) as err:
        checks.EXERCISES.run(mutant.target, mutant.build(notebooks.solution_module(chapter)), verbose=False)
    hints = "\n".join(line for line in str(err.value).splitlines() if "Hint:" in line)
    assert says in hints, hints
    assert never is None or never not in hints, hints


# Each exercise is graded on its own: an exercise that calls another one (SelfAttention calls
# scaled_dot_product_attention) is checked with the course's version of the one it calls, so a bug there costs
# only that exercise's points.
def _dependent_cases():
    cases = []
    for chapter in CHAPTERS:
        checks, module = notebooks.checks_module(chapter), notebooks.solution_module(chapter)
        for ex in checks.EXERCISES:
            order = [e.name for e in checks.EXERCISES]
            deps = dependencies(checks.EXERCISES._references, ex.name, getattr(module, ex.name), order)
            cases += [(chapter, ex.name, m) for m in catalogue.mutants(chapter) if m.target in deps]
    return cases


DEPENDENT_CASES = _dependent_cases()
# CI's tier (`make test`): the first three buggy dependencies of each exercise; all of them in `make test-full`
_SEEN: dict[tuple[str, str], int] = {}
TIERED_DEPENDENT_CASES = []
for _case in DEPENDENT_CASES:
    _SEEN[_case[:2]] = _SEEN.get(_case[:2], 0) + 1
    TIERED_DEPENDENT_CASES.append(_case if _SEEN[_case[:2]] <= 3 else pytest.param(*_case, marks=pytest.mark.slow))
# the whole-model exercises' wrong-shaped answers take a minute each: in `make test-full`
_HEAVY_SHAPES = {
    ("ch05_transformer", "DecoderLayer"),
    ("ch05_transformer", "EncoderLayer"),
    ("ch06_gpt", "GPT"),
    ("ch06_gpt", "Block"),
}
SHAPE_CASES = [pytest.param(*c, marks=pytest.mark.slow) if c in _HEAVY_SHAPES else c for c in CASES]


def _with_buggy_dependency(chapter, name, mutant):
    """The reference ``name`` defined in a namespace whose ``mutant.target`` is the buggy one (as in a notebook)."""
    module = notebooks.solution_module(chapter)
    namespace = dict(vars(module))
    namespace[mutant.target] = mutant.build(module)
    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    exec(compile(source, f"<{name} with {mutant.name}>", "exec"), namespace)
    return namespace[name]


def test_every_chapter_with_calls_between_exercises_is_covered():
    assert {c for c, _, _ in DEPENDENT_CASES} >= {
        "ch03_self_attention",
        "ch04_multi_head_attention",
        "ch06_gpt",
        "ch08_kv_cache",
    }


@pytest.mark.parametrize("chapter, name, mutant", TIERED_DEPENDENT_CASES, ids=lambda x: getattr(x, "name", x))
def test_a_buggy_earlier_exercise_costs_only_its_own_points(chapter, name, mutant):
    exercises = notebooks.checks_module(chapter).EXERCISES
    obj = _with_buggy_dependency(chapter, name, mutant)
    for hidden in (False, True):
        exercises.run(name, obj, hidden=hidden, verbose=False)  # raises CheckFailed if charged


def test_selfattention_keeps_its_points_and_names_the_buggy_sdpa(capsys):
    checks = notebooks.checks_module("ch03_self_attention")
    mutant = next(m for m in catalogue.mutants("ch03_self_attention") if m.name == "no scaling")
    assert mutant.target == "scaled_dot_product_attention"
    obj = _with_buggy_dependency("ch03_self_attention", "SelfAttention", mutant)
    checks.EXERCISES.run("SelfAttention", obj, verbose=True)
    out = capsys.readouterr().out
    assert "check passed for SelfAttention" in out or "checks passed for SelfAttention" in out, out
    assert "with your own scaled_dot_product_attention its results change" in out, out
    # the student's namespace is left as it was
    assert obj.forward.__globals__["scaled_dot_product_attention"] is not checks._sdpa_reference
    # and a SelfAttention bug of its own is still charged, with the note that the reference sdpa was used
    own_bug = next(m for m in catalogue.mutants("ch03_self_attention") if m.name == "keys from W_q")
    with pytest.raises(CheckFailed) as err:
        checks.EXERCISES.run("SelfAttention", own_bug.build(notebooks.solution_module("ch03_self_attention")))
    assert "course's version of scaled_dot_product_attention" in str(err.value)


def test_gpt_keeps_its_points_when_the_students_block_crashes(capsys):
    """A class exercise calling a class exercise (GPT builds Blocks): a Block whose forward raises costs GPT
    nothing; GPT is checked with the course's Block and the note names the student's Block."""
    module = notebooks.solution_module("ch06_gpt")

    class Crashing(module.Block):
        def forward(self, x):
            raise RuntimeError("not written yet")

    crash = types.SimpleNamespace(name="crashing Block", target="Block", build=lambda m: Crashing)
    gpt = _with_buggy_dependency("ch06_gpt", "GPT", crash)
    exercises = notebooks.checks_module("ch06_gpt").EXERCISES
    for hidden in (False, True):
        exercises.run("GPT", gpt, hidden=hidden)
    assert "with your own Block its results change" in capsys.readouterr().out


# A check never crashes on a wrong-shaped answer: it says what is wrong (shapes are checked before indexing).
DISTORTIONS = {
    "a trailing axis too few": lambda t: t[..., 0] if t.ndim else t.expand(2),
    "one row too few": lambda t: t[:-1] if t.ndim and len(t) > 1 else t[None],
    "two axes swapped": lambda t: t.transpose(0, -1) if t.ndim > 1 else t[None, None],
}


def _distort(value, how):
    if isinstance(value, torch.Tensor):
        return how(value)
    if isinstance(value, tuple):
        return tuple(_distort(v, how) for v in value)
    if callable(value) and not isinstance(value, (type, torch.nn.Module)):  # a factory's mod (chapter 12): its results
        return functools.wraps(value)(lambda *a, **k: _distort(value(*a, **k), how))
    return value


def _wrong_shaped(obj, how):
    """``obj`` (the reference function or module class) with every tensor it returns distorted by ``how``."""
    if isinstance(obj, type):
        return type(obj.__name__, (obj,), {"forward": lambda self, *a, **k: _distort(obj.forward(self, *a, **k), how)})
    return functools.wraps(obj)(lambda *a, **k: _distort_result(obj(*a, **k), how))


def _distort_result(value, how):
    """A function's result distorted; a plain count (chapter 14's ``decode_state_bytes``) becomes a tensor of the wrong
    shape, the wrong-shaped answer a count invites."""
    if isinstance(value, int) and not isinstance(value, bool):
        return how(torch.tensor(value))
    return _distort(value, how)


@pytest.mark.parametrize("chapter, name", SHAPE_CASES, ids=lambda x: x)
def test_wrong_shaped_answers_fail_with_a_message_not_a_crash(chapter, name):
    exercises = notebooks.checks_module(chapter).EXERCISES
    reference = getattr(notebooks.solution_module(chapter), name)
    for label, how in DISTORTIONS.items():
        failures = check_failures(exercises, _Wrong(name, reference, how), None)
        assert failures, f"{name} returning {label} passes every check"
        crashed = [f for f in failures if "could not be checked" in f]
        assert not crashed, f"{name} returning {label}: a check crashed instead of explaining:\n{crashed[0]}"


@dataclasses.dataclass(frozen=True)
class _Wrong:
    """An entry for check_failures: the reference with wrong-shaped results."""

    target: str
    reference: Any
    how: Any

    def build(self, module):
        return _wrong_shaped(self.reference, self.how)
