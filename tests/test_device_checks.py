"""Device checks on a CPU-only machine follow PyTorch, and blame only the student's own code.

``autograder.core.call`` asks PyTorch whether a call would fail on a GPU (a second run under ``FakeTensorMode``,
tensors made without ``device=`` on a fake CUDA device); where that run cannot decide, a fallback watches the real
call. Both paths must pass every device-correct idiom below and catch every device bug, and neither may blame a
tensor that the course's checks made. A test set of idioms, each a function of ``(q, k)`` or a module.
"""

from __future__ import annotations

import pathlib
import re

import nbformat
import pytest
import torch
from torch import nn

import autograder.core as core
import catalogue
from autograder import notebooks
from autograder.checks import device
from autograder.core import CheckFailed, call
from scripts.build_notebooks import notebooks as builder
from solutions.ch03_self_attention import causal_mask

Q = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
K = torch.randn(2, 3, 6, 5, generator=torch.Generator().manual_seed(1))


def _scores(q, k):
    return q @ k.transpose(-2, -1)


# ---------------------------------------------------------------------------------------- device-correct idioms
def helper_then_to(q, k):  # Tensor.to returns the same tensor when it is already there: still a move
    m = causal_mask(q.shape[-2], k.shape[-2]).to(q.device)
    return _scores(q, k).masked_fill(~m, float("-inf"))


def helper_with_device(q, k):
    return _scores(q, k).masked_fill(~causal_mask(q.shape[-2], k.shape[-2], device=q.device), float("-inf"))


def arange_with_device(q, k):
    i = torch.arange(q.shape[-2], device=q.device)[:, None]
    j = torch.arange(k.shape[-2], device=k.device)
    return _scores(q, k).masked_fill(j > i + k.shape[-2] - q.shape[-2], float("-inf"))


def new_methods(q, k):
    return _scores(q, k) + q.new_zeros(q.shape[-2], k.shape[-2]) + q.new_tensor([1.0])


def like_functions(q, k):
    return torch.ones_like(q) * q + torch.full_like(q, 2.0)


def type_as(q, k):
    return q + torch.ones(q.shape[-1]).type_as(q)


def to_like(q, k):
    return q + torch.ones(q.shape[-1]).to(q)


def cpu_scalar(q, k):  # PyTorch lets CPU scalars mix with GPU tensors
    return q / torch.sqrt(torch.tensor(float(q.shape[-1])))


def reads_values(q, k):  # .item(): the fake run cannot decide; the fallback does
    n = int((q > 0).sum().item())
    return q + torch.arange(q.shape[-1], device=q.device) * n


def cpu_index(q, k):  # a CPU index tensor may index a GPU tensor
    return q[:, :, torch.arange(2)]


def where_with_python_scalar(q, k):
    return torch.where(q > 0, q, 0.0)


IDIOMS = [
    helper_then_to,
    helper_with_device,
    arange_with_device,
    new_methods,
    like_functions,
    type_as,
    to_like,
    cpu_scalar,
    reads_values,
    cpu_index,
    where_with_python_scalar,
]


# ---------------------------------------------------------------------------------------- device bugs
def arange_without_device(q, k):
    return q + torch.arange(q.shape[-1])


def helper_without_device(q, k):  # the course's helper, called by the student without device= and never moved
    return _scores(q, k).masked_fill(~causal_mask(q.shape[-2], k.shape[-2]), float("-inf"))


def matmul_with_cpu_tensor(q, k):
    return q @ torch.ones(q.shape[-1], q.shape[-1])


def reads_values_then_arange(q, k):
    n = int((q > 0).sum().item())
    return q + torch.arange(q.shape[-1]) * n


BUGS = [arange_without_device, helper_without_device, matmul_with_cpu_tensor, reads_values_then_arange]


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 5)
        self.register_buffer("mask", torch.ones(6, 6, dtype=torch.bool).tril())  # a buffer moves with the module

    def forward(self, x):
        T = x.shape[-2]
        return self.proj(x).masked_fill(~self.mask[:T, :1], 0.0) + torch.zeros(5, device=x.device)


class ZerosWithoutDevice(WithBuffer):
    def forward(self, x):
        return self.proj(x) + torch.zeros(5)


@pytest.fixture(params=["fake GPU", "fallback"])
def path(request, monkeypatch):
    monkeypatch.setattr(device, "FAKE_GPU", request.param == "fake GPU")
    return request.param


@pytest.mark.parametrize("fn", IDIOMS, ids=lambda f: f.__name__)
def test_device_correct_idioms_pass(fn, path):
    expected = fn(Q, K)
    torch.testing.assert_close(call(f"{fn.__name__}(q, k)", fn, Q, K), expected)


@pytest.mark.parametrize("fn", BUGS, ids=lambda f: f.__name__)
def test_device_bugs_are_caught_and_name_the_students_line(fn, path):
    with pytest.raises(CheckFailed) as err:
        call(f"{fn.__name__}(q, k)", fn, Q, K)
    message = str(err.value)
    assert "without device=" in message and "your line" in message, message
    assert "fails on a GPU" in message


def test_module_idioms(path):
    call("module(x)", WithBuffer(), Q[0])
    with pytest.raises(CheckFailed, match="without device="):
        call("module(x)", ZerosWithoutDevice(), Q[0])
    with pytest.raises(CheckFailed, match="without device="):
        call("module.forward(x)", ZerosWithoutDevice().forward, Q[0])


def test_a_tensor_the_checks_made_is_never_blamed_on_the_student(path):
    """A toy model written in the checks (as ch06's) that makes a tensor without device=: the student's code that
    calls it (a generate() relying on the model's default position ids) keeps its points."""
    source = (
        "import torch\n"
        "class ToyLM(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.wpe = torch.nn.Embedding(8, 5)\n"
        "    def forward(self, idx):\n"
        "        return self.wpe(torch.arange(idx.shape[1])) + torch.zeros(idx.shape[1], 5)\n"
    )
    checks_file = str(pathlib.Path(core.__file__).parent / "_a_checks_module.py")
    namespace: dict = {}
    exec(compile(source, checks_file, "exec"), namespace)
    model = namespace["ToyLM"]()

    def students_generate(model, idx):
        return model(idx) + idx.new_zeros(idx.shape[1], 1)

    idx = torch.zeros(1, 4, dtype=torch.long)
    call("generate(model, idx)", students_generate, model, idx)


def test_the_probe_leaves_the_arguments_and_random_state_alone():
    """The fake run works on copies: a cache appended to, a module's attribute set, the global generator."""
    cache: list = []

    def appends(x, cache):
        cache.append(x)
        torch.rand(1)  # the global generator
        return x * 2

    state = torch.random.get_rng_state()
    call("appends(x, cache)", appends, Q, cache)
    assert len(cache) == 1 and cache[0] is Q
    torch.random.set_rng_state(state)
    torch.rand(1)
    after_one_draw = torch.random.get_rng_state()
    torch.random.set_rng_state(state)
    call("appends(x, cache)", appends, Q, [])
    assert torch.equal(torch.random.get_rng_state(), after_one_draw)  # one draw: the real call's


def test_a_crash_names_the_students_line_not_the_course_helpers():
    """An error raised inside the course's helper (a ValueError about shapes) is shown at the student's line that
    called it."""
    from solutions.ch03_self_attention import scaled_dot_product_attention

    def wrong_shapes(q, k):
        return scaled_dot_product_attention(q, k[..., :-1], k)  # d_k differs

    with pytest.raises(CheckFailed) as err:
        call("wrong_shapes(q, k)", wrong_shapes, Q, K)
    message = str(err.value)
    assert "your line" in message and "scaled_dot_product_attention(q, k[..., :-1], k)" in message, message
    assert "raise ValueError" not in message


# ---------------------------------------------------------------------------------------- the same check in grading
DEVICE_CHAPTER = "ch03_self_attention"


def _device_entries(chapter):
    """The catalogue's device bugs of ``chapter`` (mutants that drop a ``device=``) and its device-correct idioms
    (alternatives that build tensors on the input's device another way)."""
    bugs = [
        m for m in catalogue.mutants(chapter) if any("device=" in old and "device=" not in new for old, new in m.edits)
    ]
    idioms = [a for a in catalogue.alternatives(chapter) if any("device=" in new for _, new in getattr(a, "edits", ()))]
    return bugs, idioms


@pytest.mark.slow
def test_the_grader_decides_devices_as_the_notebook_does(tmp_path):
    """Graded through the real grader (kernel, recorder, the worker's replay): each device bug of the catalogue
    loses its exercise with the message the student's own test cell gives (one device check decides in both), and
    each device-correct idiom of the catalogue keeps full marks."""
    from autograder import releases
    from autograder.grading import batch

    chapter = DEVICE_CHAPTER
    bugs, idioms = _device_entries(chapter)
    assert bugs and idioms, "the catalogue has device bugs and device-correct idioms to grade"
    release = releases.release_notebook(chapter)
    solutions = builder.solution_module(chapter)
    checks = notebooks.checks_module(chapter)
    folder = tmp_path / "subs"
    folder.mkdir()
    entries = {}
    for i, entry in enumerate(bugs + idioms):
        name = f"student{i:02d}_{7000 + i}_{8000 + i}_{chapter}.ipynb"
        (folder / name).write_text(nbformat.writes(builder.fill_release(release, chapter, mutants=[entry])))
        entries[name] = entry
    rows = batch.grade(sorted(folder.glob("*.ipynb")), chapter, tmp_path / "out", cell_timeout=60, memory_mb=3072)
    full = {ex.name: float(ex.points) for ex in checks.EXERCISES}
    assert len(rows) == len(entries)
    for row in rows:
        entry = entries[row.submission]
        if entry in idioms:
            assert row.scores == full, (entry.name, row.reason)
            continue
        assert row.scores == {**full, entry.target: 0.0}, (entry.name, row.reason)
        messages = []
        for hidden in (False, True):  # the student's own test cell (and the hidden one), in this process
            try:
                checks.EXERCISES.run(entry.target, entry.build(solutions), hidden=hidden, verbose=False)
            except CheckFailed as err:
                messages += [ln.strip() for ln in str(err).splitlines()]
        said = messages[messages.index(next(ln for ln in messages if ln.startswith("✘"))) + 1]
        # the same message, but for the line: the cell's line (with its text) in grading, the function's here
        head, *rest = re.split(r"your line \d+", said)
        assert "device" in said and head in row.reason and (not rest or rest[-1].strip() in row.reason), (
            said,
            row.reason,
        )
