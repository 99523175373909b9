"""The one runner of a chapter's checks: the registry of exercises (:class:`Exercises`) and the one loop over an
exercise's checks (:meth:`Exercises._checked`), in three modes (:class:`_Mode`): live (``EXERCISES.run``, in the
student's notebook), record (the grading kernel's recorder, ``grading/guard.py``: the calls into the answer kept,
nothing judged) and replay (the grading worker's verdict on that record, ``grading/judge.py``). An exercise that calls
an earlier one is checked with the course's version of it first, then with the student's own (:func:`_passed`, the
rule in every mode), so that one mistake costs its own exercise's points only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import types
import warnings
from collections.abc import Callable
from typing import Any

from ..wording import EN, ZH, Message, indented, lines, say, verbatim
from .compare import CheckFailed
from .limits import ExerciseTimeout, exercise_time_limit, time_limit, timeout_message
from .trace import recording, replay


@dataclasses.dataclass(frozen=True)
class Requirement:
    """What one check requires of the answer, in one short sentence written as the end of "your answer ...": "works
    for an odd ``d_model`` too". ``en`` is the English, the key of its translations in the chapter's catalogue
    (``autograder/locale/zh/<chapter>.json``). The build lists an exercise's requirements below its instructions in
    the notebook (``scripts/build_notebooks/requirements.py``), so the text the student reads is generated from the checks
    that grade it."""

    en: str

    @property
    def zh(self) -> str:
        return Message(self.en).render(ZH)


@dataclasses.dataclass
class Exercise:
    name: str  # the function/class the student writes, also the nbgrader grade_id stem
    points: int
    visible: list[Callable] = dataclasses.field(default_factory=list)
    hidden: list[Callable] = dataclasses.field(default_factory=list)
    declared: dict[Callable, Requirement] = dataclasses.field(default_factory=dict)  # check -> its requirement

    @property
    def requirements(self) -> list[Requirement]:
        """The requirements the checks declare, in registration order (visible checks first), each once."""
        found: list[Requirement] = []
        for fn in self.visible + self.hidden:
            req = self.declared.get(fn)
            if req is not None and req not in found:
                found.append(req)
        return found

    @property
    def unstated(self) -> list[str]:
        """The hidden checks that declare no requirement (the build refuses them: the student cannot see them)."""
        return [fn.__name__ for fn in self.hidden if fn not in self.declared]


class Exercises:
    """Registry of a chapter's exercises and their checks, in notebook order."""

    def __init__(self, chapter: str):
        self.chapter = chapter
        self._by_name: dict[str, Exercise] = {}
        self._references: dict[str, Callable] = {}
        self.extremes: list[Callable] = []  # the checks at the edge of the dtype's range (``check(extremes=True)``)

    def __iter__(self):
        return iter(self._by_name.values())

    def __getitem__(self, name: str) -> Exercise:
        return self._by_name[name]

    @property
    def total_points(self) -> int:
        return sum(ex.points for ex in self)

    def check(
        self,
        name: str,
        *,
        points: int | None = None,
        hidden: bool = False,
        requires: str | None = None,
        extremes: bool = False,
    ):
        """Decorator: register a check for exercise ``name`` (``points`` on its first registration).

        ``extremes``: the check feeds values at the edge of what the dtype carries (overflowing products, scores of
        thousands, -1e5): its tolerance must come from that arithmetic, and the catalogue names, for each such check,
        a correct answer that computes by another stable formula (``STABLE_FOR``; tests/test_checks.py).

        ``requires``: the requirement the check tests, one short English sentence that completes "your answer ..."
        (:class:`Requirement`; its Chinese is in the chapter's catalogue). Every hidden check must declare one (the
        build fails otherwise); a visible check may. The notebook lists them below the exercise's instructions."""

        def register(fn: Callable) -> Callable:
            if name not in self._by_name:
                if points is None:
                    raise ValueError(f"the first check of exercise {name!r} must give its points")
                self._by_name[name] = Exercise(name, points)
            elif points is not None and points != self._by_name[name].points:
                raise ValueError(f"exercise {name!r} already has {self._by_name[name].points} points")
            (self._by_name[name].hidden if hidden else self._by_name[name].visible).append(fn)
            if extremes:
                self.extremes.append(fn)
            if requires is not None:
                self._by_name[name].declared[fn] = Requirement(" ".join(requires.split()))
            return fn

        return register

    def reference(self, name: str):
        """Decorator: register the course's version of exercise ``name`` (a function), written in the checks module
        from an oracle. While *another* exercise that calls ``name`` is checked, the student's ``name`` is replaced
        by it, so that a mistake in ``name`` costs ``name``'s points only (each exercise is graded on its own)."""

        def register(fn: Callable) -> Callable:
            if name not in self._by_name:
                raise ValueError(f"register the checks of {name!r} before its reference")
            self._references[name] = fn
            return fn

        return register

    def run(self, name: str, obj: Any, *, hidden: bool = False, verbose: bool = True, edition: str = EN) -> None:
        """Run the visible (or, with ``hidden=True``, the hidden) checks of exercise ``name`` on ``obj``.

        Prints one line per passed check; raises :class:`CheckFailed` listing every failed one; both in ``edition``
        ("en", or "zh": the Chinese notebook's check cells pass ``edition="zh"``). Warnings
        raised by the student's code are silenced here: nbgrader scores a test cell that writes to stderr
        as zero, and a deprecation warning is not a mistake.

        Returns None on purpose: nbgrader reads a number left as a test cell's value as a partial score.
        """
        __tracebackhide__ = True  # IPython: show the student the message, not this function's frame
        ex = self._by_name[name]
        checks = ex.hidden if hidden else ex.visible
        kind = "hidden" if hidden else "visible"
        deps, passes = self._passes(name, obj, checks)
        runs = self._checked(name, checks, _Live(exercise_time_limit(), verbose, edition), passes)
        own = ", ".join(deps)
        if not _passed(runs, bool(deps)):
            note = say("checked with the course's version", name=name, own=own) if deps else None
            head = say(f"{kind} failed", k=len(runs[0]), n=len(checks), name=name)
            raise CheckFailed(lines(head, *runs[0], note), edition)
        own_failures = runs[1] if not runs[0] and len(runs) == 2 else []
        if own_failures:
            said = say("own failures note", name=name, own=own, k=len(own_failures), n=len(checks), kind=say(kind))
            print(said.render(edition))
        if verbose:
            passed = say("all passed", n=len(checks), kind=say(kind), name=name) if len(checks) > 1 else None
            print((passed or say("one passed", kind=say(kind), name=name)).render(edition))

    def record(
        self, name: str, obj: Any, seconds: float | None = None, references: dict[str, Callable] | None = None
    ) -> tuple[list[list[list]], list[Message], bool]:
        """Record mode, the grading kernel's recorder: every check of exercise ``name`` (visible, then hidden) run on
        ``obj`` with its calls into ``obj`` recorded (:func:`~autograder.checks.trace.recording`), for the grading
        worker to judge. The kernel reads no verdict: what a check made of the answer is the worker's to judge.

        Returns ``(traces, reasons, deps)``: ``traces`` one list per run, one trace per check (an exercise that calls
        an earlier one is run twice, ``deps`` True: :meth:`_passes`), and the recorder's own reasons, which are no
        reading of the checks: the run stopped after ``seconds`` (:func:`time_limit`), or was interrupted.

        ``references``: the course's versions of the earlier exercises, which the grading kernel's form of the checks
        does not hold (``grading/questions.py``): the recorder's own, built from what the worker gave it."""
        fns = self._all_checks(name)
        deps, passes = self._passes(name, obj, fns, references)
        mode = _Record(seconds)
        runs = self._checked(name, fns, mode, passes)
        return mode.traces, [reason for run in runs for reason in run], bool(deps)

    def replay(self, name: str, traces: list, deps: bool) -> tuple[bool, list[Message], list[Message]]:
        """Replay mode, the grading worker's verdict: every check of exercise ``name`` run again on ``traces`` (as
        :meth:`record` made them, after they travelled as data), in a process where the student's code never runs.

        Returns ``(passed, failures, details)``: the verdict (:func:`_passed`), the first lines of the first run's
        failures (messages), and its failed checks as the student reads them ("✘ label" and the message,
        indented)."""
        if not isinstance(traces, list) or not traces or len(traces) > 2:
            return False, [say("record unreadable", name=name)], []
        mode = _Replay(name=name)
        runs = self._checked(name, self._all_checks(name), mode, [({}, run) for run in traces])
        passed = _passed(runs, deps)
        return passed, ([] if passed else runs[0][:3]), mode.details[:6]

    def _all_checks(self, name: str) -> list[Callable]:
        return list(self._by_name[name].visible) + list(self._by_name[name].hidden)

    # ------------------------------------------------------------------ the rule about earlier exercises

    def _passes(
        self, name: str, obj: Any, fns: list[Callable], references: dict[str, Callable] | None = None
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[dict, list]]]:
        """How exercise ``name``'s checks ``fns`` run on ``obj`` (live and record mode): ``(deps, passes)``, where
        ``deps`` are the earlier exercises it calls (:func:`dependencies`) and each pass is what :func:`_swapped`
        puts in place while it runs — with ``deps``, first the course's versions of them (``references``, else the
        registered ones), then the student's own; else one pass — and what each check runs on (``obj``).
        :func:`_passed` reads the passes."""
        references = self._references if references is None else references
        deps = dependencies(references, name, obj, list(self._by_name))
        swap = {dep: (g, references[dep]) for dep, g in deps.items()}
        return deps, [(s, [obj] * len(fns)) for s in ([swap, {}] if deps else [{}])]

    # ------------------------------------------------------------------ the one loop over an exercise's checks

    @staticmethod
    def _checked(name: str, fns: list[Callable], mode: _Mode, passes: list[tuple[dict, Any]]) -> list[list[Message]]:
        """Run ``fns`` once per pass, in ``mode`` (:class:`_Live`, :class:`_Record`, :class:`_Replay`): each pass is
        what :func:`_swapped` puts in place while it runs and what each check runs on (the answer; in replay mode
        the check's recorded trace). Returns the failures ``mode`` reads, one list per pass begun (a time-out or an
        interruption is the failure of the pass it stopped). The whole loop stops after ``mode.seconds``."""
        runs: list[list[Message]] = []
        try:
            with time_limit(mode.seconds) as expired:
                for n, (swap, subjects) in enumerate(passes):
                    failures: list[Message] = []
                    runs.append(failures)
                    mode.begin()
                    if not isinstance(subjects, list) or len(subjects) > len(fns):
                        failures.append(say("record does not fit", name=name))
                        continue
                    with _swapped(swap):
                        for fn, subject in zip(fns, subjects):
                            failure = mode.check(fn, subject, n == 0)
                            if failure is not None:
                                failures.append(failure)
                            if expired[0]:  # the answer swallowed the time-out (a bare except): stop all the same
                                raise ExerciseTimeout(mode.seconds)
                    if len(subjects) < len(fns):  # the recorder stopped early (a time-out): its reason says why
                        failures.append(say("not every check ran", name=name))
        except (ExerciseTimeout, KeyboardInterrupt) as stop:
            why = mode.stopped(name, stop)
            if why is None:
                raise
            runs[-1:] = [(runs[-1] if runs else []) + [why]]
        return runs


def _passed(runs: list[list[Message]], deps: bool) -> bool:
    """The rule about earlier exercises, in every mode: an exercise that calls earlier ones (``deps``) is run with the
    course's versions of them first, then with the student's own (:meth:`Exercises._passes`); it passes when the
    first run passes, or when that one fails and the run with the student's own versions passes (an answer that
    fits the student's own versions only, e.g. an extra argument, keeps its points). ``runs``: each run's failures,
    one list per run begun (a run stopped by a time-out holds its failure)."""
    return not runs[0] or (deps and len(runs) == 2 and not runs[1])


@dataclasses.dataclass
class _Mode:
    """How :meth:`Exercises._checked` runs one check and what it reads of it: :class:`_Live` (the student's
    notebook), :class:`_Record` (the grading kernel's recorder), :class:`_Replay` (the grading worker's verdict)."""

    seconds: float | None = None  # the whole loop's time limit

    def begin(self) -> None:
        """A pass begins."""

    def check(self, fn: Callable, subject: Any, first: bool) -> Message | None:
        """Run check ``fn`` on ``subject`` (``first``: in the first pass); the failure it reads, or None."""
        raise NotImplementedError

    def stopped(self, name: str, stop: BaseException) -> Message | None:
        """What stopped the loop (the time limit; ``KeyboardInterrupt``) is read as; None: it goes on up."""
        return timeout_message(name, self.seconds or 0) if isinstance(stop, ExerciseTimeout) else None


@dataclasses.dataclass
class _Live(_Mode):
    """The student's notebook (``EXERCISES.run``): a failed check read as the student reads it ("✘ label" and the
    message, indented), a passed one printed in the first pass when ``verbose``, in ``edition``."""

    verbose: bool = True
    edition: str = EN

    def check(self, fn: Callable, subject: Any, first: bool) -> Message | None:
        try:
            with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                fn(subject)
        except CheckFailed as err:
            return failed_check(fn, err.message)
        except Exception as err:
            return failed_check(fn, crash_message(err))
        if self.verbose and first:
            print(say("check passed", check=label(fn)).render(self.edition))
        return None

    def stopped(self, name: str, stop: BaseException) -> Message | None:
        why = super().stopped(name, stop)
        return None if why is None else say("check label", check=why)


@dataclasses.dataclass
class _Record(_Mode):
    """The grading kernel's recorder: each check's calls into the answer kept in ``traces`` (per pass, per check),
    nothing read of how the check ended (the kernel's form of the checks compares nothing); a time-out or an
    interruption stops the run and is its reason."""

    traces: list[list[list]] = dataclasses.field(default_factory=list)

    def begin(self) -> None:
        self.traces.append([])

    def check(self, fn: Callable, subject: Any, first: bool) -> Message | None:
        trace: list = []
        self.traces[-1].append(trace)
        try:
            with recording(trace):
                fn(subject)
        except (ExerciseTimeout, KeyboardInterrupt):
            raise  # the time limit (or the cell's): stop, do not call the answer again
        except BaseException:  # the record holds how the check ended: the worker judges it
            pass
        return None

    def stopped(self, name: str, stop: BaseException) -> Message | None:
        if isinstance(stop, KeyboardInterrupt):  # the cell's time limit
            return say("checks interrupted", name=name)
        return super().stopped(name, stop)


@dataclasses.dataclass
class _Replay(_Mode):
    """The grading worker's verdict: each check run again on its recorded trace (``trace.replay``), read as its
    failure's first line (or as a record it could not be judged on); the first pass's failed checks kept in
    ``details`` as the student reads them."""

    name: str = ""
    details: list[Message] = dataclasses.field(default_factory=list)

    def check(self, fn: Callable, subject: Any, first: bool) -> Message | None:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            with contextlib.redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                outcome, message = replay(fn, subject)
        if outcome == "failed" and isinstance(message, Message):
            if first:
                self.details.append(failed_check(fn, message))
            return message.lines()[0]
        if outcome != "passed":
            return say("record not judged", name=self.name, why=str(message)[:120])
        return None


def label(fn: Callable) -> Message:
    """A check's label as the student reads it: its whole docstring on one line (a wrapped one is not cut), the key
    of its translation in the chapter's catalogue."""
    return Message(" ".join((fn.__doc__ or fn.__name__).split()))


def failed_check(fn: Callable, message: Message) -> Message:
    """A failed check as the student reads it: "✘ label", and the message below it, indented."""
    return lines(say("check label", check=label(fn)), indented(message))


def dependencies(
    references: dict[str, Callable], name: str, obj: Any, order: list[str] | tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """The exercises in ``references`` that come before exercise ``name`` in ``order`` (the notebook's) and that
    ``obj`` (a function or a class) calls by their global name, each with the globals dict it is looked up in (the
    notebook's namespace while grading). A later exercise is never swapped in: the course's version of it would be
    handed to the notebook before the notebook's own answer to it is checked."""
    found: dict[str, dict[str, Any]] = {}
    earlier = set(order[: order.index(name)]) if name in order else set()
    try:
        for fn in _functions_of(obj):
            names = _global_names(fn.__code__)
            for dep in references:
                if dep in earlier and dep in names and dep in fn.__globals__:
                    found[dep] = fn.__globals__
    except Exception:  # an object too odd to inspect: checked as it is
        return {}
    return found


def _functions_of(obj: Any) -> list[Any]:
    """The plain functions that make up ``obj``: itself, or a class's methods (its own and its bases' up to
    ``torch.nn.Module``)."""
    if isinstance(obj, type):
        found = []
        for klass in obj.__mro__:
            if klass.__module__.startswith(("torch", "builtins")):
                continue
            for value in list(vars(klass).values()):
                if type(value) in (staticmethod, classmethod):
                    value = value.__func__
                if type(value) is types.FunctionType:  # exact types: nothing of the student's code runs here
                    found.append(value)
        return found
    return [obj] if type(obj) is types.FunctionType else []


def _global_names(code: types.CodeType) -> set[str]:
    """Names ``code`` (and the functions, lambdas and comprehensions inside it) may look up as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _global_names(const)
    return names


@contextlib.contextmanager
def _swapped(entries: dict[str, tuple[dict[str, Any], Any]]):
    """Set ``globals[name] = value`` for each entry while the block runs; restore the student's afterwards."""
    saved = {name: g[name] for name, (g, _) in entries.items()}
    try:
        for name, (g, value) in entries.items():
            g[name] = value
        yield
    finally:
        for name, (g, _) in entries.items():
            g[name] = saved[name]


def crash_message(err: BaseException) -> Message:
    """A check that raised something other than CheckFailed: almost always an answer whose output has another
    shape or type than the docstring says (the check indexed or combined it), said so for the student."""
    return say("crash", error=verbatim(f"{type(err).__name__}: {str(err)[:200]}"))
