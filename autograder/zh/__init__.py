"""The grader's words of each chapter in Chinese: ``autograder/zh/chNN_<name>.py`` holds ``ZH = {English: Chinese}``
for the chapter's check module ``autograder/chNN_<name>.py`` — every check's label (its docstring on one line), and
the visible checks' hints and the names their comparisons give the values (``what``). Read by
``wording.phrases(chapter)`` for a Chinese submission's feedback page (``grading/feedback.py``); a chapter without
its module here gets English phrases on its Chinese page (and the page says so once).

Student side: plain dicts, no import of the checks or of the grading machinery.
"""
