"""What a check is, shared by the notebook, the grading kernel and the grading worker.

``compare`` (the expect_* helpers and the tolerance table), ``device`` (device mistakes on a CPU-only machine),
``limits`` (the per-exercise time limit), ``inputs`` (the answer cannot change the question), ``trace`` (call and
observe; record and replay), ``properties`` (seeded randomness, dropout, half precision) and ``exercises`` (the
registry and its runner). A chapter's check module imports them through ``autograder.core``.
"""
