"""`make gpu-check`: everything the course measures on a GPU, in one command (about 10 minutes on one GPU).

On a machine with CUDA it runs, in order:

1. every test marked ``cuda`` (``pytest -m cuda tests``);
2. chapter 11's three kernels — the forward and both backward kernels — compiled natively for each launch
   configuration of its table and for the configuration its launchers choose on this GPU (``launch_config``; the
   backward's tiles at most ``BACKWARD_MAX_BLOCK``), with the compiled kernel's registers per thread, spilled
   registers and shared memory (Triton's ``CompiledKernel``: ``n_regs`` and ``n_spills``, set when its binary is
   loaded, and ``metadata.shared``) printed and written to ``benchmarks/results/ch11_kernel_resources_cuda.json``;
   it ends with the spills at the launchers' own configurations (the backward's are chosen with the forward's
   register estimate, though its dK and dV accumulators alone take ``2 · block · d / (32 · num_warps)`` registers
   per thread: 128 at ``d = 128`` with 64 × 64 tiles and 4 warps);
3. the GPU benchmarks, each writing its file into ``benchmarks/results/`` (chapter 11's Triton kernels, chapters 3,
   4, 8 and 10 with ``--device cuda``).

It ends by listing the files it wrote. Without CUDA it says so and exits 0, running nothing; ``--list`` prints
the steps without running them (on any machine).

Usage::

    python -m scripts.gpu_check            # run everything (needs CUDA; otherwise: a message, exit 0)
    python -m scripts.gpu_check --list     # what it would run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RESOURCES = RESULTS / "ch11_kernel_resources_cuda.json"


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: a name, the command (argv after ``python``) and a time limit in seconds."""

    name: str
    argv: tuple[str, ...]
    timeout: int


STEPS = (
    Step("tests marked cuda", ("-m", "pytest", "-q", "-m", "cuda", "tests"), 150),
    Step("chapter 11 kernels: registers, spills, shared memory", ("-m", "scripts.gpu_check", "--kernels"), 90),
    Step("chapter 11 benchmark", ("-m", "benchmarks.bench_flash_attention_triton"), 120),
    Step(
        "chapter 10 benchmark",
        ("-m", "benchmarks.bench_flash_attention", "--device", "cuda", "--lengths", "1024", "4096", "16384"),
        60,
    ),
    Step("chapter 3 benchmark", ("-m", "benchmarks.bench_self_attention", "--device", "cuda"), 45),
    Step("chapter 3 recurrence benchmark", ("-m", "benchmarks.bench_recurrence_vs_attention", "--device", "cuda"), 45),
    Step("chapter 4 benchmark", ("-m", "benchmarks.bench_multi_head_attention", "--device", "cuda"), 45),
    Step("chapter 8 benchmark", ("-m", "benchmarks.bench_kv_cache", "--device", "cuda"), 45),
)


KERNELS = ("forward", "backward dk, dv", "backward dq")


def _launch(ch11, kernel, q, k, v, o, lse, block, d, common):
    """Launch one of chapter 11's kernels on ``(1, 2, T, d)`` tensors; return Triton's compiled kernel."""
    T = q.shape[2]
    grid, scale, sizes = (T // block, 2), d**-0.5, (2, T, T, d, d)
    if kernel == "forward":
        return ch11.flash_attention_forward_kernel[grid](
            q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(), *sizes, scale, **common
        )
    if kernel == "backward dk, dv":  # do, dk, dv: o's shape; D: lse's
        return ch11.flash_attention_backward_dkdv_kernel[grid](
            q, k, v, o, lse, lse, o, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), *o.stride(),
            *o.stride(), *sizes, scale, **common,
        )  # fmt: skip
    return ch11.flash_attention_backward_dq_kernel[grid](
        q, k, v, o, lse, lse, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), *o.stride(), *sizes, scale,
        **common,
    )  # fmt: skip


def accumulator_registers(kernel: str, block: int, d: int, num_warps: int) -> int:
    """32-bit registers per thread that the kernel's float32 accumulators alone take, spread over its threads: the
    forward's output (``block × d``), the dK, dV kernel's two (``2 · block × d``), the dQ kernel's one; its tiles of
    S's size (S, P and, backward, dP, dS), operands and addresses come on top, against at most 255."""
    per_program = (2 if kernel == "backward dk, dv" else 1) * block * d
    return -(-per_program // (32 * num_warps))


def configurations(d: int, shared_limit: int) -> list[dict]:
    """What to compile for head width ``d`` (float16): every kernel with every entry of chapter 11's launch table
    (its most stages), and with the configuration its launcher chooses for a GPU of ``shared_limit`` bytes of
    shared memory per program (``launcher``: True), added where the table's entry differs from it."""
    from solutions import ch11_flash_attention_triton as ch11

    chosen = {
        "forward": ch11.launch_config(d, d, 2, shared_limit),
        "backward": ch11.launch_config(d, d, 2, shared_limit, max_block=ch11.BACKWARD_MAX_BLOCK),
    }
    rows = []
    for kernel in KERNELS:
        mine = chosen["forward" if kernel == "forward" else "backward"]
        picked = (mine.block_q, mine.num_warps, mine.num_stages)
        table = [(block, e["num_warps"], e["num_stages"]) for block, e in ch11.LAUNCH_TABLE.items()]
        for block, warps, stages in table + ([picked] if picked not in table else []):
            rows.append(
                {"kernel": kernel, "d": d, "block": block, "num_warps": warps, "num_stages": stages}
                | {"launcher": (block, warps, stages) == picked}
            )
    return rows


def spill_summary(rows: list[dict]) -> list[str]:
    """One line per configuration a launcher chooses: its registers and spills (or its error)."""
    lines = []
    for row in rows:
        if not row.get("launcher"):
            continue
        what = f"{row['kernel']}, d = {row['d']}, {row['block']} × {row['block']}, {row['num_warps']} warps"
        if "error" in row:
            lines.append(f"{what}: {row['error']}")
        else:
            spilled = f"{row['n_spills']} registers SPILLED" if row["n_spills"] else "no spills"
            lines.append(f"{what}: {row['n_regs']} registers/thread, {spilled}")
    return lines


def kernel_resources() -> list[dict]:
    """Compile chapter 11's three kernels (the forward, the backward's dK, dV and dQ kernels) for every entry of its
    launch table and for the configurations its launchers choose here (float16, d = 64 and 128), and read each
    compiled kernel's registers per thread, spilled registers and shared memory."""
    import torch

    from solutions import ch11_flash_attention_triton as ch11

    rows = []
    for d in (64, 128):
        q, k, v = (torch.randn(1, 2, 512, d, device="cuda", dtype=torch.float16) for _ in range(3))
        for row in configurations(d, ch11._shared_limit("cuda")):
            kernel, block, warps, stages = row["kernel"], row["block"], row["num_warps"], row["num_stages"]
            common = dict(
                CAUSAL=True, BLOCK_M=block, BLOCK_N=block, BLOCK_DK=d, BLOCK_DV=d, num_warps=warps, num_stages=stages
            )
            o = torch.empty_like(q)
            lse = torch.empty(1, 2, 512, device="cuda")
            row["accumulator_registers"] = accumulator_registers(kernel, block, d, warps)
            try:
                compiled = _launch(ch11, kernel, q, k, v, o, lse, block, d, common)
                torch.cuda.synchronize()
                if getattr(compiled, "n_regs", None) is None and hasattr(compiled, "_init_handles"):
                    compiled._init_handles()
                row.update(
                    n_regs=compiled.n_regs, n_spills=compiled.n_spills, shared=compiled.metadata.shared,
                    estimate=ch11.forward_shared_memory_bytes(block, block, d, d, 2, stages)
                    if kernel == "forward" else None,
                )  # fmt: skip
            except Exception as err:  # out of resources: reported, not fatal
                row["error"] = f"{type(err).__name__}: {str(err)[:200]}"
            rows.append(row)
            print(
                f"{kernel:16s} d={d:3d} {block:3d}×{block:<3d} warps={warps} stages={stages}"
                + (" (launcher)" if row["launcher"] else "") + ": "
                + (row.get("error") or f"{row['n_regs']} registers/thread, {row['n_spills']} spilled, "
                   f"{row['shared'] / 1024:.0f} KB shared" + (f" (estimate {row['estimate'] / 1024:.0f} KB)"
                                                              if row["estimate"] else ""))
            )  # fmt: skip
    return rows


def write_kernel_resources() -> int:
    import torch
    import triton

    rows = kernel_resources()
    print("at the configurations the launchers choose on this GPU:")
    for line in spill_summary(rows):
        print("  " + line)
    RESULTS.mkdir(exist_ok=True)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "measured": time.strftime("%Y-%m-%d"),
    }
    RESOURCES.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print("wrote", RESOURCES.relative_to(ROOT))
    return 0


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the steps without running them")
    parser.add_argument("--kernels", action="store_true", help=argparse.SUPPRESS)  # step 2, in its own process
    args = parser.parse_args(argv)
    if args.list:
        for i, step in enumerate(STEPS, 1):
            print(f"{i}. {step.name} (at most {step.timeout} s): python {' '.join(step.argv)}")
        print(f"writes into {RESULTS.relative_to(ROOT)}/")
        return 0
    if not cuda_available():
        print("gpu-check: no CUDA device here, nothing run (python -m scripts.gpu_check --list shows the steps)")
        return 0
    if args.kernels:
        return write_kernel_resources()
    before = {p: p.stat().st_mtime for p in RESULTS.rglob("*") if p.is_file()}
    failed = []
    for step in STEPS:
        print(f"== {step.name}: python {' '.join(step.argv)}", flush=True)
        try:
            code = subprocess.run([sys.executable, *step.argv], cwd=ROOT, timeout=step.timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timed out"
        if code != 0:
            failed.append(f"{step.name} ({code})")
    written = sorted(p for p in RESULTS.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime)
    print("gpu-check wrote:" if written else "gpu-check wrote nothing")
    for p in written:
        print("  ", p.relative_to(ROOT))
    if failed:
        print("failed:", "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
