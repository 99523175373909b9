"""The registry of a chapter's exercises (:class:`Exercises`) and the one loop over an exercise's checks
(:func:`_checked`), run live (``EXERCISES.run``, in the student's notebook), recording (the grading kernel's
recorder, ``grading/guard.py``) or replaying (the grading worker's verdict, ``grading/judge.py``). An exercise that
calls an earlier one is checked with the course's version of it first, then with the student's own (:func:`_passed`).
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
    """What one check requires of the answer, the end of "your answer ...": "works for an odd ``d_model`` too"
    (``en``, the key of its Chinese in the chapter's catalogue), listed in the notebook below the exercise."""

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
        return list(dict.fromkeys(self.declared[fn] for fn in self.visible + self.hidden if fn in self.declared))

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
        """Decorator: register a check for exercise ``name`` (``points`` on its first registration). ``requires``:
        the :class:`Requirement` it tests (every hidden check must declare one). ``extremes``: it feeds values at the
        edge of the dtype's range (the catalogue names a correct answer by another stable formula for each:
        ``STABLE_FOR``, tests/test_checks.py)."""

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
        """Decorator: register the course's version of exercise ``name``, swapped in for the student's while a later
        exercise that calls it is checked (:meth:`_passes`)."""

        def register(fn: Callable) -> Callable:
            if name not in self._by_name:
                raise ValueError(f"register the checks of {name!r} before its reference")
            self._references[name] = fn
            return fn

        return register

    def run(self, name: str, obj: Any, *, hidden: bool = False, verbose: bool = True, edition: str = EN) -> None:
        """Live: run the visible (or, with ``hidden=True``, the hidden) checks of exercise ``name`` on ``obj``.

        Prints one line per passed check; raises :class:`CheckFailed` listing every failed one; both in ``edition``.
        Warnings of the student's code are silenced (nbgrader scores a test cell that writes to stderr as zero).
        Returns None on purpose: nbgrader reads a number left as a test cell's value as a partial score."""
        __tracebackhide__ = True  # IPython: show the student the message, not this function's frame
        ex = self._by_name[name]
        checks = ex.hidden if hidden else ex.visible
        kind = "hidden" if hidden else "visible"
        seconds = exercise_time_limit()

        def check(fn: Callable, subject: Any, n: int) -> Message | None:
            try:
                with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")
                    fn(subject)
            except CheckFailed as err:
                return failed_check(fn, err.message)
            except Exception as err:
                return failed_check(fn, crash_message(err))
            if verbose and n == 0:
                print(say("check passed", check=label(fn)).render(edition))
            return None

        def stopped(stop: BaseException) -> Message | None:
            why = _timed_out(name, seconds, stop)
            return None if why is None else say("check label", check=why)

        deps, passes = self._passes(name, obj, checks)
        runs = _checked(name, checks, passes, check, seconds, stopped)
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
        """The grading kernel's recorder: every check of exercise ``name`` (visible, then hidden) run on ``obj`` with
        its calls into ``obj`` recorded (:func:`~autograder.checks.trace.recording`), nothing judged.

        Returns ``(traces, reasons, deps)``: one list of traces per pass, one trace per check (two passes when
        ``deps``: :meth:`_passes`), and the recorder's own reasons (the run stopped after ``seconds``, or was
        interrupted). ``references``: the course's versions of the earlier exercises, which the kernel's form of the
        checks does not hold (``grading/questions.py``)."""
        fns = self._all_checks(name)
        deps, passes = self._passes(name, obj, fns, references)
        traces: list[list[list]] = []

        def check(fn: Callable, subject: Any, n: int) -> None:
            if len(traces) <= n:
                traces.append([])
            trace: list = []
            traces[n].append(trace)
            try:
                with recording(trace):
                    fn(subject)
            except (ExerciseTimeout, KeyboardInterrupt):
                raise  # the time limit (or the cell's): stop, do not call the answer again
            except BaseException:  # the record holds how the check ended: the worker judges it
                pass

        def stopped(stop: BaseException) -> Message | None:
            if isinstance(stop, KeyboardInterrupt):  # the cell's time limit
                return say("checks interrupted", name=name)
            return _timed_out(name, seconds, stop)

        runs = _checked(name, fns, passes, check, seconds, stopped)
        return traces, [reason for run in runs for reason in run], bool(deps)

    def replay(self, name: str, traces: list, deps: bool) -> tuple[bool, list[Message], list[Message]]:
        """The grading worker's verdict: every check of exercise ``name`` run again on ``traces`` (as :meth:`record`
        made them, after they travelled as data), where the student's code never runs.

        Returns ``(passed, failures, details)``: the verdict (:func:`_passed`), the first lines of the first pass's
        failures, and its failed checks as the student reads them ("✘ label" and the message, indented)."""
        if not isinstance(traces, list) or not traces or len(traces) > 2:
            return False, [say("record unreadable", name=name)], []
        details: list[Message] = []

        def check(fn: Callable, subject: Any, n: int) -> Message | None:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                with contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")
                    outcome, message = replay(fn, subject)
            if outcome == "failed" and isinstance(message, Message):
                if n == 0:
                    details.append(failed_check(fn, message))
                return message.lines()[0]
            return None if outcome == "passed" else say("record not judged", name=name, why=str(message)[:120])

        runs = _checked(name, self._all_checks(name), [({}, run) for run in traces], check)
        passed = _passed(runs, deps)
        return passed, ([] if passed else runs[0][:3]), details[:6]

    def _all_checks(self, name: str) -> list[Callable]:
        return list(self._by_name[name].visible) + list(self._by_name[name].hidden)

    def _passes(
        self, name: str, obj: Any, fns: list[Callable], references: dict[str, Callable] | None = None
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[dict, list]]]:
        """How exercise ``name``'s checks ``fns`` run on ``obj``: ``(deps, passes)``, ``deps`` the earlier exercises
        it calls (:func:`dependencies`), each pass what :func:`_swapped` puts in place while it runs (with ``deps``,
        first the course's versions of them, ``references`` else the registered ones, then nothing: the student's
        own) and what each check runs on."""
        references = self._references if references is None else references
        deps = dependencies(references, name, obj, list(self._by_name))
        swap = {dep: (g, references[dep]) for dep, g in deps.items()}
        return deps, [(s, [obj] * len(fns)) for s in ([swap, {}] if deps else [{}])]


def _checked(
    name: str,
    fns: list[Callable],
    passes: list[tuple[dict, Any]],
    check: Callable[[Callable, Any, int], Message | None],
    seconds: float | None = None,
    stopped: Callable[[BaseException], Message | None] | None = None,
) -> list[list[Message]]:
    """The one loop over an exercise's checks: ``check(fn, subject, n)`` for each check ``fn`` in each pass ``n``
    (what :func:`_swapped` puts in place while it runs, and each check's subject: the answer, or in the worker its
    recorded trace), returning the failure it reads or None. Returns the failures, one list per pass begun. The whole
    loop stops after ``seconds``; what stopped it (the time limit, ``KeyboardInterrupt``) is the failure ``stopped``
    reads of it (default: a time-out's), or goes on up when that is None."""
    runs: list[list[Message]] = []
    try:
        with time_limit(seconds) as expired:
            for n, (swap, subjects) in enumerate(passes):
                failures: list[Message] = []
                runs.append(failures)
                if not isinstance(subjects, list) or len(subjects) > len(fns):
                    failures.append(say("record does not fit", name=name))
                    continue
                with _swapped(swap):
                    for fn, subject in zip(fns, subjects):
                        failure = check(fn, subject, n)
                        if failure is not None:
                            failures.append(failure)
                        if expired[0]:  # the answer swallowed the time-out (a bare except): stop all the same
                            raise ExerciseTimeout(seconds)
                if len(subjects) < len(fns):  # the recorder stopped early (a time-out): its reason says why
                    failures.append(say("not every check ran", name=name))
    except (ExerciseTimeout, KeyboardInterrupt) as stop:
        why = stopped(stop) if stopped else _timed_out(name, seconds, stop)
        if why is None:
            raise
        runs[-1:] = [(runs[-1] if runs else []) + [why]]
    return runs


def _timed_out(name: str, seconds: float | None, stop: BaseException) -> Message | None:
    return timeout_message(name, seconds or 0) if isinstance(stop, ExerciseTimeout) else None


def _passed(runs: list[list[Message]], deps: bool) -> bool:
    """The rule about earlier exercises, in every mode: an exercise that calls earlier ones (``deps``) passes when
    its first pass (with the course's versions of them) passes, or when that one fails and the pass with the
    student's own versions passes (an answer that fits the student's own versions only keeps its points)."""
    return not runs[0] or (deps and len(runs) == 2 and not runs[1])


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
