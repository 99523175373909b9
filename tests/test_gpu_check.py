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


def test_the_kernels_step_compiles_the_launchers_own_configurations_for_forward_and_backward():
    """Every kernel is compiled with every entry of the launch table and with the configuration its launcher chooses
    (marked), so that the spills that matter — the backward's at d = 128, whose dK and dV accumulators alone take 128
    registers per thread with 64 × 64 tiles and 4 warps — are reported for the forward and both backward kernels."""
    from solutions import ch11_flash_attention_triton as ch11

    for d, limit in ((64, 163 * 1024), (128, 163 * 1024), (128, 64 * 1024)):
        rows = gpu_check.configurations(d, limit)
        assert {r["kernel"] for r in rows} == set(gpu_check.KERNELS)
        for kernel in gpu_check.KERNELS:
            chosen = [r for r in rows if r["kernel"] == kernel and r["launcher"]]
            config = ch11.launch_config(d, d, 2, limit, max_block=128 if kernel == "forward" else 64)
            assert [(r["block"], r["num_warps"], r["num_stages"]) for r in chosen] == [
                (config.block_q, config.num_warps, config.num_stages)
            ]
            assert {r["block"] for r in rows if r["kernel"] == kernel} >= set(ch11.LAUNCH_TABLE)
    assert gpu_check.accumulator_registers("backward dk, dv", 64, 128, 4) == 128
    assert gpu_check.accumulator_registers("backward dq", 64, 128, 4) == 64
    assert gpu_check.accumulator_registers("forward", 128, 64, 8) == 32


def test_the_spill_summary_names_the_launchers_configurations_only():
    rows = [
        {"kernel": "forward", "d": 128, "block": 64, "num_warps": 4, "launcher": True, "n_regs": 168, "n_spills": 0},
        {"kernel": "backward dk, dv", "d": 128, "block": 64, "num_warps": 4, "launcher": True, "n_regs": 255,
         "n_spills": 96},
        {"kernel": "backward dq", "d": 128, "block": 64, "num_warps": 4, "launcher": True, "error": "OutOfResources"},
        {"kernel": "forward", "d": 128, "block": 128, "num_warps": 8, "launcher": False, "n_regs": 255, "n_spills": 9},
    ]  # fmt: skip
    lines = gpu_check.spill_summary(rows)
    assert lines == [
        "forward, d = 128, 64 × 64, 4 warps: 168 registers/thread, no spills",
        "backward dk, dv, d = 128, 64 × 64, 4 warps: 255 registers/thread, 96 registers SPILLED",
        "backward dq, d = 128, 64 × 64, 4 warps: OutOfResources",
    ]
