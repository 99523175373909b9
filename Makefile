# One-command set-up: every target creates .venv and installs everything it needs on first use.
#   make book   - build the HTML book into _build/html (executes every page; cached)
#   make lint   - ruff (lint + format check) on the tree, mypy on solutions/, autograder/ and scripts/build_notebooks/ (pyproject config)
#   make test   - lint, then all tests (derived files in sync, solutions, graders, nbval, end-to-end grading), then the book
#                 build and its check in headless Chromium (needs: apt-get install chromium chromium-driver)
#   make grade  - grade the shipped sample submissions into grading_out/
#   make release-check - build the sdist + wheel into dist/ and check them, the workflows and CITATION.cff
#   make gpu-check - on a CUDA machine: the cuda-marked tests, chapter 11's kernels' registers/spills/shared memory,
#                 the GPU benchmarks into benchmarks/results/ (about 10 minutes); without CUDA it says so and exits 0
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONPATH := $(CURDIR)

.PHONY: setup book book-en book-zh lint test test-full grade notebooks release-check gpu-check clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup: $(STAMP)

# --all re-reads every page (execution stays cached in _build/.jupyter_cache), so a page's warnings recur on every
# build: a failed build cannot turn green by being run again unchanged.
# The Chinese edition (中文版, book/*.zh.md) builds from _config.zh.yml/_toc.zh.yml and lands in _build/html/zh/; its
# code cells are the English pages', captions and the cells' tables are translated as it renders.
# Each page is executed once for both editions, pages side by side on every core (scripts/execute_book.py): its
# kernel draws every figure as the code writes it and in Chinese (book/edition_text.py), each edition's execution
# cache (_build/.jupyter_cache, _build/.jupyter_cache_zh) gets its own, and the key of both holds the digest of the
# files the page read (book/_ext/page_inputs.py), so a changed page or module re-executes the pages it concerns.
# The two builds then execute nothing and run side by side (make -j2, each one's log kept whole).
book: $(STAMP)
	$(PY) -m scripts.execute_book
	$(MAKE) --no-print-directory -j2 --output-sync=target book-en book-zh
	rm -rf _build/html/zh && cp -r _build/zh/_build/html _build/html/zh

book-en:  # the English edition alone (`make book` runs it after the execution); needs .venv
	$(VENV)/bin/jupyter-book build . --all -W --keep-going

book-zh:  # the Chinese edition alone, likewise
	$(VENV)/bin/jupyter-book build . --config _config.zh.yml --toc _toc.zh.yml --path-output _build/zh --all -W --keep-going

# Configured in pyproject.toml ([tool.ruff], [tool.mypy]); .pre-commit-config.yaml runs the same three commands.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# lint first: a style or type error fails CI before the long suites run.
# CI's tier of the slow tests (they start kernels, jails or processes), about 10 minutes on 2 quiet cores: every
# chapter's notebook in the Colab-like virtualenv (tests/platforms.toml: untouched and with the reference answers, the
# course installed by the setup cell; on Colab's CPU runtime, where chapter 11's notebook installs the Triton of the
# runtime's torch, and chapter 11's again on the GPU runtime's Triton) and chapter 3's Chinese notebook, the grading
# jail, DDP training, plain nbgrader's own tools on the exchange chapter, the graded damaged/hostile variants of
# chapter 9, the independently written correct answers graded through the real grader for chapters 3 and 11, the
# stray-chapter Canvas zip, a Moodle and a Canvas zip with re-uploads, PDFs, Chinese names and claimed ids (about
# a minute), workers started without the fork server, Chinese submissions graded like English ones, one simulated
# Gradescope container (chapter 3: a hostile cell, then the Chinese notebook with a bug; about 3 minutes), every
# chapter's Gradescope requirements resolved by pip with the Python setup.sh picks on Ubuntu 22.04, python3.11, to the
# tested nbgrader (under a minute; skipped without Python 3.10 and 3.11 or PyPI), chapters 8's
# and 6's answers that change the question, chapter 6's blocks that echo what the check's oracle would need, chapter 9's
# catalogue recorded with the kernel's form of the checks (the grader's knowledge as the answer is graded in the
# variants of chapters 8 and 9), the fresh _posixsubprocess without the jail, chapter 13's ring attention on two
# real gloo processes (forward and backward, about 8 s), chapter 3's device bugs and idioms of
# the catalogue graded as the notebook decides them, and the kernels' memory limits (a fill of /tmp and home, a limit
# too small). The other per-chapter kernel tests (variants, plain nbgrader, rewrites through
# the grader and Gradescope's samples of the other chapters, nbval), grading on a Dask cluster, the scaffold and the
# training-script tests run in `make test-full` (before a release; about 25 minutes on 2 cores). Moved there when
# chapters 13 and 14 came (to keep .ci/run under 20 minutes): chapter 8's graded variants, chapters 10's and 12's
# rewrites through the grader, and the Dask cluster.
SLOW_CI := 'tests/test_colab_surface.py::test_untouched_notebook_says_each_exercise_is_not_filled_in' \
	'tests/test_colab_surface.py::test_reference_answers_pass_every_visible_check' \
	'tests/test_colab_surface.py::test_chinese_notebook_with_the_reference_answers_passes_and_is_gradeable[ch03_self_attention]' \
	tests/test_colab_surface.py::test_private_torch_names_import_on_colabs_torch \
	'tests/test_colab_surface.py::test_gpu_runtime_untouched_notebook_says_each_exercise_is_not_filled_in' \
	'tests/test_colab_surface.py::test_gpu_runtime_reference_answers_pass_every_visible_check' \
	tests/test_jail.py tests/test_distributed_training.py \
	'tests/test_ch13_serving_attention.py::test_ring_attention_on_real_processes_equals_full_attention_forward_and_backward[zigzag-2]' \
	'tests/test_alternatives_graded.py::test_rewrites_get_full_marks_through_the_grader[ch03_self_attention]' \
	'tests/test_alternatives_graded.py::test_rewrites_get_full_marks_through_the_grader[ch11_flash_attention_triton]' \
	'tests/test_grading.py::test_a_canvas_download_with_a_stray_chapter_keeps_the_students_grade' \
	'tests/test_grading.py::test_lms_downloads_give_every_student_one_right_row' \
	'tests/test_grading.py::test_workers_started_as_new_interpreters_grade_as_forked_ones' \
	'tests/test_grading.py::test_a_crash_in_the_answer_names_the_students_line_in_the_graded_reason_and_feedback' \
	'tests/test_translations.py::test_chinese_submissions_are_graded_like_english_ones' \
	'tests/test_gradescope.py::test_simulated_gradescope_run' \
	'tests/test_gradescope.py::test_setup_sh_installs_every_chapter_on_ubuntu_2204s_python' \
	'tests/test_nbgrader_course.py::test_plain_nbgrader_gives_the_course_points[ch03_self_attention]' \
	'tests/test_robust_grading.py::test_variants_grade_as_expected[ch09_sparse_attention]' \
	'tests/test_robust_grading.py::test_answers_that_change_the_question_earn_nothing[ch08_kv_cache]' \
	'tests/test_robust_grading.py::test_answers_that_change_the_question_earn_nothing[ch06_gpt]' \
	'tests/test_robust_grading.py::test_parts_of_the_answer_feed_no_oracle[ch06_gpt]' \
	'tests/test_questions.py::test_every_catalogue_entry_is_judged_alike_from_the_kernel_form[ch09_sparse_attention]' \
	tests/test_robust_grading.py::test_a_fresh_posixsubprocess_is_refused_without_the_jail \
	tests/test_device_checks.py::test_the_grader_decides_devices_as_the_notebook_does \
	tests/test_kernel_limits.py \
	tests/test_test_history.py::test_an_earlier_download_gets_full_marks_and_no_edit_reported

test: $(STAMP) lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto --dist loadgroup -m "not slow" tests
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto --dist loadgroup --durations=20 -m slow $(SLOW_CI)
	$(MAKE) book
	$(PY) -m tests.check_built_book
	$(PY) -m tests.check_book_in_browser
	$(MAKE) release-check

# What a release publishes, checked here because the workflows cannot run here: the sdist and the wheel built from
# it (dist/), twine's metadata check, the workflow files against GitHub's schema and zizmor's audits (offline),
# and CITATION.cff against the Citation File Format schema.
release-check: $(STAMP)
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github/workflows
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.citation-file-format CITATION.cff

# Everything measured on a GPU, in one command (scripts/gpu_check.py; `python -m scripts.gpu_check --list` shows the
# steps): skips cleanly without CUDA.
gpu-check: $(STAMP)
	$(PY) -m scripts.gpu_check

grade: $(STAMP)
	$(PY) -m autograder grade

notebooks: $(STAMP)
	$(PY) -m scripts.build_notebooks

clean:
	rm -rf _build build dist grading_out

# Every test, the slow per-chapter kernel tests included, then what `make test` does after its tests.
test-full: $(STAMP) lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto --dist loadgroup tests
	$(MAKE) book
	$(PY) -m tests.check_built_book
	$(PY) -m tests.check_book_in_browser
	$(MAKE) release-check
