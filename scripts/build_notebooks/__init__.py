"""The notebook builder: every committed file derived from the chapters' sources, for maintainers (students,
graders and instructors never run it, and the installed package does not carry it).

``python -m scripts.build_notebooks [CHAPTER...]`` writes them all: the release notebooks of both editions and their test cell
history (``notebooks.py``, ``translations.py``, ``requirements.py``), the nbgrader course directory
(``nbgrader_course.py``), then the sample submissions (``catalogue/samples.py``). ``--check`` lists the stale ones
instead; ``translations check | stamp PAGE... | skeleton CHAPTER`` keeps the Chinese pages in step with the English.
"""
