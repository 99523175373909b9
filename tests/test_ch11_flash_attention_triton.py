"""The chapter 11 Triton kernels against chapter 10's PyTorch loops and PyTorch's own attention, on every device.

Oracles: ``F.scaled_dot_product_attention`` and autograd through it, ``torch.logsumexp`` of the masked scores, and
chapter 10's ``flash_attention_forward`` / ``flash_attention`` (imported, not copied). Without a GPU the kernels run
under Triton's interpreter, so the sizes are small: one to three blocks of 16 or 32 per axis, lengths that are not
multiples of the blocks. The HBM-traffic counts of the kernels' own loads and stores must equal the formulas the
page compares with Dao et al. 2022, theorem 2. And the rest of the course must not need Triton: importing the other
chapters imports no Triton, and the chapter itself says how to install it.
"""

import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import causal_mask
from solutions.ch10_flash_attention import flash_attention, flash_attention_forward
from solutions.ch11_flash_attention_triton import (
    INTERPRETING,
    L2_CACHE,
    LAUNCH_TABLE,
    MAX_REGISTERS_PER_THREAD,
    REGISTER_BUDGET,
    REGISTERS_PER_SM,
    SHARED_MEMORY_PER_SM,
    TRITON_VERSION,
    FlashAttentionTriton,
    LaunchConfig,
    count_hbm_traffic,
    flash_attention_triton,
    flash_attention_triton_backward,
    flash_attention_triton_forward,
    flash_forward_traffic,
    forward_registers_per_thread,
    forward_shared_memory_bytes,
    launch_config,
    naive_attention_triton,
    naive_traffic,
)
from solutions.triton_install import triton_requirement
from tests.conftest import tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _qkv(device, dtype=torch.float32, B=1, H=2, T_q=21, T_k=37, d_k=8, d_v=5, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: (torch.randn(*s, generator=g, dtype=torch.float64) * scale).to(device, dtype)
    return mk(B, H, T_q, d_k), mk(B, H, T_k, d_k), mk(B, H, T_k, d_v)


def _lse_oracle(q, k, mask):
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.logsumexp(scores, dim=-1)


def _skip_if_cpu_without_interpreter(device):
    if device.type == "cpu" and not INTERPRETING:
        pytest.skip("the kernels are compiled for the GPU in this process: CPU tensors need TRITON_INTERPRET=1")


# ---------------------------------------------------------------- forward


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("blocks", [(16, 16), (32, 16), (16, 32)])
def test_forward_matches_sdpa_and_chapter_10(device, causal, blocks):
    _skip_if_cpu_without_interpreter(device)
    q, k, v = _qkv(device)
    block_q, block_k = blocks
    o, lse = flash_attention_triton_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    mask = causal_mask(21, 37, device=device) if causal else None
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **tolerance(q.dtype))
    torch.testing.assert_close(lse, _lse_oracle(q, k, mask).float(), **tolerance(torch.float32))
    o10, lse10 = flash_attention_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(o, o10, **tolerance(q.dtype))
    torch.testing.assert_close(lse, lse10, **tolerance(torch.float32))
    assert o.dtype == q.dtype and lse.dtype == torch.float32


def test_forward_more_queries_than_keys_and_one_block(device):
    _skip_if_cpu_without_interpreter(device)
    q, k, v = _qkv(device, B=2, H=1, T_q=40, T_k=9, d_k=4, d_v=16)
    o, lse = flash_attention_triton_forward(q, k, v, block_q=32, block_k=16)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), **tolerance(q.dtype))
    torch.testing.assert_close(lse, _lse_oracle(q, k, None).float(), **tolerance(torch.float32))


def test_forward_float16_matches_sdpa(device):
    """float16 inputs (the interpreter computes them with numpy's float16; a GPU with its tensor cores)."""
    _skip_if_cpu_without_interpreter(device)
    q, k, v = _qkv(device, torch.float16)
    o, lse = flash_attention_triton_forward(q, k, v, causal=True, block_q=16, block_k=16)
    mask = causal_mask(21, 37, device=device)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).half()
    assert o.dtype == torch.float16 and lse.dtype == torch.float32
    torch.testing.assert_close(o, expected, **tolerance(torch.float16))
    torch.testing.assert_close(lse, _lse_oracle(q, k, mask).float(), **tolerance(torch.float16))


def test_forward_very_negative_allowed_scores(device):
    """Every allowed score near -60 000 (q > 0, k < 0): exact only if the running max starts at -inf."""
    _skip_if_cpu_without_interpreter(device)
    g = torch.Generator().manual_seed(3)
    q = torch.randint(170, 261, (1, 1, 20, 4), generator=g).float().to(device)
    k = -torch.randint(170, 261, (1, 1, 35, 4), generator=g).float().to(device)
    v = torch.randn(1, 1, 35, 3, generator=g).to(device)
    o, lse = flash_attention_triton_forward(q, k, v, causal=True, block_q=16, block_k=16)
    mask = causal_mask(20, 35, device=device)
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~mask, -math.inf)
    assert (scores[0, 0][mask] < -50_000).all()
    torch.testing.assert_close(o, torch.softmax(scores, -1) @ v, **tolerance(torch.float32))
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), **tolerance(torch.float32))


def test_forward_reads_strided_inputs(device):
    """Views whose rows are further apart than d (a slice of a wider tensor) are read through their strides."""
    _skip_if_cpu_without_interpreter(device)
    wide = _qkv(device, d_k=24, d_v=24)
    q, k, v = (t[..., :8] for t in wide)
    o, _ = flash_attention_triton_forward(q, k, v, block_q=16, block_k=16)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), **tolerance(q.dtype))


# ---------------------------------------------------------------- backward and autograd


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_autograd_through_sdpa_and_chapter_10(device, causal):
    _skip_if_cpu_without_interpreter(device)
    q, k, v = (t.requires_grad_() for t in _qkv(device, seed=1))
    do = torch.randn(1, 2, 21, 5, generator=torch.Generator().manual_seed(2)).to(device)
    ours = torch.autograd.grad(FlashAttentionTriton.apply(q, k, v, causal), (q, k, v), do)
    mask = causal_mask(21, 37, device=device) if causal else None
    ref = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), do)
    ch10 = torch.autograd.grad(flash_attention(q, k, v, causal=causal, block_q=16, block_k=16), (q, k, v), do)
    for name, a, b, c in zip(("dq", "dk", "dv"), ours, ref, ch10):
        torch.testing.assert_close(a, b, **tolerance(torch.float32), msg=f"{name} vs F.sdpa")
        torch.testing.assert_close(a, c, **tolerance(torch.float32), msg=f"{name} vs chapter 10")


def test_gradients_float16_and_other_blocks(device):
    _skip_if_cpu_without_interpreter(device)
    q, k, v = (t.requires_grad_() for t in _qkv(device, torch.float16, T_q=40, T_k=40, seed=4))
    do = torch.randn(1, 2, 40, 5, generator=torch.Generator().manual_seed(5)).to(device, torch.float16)
    ours = torch.autograd.grad(flash_attention_triton(q, k, v, causal=True, block_q=32, block_k=16), (q, k, v), do)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q32, k32, v32, is_causal=True)
    ref = torch.autograd.grad(out, (q32, k32, v32), do.float())
    for name, a, b in zip(("dq", "dk", "dv"), ours, ref):
        assert a.dtype == torch.float16, name
        torch.testing.assert_close(a, b.half(), **tolerance(torch.float16), msg=name)


def test_backward_checks_its_inputs():
    q, k, v = _qkv("cpu")
    o, lse = torch.zeros(1, 2, 21, 5), torch.zeros(1, 2, 21)
    with pytest.raises(ValueError, match=r"do and o must be \(B, H, T_q, d_v\)"):
        flash_attention_triton_backward(torch.zeros(1, 2, 21, 4), q, k, v, o, lse)


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_value_errors_naming_the_shapes():
    q, k, v = _qkv("cpu")
    with pytest.raises(ValueError, match=r"q and k must share d_k"):
        flash_attention_triton_forward(q, k[..., :3], v)
    with pytest.raises(ValueError, match=r"causal attention needs T_q <= T_k"):
        flash_attention_triton_forward(k, q, q[..., :5], causal=True)
    with pytest.raises(ValueError, match="power of two of at least 16"):
        flash_attention_triton_forward(q, k, v, block_q=24)
    with pytest.raises(ValueError, match="power of two of at least 16"):
        flash_attention_triton_forward(q, k, v, block_k=8)
    with pytest.raises(ValueError, match="float16, bfloat16 or float32"):
        flash_attention_triton_forward(q.double(), k.double(), v.double())


@pytest.mark.skipif(not INTERPRETING, reason="bfloat16 works on a GPU")
def test_interpreter_refuses_bfloat16_with_a_reason():
    q, k, v = (t.bfloat16() for t in _qkv("cpu"))
    with pytest.raises(ValueError, match="numpy, which has no bfloat16"):
        flash_attention_triton_forward(q, k, v)


# ---------------------------------------------------------------- HBM traffic, counted and as formulas


@pytest.mark.skipif(not INTERPRETING, reason="counts under Triton's interpreter")
@pytest.mark.parametrize("T, block_q, causal", [(40, 16, False), (40, 32, True), (64, 16, True), (64, 32, False)])
def test_counted_traffic_equals_the_formulas(T, block_q, causal):
    q, k, v = _qkv("cpu", B=1, H=1, T_q=T, T_k=T, d_k=16, d_v=16, seed=6)
    with count_hbm_traffic() as flash:
        flash_attention_triton_forward(q, k, v, causal=causal, block_q=block_q, block_k=16)
    assert flash.total == flash_forward_traffic(
        1, 1, T, T, 16, 16, block_q=block_q, block_k=16, element_size=4, causal=causal
    )
    assert flash.written == 4 * T * 16 + 4 * T  # o and lse, once
    with count_hbm_traffic() as naive:
        o = naive_attention_triton(q, k, v, causal=causal, block_q=block_q, block_k=16)
    assert naive.total == naive_traffic(1, 1, T, T, 16, 16, block_q=block_q, block_k=16, element_size=4)
    assert naive.total > flash.total
    mask = causal_mask(T, device="cpu") if causal else None
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **tolerance(q.dtype))


def test_traffic_formulas_follow_theorem_2():
    """Standard attention moves Θ(N²) bytes, FlashAttention Θ(N² d / B): 4× per doubling of N, ½ per doubling of B."""
    flash = lambda N, B: flash_forward_traffic(1, 1, N, N, 64, 64, block_q=B, block_k=64, element_size=2)
    naive = lambda N: naive_traffic(1, 1, N, N, 64, 64, block_q=64, block_k=64, element_size=2)
    assert 3.9 < naive(8192) / naive(4096) < 4.1
    assert 3.9 < flash(8192, 128) / flash(4096, 128) < 4.1
    assert 1.9 < flash(8192, 64) / flash(8192, 128) < 2.1
    assert naive(8192) / flash(8192, 128) > 2  # 4 N² of the tables against 2 N² d / B
    causal = flash_forward_traffic(1, 1, 8192, 8192, 64, 64, block_q=128, block_k=64, element_size=2, causal=True)
    assert 0.45 < causal / flash(8192, 128) < 0.55  # the causal loop skips about half the key blocks


@pytest.mark.skipif(INTERPRETING, reason="counting is possible here")
def test_counting_needs_the_interpreter():
    with pytest.raises(RuntimeError, match="interpreter"):
        with count_hbm_traffic():
            pass


def test_shared_memory_table_and_estimate():
    """The page's figures: per-SM shared memory of compute capability 7.5 / 8.0 / 9.0 (CUDA C++ Programming Guide),
    the register file (256 KB per SM, larger than any of them), the L2 sizes of the whitepapers; the estimate counts
    Q and the staged K, V tiles, not P (which stays in registers)."""
    assert [v["per_sm"] // 1024 for v in SHARED_MEMORY_PER_SM.values()] == [64, 164, 228]
    assert [v["per_block"] // 1024 for v in SHARED_MEMORY_PER_SM.values()] == [64, 163, 227]
    assert REGISTERS_PER_SM * 4 == 256 * 1024 > max(v["per_sm"] for v in SHARED_MEMORY_PER_SM.values())
    assert [v // 2**20 for v in L2_CACHE.values()] == [4, 40, 50] and list(L2_CACHE) == list(SHARED_MEMORY_PER_SM)
    # float16, d = 64, 64 × 64 tiles, two stages: Q 8 KiB + 2 × (K 8 + V 8) KiB
    assert forward_shared_memory_bytes(64, 64, 64, 64, element_size=2, num_stages=2) == 40 * 1024
    assert forward_shared_memory_bytes(16, 16, 4, 6, element_size=4, num_stages=1) == 4 * (16 * 16 * 3)
    # the issue's case: 128 × 128 at d = 128 in float16 needs 160 KB and fits an A100's 163 KB per block
    need = forward_shared_memory_bytes(128, 128, 128, 128, element_size=2, num_stages=2)
    assert need == 160 * 1024 <= SHARED_MEMORY_PER_SM["A100 (sm_80)"]["per_block"]


def test_registers_bound_the_tile_and_the_launch_table_respects_them():
    """With Triton's default of 4 warps a 128 × 128 tile at d = 64 needs 192 float32 registers per thread for S and the
    accumulator alone (spilling territory: at most 255 per thread); the table's 8 warps halve it. Every entry of the
    table keeps S and the accumulator within the budget at d = 64."""
    assert forward_registers_per_thread(128, 128, 64, num_warps=4) == 192 > REGISTER_BUDGET
    assert forward_registers_per_thread(128, 128, 64, num_warps=8) == 96 <= REGISTER_BUDGET
    assert REGISTER_BUDGET < MAX_REGISTERS_PER_THREAD
    for block, entry in LAUNCH_TABLE.items():
        assert forward_registers_per_thread(block, block, 64, entry["num_warps"]) <= REGISTER_BUDGET, block
        assert entry["num_stages"] >= 2


@pytest.mark.parametrize(
    "gpu, d, element_size, forward, backward",
    [
        ("T4 (sm_75)", 64, 2, LaunchConfig(64, 64, 4, 2), LaunchConfig(64, 64, 4, 2)),
        ("T4 (sm_75)", 64, 4, LaunchConfig(32, 32, 4, 2), LaunchConfig(32, 32, 4, 2)),
        ("A100 (sm_80)", 64, 2, LaunchConfig(128, 128, 8, 3), LaunchConfig(64, 64, 4, 3)),
        ("A100 (sm_80)", 128, 2, LaunchConfig(64, 64, 4, 3), LaunchConfig(64, 64, 4, 3)),
        ("H100 (sm_90)", 128, 2, LaunchConfig(128, 128, 8, 2), LaunchConfig(64, 64, 4, 3)),
    ],
)
def test_launch_config_per_gpu(gpu, d, element_size, forward, backward):
    """What the launchers choose on each GPU of the page's table (its shared memory per program as the limit)."""
    limit = SHARED_MEMORY_PER_SM[gpu]["per_block"]
    assert launch_config(d, d, element_size, limit) == forward
    assert launch_config(d, d, element_size, limit, max_block=64) == backward


@pytest.mark.skipif(not INTERPRETING, reason="a fix of Triton's interpreter")
def test_the_interpreter_fix_reads_a_one_element_scalar_as_a_loop_bound_and_is_undone_after_the_launch(monkeypatch):
    """What the chapter gives Triton 3.6's interpreter (3.7's line): a scalar held as a numpy array of shape (1,) is
    a ``range`` bound even where NumPy refuses ``int()`` of it (2.4 and later); the launch's patch scope undoes it."""
    import types

    import numpy as np
    from triton.runtime import interpreter

    import solutions.ch11_flash_attention_triton as sol

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", interpreter._patch_lang_tensor)  # the test's wrap undone
    sol._interpreter_takes_loop_bounds_from_scalars()

    class Scalar:  # stands for tl.tensor, as the interpreter patches it for one launch
        pass

    scope = interpreter._LangPatchScope()
    interpreter._patch_lang_tensor(Scalar, scope)
    hi = Scalar()
    hi.handle = types.SimpleNamespace(data=np.array([35], dtype=np.int32))  # how the interpreter holds T_k
    assert list(range(0, hi, 16)) == [0, 16, 32]
    scope.restore()
    assert not hasattr(Scalar, "__index__")


# ---------------------------------------------------------------- the rest of the course does not need Triton


def test_the_course_without_triton_and_the_chapter_with_it():
    """In a fresh Python without TRITON_INTERPRET: the other chapters and this chapter's checks import no Triton; with
    Triton's import made to fail, the chapter says how to install it; with Triton imported first by someone else and
    without the flag (as torch._dynamo does whenever Triton is installed), the chapter still turns the interpreter on
    (without a GPU) and its kernels run."""
    code = (
        "import importlib, os, sys\n"
        "for n in ['solutions.ch03_self_attention', 'solutions.ch10_flash_attention', 'autograder.ch10_flash_attention',"
        " 'autograder.ch11_flash_attention_triton', 'autograder.canonical']:\n"
        "    importlib.import_module(n)\n"
        "assert 'triton' not in sys.modules, sorted(m for m in sys.modules if m.startswith('triton'))\n"
        "sys.modules['triton'] = None  # `import triton` now raises ImportError, as where it is not installed\n"
        "try:\n"
        "    import solutions.ch11_flash_attention_triton\n"
        "except ImportError as err:\n"
        "    print('MESSAGE', err)\n"
        "del sys.modules['triton']\n"
        "os.environ.pop('TRITON_INTERPRET', None)\n"
        "import torch, torch._dynamo  # imports Triton, before the chapter could set the flag\n"
        "assert 'triton' in sys.modules\n"
        "import solutions.ch11_flash_attention_triton as m\n"
        "print('INTERPRETING', m.INTERPRETING, os.environ.get('TRITON_INTERPRET'))\n"
        "if m.INTERPRETING:\n"
        "    q, k, v = (torch.randn(1, 1, 20, 16) for _ in range(3))\n"
        "    o, _ = m.flash_attention_triton_forward(q, k, v, block_q=16, block_k=16)\n"
        "    print('MAX DIFF', (o - torch.nn.functional.scaled_dot_product_attention(q, k, v)).abs().max().item())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout.split("MESSAGE", 1)[1]
    assert f"pip install {triton_requirement()}" in message and "Colab" in message, message
    if torch.cuda.is_available():
        assert "INTERPRETING False None" in result.stdout, result.stdout
    else:
        assert "INTERPRETING True 1" in result.stdout, result.stdout
        assert float(result.stdout.split("MAX DIFF", 1)[1]) < 1e-5, result.stdout


def test_requirements_pin_triton_without_touching_colab():
    """requirements.txt pins the tested Triton (Linux only, where its wheels exist); the package's own dependencies
    do not list it (Colab keeps the Triton that came with its torch), the `triton` extra names it unpinned."""
    text = open(os.path.join(ROOT, "requirements.txt")).read()
    assert f'triton=={TRITON_VERSION}; sys_platform == "linux"' in text
    pyproject = open(os.path.join(ROOT, "pyproject.toml")).read()
    dependencies = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "triton" not in dependencies
    assert "triton = [\"triton; sys_platform == 'linux'\"]" in pyproject


# Colab's runtimes as Google publishes them (googlecolab/backend-info, 2026-08-19, "Upgrade to Python 3.13"): the GPU
# runtime's pip freeze has torch==2.11.0+cu128 and triton==3.6.0, the CPU runtime's torch==2.11.0+cpu and no Triton.
# PyPI's torch 2.11.0 (Linux) requires "triton==3.6.0; platform_system == \"Linux\"".
COLAB_GPU_TRITON = "triton==3.6.0"


@pytest.mark.parametrize(
    "torch_version, requires, expected",
    [
        ("2.11.0", ['triton==3.6.0; platform_system == "Linux"', "sympy>=1.13.3"], COLAB_GPU_TRITON),  # PyPI, Linux
        ("2.11.0+cu128", ["triton == 3.6.0 ; platform_system == 'Linux'"], COLAB_GPU_TRITON),
        ("2.11.0+cpu", [], COLAB_GPU_TRITON),  # Colab's CPU runtime: the Triton of the same torch release
        ("2.11.0+cpu", ['triton-kernels==1.0; extra == "kernels"', 'triton==9.9; extra == "x"'], COLAB_GPU_TRITON),
        (
            "2.99.0+cpu",
            [],
            f"triton=={TRITON_VERSION}",
        ),  # a torch the course does not know yet: the newest Triton tested
    ],
)
def test_the_triton_installed_where_missing_is_the_one_torch_was_released_with(torch_version, requires, expected):
    assert triton_requirement(torch_version, requires) == expected


def test_the_installed_torch_gets_the_triton_its_metadata_requires():
    from importlib import metadata

    pins = [r.split(";")[0].replace(" ", "") for r in metadata.requires("torch") or [] if r.startswith("triton")]
    if not pins:
        pytest.skip(f"torch {torch.__version__} requires no Triton (a CPU-only wheel)")
    assert triton_requirement() == pins[0]


def _notebook_triton_cell() -> str:
    import json

    with open(os.path.join(ROOT, "notebooks", "ch11_flash_attention_triton.ipynb"), encoding="utf-8") as f:
        cells = ["".join(c["source"]) for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    cell = next(c for c in cells if 'find_spec("triton")' in c)
    return cell.split("\nimport math\n", 1)[0]  # the install, before the chapter's imports


@pytest.mark.parametrize("runtime", ["Colab GPU (Triton present)", "Colab CPU (torch 2.11.0+cpu, no Triton)"])
def test_the_notebook_keeps_colabs_triton_and_installs_torchs_own_where_missing(runtime, monkeypatch):
    """The notebook's setup cell, run with Colab's runtimes simulated: pip is never called where Triton is installed;
    where it is not, pip installs the Triton of the torch release (3.6.0 beside torch 2.11), not the newest one."""
    import importlib.metadata
    import importlib.util

    present = runtime.startswith("Colab GPU")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: find_spec(n, *a) if present else None)
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu128" if present else "2.11.0+cpu")
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: [])  # +cpu wheels require no Triton
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    exec(compile(_notebook_triton_cell(), "setup cell", "exec"), {"__name__": "__main__"})
    if present:
        assert calls == []
    else:
        assert calls == [[sys.executable, "-m", "pip", "install", "-q", COLAB_GPU_TRITON]], calls


# ---------------------------------------------------------------- the benchmark (GPU only)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_benchmark_runs_on_a_gpu(tmp_path):
    from benchmarks import bench_flash_attention_triton as bench

    rows = bench.run(lengths=[256], dtype=torch.float16, d=64, rounds=2)
    assert {r["impl"] for r in rows} == set(bench.IMPLS)
    assert all(r["ms"] > 0 and r["max_abs_diff"] < 1e-2 for r in rows)


def test_benchmark_without_a_gpu_says_so_and_exits_cleanly(capsys):
    if torch.cuda.is_available():
        pytest.skip("there is a GPU: the benchmark would run")
    from benchmarks import bench_flash_attention_triton as bench

    assert bench.main([]) == 0
    assert "no CUDA device" in capsys.readouterr().out


# ---------------------------------------------------------------- what the checks tell the student (issue 38)


def _caught(name):
    """The visible and hidden failure messages of the catalogued chapter 11 mistake ``name``."""
    import catalogue
    import solutions.ch11_flash_attention_triton as sol
    from autograder.ch11_flash_attention_triton import EXERCISES
    from autograder.core import CheckFailed

    mutant = next(m for m in catalogue.mutants("ch11_flash_attention_triton") if m.name == name)
    obj, text = mutant.build(sol), []
    for hidden in (False, True):
        try:
            EXERCISES.run(mutant.target, obj, hidden=hidden, verbose=False)
        except CheckFailed as err:
            text.append(str(err))
    return "\n".join(text)


@pytest.mark.skipif(not INTERPRETING, reason="the refusal is the interpreter's")
def test_a_construct_triton_refuses_is_reported_with_the_students_line_not_as_unfilled():
    text = _caught("block pointers (removed in Triton 3.9)")
    if _triton_version() < (3, 9):  # block pointers still exist: the kernel is right, its loads are counted
        assert text == "", text
        return
    assert "not been filled in" not in text, text
    assert "Block pointers have been removed" in text and "(your line " in text and "make_block_ptr" in text, text


def _triton_version():
    import triton

    return tuple(int(n) for n in triton.__version__.split(".")[:2])


def test_an_object_that_is_no_triton_kernel_is_refused():
    text = _caught("PyTorch code behind a launcher object")
    assert "expected a Triton kernel, a function decorated with @triton.jit" in text, text
    from autograder.ch11_flash_attention_triton import EXERCISES

    ex = EXERCISES["flash_attention_forward_kernel"]
    assert text.count("✘") == len(ex.visible) + len(ex.hidden), text  # every check of the exercise


@pytest.mark.skipif(not INTERPRETING, reason="the loads are counted under the interpreter")
def test_a_kernel_that_never_skips_future_blocks_loses_the_visible_causal_check():
    for name, check in (
        ("future key blocks loaded and masked, never skipped", "causal with T_q = 20 < T_k = 35"),
        ("query blocks before the key block loaded, never skipped", "causal with T_q = 20 < T_k = 35"),
    ):
        text = _caught(name)
        assert check in text and "loads blocks that it should skip" in text, text
        assert "visible checks failed" in text, text


def test_hints_are_one_per_line_and_the_causal_hint_needs_a_right_plain_launch():
    causal_only = _caught("causal blocks skipped one too many")  # right without CAUSAL
    assert "without CAUSAL your kernel is right" in causal_only, causal_only
    everywhere = _caught("no scaling")  # wrong without CAUSAL too
    assert "without CAUSAL your kernel is right" not in everywhere, everywhere
    for text in (causal_only, everywhere, _caught("D not subtracted")):
        for line in text.splitlines():
            assert line.count("Hint:") <= 1, line
            assert "delta" not in line, line  # the notebook's name is D
