"""The grading machinery, for instructors (``pip install 'attention-course[grading]'``; the student install has
no nbgrader). A submission travels one line, :func:`autograder.grading.batch.grade`, whose body is the list of
steps, each returning into the submission's record (``submission.Submission``)::

    collect ─▶ canonicalise ─▶ execute ─▶ judge ─▶ feedback ─▶ report (and LMS files)

Each module's docstring says which step it is; what each step enters: docs/grading-design.md ("The line inside every
step"); the security design (threat model, what is enforced where, known gaps): the same document.
``nbgrader_adapter`` alone imports nbgrader. This package imports nothing here, so that the kernel's
``import autograder.grading.guard`` loads the guard alone.
"""
