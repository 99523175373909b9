"""The verdict judged outside the kernel: checks recorded in one process and replayed in another agree.

``autograder.core.record`` runs a check on the answer and keeps every call into the answer's code;
``autograder.core.replay`` runs the same check on that record alone (the grading worker does this, in a process the
student's code never runs in), and that is the only verdict: every check of every chapter must replay.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pickle
import warnings

import pytest
import torch

import catalogue
from autograder import core, notebooks
from autograder.checks import trace as trace_mod
from autograder.core import CheckFailed, call, expect_close, expect_true, record, replay, rng
from autograder.grading import channel, guard, judge

CHAPTERS = notebooks.chapters()


def _sdpa_check(fn):
    q, k, v = (torch.randn(2, 3, 4, generator=rng(s)) for s in (1, 2, 3))
    q.requires_grad_(), v.requires_grad_()
    got = call("attention(q, k, v)", fn, q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1) @ v
    expect_close("attention(q, k, v)", got.detach(), expected.detach())
    call("backward", lambda: got.sum().backward())
    expect_true(q.grad is not None, "no gradient reaches q")


def _right(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1) @ v


def _unscaled(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v


def test_a_replayed_check_judges_the_recorded_answer():
    outcome, _, trace = record(_sdpa_check, _right)
    assert outcome == "passed" and [e[1] for e in trace] == ["attention(q, k, v)", "backward"]
    assert replay(_sdpa_check, trace) == ("passed", "")
    outcome, message, trace = record(_sdpa_check, _unscaled)
    assert outcome == "failed"
    assert replay(_sdpa_check, trace) == ("failed", message)


def test_a_record_that_says_pass_for_a_wrong_answer_is_judged_by_its_values():
    """What a patched kernel could send: the check 'passed' there, but the values it recorded are the wrong
    answer's; the worker computes the oracle and the comparison itself."""
    _, _, trace = record(_sdpa_check, _unscaled)
    outcome, message = replay(_sdpa_check, trace)
    assert outcome == "failed" and "differs from the expected values" in str(message)


def test_the_gradient_a_backward_pass_gives_the_checks_inputs_is_replayed():
    def detached(q, k, v):
        return _right(q.detach(), k, v)

    outcome, message, trace = record(_sdpa_check, detached)
    assert outcome == "failed" and "no gradient" in str(message)
    assert replay(_sdpa_check, trace) == ("failed", message)


def test_a_check_that_diverges_from_its_record_is_not_judged_a_pass():
    _, _, trace = record(_sdpa_check, _right)
    assert replay(_sdpa_check, trace[:1])[0] == "unjudged"  # the record ran out
    renamed = [[trace[0][0], "something else", *trace[0][2:]], trace[1]]
    assert replay(_sdpa_check, renamed)[0] == "unjudged"


def test_an_answers_object_is_replayed_as_a_shell_with_its_weights():
    class Student(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.W_q = torch.nn.Linear(4, 4)
            self.scale = 0.5

        def forward(self, x):
            return self.W_q(x) * self.scale

    def check(cls):
        torch.manual_seed(0)
        m = call("Student()", cls)
        expect_true(isinstance(m.W_q, torch.nn.Linear), "W_q should be an nn.Linear")
        x = torch.randn(2, 4, generator=rng(0))
        got = call("m(x)", m, x)
        expect_close("m(x)", got, torch.nn.functional.linear(x, m.W_q.weight, m.W_q.bias).detach() * m.scale)

    outcome, _, trace = record(check, Student)
    assert outcome == "passed"
    assert replay(check, trace) == ("passed", "")

    def calls_forward_directly(cls):
        m = call("Student()", cls)
        m(torch.zeros(1, 4))

    assert replay(calls_forward_directly, record(calls_forward_directly, Student)[2])[0] == "unjudged"


def _pair_check(fn):
    """A check as the worker replays it: the answer must return a pair before the check unpacks it."""
    x = torch.randn(3, 4, generator=rng(1))
    result = call("update(x)", fn, x)
    expect_true(isinstance(result, tuple) and len(result) == 2, "update should return a pair (m, ell)")
    m, ell = result
    call("update(m)", fn, m)


def _pair_question(fn):
    """The same check in the kernel's form (``grading/questions.py``): its calls only, no expectation."""
    x = torch.randn(3, 4, generator=rng(1))
    m, ell = call("update(x)", fn, x)  # a 1-D tensor of n values is unbound into n tensors here
    call("update(m)", fn, m)


def test_a_result_bigger_than_a_record_stops_the_check_and_is_judged_by_its_shape():
    """Issue 46's flood, at its root: an answer returning 2,000,000 numbers where a pair is due. The kernel records the
    result's shape and dtype only, and the check stops there (its kernel form would otherwise unbind the tensor into
    2,000,000 tensors, about 300 MB); the worker's replay fails it with the check's own message."""
    with trace_mod.recording([]) as trace, pytest.raises(trace_mod.NotReplayable):
        _pair_question(lambda x: torch.zeros(2_000_000, dtype=torch.int32))
    assert len(trace) == 1 and trace[0][2] == ("shape", [2_000_000], "int32")
    assert len(guard.encode_traces([[trace]])) < 2_000
    outcome, message = replay(_pair_check, channel.decode_traces(guard.encode_traces([[trace]]))[0][0])
    assert outcome == "failed" and "should return a pair" in str(message)
    # a result the record holds is recorded whole, and the check goes on
    with trace_mod.recording([]) as trace:
        _pair_question(lambda x: (x.amax(-1), x.exp().sum(-1)))
    assert len(trace) == 2 and trace[0][2][0] == "tuple"


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_results_too_big_to_record_earn_nothing(chapter):
    """Red team, against the cap above: every function exercise answered by something that returns 3,000,000 numbers
    at every other call (each check then stops in the kernel at its first call) and the course's answer otherwise.
    The worker's replay gives no exercise its points."""
    checks = notebooks.checks_module(chapter)
    solutions = importlib.import_module(f"solutions.{chapter}")
    references = dict(checks.EXERCISES._references)
    for ex in checks.EXERCISES:
        course = getattr(solutions, ex.name)
        if isinstance(course, type):
            continue
        calls = [0]

        def answer(*args, _course=course, _calls=calls, **kwargs):
            _calls[0] += 1
            return torch.zeros(3_000_000) if _calls[0] % 2 else _course(*args, **kwargs)

        traces, _, deps = _quiet(checks.EXERCISES.record, ex.name, answer, None, references)
        passed, _, _ = _quiet(checks.EXERCISES.replay, ex.name, traces, deps)
        assert not passed, ex.name


def test_records_travel_as_data_that_loads_without_running_code():
    _, _, trace = record(_sdpa_check, _right)
    text = guard.encode_traces([[trace]])
    assert replay(_sdpa_check, channel.decode_traces(text)[0][0]) == ("passed", "")

    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    buf = io.BytesIO()
    torch.save([Evil()], buf)
    import base64
    import zlib

    with pytest.raises(pickle.UnpicklingError):
        channel.decode_traces(base64.b64encode(zlib.compress(buf.getvalue())).decode())


def _quiet(fn, *args):
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_check_gives_the_same_verdict_when_replayed(chapter):
    """On the reference answers: each check gives the same verdict from its record as on the answer itself."""
    checks = importlib.import_module(f"autograder.{chapter}")
    solutions = importlib.import_module(f"solutions.{chapter}")
    wrong = []
    for ex in checks.EXERCISES:
        obj = getattr(solutions, ex.name)
        for fn in ex.visible + ex.hidden:
            outcome, message, trace = _quiet(record, fn, obj)
            assert outcome == "passed", f"{fn.__name__} fails on the reference: {message}"
            again, why = _quiet(replay, fn, trace)
            if again != "passed":
                wrong.append(f"{fn.__name__}: {again} ({why[:160]})")
    assert not wrong, "checks that do not replay (look at the answer through call() or observe()):\n" + "\n".join(wrong)


def test_the_worker_withholds_what_the_kernel_passed_but_the_record_fails():
    """judge.judge on a verdict record as a patched kernel would send it: 'passed', with a wrong answer's record."""
    checks = importlib.import_module("autograder.ch08_kv_cache")
    solutions = importlib.import_module("solutions.ch08_kv_cache")
    mutant = next(m for m in catalogue.mutants("ch08_kv_cache") if m.target == "repeat_kv")
    fns = checks.EXERCISES["repeat_kv"].visible + checks.EXERCISES["repeat_kv"].hidden
    traces = [[_quiet(record, fn, mutant.build(solutions))[2] for fn in fns]]
    forged = {"type": "verdict", "exercise": "repeat_kv", "passed": True, "failures": [], "violations": []}
    judged = judge.judge("ch08_kv_cache", [dict(forged, traces=guard.encode_traces(traces))])[0]
    assert judged["passed"] is False and judged["failures"] and judged["judged"] == len(fns)
    honest = [[_quiet(record, fn, solutions.repeat_kv)[2] for fn in fns]]
    assert judge.judge("ch08_kv_cache", [dict(forged, traces=guard.encode_traces(honest))])[0]["passed"] is True
    assert judge.judge("ch08_kv_cache", [forged])[0]["passed"] is False  # no record: nothing to judge, no points


def test_a_check_failure_raised_inside_the_answer_is_recorded_as_the_checks_message():
    def check(fn):
        call("fn()", fn)

    def raises():
        raise ValueError("bad shapes")

    outcome, message, trace = record(check, raises)
    assert outcome == "failed" and "ValueError: bad shapes" in str(message)
    assert replay(check, trace) == ("failed", message)
    with pytest.raises(CheckFailed):
        check(raises)
    assert core._RECORDER["trace"] is None and core._RECORDER["replay"] is None


def _calling_an_earlier_exercise():
    """A chapter of two exercises: ``g`` (doubles), then ``f`` (``g`` plus one), which calls ``g``; the course's
    ``g`` registered."""
    exercises = core.Exercises("chXX_test")

    @exercises.check("g", points=1)
    def g_doubles(fn):
        """g doubles"""
        expect_close("g(x)", call("g(x)", fn, torch.ones(2)), torch.full((2,), 2.0))

    @exercises.check("f", points=1)
    def f_adds_one(fn):
        """f is g plus one"""
        expect_close("f(x)", call("f(x)", fn, torch.ones(2)), torch.full((2,), 3.0))

    @exercises.reference("g")
    def course_g(x):
        return 2 * x

    return exercises


_NOTE = (
    "✔ f is g plus one\nNote: f is right, but with your own g its results change (1 of 1 visible checks fail): the "
    "mistake is in your g, whose own checks say what it is. f keeps its points.\nThe visible check passed for f.\n"
)


@pytest.mark.parametrize(
    "source, printed",
    [
        ("def g(x):\n    return 3 * x\ndef f(x):\n    return g(x) + 1", _NOTE),  # g's mistake costs g's points only
        ("def g(x, s):\n    return s * x\ndef f(x):\n    return g(x, 2) + 1", "The visible check passed for f.\n"),
        ("def g(x):\n    return 2 * x\ndef f(x):\n    return g(x) + 2", None),  # fails with either g
    ],
)
def test_the_kernel_reads_no_verdict_and_every_mode_keeps_the_rule_about_earlier_exercises(source, printed):
    """The notebook (live mode) and the worker (replay of the kernel's record) give the same verdict, by the one rule
    (the course's version of the earlier exercise first, then the student's own); the kernel's record carries no
    reading of the checks, only its own reasons (none here, even for a wrong answer)."""
    exercises, ns = _calling_an_earlier_exercise(), {}
    exec(source, ns)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if printed is None:
            with pytest.raises(CheckFailed) as err:
                exercises.run("f", ns["f"])
            assert str(err.value).startswith("1 of 1 visible checks failed for f:\n✘ f is g plus one\n    f(x) differs")
            assert str(err.value).endswith("(f was checked with the course's version of g in place of yours, so that a "
                                           "mistake there is not charged twice.)")  # fmt: skip
        else:
            exercises.run("f", ns["f"])
    assert out.getvalue() == (printed or "")
    traces, reasons, deps = exercises.record("f", ns["f"])
    assert reasons == [] and deps is True and len(traces) == 2
    passed, failures, details = exercises.replay("f", channel.decode_traces(guard.encode_traces(traces)), deps)
    assert passed is (printed is not None) and bool(failures) is not passed
    assert [str(d).splitlines()[0] for d in details] == (
        [] if printed == _NOTE else ["✘ f is g plus one"]
    )  # first run's


def test_the_recorders_own_reason_comes_first_in_the_workers_failures():
    """A time-out in the kernel (a reason of the recorder's own, not a reading of the checks) is kept in the record
    and heads the worker's failures, before what the worker read of the record it cut short."""
    import time

    from autograder.checks.limits import timeout_message

    def endless(x):
        while True:
            time.sleep(0.01)

    exercises = _calling_an_earlier_exercise()
    exercises.record("g", lambda x: 2 * x)  # torch's lazy imports done before a time limit can cut one short
    traces, reasons, deps = exercises.record("g", endless, seconds=0.5)
    assert reasons == [timeout_message("g", 0.5)] and deps is False and traces == [[[]]]
    passed, failures, _ = exercises.replay("g", traces, deps)
    assert not passed and str(failures[0]).startswith("g: a check's record could not be judged")

    checks = importlib.import_module("autograder.ch08_kv_cache")
    solutions = importlib.import_module("solutions.ch08_kv_cache")
    fns = checks.EXERCISES["repeat_kv"].visible + checks.EXERCISES["repeat_kv"].hidden
    cut = [[_quiet(record, fn, solutions.repeat_kv)[2] for fn in fns[:1]]]
    rec = {"type": "verdict", "exercise": "repeat_kv", "reasons": ["repeat_kv timed out after 9 s"], "deps": False}
    judged = judge.judge("ch08_kv_cache", [dict(rec, traces=guard.encode_traces(cut))])[0]
    assert not judged["passed"] and [str(f) for f in judged["failures"]] == [
        "repeat_kv timed out after 9 s",
        "repeat_kv: not every check ran",
    ]
    unread = judge.judge("ch08_kv_cache", [dict(rec, reasons=["repeat_kv is not defined in the notebook"])])[0]
    assert not unread["passed"] and unread["failures"] == ["repeat_kv is not defined in the notebook"]
