"""The graders are tested too: for every chapter, the reference passes every check (visible and hidden),
the untouched stub fails every exercise, and every bug in the chapter's catalogue is caught by some check."""

import pytest

from autograder import notebooks
from autograder.core import CheckFailed

CHAPTERS = notebooks.chapters()
CASES = [(c, ex.name) for c in CHAPTERS for ex in notebooks.checks_module(c).EXERCISES]
MUTANT_CASES = [(c, m) for c in CHAPTERS for m in notebooks.checks_module(c).MUTANTS]


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
    module = notebooks.solution_module(chapter)
    exercises = notebooks.checks_module(chapter).EXERCISES
    buggy = mutant.build(module)
    failures = []
    for hidden in (False, True):
        try:
            exercises.run(mutant.target, buggy, hidden=hidden, verbose=False)
        except CheckFailed as err:
            failures.append(str(err))
    assert failures, f"bug '{mutant.name}' ({mutant.description}) passes every check of {mutant.target}"


def test_catalogue_size():
    for chapter in CHAPTERS:
        assert len(notebooks.checks_module(chapter).MUTANTS) >= 8, f"{chapter}: fewer than 8 catalogued bugs"


def test_hidden_messages_carry_no_values():
    """A hidden check's failure names the property, never the reference numbers."""
    import solutions.ch03_self_attention as sol
    from autograder.ch03_self_attention import EXERCISES, MUTANTS

    buggy = next(m for m in MUTANTS if m.name == "no scaling").build(sol)
    with pytest.raises(CheckFailed) as err:
        EXERCISES.run("scaled_dot_product_attention", buggy, hidden=True, verbose=False)
    assert "tensor(" not in str(err.value) and "expected:" not in str(err.value)
