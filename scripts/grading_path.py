"""The grading path as a line: the steps of ``batch.grade`` and the course modules each step enters, at any depth.

    python -m scripts.grading_path [CHAPTER]

Grades the chapter's shipped samples (``autograder/samples/CHAPTER/``) in a temporary folder and watches every call
the batch's own process makes into the course (``autograder.*``), at any depth and in every thread
(``sys.setprofile``, ``threading.setprofile``). A call belongs to the step of the outermost call ``batch.py`` made
for it (:data:`STEP_OF`: by ``batch.py``'s function, else by the module ``grade`` calls; a thread's first call by
its module, :data:`STEP_OF_THREAD`). For each step it prints:

* the modules the step **enters**, each with the times it enters it: a call from one course module into another
  is an entry, counted once per call site (a loop over the batch's files that calls ``lms.parse`` for each file
  enters ``lms`` once; a generator or context manager resumed is the entry it was, not a new one); "each step
  enters its modules once" is every count 1;
* the step's **path**: the modules it is in, one after the other (a call into a module, then the return to its
  caller's module; a call site already seen is not walked again), and its **returns**: how often the path comes
  back to a module it left (``batch -> report -> lms -> report -> batch``: 2).

It ends with the modules entered by more than one step, with the steps that enter each. ``submission`` (the record every
step reads and returns into) and ``wording`` (the grader's messages, data every step that shows them renders in the
reader's edition) are set aside: never an entry or a place on the path; so is the code a module
runs when it is first imported (which step imports a module first is chance). The worker and the kernel
run in processes of their own (the execute and judge steps inside them: ``worker.py``, ``guard.py``,
``judge.py``); this shows the batch's side. For maintainers; ``tests/test_grading.py`` holds the report step to
its limits.
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import sys
import tempfile
import threading
from collections.abc import Callable
from types import CodeType, FrameType

STEPS = ("chapter", "collect", "canonicalise", "execute", "judge", "feedback", "report")
BATCH = "autograder.grading.batch"
RECORD = "autograder.grading.submission"
WORDS = "autograder.wording"  # the messages: data, as the record is
ASIDE = (RECORD, WORDS)
LINE = "line"  # batch.grade itself: the line, no step
IMPORT = "import"  # a module's code run by its first import (which step imports it first is chance): not walked
# the step of each of batch.py's functions (by qualified name); one not named is in its caller's step
STEP_OF = {"grade": LINE, "_output_folder": "chapter", "canonicalise": "canonicalise",
           "grade.<locals>.record": "feedback", "_log_row": "feedback", "Progress.__init__": "feedback",
           "Progress.step": "feedback"}  # fmt: skip
# the step of a module ``grade`` calls itself (the last part of its name)
STEP_OF_MODULE = {"releases": "chapter", "collect": "collect", "execute": "execute", "feedback": "feedback",
                  "report": "report"}  # fmt: skip
# the step of a thread's first call into the course, by its module: the execute step's pool
STEP_OF_THREAD = {"execute": "execute"}


def short(module: str) -> str:
    return module.removeprefix("autograder.grading.").removeprefix("autograder.")


@dataclasses.dataclass
class Step:
    entered: dict[str, int] = dataclasses.field(default_factory=dict)  # module -> times entered (call sites)
    path: list[str] = dataclasses.field(default_factory=list)  # the modules, one after the other
    record: bool = False  # whether it read or wrote the record (submission.py)
    called: set[str] = dataclasses.field(default_factory=set)  # every course function it called ("lms.choose")

    @property
    def returns(self) -> int:
        """How often the path comes back to a module it left."""
        return sum(m in self.path[:i] for i, m in enumerate(self.path))

    def go(self, module: str) -> None:
        if not self.path or self.path[-1] != module:
            self.path.append(module)


@dataclasses.dataclass
class _Frame:
    frame: FrameType
    module: str
    step: str
    walked: bool  # a call into another module from a call site not seen before: its return is on the path


class Watch:
    """Every call into the course, at any depth and in every thread, by step (:meth:`profile`: the profiler)."""

    def __init__(self) -> None:
        self.steps: dict[str, Step] = {step: Step() for step in STEPS}
        self._sites: set[tuple[str, CodeType | None, int, CodeType]] = set()
        self._started: dict[FrameType, str] = {}  # a generator's frame -> its step (a resumption is no new entry)
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[_Frame]:
        try:
            return self._local.stack
        except AttributeError:
            self._local.stack = []
            return self._local.stack

    def profile(self, frame: FrameType, event: str, arg) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("autograder."):
            return
        stack = self._stack()
        with self._lock:
            if event == "call":
                self._call(stack, frame, module)
            elif stack and stack[-1].frame is frame:
                done = stack.pop()
                if done.walked:
                    caller = next((f for f in reversed(stack) if f.module not in ASIDE), None)
                    self.steps.setdefault(done.step, Step()).go(short(caller.module) if caller else "(thread)")

    def _call(self, stack: list[_Frame], frame: FrameType, module: str) -> None:
        caller = next((f for f in reversed(stack) if f.module not in ASIDE), None)
        code = frame.f_code
        if code.co_name == "<module>" or (caller is not None and caller.step == IMPORT):
            stack.append(_Frame(frame, module, IMPORT, False))  # an import's own code: no step walks it
            return
        if frame in self._started:  # a generator resumed (a context manager's exit, a loop's next item)
            stack.append(_Frame(frame, module, self._started[frame], False))
            return
        if module == BATCH:
            step = STEP_OF.get(code.co_qualname, caller.step if caller else "?")
        elif caller is None:  # a thread's first call into the course
            step = STEP_OF_THREAD.get(module.rsplit(".", 1)[-1], "?")
        elif caller.module == BATCH and caller.step == LINE:
            step = STEP_OF_MODULE.get(module.rsplit(".", 1)[-1], "?")
        else:
            step = caller.step
        into = self.steps.setdefault(step, Step()) if step != LINE else None
        walked = False
        if into is not None:
            into.called.add(f"{short(module)}.{code.co_qualname}")
        if module in ASIDE:
            if into is not None and module == RECORD:
                into.record = True
        elif into is not None and (caller.module != module if caller else module != BATCH):
            site = (step, caller.frame.f_code if caller else None, caller.frame.f_lineno if caller else 0, code)
            if site not in self._sites:
                self._sites.add(site)
                into.entered[short(module)] = into.entered.get(short(module), 0) + 1
                into.go(short(caller.module) if caller else "(thread)")
                into.go(short(module))
                walked = True
        if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            self._started[frame] = step
        stack.append(_Frame(frame, module, step, walked))


def watch(run: Callable[[], object]) -> dict[str, Step]:
    """The steps of ``run()`` (a call of ``batch.grade``), as :class:`Watch` sees them."""
    seen = Watch()
    sys.setprofile(seen.profile)
    threading.setprofile(seen.profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return seen.steps


INSIDE = {"execute": "in the worker's process: worker.py, jail.py, memory.py; the kernel: guard.py",
          "judge": "in the worker's process: judge.py, scoring.py, channel.py"}  # fmt: skip


def show(steps: dict[str, Step]) -> None:
    for n, (name, step) in enumerate(steps.items()):
        print(f"{n}. {name}" + (f"  ({INSIDE[name]})" if name in INSIDE else ""))
        entered = ", ".join(f"{m}" + (f" x{k}" if k > 1 else "") for m, k in step.entered.items())
        print(f"     enters: {entered or '-'}" + ("  (and the record, submission)" if step.record else ""))
        print(f"     path: {' -> '.join(step.path) or '-'}  ({step.returns} returns to a module it left)")
    modules: dict[str, list[str]] = {}
    for name, step in steps.items():
        for m in step.entered:
            modules.setdefault(m, []).append(name)
    again = {m: s for m, s in modules.items() if len(s) > 1}
    print("modules entered by more than one step (the record, submission, and the messages, wording, aside):")
    for m, names in again.items():
        print(f"     {m}: {', '.join(names)}")
    if not again:
        print("     none")


def main(chapter: str = "ch03_self_attention") -> dict[str, Step]:
    from autograder import notebooks
    from autograder.grading import batch

    files = sorted((notebooks.SAMPLES / chapter).glob("*.ipynb"))
    out = pathlib.Path(tempfile.mkdtemp(prefix="grading-path-"))
    steps = watch(lambda: batch.grade(files, chapter, out, jobs=2))
    show(steps)
    return steps


if __name__ == "__main__":
    main(*sys.argv[1:2])
