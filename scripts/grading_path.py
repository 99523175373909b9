"""The grading path as a line: the steps of ``batch.grade`` and the course modules each step enters.

    python -m scripts.grading_path [CHAPTER]

Grades the chapter's shipped samples (``autograder/samples/CHAPTER/``) in a temporary folder, watching the calls
that ``autograder/grading/batch.py``'s own functions make into the rest of the course, and prints each step with
the functions it called, in the order it first called them. It ends with the modules entered by more than one step
(there should be none but ``submission``, the record every step reads and returns into). The worker and the
kernel run in processes of their own (the execute and judge steps inside them: ``worker.py``, ``guard.py``,
``judge.py``); this shows the batch's side. For maintainers.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import threading

from autograder import notebooks
from autograder.grading import batch

STEPS = ("chapter", "collect", "canonicalise", "execute", "judge", "feedback", "report")
# which step each of batch.py's functions is; ``grade`` itself calls into several, told apart by the callee
STEP_OF = {"canonicalise": "canonicalise", "grading_instructor": "execute", "grading_course": "execute",
           "run": "execute", "job_for": "execute", "run_one": "execute", "share": "judge", "record": "feedback",
           "_log_row": "feedback", "<listcomp>": "report"}  # fmt: skip
STEP_OF_MODULE = {"releases": "chapter", "checks": "chapter", "collect": "collect", "jail": "execute",
                  "execute": "execute", "feedback": "feedback", "report": "report"}  # fmt: skip
RECORD = "autograder.grading.submission"


def step_of(caller: str, module: str) -> str:
    if caller in STEP_OF:
        return STEP_OF[caller]
    return STEP_OF_MODULE.get(module.split(".")[-1] if "grading" in module else module.split(".")[1], "?")


def main(chapter: str = "ch03_self_attention") -> dict[str, list[str]]:
    steps: dict[str, list[str]] = {step: [] for step in STEPS}

    def profile(frame, event, arg):
        caller = frame.f_back
        if event != "call" or caller is None or not caller.f_code.co_filename.endswith("grading/batch.py"):
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("autograder") and module != "autograder.grading.batch":
            called = f"{module}.{frame.f_code.co_name}"
            step = steps.setdefault(step_of(caller.f_code.co_name, module), [])
            if called not in step:
                step.append(called)

    files = sorted((notebooks.SAMPLES / chapter).glob("*.ipynb"))
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        batch.grade(files, chapter, pathlib.Path(tempfile.mkdtemp(prefix="grading-path-")), jobs=2)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    inside = {"execute": "in the worker's process: worker.py, jail.py, memory.py; the kernel: guard.py",
              "judge": "in the worker's process: judge.py, scoring.py, channel.py"}  # fmt: skip
    for n, (step, called) in enumerate(steps.items()):
        print(f"{n}. {step}" + (f"  ({inside[step]})" if step in inside else ""))
        for name in called:
            print(f"     {name}")
    entered: dict[str, set[str]] = {}
    for step, called in steps.items():
        for name in called:
            entered.setdefault(name.rsplit(".", 1)[0], set()).add(step)
    again = {m: sorted(s, key=STEPS.index) for m, s in entered.items() if len(s) > 1 and m != RECORD}
    print("modules entered by more than one step (the record, submission, aside):", again or "none")
    return steps


if __name__ == "__main__":
    main(*sys.argv[1:2])
