"""A chapter's autograder for Gradescope, made by one command, that grades there as ``python -m autograder grade``
grades here (README, "Gradescope").

* :mod:`~autograder.gradescope.build` — ``python -m autograder gradescope CHAPTER``: ``CHAPTER_gradescope.zip``
  (``setup.sh``, ``run_autograder``, ``gradescope.json``, the course);
* :mod:`~autograder.gradescope.run` — inside Gradescope's container: grade ``/autograder/submission`` and write
  ``/autograder/results/results.json`` (``python -m autograder.gradescope run``, what ``run_autograder`` calls);
* :mod:`~autograder.gradescope.results_json` — what ``results.json`` says, from the course grader's result
  (its format: ``gradescope_results.schema.json``, beside this file).

Gradescope's container simulated on this machine, for the tests and the benchmark, is test support:
``tests/gradescope_container.py``.
"""

from .build import add_build_arguments, build_command

__all__ = ["add_build_arguments", "build_command"]
