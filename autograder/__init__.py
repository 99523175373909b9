"""Autograder for the course "Attention in NLP": the chapters' checks (``autograder.chNN_<name>``, built on
``autograder.core``), the student's self-check (``canonical``, ``releases``) and the instructors' grader
(``autograder.grading``; docs/grading-design.md). Command line: ``python -m autograder --help``.
"""

# The course's version, the one place it is written: pyproject.toml reads it ([tool.setuptools.dynamic]),
# CITATION.cff repeats it (tests/test_publishing.py checks), a release is the tag v<version>.
__version__ = "0.1.0"

# Where the course lives; the Colab badges, the notebooks' setup cell and the book's launch buttons use it.
# _config.yml (repository.url, repository.branch) must agree: tests/test_notebooks.py checks that.
REPOSITORY = "https://github.com/attention-course/attention-in-nlp"
BRANCH = "main"

# What the notebooks' setup cell installs when the course package is missing (any pip requirement: a git URL, the
# path or URL of a wheel or sdist, a name on a package index). In the notebook, a wheel or sdist uploaded next to
# it (attention_course-*.whl / .tar.gz) comes first, and the environment variable ATTENTION_COURSE_SOURCE
# overrides both. After a fork, `python -m scripts.repository URL` rewrites every link (README, "Forking the course").
PACKAGE_SOURCE = f"git+{REPOSITORY}.git@{BRANCH}"
