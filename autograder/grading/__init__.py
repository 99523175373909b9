"""The grading machinery, for instructors (``pip install 'attention-course[grading]'``; the student install has
no nbgrader). A submission travels one line, :func:`autograder.grading.batch.grade`, whose body is the list of
steps; each step returns into the submission's record (``submission.Submission``)::

    collect ─▶ canonicalise ─▶ execute ─▶ judge ─▶ feedback ─▶ report (and LMS files)

* ``batch`` — the line itself: reads the chapter once (``releases.read``) and gives that object to every step;
  canonicalises against the committed release notebook;
* ``collect`` — files, folders, LMS zips: every uploaded file one record, its LMS identity read once (``lms``),
  what it is and its edition (``canonical.examine``), whether an earlier run graded it;
* ``submission`` — the record, from the file to its row; the result file (``Result``, written last);
* ``execute`` — the grading notebook (``runner.grading_notebook``) written once per batch; the one job function
  (``run_job``) that the local pool and a Dask task (``executors``) both run; each run's outcome given to the files
  that share it (``share``); what this machine gives the kernels;
* ``worker`` — one submission in a process of its own, forked from the batch's fork server (``worker.serve``) or
  a new interpreter: the grading notebook run in a kernel whose recorder (``guard``) runs the checks and sends what
  the answers returned over a signed channel (``channel``), every check judged again on that record (``judge``:
  the only verdict) and scored (``scoring``); ``reasons``: its one-line reasons; ``runner``: the grading notebook,
  and its run with nbclient (no nbgrader on the grading path);
* ``jail`` — the kernel's process limits and what it may see (``python -m autograder.grading.jail kernel ...``);
  ``memory``: its memory cgroup and sized file system;
* ``feedback`` — the student's page, written by ``feedback.write_page`` alone (the batch's ``feedback.Pages``,
  Gradescope's ``output``), for every outcome, in the edition submitted
  (``autograder/wording.py``); ``redaction``: what no page may show (hidden tests, the reference's lines);
* ``report`` — grades.csv, the summary, the LMS files (``lms``);
* ``nbgrader_adapter`` — the nbgrader plugins of ``nbgrader_course/`` (export to grades.csv and the LMS files, an offline feedback page); no
  other module of the grading path imports nbgrader.

This package imports nothing here, so that the kernel's ``import autograder.grading.guard`` loads the guard
alone. The security design (threat model, what is enforced where, known gaps): docs/grading-design.md.
"""
