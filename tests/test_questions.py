"""The grading kernel holds questions, never answers: the kernel form of every chapter's checks (``grading/questions.py``).

Two things are held here: the kernel form contains no comparison, oracle, hint or course version of an exercise
(read off its syntax tree and off the module it defines), and a record made with it is judged in the worker exactly as
a record made with the whole checks module — for the reference solution (every chapter, here) and for every
catalogue entry, mistakes and correct alternatives alike (the slow tier).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import pathlib
import types
import warnings

import pytest

import catalogue
from autograder import notebooks
from autograder.checks.trace import record, replay
from autograder.grading import questions

CHAPTERS = notebooks.chapters()
COMPARISONS = {"expect_close", "expect_equal", "expect_shape", "expect_true"}
# The dense forward pass of chapters 10 and 11 is a question there: its output (o, lse) is the input of the backward
# exercises. No exercise accepts it as an answer (the forward must be tiled, or a Triton kernel): docs/grading-design.md.
QUESTION_ORACLES = {"ch10_flash_attention": {"_forward_oracle"}, "ch11_flash_attention_triton": {"_forward_oracle", "_dkdv_oracle"}, "ch13_serving_attention": {"_state_oracle"}}  # fmt: skip


# The helpers each kernel form keeps that make no call into the answer, each read and judged a question (inputs, the
# weights a check sets, the twin module a check copies weights into, the launch of a kernel), never an answer to an
# exercise of the chapter. A change to this list is a change to what the student's process holds: review it.
QUESTION_HELPERS = {
    "ch01_seq2seq": {"_batch"},
    "ch02_bahdanau_attention": {"_score_inputs", "_lengths_mask"},
    "ch03_self_attention": {"_qkv", "_large_products"},
    "ch04_multi_head_attention": {"_projections_set"},
    "ch05_transformer": {
        "_torch_causal",
        "_randomise",
        "_copy_attn",
        "_copy_rest",
        "_layer_args",
        "_torch_args",
        "_pad",
        "_only_sublayers",
    },
    "ch06_gpt": {"_randomise", "_silenced"},
    "ch07_bert": {"_batch"},
    "ch08_kv_cache": {"_qkv"},
    "ch09_sparse_attention": {"_qkv", "_measured"},
    "ch10_flash_attention": {
        "_randn",
        "_qkv",
        "_full_mask",
        "_forward_oracle",
        "_lengths_mask",
        "_exact_negative_qkv",
        "_half_exact",
        "_large_qk",
        "_tiles_inputs",
        "_forward_what",
    },
    "ch11_flash_attention_triton": {
        "_tile_width",
        "_in_nan_padding",
        "_flat_in_nan_padding",
        "_empty_padded",
        "_source_of",
        "_kernel_classes",
        "_is_kernel",
        "_fresh_rewrite",
        "_kernel_problem",
        "_global_problem",
        "_name_problem",
        "_run",
        "_watching_loads",
        "_loaded_rows",
        "_loads_verdict",
        "_counted",
        "_launch_forward",
        "_launch_dkdv",
        "_randn",
        "_qkv",
        "_mask",
        "_forward_oracle",
        "_launch_what",
        "_exact_negative_qkv",
        "_half_exact",
        "_dkdv_oracle",
    },
    "ch12_flex_attention": {"_mask_grid", "_score_grid", "_flex_output", "_grid_what", "_qkv", "_causal_rule"},
    # the attention states a merge or a ring step takes as inputs are attention over chunks of keys (as chapter 10's
    # backward takes the forward's (o, lse)): _state_oracle builds them, _chunk_states cuts the keys
    "ch13_serving_attention": {
        "_randn",
        "_qkv",
        "_pool_case",
        "_state_oracle",
        "_chunk_states",
        "_positions",
        "_causal",
    },
    "ch14_linear_attention": {
        "_randn",
        "_qkv",
        "_phi",
        "_softplus_features",
        "_given_state",
        "_delta_inputs",
    },
}


def kernel_module(chapter: str) -> types.ModuleType:
    """The chapter's checks as the grading kernel imports them, loaded beside the course's."""
    path = questions.package_dir() / f"{chapter}.py"
    module = types.ModuleType(f"autograder._kernel_{chapter}")
    module.__package__ = "autograder"
    exec(compile(questions.kernel_form(path.read_text()), str(path), "exec"), module.__dict__)
    return module


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
    }


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_kernel_form_holds_no_answer(chapter):
    source = (questions.package_dir() / f"{chapter}.py").read_text()
    tree = ast.parse(source)
    kernel = ast.parse(questions.kernel_form(source))
    names = _names(kernel)
    oracles = {
        s.name for s in tree.body if isinstance(s, ast.FunctionDef) and any(w in s.name for w in ("oracle", "hint"))
    }
    references = {
        s.name
        for s in tree.body
        if isinstance(s, ast.FunctionDef)
        and any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "reference" for d in s.decorator_list)
    } | {r[1] for s in tree.body if (r := questions._registered_reference(s))}
    real_refs = importlib.import_module(f"autograder.{chapter}").EXERCISES._references
    assert set(questions.reference_sources(source)) == set(real_refs), "a course version the recorder is not sent"
    assert oracles or references, "the test reads nothing: are the oracles still named *_oracle?"
    assert not (names & COMPARISONS), f"comparisons in the kernel form: {sorted(names & COMPARISONS)}"
    assert not (names & references), f"the course's versions in the kernel form: {sorted(names & references)}"
    leaked = (names & oracles) - QUESTION_ORACLES.get(chapter, set())
    assert not leaked, f"oracles or hints in the kernel form: {sorted(leaked)}"
    calling = questions._calling_functions(tree)
    helpers = {
        s.name
        for s in kernel.body
        if isinstance(s, ast.FunctionDef) and not questions._decorator_name(s) and s.name not in calling
    }
    assert helpers == QUESTION_HELPERS[chapter], "the kernel form's helpers changed: review them (QUESTION_HELPERS)"
    module = kernel_module(chapter)
    assert not module.EXERCISES._references
    assert not hasattr(module.EXERCISES, "references")
    real = importlib.import_module(f"autograder.{chapter}").EXERCISES
    assert [(e.name, e.points, [f.__name__ for f in e.visible + e.hidden]) for e in module.EXERCISES] == [
        (e.name, e.points, [f.__name__ for f in e.visible + e.hidden]) for e in real
    ], "the kernel form registers other checks, or in another order, than the course's (replay pairs them by place)"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_kernel_form_does_what_the_module_does_when_imported(chapter):
    """Statements a checks module runs when imported (registering a class whose state a call updates, setting the
    environment) are kept as they are: the grading kernel imports the kernel form alone, and a check recorded there
    without them is judged otherwise (chapter 8's KVCache, updated in place by the exercise)."""
    source = (questions.package_dir() / f"{chapter}.py").read_text()
    effects = [
        ast.dump(s)
        for s in ast.parse(source).body[1:]
        if isinstance(s, (ast.Expr, ast.If, ast.Try, ast.With, ast.For, ast.While))
        and not questions._registered_reference(s)  # a course version: the recorder's, never the kernel form's
    ]
    kernel = {ast.dump(s) for s in ast.parse(questions.kernel_form(source)).body}
    assert all(e in kernel for e in effects)
    if chapter == "ch08_kv_cache":
        assert effects, "chapter 8 registers KVCache when imported: the test reads nothing"


def _quiet(fn, *args):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # fmt: skip
        warnings.simplefilter("ignore")
        return fn(*args)


def _judged_alike(chapter: str, objects: list[tuple[str, str, object]]) -> list[str]:
    """For each (label, exercise, object): every check recorded with the kernel form and with the course's checks,
    both records judged by the course's checks; the differences."""
    real = importlib.import_module(f"autograder.{chapter}").EXERCISES
    kernel = kernel_module(chapter).EXERCISES
    differ = []
    for label, name, obj in objects:
        for fn, kfn in zip(real[name].visible + real[name].hidden, kernel[name].visible + kernel[name].hidden):
            whole = _quiet(replay, fn, _quiet(record, fn, obj)[2])
            cut = _quiet(replay, fn, _quiet(record, kfn, obj)[2])
            if whole != cut:
                differ.append(f"{label} {fn.__name__}: whole {whole[0]} {whole[1][:80]!r}, kernel {cut[0]} {cut[1][:80]!r}")  # fmt: skip
    return differ


# the reference solution's records compared on every chapter: in the fast tier for the chapters whose checks change
# state a call sees (chapters 6 and 8) and the first with a course version (chapter 3); every chapter's, catalogue
# and all, in the slow tier below
FAST_RECORDS = ("ch03_self_attention", "ch06_gpt", "ch08_kv_cache")


@pytest.mark.parametrize(
    "chapter", [c if c in FAST_RECORDS else pytest.param(c, marks=pytest.mark.slow) for c in CHAPTERS]
)
def test_a_record_made_with_the_kernel_form_is_judged_as_one_made_with_the_checks(chapter):
    solutions = importlib.import_module(f"solutions.{chapter}")
    exercises = importlib.import_module(f"autograder.{chapter}").EXERCISES
    differ = _judged_alike(chapter, [("reference", ex.name, getattr(solutions, ex.name)) for ex in exercises])
    assert not differ, "\n".join(differ)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if catalogue.of(c) is not None])
def test_every_catalogue_entry_is_judged_alike_from_the_kernel_form(chapter):
    solutions = importlib.import_module(f"solutions.{chapter}")
    entries = catalogue.mutants(chapter) + catalogue.alternatives(chapter)
    differ = _judged_alike(chapter, [(e.name, e.target, e.build(solutions)) for e in entries])
    assert not differ, "\n".join(differ)


def test_each_course_version_runs_alone(tmp_path):
    """``reference_sources``: each course version of an exercise, with only what it needs, runs in a namespace of its
    own and gives what the checks module's gives."""
    import torch

    source = (questions.package_dir() / "ch03_self_attention.py").read_text()
    sources = questions.reference_sources(source)
    assert set(sources) == {"scaled_dot_product_attention"}
    ns = {"__name__": "autograder.withheld", "__package__": "autograder"}
    exec(compile(sources["scaled_dot_product_attention"], "<course version>", "exec"), ns)
    fn = ns["_course_version"]
    q, k, v = (torch.randn(2, 3, 4) for _ in range(3))
    real = importlib.import_module("autograder.ch03_self_attention").EXERCISES._references
    assert all(torch.equal(a, b) for a, b in zip(fn(q, k, v), real["scaled_dot_product_attention"](q, k, v)))
    assert not any("oracle" in name or name.startswith("_sdpa_") and name != "_sdpa_reference" for name in ns)


def test_the_staged_package_has_every_chapter_in_its_kernel_form(tmp_path):
    staged = questions.stage_checks(tmp_path)
    for module in questions.chapter_modules():
        assert (staged / module.name).read_text() == questions.kernel_form(module.read_text())
    assert not (staged / "samples").exists()
    assert (staged / "grading" / "guard.py").read_text() == (
        questions.package_dir() / "grading" / "guard.py"
    ).read_text()
    assert pathlib.Path(staged / "__pycache__").is_dir()
