"""A chapter's autograder for Gradescope: :mod:`.build` writes its zip (``python -m autograder gradescope``),
:mod:`.run` grades a submission inside Gradescope's container, :mod:`.results_json` says what ``results.json``
holds. README, "Gradescope"."""
