"""The graders are tested too: for every chapter, the reference passes every check (visible and hidden),
the untouched stub fails every exercise, every bug in the chapter's catalogue is caught by some check, and every
catalogued valid alternative passes every check."""

import pathlib
import re

import pytest

from autograder import catalogue, notebooks
from autograder.core import CheckFailed, check_failures

MIN_BUGS, MIN_ALTERNATIVES = 12, 4

CHAPTERS = notebooks.chapters()
CASES = [(c, ex.name) for c in CHAPTERS for ex in notebooks.checks_module(c).EXERCISES]
MUTANT_CASES = [(c, m) for c in CHAPTERS for m in notebooks.checks_module(c).MUTANTS]
ALTERNATIVE_CASES = [(c, a) for c in CHAPTERS for a in getattr(notebooks.checks_module(c), "ALTERNATIVES", [])]


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


def test_catalogue_size():
    for chapter in CHAPTERS:
        checks = notebooks.checks_module(chapter)
        assert len(checks.MUTANTS) >= MIN_BUGS, f"{chapter}: fewer than {MIN_BUGS} catalogued bugs"
        assert len(getattr(checks, "ALTERNATIVES", [])) >= MIN_ALTERNATIVES, (
            f"{chapter}: fewer than {MIN_ALTERNATIVES} catalogued valid alternatives"
        )


def test_readme_catalogue_table_is_current():
    """The README's table is the output of `python -m autograder catalogue` (so it cannot go stale)."""
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^\| chapter \| bugs caught \|.*?(?=\n(?!\|))", readme, re.S | re.M)
    assert found, "README.md has no catalogue table: paste the output of `python -m autograder catalogue`"
    assert found.group(0).strip() == catalogue.table(), (
        "README.md's catalogue table is stale: paste the output of `python -m autograder catalogue`"
    )


def test_hidden_messages_carry_no_values():
    """A hidden check's failure names the property, never the reference numbers."""
    import solutions.ch03_self_attention as sol
    from autograder.ch03_self_attention import EXERCISES, MUTANTS

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
]


@pytest.mark.parametrize("chapter, name, says, never", HINTS, ids=[h[1] for h in HINTS])
def test_hints_name_the_real_cause(chapter, name, says, never):
    checks = notebooks.checks_module(chapter)
    mutant = next(m for m in checks.MUTANTS if m.name == name)
    with pytest.raises(CheckFailed) as err:
        checks.EXERCISES.run(mutant.target, mutant.build(notebooks.solution_module(chapter)), verbose=False)
    hints = "\n".join(line for line in str(err.value).splitlines() if "Hint:" in line)
    assert says in hints, hints
    assert never is None or never not in hints, hints
