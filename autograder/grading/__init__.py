"""The grading machinery, for instructors (``pip install 'attention-course[grading]'``; the student install has
no nbgrader). Imports point one way, from the batch down to the reports::

    batch  ─▶ worker ─▶ results ◀─ report ─▶ lms
      │         ├─▶ jail, guard (RecordServer), scoring
      └─────────┴─▶ nbgrader_adapter ─▶ report
    executors ─▶ batch, jail (optional: the batch's workers on a Dask cluster)

* ``batch`` — collect submissions (files, folders, LMS zips), canonicalise them, run one worker per distinct
  notebook, write the reports: :func:`autograder.grading.batch.grade`;
* ``executors`` — optional: run the batch's workers on a Dask cluster instead of this machine's processes
  (``--executor dask``, ``--scheduler ADDRESS``); it plugs into ``batch`` (``batch.Executor``);
* ``worker`` — one submission: stage a private course directory, run nbgrader's autograde in a kernel armed with
  the guard, score it (``python -m autograder.grading.worker JOB.json``);
* ``jail`` — the kernel's process limits and what it may see (``python -m autograder.grading.jail kernel ...``);
* ``guard`` — the engine inside the student's kernel that writes the only verdicts that count;
* ``scoring`` — the rule that turns nbgrader's points and the guard's records into scores;
* ``results`` — the one writer of result files and of feedback pages;
* ``report`` — grades.csv, the summary, the LMS files (``lms``);
* ``nbgrader_adapter`` — every use of nbgrader's API, and the nbgrader plugins of ``nbgrader_course/`` (export to
  grades.csv and the LMS files, an offline feedback page).

This package imports nothing here, so that the kernel's ``import autograder.grading.guard`` loads the guard
alone. The security design (threat model, what is enforced where, known gaps): docs/grading-design.md.
"""
