"""`make gpu-check` (scripts/gpu_check.py): it lists what it would run, every step names a module that exists, and
without CUDA it runs nothing and exits 0 with a message."""

import pathlib
import subprocess
import sys

import pytest
import torch

from scripts import gpu_check

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_list_names_the_cuda_tests_the_kernels_and_the_benchmarks(capsys):
    assert gpu_check.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "pytest -q -m cuda tests" in out
    assert "registers, spills, shared memory" in out and "scripts.gpu_check --kernels" in out
    assert "benchmarks.bench_flash_attention_triton" in out
    assert out.count("benchmark") >= 6 and "writes into benchmarks/results/" in out


def test_every_step_runs_a_module_that_exists_and_fits_ten_minutes():
    for step in gpu_check.STEPS:
        module = step.argv[step.argv.index("-m") + 1]
        if module != "pytest":
            assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module
        if module.startswith("benchmarks.") and module != "benchmarks.bench_flash_attention_triton":
            assert "--device" in step.argv and "cuda" in step.argv, step
    assert sum(step.timeout for step in gpu_check.STEPS) <= 600


@pytest.mark.skipif(torch.cuda.is_available(), reason="there is a GPU: gpu-check would run")
def test_without_cuda_it_says_so_and_exits_0():
    result = subprocess.run(
        [sys.executable, "-m", "scripts.gpu_check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "no CUDA device here, nothing run" in result.stdout


def test_makefile_target_runs_the_script():
    makefile = (ROOT / "Makefile").read_text()
    assert "gpu-check:" in makefile and "scripts.gpu_check" in makefile.split("gpu-check:", 1)[1].split("\n\n")[0]


def test_the_kernel_launches_fit_the_kernels_signatures():
    """The launches that report registers and shared memory on a GPU, run here as they are (under Triton's
    interpreter without a GPU): every argument in its place, the forward's output equal to PyTorch's."""
    from solutions import ch11_flash_attention_triton as ch11

    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v = (torch.randn(1, 2, 32, 16, device=device) for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 2, 32, device=device)
    common = dict(CAUSAL=True, BLOCK_M=16, BLOCK_N=16, BLOCK_DK=16, BLOCK_DV=16, num_warps=4, num_stages=2)
    for kernel in gpu_check.KERNELS:
        gpu_check._launch(ch11, kernel, q, k, v, o, lse, 16, 16, common)
        if kernel == "forward":
            mask = torch.ones(32, 32, dtype=torch.bool, device=device).tril()
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            assert (o - ref).abs().max() < 1e-5
