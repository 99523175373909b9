"""Issue 46: what the answer's process can switch off is not a verdict.

Chapters 9, 10 and 11 measure *how* an answer computes (the largest tensor it makes, the tensors it keeps for
backward, the blocks a kernel loads) inside the answer's call, in the student's process. Each way to switch such a
measurement off must fail the check (recorded, and failed again when the worker replays the record), not pass it
unmeasured; the course's answers and the catalogue's correct alternatives still pass (tests/test_checks.py). The same
attacks, graded through the real grader, are variants in tests/variants.py (``MEASURED_VARIANTS``).
"""

from __future__ import annotations

import importlib.util
import inspect
import math

import pytest
import torch
from torch.utils._python_dispatch import _disable_current_modes, _pop_mode, _push_mode

import catalogue
from autograder import ch09_sparse_attention as ch09
from autograder import ch10_flash_attention as ch10
from autograder.core import record, replay
from solutions import ch09_sparse_attention as sol09
from solutions import ch10_flash_attention as sol10


def _verdict(check, answer) -> tuple[str, str]:
    """The kernel's outcome and message (its English), after asserting that the worker's replay of the record
    agrees."""
    outcome, message, trace = record(check, answer)
    assert replay(check, trace) == (outcome, message)
    return outcome, str(message)


def _mutant(chapter: str, name: str, solutions):
    return next(m for m in catalogue.mutants(chapter) if m.name == name).build(solutions)


# ---------------------------------------------------------------- chapter 10: tiles only


_FULL = _mutant("ch10_flash_attention", "whole score matrix in the forward pass", sol10)


def _modes_off(*args, **kwargs):
    with _disable_current_modes():
        return _FULL(*args, **kwargs)


def _python_key_excluded(*args, **kwargs):
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
        return _FULL(*args, **kwargs)


def _mode_popped(*args, **kwargs):
    if not torch._C._len_torch_dispatch_stack():
        return _FULL(*args, **kwargs)
    mode = _pop_mode()
    try:
        return _FULL(*args, **kwargs)
    finally:
        _push_mode(mode)


def _cloned_where_seen(*args, **kwargs):
    with _disable_current_modes():
        o, lse = _FULL(*args, **kwargs)
    return o.clone(), lse.clone()  # seen: a clone of something the watch never saw made


def _through_numpy(*args, **kwargs):
    with _disable_current_modes():
        o, lse = _FULL(*args, **kwargs)
    return torch.from_numpy(o.numpy().copy()), torch.tensor(lse.numpy())


def _written_behind(*args, **kwargs):
    o, lse = sol10.flash_attention_forward(*args, **kwargs)  # a tiled result, seen
    with _disable_current_modes():
        o_full, lse_full = _FULL(*args, **kwargs)
    o.numpy()[...] = o_full.numpy()  # then overwritten through a numpy view (no version counter moves)
    lse.data.copy_(lse_full)
    return o, lse


@pytest.mark.parametrize(
    "answer", [_modes_off, _python_key_excluded, _mode_popped, _cloned_where_seen, _through_numpy, _written_behind]
)
def test_a_full_matrix_computed_where_the_tiles_check_cannot_see_fails_it(answer):
    outcome, message = _verdict(ch10._forward_tiles_only, answer)
    assert outcome == "failed" and "computed where the check could not see it" in message
    assert _verdict(ch10._forward_no_mask, answer)[0] == "passed"  # the numbers themselves are right


def test_an_answer_that_computes_nothing_while_watched_fails_the_tiles_check():
    def lazy_when_watched(q, k, v, **kwargs):
        if torch._C._len_torch_dispatch_stack():
            return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(q.shape[:-1])
        return _FULL(q, k, v, **kwargs)

    outcome, message = _verdict(ch10._forward_tiles_only, lazy_when_watched)
    assert outcome == "failed" and "differs from the expected values" in message


def test_the_backward_tiles_check_fails_closed_too():
    full = _mutant("ch10_flash_attention", "torch.autograd through the whole matrices in the backward pass", sol10)

    def off(*args, **kwargs):
        with _disable_current_modes():
            return full(*args, **kwargs)

    assert "made a tensor of" in _verdict(ch10._backward_tiles_only, full)[1]
    assert "could not see it" in _verdict(ch10._backward_tiles_only, off)[1]
    assert _verdict(ch10._backward_tiles_only, sol10.flash_attention_backward) == ("passed", "")


# ---------------------------------------------------------------- chapter 9: no T x T tensor, forward and backward


_DENSE = _mutant("ch09_sparse_attention", "dense attention under the mask", sol09)


class _Recomputed(torch.autograd.Function):
    """Dense attention that keeps only q, k and v for backward and recomputes the dense scores there."""

    off = False

    @staticmethod
    def forward(ctx, q, k, v, window, causal):
        ctx.save_for_backward(q, k, v)
        ctx.args = (window, causal)
        with _disable_current_modes() if _Recomputed.off else torch.no_grad():
            return _DENSE(q, k, v, window, causal=causal)

    @staticmethod
    def backward(ctx, grad):
        window, causal = ctx.args
        with _disable_current_modes() if _Recomputed.off else torch.no_grad(), torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            out = _DENSE(q, k, v, window, causal=causal)
            return (*torch.autograd.grad(out, (q, k, v), grad), None, None)


@pytest.mark.parametrize("off", [False, True], ids=["watched", "modes off"])
def test_dense_attention_recomputed_in_backward_fails_the_memory_check(off, monkeypatch):
    monkeypatch.setattr(_Recomputed, "off", off)

    def recomputed(q, k, v, window, *, causal=True, block_len=None):
        return _Recomputed.apply(q, k, v, window, causal)

    assert _verdict(ch09._attention_causal, recomputed)[0] == "passed"  # right numbers, nothing T x T kept
    outcome, message = _verdict(ch09._attention_memory, recomputed)
    assert outcome == "failed"
    assert ("could not see it" if off else "made a tensor of 262144 elements") in message


def test_the_memory_check_is_judged_from_the_record():
    """The numbers are the call's result: the worker fails a dense answer from the record alone (it used to find
    nothing measured there)."""
    outcome, message = _verdict(ch09._attention_memory, _DENSE)
    assert outcome == "failed" and "keeps a tensor of 262144 elements" in message


# ---------------------------------------------------------------- chapter 11: the kernel and its loads


@pytest.fixture(scope="module")
def ch11():
    pytest.importorskip("triton")
    from autograder import ch11_flash_attention_triton as checks
    from solutions import ch11_flash_attention_triton as solutions

    if not solutions.INTERPRETING:
        pytest.skip("the loads are watched under Triton's interpreter only")
    return checks, solutions


def _kernel_from_source(tmp_path, name: str, source: str):
    """A kernel defined in a file of its own (Triton's interpreter reads a kernel's source)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_subclass_of_tritons_kernel_with_a_forged_load_is_refused(ch11, tmp_path):
    checks, _ = ch11
    from tests import variants

    module = _kernel_from_source(tmp_path, "forged", "\n".join(variants._FORGED_LOAD_SUBCLASS))
    kernel = module.flash_attention_forward_kernel
    assert not checks._is_kernel(kernel)
    for check in (checks._forward_no_mask, checks._forward_causal):
        outcome, message = _verdict(check, kernel)
        assert outcome == "failed" and "expected a Triton kernel" in message


def test_a_kernel_object_with_its_launch_replaced_is_refused(ch11):
    checks, solutions = ch11
    import triton.runtime.interpreter as interpreter

    kernel = interpreter.InterpretedFunction(solutions.flash_attention_forward_kernel.fn)
    assert checks._is_kernel(kernel)
    kernel.run = lambda *args, **kwargs: None
    assert not checks._is_kernel(kernel)
    kernel = interpreter.InterpretedFunction(solutions.flash_attention_forward_kernel.fn)
    kernel.add_pre_run_hook(lambda *args, **kwargs: None)
    assert not checks._is_kernel(kernel)


def _reference_source(solutions) -> str:
    return "import math\nimport triton\nimport triton.language as tl\n\n\n" + inspect.getsource(
        solutions.flash_attention_forward_kernel.fn
    )


def test_a_kernel_that_calls_python_or_the_interpreter_is_refused(ch11, tmp_path):
    checks, solutions = ch11
    source = _reference_source(solutions)
    cases = {
        "helper": ("def helper(x):\n    return x\n\n\n", "o = helper(acc) / l_i[:, None]"),
        "builder": ("from triton.runtime.interpreter import interpreter_builder\n\n\n", "o = acc / l_i[:, None]\n    interpreter_builder.grid_idx"),
        "private": ("", "o = acc / l_i[:, None]\n    tl._unused"),
        "runtime": ("", "o = acc / l_i[:, None]\n    triton.runtime"),
        "math": ("", "o = acc / l_i[:, None] * math.exp(0.0)"),
    }  # fmt: skip
    for name, (before, line) in cases.items():
        changed = source.replace("\n\n\n@triton.jit", "\n\n\n" + before + "@triton.jit").replace(
            "o = acc / l_i[:, None]", line
        )
        kernel = _kernel_from_source(tmp_path, f"kernel_{name}", changed).flash_attention_forward_kernel
        assert checks._kernel_problem(kernel), name
        outcome, message = _verdict(checks._forward_no_mask, kernel)
        assert outcome == "failed" and "not plain Triton code" in message, name
    plain = _kernel_from_source(tmp_path, "kernel_plain", source).flash_attention_forward_kernel
    assert checks._kernel_problem(plain) == ""
    assert _verdict(checks._forward_causal, plain) == ("passed", "")


def test_loads_that_only_inflate_the_launch_without_causal_buy_no_pass(ch11, tmp_path):
    """The causal launch loads every block, and the launch without CAUSAL loads every block twice, so that its count
    drops by more than the skippable blocks: the loads of blocks out of a program's reach are found by address."""
    checks, solutions = ch11
    source = _reference_source(solutions)
    skip = "        hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)\n"
    extra = (
        "    if not CAUSAL:\n"
        "        for extra in range(0, T_k, BLOCK_N):\n"
        "            cols = extra + offs_n\n"
        "            tl.load(K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,\n"
        "                    mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k), other=0.0)\n"
        "            tl.load(V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,\n"
        "                    mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v), other=0.0)\n"
    )
    assert skip in source
    changed = source.replace(skip, "        hi = T_k\n").replace(
        "    o = acc / l_i[:, None]\n", extra + "    o = acc / l_i[:, None]\n"
    )
    kernel = _kernel_from_source(tmp_path, "inflated", changed).flash_attention_forward_kernel
    outcome, message = _verdict(checks._forward_causal, kernel)
    assert outcome == "failed" and "wholly outside the reach" in message
    assert _verdict(checks._forward_no_mask, kernel) == ("passed", "")


def test_loads_the_watch_does_not_see_fail_the_check(ch11, monkeypatch):
    """A launch whose loads never reach the watch (here: the watch sees none) fails, rather than counting as a
    kernel that skips everything."""
    checks, solutions = ch11
    monkeypatch.setattr(checks, "_loads_verdict", _no_loads_seen(checks._loads_verdict))
    outcome, message = _verdict(checks._forward_causal, solutions.flash_attention_forward_kernel)
    assert outcome == "failed" and "do not come from loads the check saw" in message


def _no_loads_seen(verdict):
    def blind(loads, watched, needed_from, forbidden):
        return verdict([], watched, needed_from, forbidden)

    return blind


def test_math_constants_stay_allowed_in_a_kernel(ch11):
    checks, _ = ch11
    assert isinstance(math.pi, float) and checks._name_problem("k", "math", math, set()) == ""


@pytest.mark.parametrize("name", sorted(__import__("tests.variants", fromlist=["MEASURED_VARIANTS"]).MEASURED_VARIANTS))
def test_switching_a_measurement_off_is_flagged_for_review(name):
    """What the checks measure in the student's process is enforced where it can be and flagged where it cannot: each
    variant that switches a measurement off (dispatch modes, Triton's kernel classes) is flagged for the TA and the
    student, on top of failing the check."""
    import nbformat

    from autograder import releases
    from autograder.grading import worker
    from autograder.wording import say
    from tests import variants

    chapter = variants.MEASURED_VARIANTS[name]
    nb = nbformat.reads(variants.variants(chapter, releases.release_notebook(chapter))[name].text, as_version=4)
    flags = worker.suspicious(nb, chapter)
    assert {say("flag: measurement"), say("flag: triton internals")} & set(flags), flags
