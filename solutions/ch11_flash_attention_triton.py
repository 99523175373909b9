"""Chapter 11 — FlashAttention in Triton: the tiled forward and the recomputing backward as GPU kernels (核函数).

Chapter 10 wrote FlashAttention as PyTorch loops over blocks; this chapter writes the same algorithm the way a GPU
runs it, in Triton (Tillet, Kung & Cox 2019). A *kernel* is one function that a *grid* of *programs* (程序实例) runs
in parallel, each program on one streaming multiprocessor (流式多处理器), each seeing only what it loads from the
GPU's main memory (HBM) into its registers and shared memory (共享内存) with ``tl.load`` and writes back with
``tl.store``. The book page ``book/ch11_flash_attention_triton.md`` explains it; the notebook
``notebooks/ch11_flash_attention_triton.ipynb`` is generated from it (the ``### BEGIN SOLUTION`` regions are the
exercises).

Reading order follows the book:

1. the GPU the kernels run on: :data:`SHARED_MEMORY_PER_SM`, :data:`REGISTERS_PER_SM`, :data:`L2_CACHE`,
   :func:`forward_shared_memory_bytes`, :func:`forward_registers_per_thread` (why block sizes are powers of two and
   what bounds them), :data:`LAUNCH_TABLE` and :func:`launch_config` (the blocks, warps and stages a launch uses);
2. :func:`flash_attention_forward_kernel` (one program per block of queries, a loop over blocks of keys with the
   online softmax: Dao 2023, FlashAttention-2, algorithm 1) and its launcher :func:`flash_attention_triton_forward`;
3. :func:`flash_attention_backward_dkdv_kernel` (one program per block of keys, a loop over blocks of queries) and
   :func:`flash_attention_backward_dq_kernel` (one program per block of queries), which recompute the probabilities
   from the saved log-sum-exp (Dao 2023, algorithm 2), launched by :func:`flash_attention_triton_backward`;
4. :class:`FlashAttentionTriton`, :func:`flash_attention_triton` — the two as a ``torch.autograd.Function``;
5. the HBM traffic, counted: :func:`count_hbm_traffic` adds up the bytes that the kernels' own ``tl.load`` and
   ``tl.store`` move under Triton's interpreter; :func:`naive_attention_triton` is standard attention as three
   kernels (scores, softmax, weighted sum) for comparison; :func:`flash_forward_traffic` and
   :func:`naive_traffic` are the same counts as formulas (Dao et al. 2022, theorem 2).

Shapes: ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)``, float16 or float32 (bfloat16 on a
GPU); ``causal`` is chapter 3's ``causal_mask`` (bottom-right aligned, True = may attend, needs ``T_q <= T_k``).
Blocks: ``block_q`` queries per program (Triton's ``BLOCK_M``) and ``block_k`` keys per loop step (``BLOCK_N``),
powers of two of at least 16; ``T_q`` and ``T_k`` need not be multiples of them.

Without a CUDA device, this module sets ``TRITON_INTERPRET=1`` before importing Triton: the kernels then run on the
CPU under Triton's interpreter (numpy; slow, no bfloat16), with the same results. Importing it without Triton raises
an ImportError that says how to install it: the Triton that the installed torch was released with (``pip install
triton==3.6.0`` beside torch 2.11; ``solutions.triton_install.triton_requirement`` gives the
rule). The kernels are tested with Triton 3.6 to 3.9. No other chapter imports Triton.

Sources: Dao, Fu, Ermon, Rudra & Ré 2022 (FlashAttention, algorithm 1, theorem 2); Dao 2023 (FlashAttention-2,
algorithms 1 and 2); Tillet, Kung & Cox 2019 (Triton); NVIDIA 2024 (CUDA C++ Programming Guide, technical
specifications per compute capability).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Iterator
from typing import Any

import torch

from solutions.ch10_flash_attention import check_flash_inputs
from solutions.triton_install import TRITON_VERSION, triton_requirement  # imports no Triton

TRITON_MISSING = (
    "Chapter 11 needs Triton. Colab's GPU runtime has it (it comes with torch); elsewhere on Linux run "
    "`pip install {requirement}`, the Triton this torch was released with (on a CPU its interpreter runs the "
    "kernels). Triton has no wheels for macOS or Windows: open the notebook in Colab."
)

# Before Triton is imported: without a GPU, every @triton.jit kernel is run by Triton's interpreter (numpy).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# tl.dot on float32 tiles in full float32, not TF32 (10-bit mantissa, a GPU's default): the checks compare float32
# results at float32 tolerance. Float16 tiles are unaffected.
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")

try:
    import triton
    import triton.language as tl
except ImportError as err:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(TRITON_MISSING.format(requirement=triton_requirement())) from err


def _language_built_for_the_interpreter() -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.max, InterpretedFunction)  # one of the @jit functions of Triton's own library


if triton.knobs.runtime.interpret and not _language_built_for_the_interpreter():
    # Triton was imported before the flag was set (torch._dynamo imports it whenever it is installed): its library of
    # @jit functions (tl.max, tl.sum, ...) was built for the GPU compiler then, and the interpreter cannot call them.
    # Import its Python modules again, now for the interpreter (the compiled extension, triton._C, stays loaded).
    import sys

    for _name in [n for n in sys.modules if n.split(".")[0] == "triton" and not n.startswith("triton._C")]:
        del sys.modules[_name]
    import triton
    import triton.language as tl


def _interpreter_takes_loop_bounds_from_scalars() -> None:
    """Let Triton 3.6's interpreter use a runtime scalar as a ``range`` bound under NumPy 2.4 and later.

    The interpreter holds a scalar (an ``int`` argument such as ``T_k``, or ``tl.minimum`` of two) as a numpy array
    of one element, shape ``(1,)``, and ``for start_n in range(0, hi, BLOCK_N)`` asks it for ``__index__``. Triton
    3.6's interpreter answers ``int(data)``, which NumPy deprecated for arrays of more than 0 dimensions (1.25) and
    refuses since 2.4 ("only 0-dimensional arrays can be converted to Python scalars"): every kernel whose loop runs
    to a runtime bound, Triton's own tutorials among them, then fails on a CPU. Triton 3.7 reads ``int(data.squeeze())``
    instead (triton-lang/triton issue 9171, pull request 9172); this gives 3.6 the same line. It changes nothing on a
    GPU, where the loop is compiled (a ``scf.for``, which ``num_stages`` pipelines), and nothing in Triton >= 3.7.
    """
    from triton.runtime import interpreter

    patch_lang_tensor = interpreter._patch_lang_tensor

    def _patch_lang_tensor(tensor, scope):
        patch_lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))  # restored after the launch

    interpreter._patch_lang_tensor = _patch_lang_tensor


if triton.knobs.runtime.interpret and tuple(int(n) for n in triton.__version__.split(".")[:2]) < (3, 7):
    _interpreter_takes_loop_bounds_from_scalars()

__all__ = [
    "TRITON_VERSION",
    "INTERPRETING",
    "SHARED_MEMORY_PER_SM",
    "forward_shared_memory_bytes",
    "REGISTERS_PER_SM",
    "MAX_REGISTERS_PER_THREAD",
    "L2_CACHE",
    "forward_registers_per_thread",
    "NUM_STAGES",
    "REGISTER_BUDGET",
    "LAUNCH_TABLE",
    "BACKWARD_MAX_BLOCK",
    "LaunchConfig",
    "launch_config",
    "default_config",
    "default_blocks",
    "flash_attention_forward_kernel",
    "flash_attention_triton_forward",
    "flash_attention_backward_dkdv_kernel",
    "flash_attention_backward_dq_kernel",
    "flash_attention_triton_backward",
    "FlashAttentionTriton",
    "flash_attention_triton",
    "naive_scores_kernel",
    "naive_softmax_kernel",
    "naive_weighted_sum_kernel",
    "naive_attention_triton",
    "HBMTraffic",
    "count_hbm_traffic",
    "flash_forward_traffic",
    "naive_traffic",
]

INTERPRETING = bool(triton.knobs.runtime.interpret)  # True: kernels run on the CPU under Triton's interpreter

# --------------------------------------------------------------------------------------------------
# 1. The GPU the kernels run on
# --------------------------------------------------------------------------------------------------

# Shared memory (共享内存) per streaming multiprocessor and the most one program (thread block) may use, in bytes:
# NVIDIA 2024, CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (compute capability
# 7.5 = Turing, 8.0 = Ampere A100, 9.0 = Hopper H100; above 48 KB per block a kernel must opt in, Triton does).
SHARED_MEMORY_PER_SM = {
    "T4 (sm_75)": {"per_sm": 64 * 1024, "per_block": 64 * 1024},
    "A100 (sm_80)": {"per_sm": 164 * 1024, "per_block": 163 * 1024},
    "H100 (sm_90)": {"per_sm": 228 * 1024, "per_block": 227 * 1024},
}
# The register file (寄存器) of one SM: 65 536 32-bit registers (256 KB) on every compute capability from 5.0 to 9.0,
# at most 255 per thread (the same table of the CUDA C++ Programming Guide). It is larger than the shared memory of
# any GPU above: registers are the fastest and, per SM, the largest on-chip memory.
REGISTERS_PER_SM = 64 * 1024
MAX_REGISTERS_PER_THREAD = 255
# The L2 cache in front of HBM, shared by all SMs: NVIDIA's whitepapers (Turing, 2018: 4 MB on the TU104 of a T4;
# A100, 2020: 40 MB); 50 MB on the H100 SXM5 (Shah et al. 2024, FlashAttention-3, section 2.2).
L2_CACHE = {"T4 (sm_75)": 4 * 2**20, "A100 (sm_80)": 40 * 2**20, "H100 (sm_90)": 50 * 2**20}


def forward_shared_memory_bytes(
    block_q: int, block_k: int, d_k: int, d_v: int, element_size: int = 2, num_stages: int = 2
) -> int:
    """Estimated shared memory of one program of :func:`flash_attention_forward_kernel`, in bytes.

    Shared memory holds the tiles that are loaded from HBM: the program's query tile ``(block_q, d_k)`` (loaded once,
    staged there on its way into the tensor cores' operand layout), and for each step the key and value tiles
    ``(block_k, d_k)`` and ``(block_k, d_v)``; Triton's software pipeline keeps ``num_stages`` copies of these so that
    the next ones load while the current ones are multiplied. The score tile ``S``, the probabilities ``P`` and the
    accumulator are computed, not loaded: they stay in registers. On sm_80 and later the tensor cores' ``mma``
    instruction takes its operands from registers, and Triton converts ``P`` to that operand layout in registers
    before the second ``tl.dot`` (FlashAttention-2 keeps ``P`` in registers by design: Dao 2023, section 3.3). ``d``
    is rounded up to a power of two (at least 16), as the kernel's tiles are. An estimate of the layout, not the
    compiler's figure: on a GPU, a compiled kernel's ``metadata.shared`` is the exact number (``make gpu-check``
    reports it), and a launch that needs more than the per-block limit of :data:`SHARED_MEMORY_PER_SM` fails with
    "out of resource: shared memory".

    Args:
        block_q, block_k: queries per program, keys per step (powers of two).
        d_k, d_v: head widths; element_size: bytes per number (2 for float16, 4 for float32).
        num_stages: copies of the key and value tiles in flight (Triton's ``num_stages``).

    Returns:
        Bytes (int).
    """
    dk, dv = _tile_width(d_k), _tile_width(d_v)
    return element_size * (block_q * dk + num_stages * block_k * (dk + dv))


def forward_registers_per_thread(block_q: int, block_k: int, d_v: int, num_warps: int) -> int:
    """32-bit registers per thread that the forward kernel's float32 tiles need at least, spread over its threads.

    The score tile ``S`` (``block_q × block_k``) and the output accumulator (``block_q × d_v``) are float32 values in
    registers, divided among the ``32 · num_warps`` threads of the program; ``P`` (in the inputs' dtype), the
    query tile's operand fragments, the row statistics, pointers and masks come on top. A thread has at most
    :data:`MAX_REGISTERS_PER_THREAD`; what does not fit is *spilled* to local memory (in HBM, behind the caches),
    which FlashAttention-2 names as what limits the block size (Dao 2023, section 3.3). On a GPU the compiled kernel's
    ``n_regs`` and ``n_spills`` are the exact figures (``make gpu-check`` reports them).

    Args:
        block_q, block_k: the tile; d_v: the value width (rounded up as the kernel's tiles are); num_warps: warps
            per program.

    Returns:
        Registers per thread (int).
    """
    return -(-(block_q * block_k + block_q * _tile_width(d_v)) // (32 * num_warps))


def _tile_width(d: int) -> int:
    """The tile width that covers ``d`` columns: the next power of two, at least 16 (``tl.dot``'s smallest size)."""
    return max(16, triton.next_power_of_2(d))


NUM_STAGES = 2  # the fewest copies of the key and value tiles that overlap a load with a multiply (Triton's num_stages)
# The most registers per thread the float32 tiles S and the accumulator may take (forward_registers_per_thread):
# half of MAX_REGISTERS_PER_THREAD, the other half left for P, the operand fragments, statistics and addresses.
REGISTER_BUDGET = 128

# Per square tile (block_q = block_k): the warps per program and the most pipeline stages to try. Sources: Triton's
# tutorial 06-fused-attention autotunes the forward over BLOCK_M in {64, 128}, num_warps in {4, 8} — keeping 8 warps
# only for 128 × 128 tiles — and num_stages from 3 up (2 with TMA); Triton's default is 4 warps; FlashAttention-2
# (Dao 2023, section 3.3) uses 4 or 8 warps per thread block and blocks of {64, 128} × {64, 128}, past which
# registers spill. With 4 warps a 128 × 128 tile would need 128 + 64 float32 registers per thread for S and the
# accumulator at d = 64 (forward_registers_per_thread), beyond REGISTER_BUDGET; 8 warps halve it.
LAUNCH_TABLE = {
    128: {"num_warps": 8, "num_stages": 3},
    64: {"num_warps": 4, "num_stages": 3},
    32: {"num_warps": 4, "num_stages": 2},
    16: {"num_warps": 4, "num_stages": 2},
}
BACKWARD_MAX_BLOCK = 64  # the backward holds dK, dV (or dQ) and up to four tiles of S's size (S, P, dP, dS) at once


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """What a launcher passes to a kernel: its blocks and Triton's ``num_warps`` and ``num_stages``."""

    block_q: int
    block_k: int
    num_warps: int = 4
    num_stages: int = NUM_STAGES


def launch_config(d_k: int, d_v: int, element_size: int, shared_limit: int, *, max_block: int = 128) -> LaunchConfig:
    """The largest square tile of :data:`LAUNCH_TABLE` (at most ``max_block``) that fits, with its warps and stages.

    A tile fits when its :func:`forward_shared_memory_bytes` estimate, with the most stages the table allows down to
    :data:`NUM_STAGES`, is at most three quarters of ``shared_limit`` (a margin for what the estimate leaves out), and
    :func:`forward_registers_per_thread` with the table's warps is at most :data:`REGISTER_BUDGET`.

    On a T4 that is 64 × 64 with 4 warps and 2 stages for float16 up to ``d = 64`` and 32 × 32 for float32; on an A100
    or H100, 128 × 128 with 8 warps and 3 stages for float16 at ``d = 64``.

    Args:
        d_k, d_v: head widths; element_size: bytes per number; shared_limit: the GPU's shared memory per program
            (bytes); max_block: the largest tile to consider.

    Returns:
        A :class:`LaunchConfig`.
    """
    for block, entry in LAUNCH_TABLE.items():
        if block > max_block or forward_registers_per_thread(block, block, d_v, entry["num_warps"]) > REGISTER_BUDGET:
            continue
        for stages in range(entry["num_stages"], NUM_STAGES - 1, -1):
            if forward_shared_memory_bytes(block, block, d_k, d_v, element_size, stages) <= 0.75 * shared_limit:
                return LaunchConfig(block, block, entry["num_warps"], stages)
    return LaunchConfig(16, 16, LAUNCH_TABLE[16]["num_warps"], NUM_STAGES)


def _shared_limit(device: torch.device | str | None) -> int:
    index = torch.device(device or "cuda").index
    try:  # the per-program limit a kernel may opt in to (larger than the 48 KB of the default)
        return int(
            triton.runtime.driver.active.utils.get_device_properties(
                index if index is not None else torch.cuda.current_device()
            )["max_shared_mem"]
        )
    except Exception:  # a driver without the query: the limit every CUDA GPU of compute capability >= 7 has
        return 48 * 1024


def default_config(
    d_k: int, d_v: int, element_size: int, device: torch.device | str | None = None, *, backward: bool = False
) -> LaunchConfig:
    """The launch configuration used when no block sizes are given: :func:`launch_config` for this GPU (the
    backward's tiles at most :data:`BACKWARD_MAX_BLOCK`); 64 × 64 under the interpreter, which has no such limits.

    Args:
        d_k, d_v: head widths; element_size: bytes per number; device: the CUDA device (default: the current one);
        backward: for the backward kernels.

    Returns:
        A :class:`LaunchConfig`.
    """
    if INTERPRETING or not torch.cuda.is_available():
        return LaunchConfig(64, 64)
    return launch_config(
        d_k, d_v, element_size, _shared_limit(device), max_block=BACKWARD_MAX_BLOCK if backward else 128
    )


def default_blocks(d_k: int, d_v: int, element_size: int, device: torch.device | str | None = None) -> tuple[int, int]:
    """The forward's ``(block_q, block_k)`` of :func:`default_config`.

    Args:
        d_k, d_v: head widths; element_size: bytes per number; device: the CUDA device (default: the current one).

    Returns:
        ``(block_q, block_k)``.
    """
    config = default_config(d_k, d_v, element_size, device)
    return config.block_q, config.block_k


def _config(
    q: torch.Tensor, v: torch.Tensor, block_q: int | None, block_k: int | None, *, backward: bool = False
) -> LaunchConfig:
    """The blocks given, or the default ones; warps from :data:`LAUNCH_TABLE` for the larger block."""
    default = default_config(q.shape[-1], v.shape[-1], q.element_size(), q.device, backward=backward)
    if block_q is None and block_k is None:
        return default
    bq, bk = block_q or default.block_q, block_k or default.block_k
    warps = LAUNCH_TABLE.get(max(bq, bk), {"num_warps": 8 if max(bq, bk) > 128 else 4})["num_warps"]
    return LaunchConfig(bq, bk, warps, NUM_STAGES)


def _check_blocks(block_q: int, block_k: int) -> None:
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if block < 16 or block & (block - 1):
            raise ValueError(
                f"{name} must be a power of two of at least 16 (tl.arange needs powers of two, tl.dot tiles of at "
                f"least 16), got {block}"
            )


def _check_device(*tensors: torch.Tensor) -> None:
    """Raise ValueError unless the tensors can be handed to the kernels here (a GPU, or the CPU when interpreting)."""
    t = tensors[0]
    if INTERPRETING:
        if t.dtype == torch.bfloat16:
            raise ValueError(
                "bfloat16 needs a GPU: Triton's interpreter computes with numpy, which has no bfloat16 (use float16 "
                "or float32)"
            )
    elif t.device.type != "cuda":
        raise ValueError(
            f"the Triton kernels run on the GPU: move the tensors there (.cuda()), got device {t.device}; without a "
            "GPU, TRITON_INTERPRET=1 runs them on the CPU"
        )
    if t.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"the kernels take float16, bfloat16 or float32 tensors, got {t.dtype}")


# --------------------------------------------------------------------------------------------------
# 2. The forward kernel: one program per block of queries (分块前向)
# --------------------------------------------------------------------------------------------------


@triton.jit
def flash_attention_forward_kernel(
    Q,  # pointer to q (B, H, T_q, d_k)
    K,  # pointer to k (B, H, T_k, d_k)
    V,  # pointer to v (B, H, T_k, d_v)
    Out,  # pointer to the output o (B, H, T_q, d_v)
    LSE,  # pointer to the log-sum-exp (B, H, T_q), float32, contiguous
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_ob, stride_oh, stride_ot, stride_od,
    H, T_q, T_k, d_k, d_v,
    scale,  # 1 / sqrt(d_k)
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per program (block_q)
    BLOCK_N: tl.constexpr,  # keys per step of the loop (block_k)
    BLOCK_DK: tl.constexpr,  # d_k rounded up to a power of two (>= 16)
    BLOCK_DV: tl.constexpr,  # d_v rounded up to a power of two (>= 16)
):  # fmt: skip
    """One program: the outputs and log-sum-exps of ``BLOCK_M`` queries of one (batch, head).

    Grid ``(cdiv(T_q, BLOCK_M), B * H)``. The queries are loaded once; the loop visits the key and value blocks,
    folding each into the running max ``m_i``, running sum ``l_i`` and unnormalised output ``acc`` (the online
    softmax, in base 2), then stores ``o = acc / l_i`` and ``lse = ln 2 · (m_i + log2 l_i)`` (Dao 2023, algorithm 1).
    """
    pid_m = tl.program_id(0)  # which block of queries
    pid_bh = tl.program_id(1)  # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) this program's query positions
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,) key offsets within a block
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    # the program's queries, loaded once: masked lanes (past T_q, past d_k) read nothing and give 0
    q = tl.load(
        Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qt + offs_dk[None, :] * stride_qd,
        mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k),
        other=0.0,
    )  # (BLOCK_M, BLOCK_DK)
    K_bh = K + b * stride_kb + h * stride_kh  # this (batch, head)'s keys and values
    V_bh = V + b * stride_vb + h * stride_vh
    q_pos = rows + (T_k - T_q)  # (BLOCK_M,) each query's position among the keys (causal: bottom-right aligned)
    qk_scale = scale * 1.4426950408889634  # log2(e): scores in base 2, since exp(x) = exp2(x log2 e)
    ### BEGIN SOLUTION
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max (base 2)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # unnormalised output
    hi = T_k
    if CAUSAL:  # key blocks that start after the block's last query position are never visited
        hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,) key positions of this block
        k = tl.load(
            K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
            mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k),
            other=0.0,
        )  # (BLOCK_N, BLOCK_DK)
        v = tl.load(
            V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
            mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v),
            other=0.0,
        )  # (BLOCK_N, BLOCK_DV)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N) scores in base 2, float32
        allowed = cols[None, :] < T_k  # the last block's keys past T_k are padding
        if CAUSAL:
            allowed = allowed & (cols[None, :] <= q_pos[:, None])
        s = tl.where(allowed, s, float("-inf"))  # mask before the max
        m_new = tl.maximum(m_i, tl.max(s, 1))  # (BLOCK_M,)
        alpha = tl.exp2(m_i - m_new)  # rescales what was summed under the old max
        p = tl.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N) unnormalised probabilities
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # (BLOCK_M, BLOCK_DV), accumulated in float32
        m_i = m_new
    o = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # ln 2: the log-sum-exp of the scaled scores, natural log
    ### END SOLUTION
    tl.store(
        Out + b * stride_ob + h * stride_oh + rows[:, None] * stride_ot + offs_dv[None, :] * stride_od,
        o.to(Out.dtype.element_ty),
        mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v),
    )
    tl.store(LSE + pid_bh * T_q + rows, lse, mask=rows < T_q)


def flash_attention_triton_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int | None = None,
    block_k: int | None = None,
    kernel: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact attention ``softmax(q k^T / sqrt(d_k)) v`` by :func:`flash_attention_forward_kernel`, and its log-sum-exp.

    Launches a grid of ``cdiv(T_q, block_q) × (B · H)`` programs (Dao 2023: parallel over query blocks as well as
    batch and heads). Nothing of size ``T_q × T_k`` is ever written to memory.

    Args:
        q: ``(B, H, T_q, d_k)``; k: ``(B, H, T_k, d_k)``; v: ``(B, H, T_k, d_v)``; one dtype (float16, float32; bfloat16
            on a GPU), on the GPU (or the CPU under the interpreter); the last dimension contiguous.
        causal: query ``i`` may attend to keys ``j <= i + T_k - T_q`` (needs ``T_q <= T_k``).
        block_q, block_k: the kernel's ``BLOCK_M`` and ``BLOCK_N`` (powers of two, at least 16; default
            :func:`default_blocks`).
        kernel: the ``@triton.jit`` kernel to launch, with :func:`flash_attention_forward_kernel`'s signature
            (default: that one); the notebook passes the student's.

    Returns:
        ``(o, lse)``: ``o (B, H, T_q, d_v)`` in the dtype of ``q``; ``lse (B, H, T_q)`` float32, natural log.

    Raises:
        ValueError: shapes that do not fit (see chapter 10's ``check_flash_inputs``), block sizes that are not powers
            of two of at least 16, a device or dtype the kernels cannot take here.

    Source: Dao 2023, algorithm 1; Dao et al. 2022, section 3.1.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=None)
    _check_device(q, k, v)
    config = _config(q, v, block_q, block_k)
    block_q, block_k = config.block_q, config.block_k
    _check_blocks(block_q, block_k)
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    o = torch.empty(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, T_q, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(T_q, block_q), B * H)
    (kernel or flash_attention_forward_kernel)[grid](
        q, k, v, o, lse,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k),
        CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    return o, lse


# --------------------------------------------------------------------------------------------------
# 3. The backward kernels: the probabilities recomputed from the log-sum-exp (重计算)
# --------------------------------------------------------------------------------------------------


@triton.jit
def flash_attention_backward_dkdv_kernel(
    Q,  # pointer to q (B, H, T_q, d_k)
    K,  # pointer to k (B, H, T_k, d_k)
    V,  # pointer to v (B, H, T_k, d_v)
    DO,  # pointer to do, the gradient of the output (B, H, T_q, d_v)
    LSE,  # pointer to the forward's log-sum-exp (B, H, T_q), float32, contiguous
    D,  # pointer to D = rowsum(do ∘ o) (B, H, T_q), float32, contiguous
    DK,  # pointer to dk (B, H, T_k, d_k)
    DV,  # pointer to dv (B, H, T_k, d_v)
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_dkb, stride_dkh, stride_dkt, stride_dkd,
    stride_dvb, stride_dvh, stride_dvt, stride_dvd,
    H, T_q, T_k, d_k, d_v,
    scale,  # 1 / sqrt(d_k)
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per step of the loop (block_q)
    BLOCK_N: tl.constexpr,  # keys per program (block_k)
    BLOCK_DK: tl.constexpr,
    BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """One program: ``dk`` and ``dv`` of ``BLOCK_N`` keys of one (batch, head), looping over the blocks of queries.

    Grid ``(cdiv(T_k, BLOCK_N), B * H)``. Each step recomputes the tile of probabilities exactly from the saved
    log-sum-exp, ``P = exp(S - L)``, and accumulates ``dV += P^T dO`` and ``dK += dS^T Q / sqrt(d_k)`` with
    ``dS = P ∘ (dO V^T - D)`` (Dao 2023, algorithm 2, lines 6–15). The program owns its rows of ``dk`` and ``dv``:
    no two programs write the same memory.
    """
    pid_n = tl.program_id(0)  # which block of keys
    pid_bh = tl.program_id(1)  # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) this program's key positions
    offs_m = tl.arange(0, BLOCK_M)  # (BLOCK_M,) query offsets within a block
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    # the program's keys and values, loaded once
    k = tl.load(
        K + b * stride_kb + h * stride_kh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
        mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k),
        other=0.0,
    )  # (BLOCK_N, BLOCK_DK)
    v = tl.load(
        V + b * stride_vb + h * stride_vh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
        mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v),
        other=0.0,
    )  # (BLOCK_N, BLOCK_DV)
    Q_bh = Q + b * stride_qb + h * stride_qh  # this (batch, head)'s queries, output gradients, lse and D
    DO_bh = DO + b * stride_dob + h * stride_doh
    LSE_bh = LSE + pid_bh * T_q
    D_bh = D + pid_bh * T_q
    offset = T_k - T_q  # query i sits at key position i + offset (causal, bottom-right aligned)
    ### BEGIN SOLUTION
    dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
    lo = 0
    if CAUSAL:  # query blocks whose every query comes before this block's first key see none of it: skipped
        lo = tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M
    for start_m in range(lo, T_q, BLOCK_M):
        rows = start_m + offs_m  # (BLOCK_M,) query positions of this block
        q = tl.load(
            Q_bh + rows[:, None] * stride_qt + offs_dk[None, :] * stride_qd,
            mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k),
            other=0.0,
        )  # (BLOCK_M, BLOCK_DK)
        do = tl.load(
            DO_bh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
            mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v),
            other=0.0,
        )  # (BLOCK_M, BLOCK_DV); rows past T_q are 0, so they add nothing below
        lse = tl.load(LSE_bh + rows, mask=rows < T_q, other=0.0)  # (BLOCK_M,)
        delta = tl.load(D_bh + rows, mask=rows < T_q, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N), recomputed
        p = tl.exp(s - lse[:, None])  # the forward's probabilities, already normalised
        if CAUSAL:
            p = tl.where(cols[None, :] <= rows[:, None] + offset, p, 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)  # (BLOCK_N, BLOCK_DV)
        dp = tl.dot(do, tl.trans(v))  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)  # (BLOCK_N, BLOCK_DK)
    dk = dk * scale  # the 1/sqrt(d_k) of S = Q K^T / sqrt(d_k)
    ### END SOLUTION
    tl.store(
        DK + b * stride_dkb + h * stride_dkh + cols[:, None] * stride_dkt + offs_dk[None, :] * stride_dkd,
        dk.to(DK.dtype.element_ty),
        mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k),
    )
    tl.store(
        DV + b * stride_dvb + h * stride_dvh + cols[:, None] * stride_dvt + offs_dv[None, :] * stride_dvd,
        dv.to(DV.dtype.element_ty),
        mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v),
    )


@triton.jit
def flash_attention_backward_dq_kernel(
    Q,  # pointer to q (B, H, T_q, d_k)
    K,  # pointer to k (B, H, T_k, d_k)
    V,  # pointer to v (B, H, T_k, d_v)
    DO,  # pointer to do (B, H, T_q, d_v)
    LSE,  # pointer to the log-sum-exp (B, H, T_q), float32, contiguous
    D,  # pointer to D = rowsum(do ∘ o) (B, H, T_q), float32, contiguous
    DQ,  # pointer to dq (B, H, T_q, d_k)
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_dqb, stride_dqh, stride_dqt, stride_dqd,
    H, T_q, T_k, d_k, d_v,
    scale,  # 1 / sqrt(d_k)
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per program (block_q)
    BLOCK_N: tl.constexpr,  # keys per step of the loop (block_k)
    BLOCK_DK: tl.constexpr,
    BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """One program: ``dq`` of ``BLOCK_M`` queries of one (batch, head), looping over the blocks of keys.

    Grid ``(cdiv(T_q, BLOCK_M), B * H)``: the forward's loop order, so that each program owns its rows of ``dq``
    (FlashAttention-2 itself adds into ``dq`` from the key-block programs with atomic additions; a second kernel
    avoids them at the price of computing ``S`` and ``dP`` once more: seven matrix multiplies instead of the
    backward's five, ``14 N² d`` FLOPs per head instead of ``10 N² d``). ``dQ = dS K / sqrt(d_k)`` with
    ``dS = P ∘ (dO V^T - D)``, ``P = exp(S - L)`` (Dao 2023, algorithm 2, lines 11–13).
    """
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) this program's query positions
    offs_n = tl.arange(0, BLOCK_N)
    offs_dk = tl.arange(0, BLOCK_DK)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = tl.load(
        Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qt + offs_dk[None, :] * stride_qd,
        mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k),
        other=0.0,
    )  # (BLOCK_M, BLOCK_DK)
    do = tl.load(
        DO + b * stride_dob + h * stride_doh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
        mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v),
        other=0.0,
    )  # (BLOCK_M, BLOCK_DV)
    lse = tl.load(LSE + pid_bh * T_q + rows, mask=rows < T_q, other=0.0)  # (BLOCK_M,)
    delta = tl.load(D + pid_bh * T_q + rows, mask=rows < T_q, other=0.0)
    K_bh = K + b * stride_kb + h * stride_kh
    V_bh = V + b * stride_vb + h * stride_vh
    q_pos = rows + (T_k - T_q)  # each query's position among the keys
    dq = tl.zeros([BLOCK_M, BLOCK_DK], dtype=tl.float32)
    hi = T_k
    if CAUSAL:  # the forward's causal bound: key blocks after the block's last query hold no gradient
        hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,) key positions of this block
        k = tl.load(
            K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
            mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k),
            other=0.0,
        )  # (BLOCK_N, BLOCK_DK)
        v = tl.load(
            V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
            mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v),
            other=0.0,
        )  # (BLOCK_N, BLOCK_DV)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N), recomputed
        p = tl.exp(s - lse[:, None])  # the forward's probabilities
        allowed = cols[None, :] < T_k
        if CAUSAL:
            allowed = allowed & (cols[None, :] <= q_pos[:, None])
        p = tl.where(allowed, p, 0.0)
        dp = tl.dot(do, tl.trans(v))  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)  # (BLOCK_M, BLOCK_DK)
    dq = dq * scale
    tl.store(
        DQ + b * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqt + offs_dk[None, :] * stride_dqd,
        dq.to(DQ.dtype.element_ty),
        mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k),
    )


def flash_attention_triton_backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int | None = None,
    block_k: int | None = None,
    dkdv_kernel: Any = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Gradients of attention with respect to q, k, v from the forward's output and log-sum-exp (no ``T × T`` table).

    Computes :math:`D = \mathrm{rowsum}(dO \circ O)` (Dao 2023, algorithm 2, line 4), then launches
    :func:`flash_attention_backward_dkdv_kernel` over ``cdiv(T_k, block_k) × (B · H)`` programs and
    :func:`flash_attention_backward_dq_kernel` over ``cdiv(T_q, block_q) × (B · H)``.

    Args:
        do: ``(B, H, T_q, d_v)``, the gradient of the loss with respect to ``o``.
        q, k, v, causal, block_q, block_k: as given to :func:`flash_attention_triton_forward`.
        o, lse: what :func:`flash_attention_triton_forward` returned for them.
        dkdv_kernel: the ``@triton.jit`` kernel for ``dk, dv`` (default :func:`flash_attention_backward_dkdv_kernel`).

    Returns:
        ``(dq, dk, dv)`` with the shapes and dtypes of ``q, k, v``.

    Raises:
        ValueError: as :func:`flash_attention_triton_forward`; or if ``do``, ``o``, ``lse`` do not fit ``q`` and ``v``.

    Source: Dao 2023, algorithm 2; Dao et al. 2022, appendix B.2.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=None)
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if do.shape != (B, H, T_q, d_v) or o.shape != (B, H, T_q, d_v) or lse.shape != (B, H, T_q):
        raise ValueError(
            f"do and o must be (B, H, T_q, d_v) = {(B, H, T_q, d_v)} and lse (B, H, T_q); got do{tuple(do.shape)}, "
            f"o{tuple(o.shape)}, lse{tuple(lse.shape)}"
        )
    do = do.contiguous().to(q.dtype)
    _check_device(q, k, v, do)
    config = _config(q, v, block_q, block_k, backward=True)
    block_q, block_k = config.block_q, config.block_k
    _check_blocks(block_q, block_k)
    D = (do.float() * o.float()).sum(dim=-1).contiguous()  # (B, H, T_q)  algorithm 2, line 4
    lse = lse.float().contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    common = dict(
        CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    (dkdv_kernel or flash_attention_backward_dkdv_kernel)[(triton.cdiv(T_k, block_k), B * H)](
        q, k, v, do, lse, D, dk, dv,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
        H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k), **common,
    )  # fmt: skip
    flash_attention_backward_dq_kernel[(triton.cdiv(T_q, block_q), B * H)](
        q, k, v, do, lse, D, dq,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride(),
        H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k), **common,
    )  # fmt: skip
    return dq, dk, dv


# --------------------------------------------------------------------------------------------------
# 4. Forward and backward together: a torch.autograd.Function
# --------------------------------------------------------------------------------------------------


class FlashAttentionTriton(torch.autograd.Function):
    """Autograd wrapper of the kernels: the forward saves ``q, k, v, o, lse`` (``O(T d)``), the backward recomputes.

    ``FlashAttentionTriton.apply(q, k, v, causal) -> o`` for ``(B, H, T, d)`` tensors (optionally
    ``apply(q, k, v, causal, block_q, block_k)``); prefer :func:`flash_attention_triton`. Gradients flow to ``q``,
    ``k`` and ``v``. Double backward is not supported.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal=False, block_q=None, block_k=None):
        q, k, v = (t.contiguous() for t in (q, k, v))
        o, lse = flash_attention_triton_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_triton_backward(
            do, q, k, v, o, lse, causal=ctx.causal, block_q=ctx.block_q, block_k=ctx.block_k
        )
        return dq, dk, dv, None, None, None


def flash_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int | None = None,
    block_k: int | None = None,
) -> torch.Tensor:
    """Exact attention by the Triton kernels, differentiable: ``F.scaled_dot_product_attention(q, k, v)``'s result.

    Args:
        q, k, v, causal, block_q, block_k: see :func:`flash_attention_triton_forward`.

    Returns:
        ``o (B, H, T_q, d_v)``, dtype of ``q``; gradients reach ``q``, ``k``, ``v``.

    Raises:
        ValueError: see :func:`flash_attention_triton_forward`.

    Source: Dao et al. 2022; Dao 2023.
    """
    return FlashAttentionTriton.apply(q, k, v, causal, block_q, block_k)


# --------------------------------------------------------------------------------------------------
# 5. HBM traffic, counted: standard attention as three kernels, and the counter
# --------------------------------------------------------------------------------------------------


@triton.jit
def naive_scores_kernel(
    Q, K, S,  # q (B, H, T_q, d_k), k (B, H, T_k, d_k) and the scores S (B, H, T_q, T_k), all contiguous
    T_q, T_k, d_k, scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DK: tl.constexpr,
):  # fmt: skip
    """Standard attention, step 1: one program writes one ``(BLOCK_M, BLOCK_N)`` tile of ``S = Q K^T / sqrt(d_k)``
    to memory (Dao et al. 2022, algorithm 0, line 1). Grid ``(cdiv(T_q, BLOCK_M), cdiv(T_k, BLOCK_N), B · H)``."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    bh = tl.program_id(2)
    offs_d = tl.arange(0, BLOCK_DK)
    q = tl.load(
        Q + bh * T_q * d_k + rows[:, None] * d_k + offs_d[None, :],
        mask=(rows[:, None] < T_q) & (offs_d[None, :] < d_k),
        other=0.0,
    )
    k = tl.load(
        K + bh * T_k * d_k + cols[:, None] * d_k + offs_d[None, :],
        mask=(cols[:, None] < T_k) & (offs_d[None, :] < d_k),
        other=0.0,
    )
    s = tl.dot(q, tl.trans(k)) * scale
    tl.store(
        S + bh * T_q * T_k + rows[:, None] * T_k + cols[None, :],
        s.to(S.dtype.element_ty),
        mask=(rows[:, None] < T_q) & (cols[None, :] < T_k),
    )


@triton.jit
def naive_softmax_kernel(
    S, P,  # the scores S and the probabilities P (B, H, T_q, T_k), contiguous
    T_q, T_k,
    CAUSAL: tl.constexpr, BLOCK_T: tl.constexpr,  # BLOCK_T: T_k rounded up to a power of two
):  # fmt: skip
    """Standard attention, step 2: one program reads a whole row of ``S`` and writes the row of
    ``P = softmax(S)`` (algorithm 0, line 2). Grid ``(T_q, B · H)``."""
    i = tl.program_id(0)
    bh = tl.program_id(1)
    cols = tl.arange(0, BLOCK_T)
    allowed = cols < T_k
    if CAUSAL:
        allowed = allowed & (cols <= i + T_k - T_q)
    s = tl.load(S + bh * T_q * T_k + i * T_k + cols, mask=cols < T_k, other=0.0).to(tl.float32)
    s = tl.where(allowed, s, float("-inf"))
    e = tl.exp(s - tl.max(s, 0))
    tl.store(P + bh * T_q * T_k + i * T_k + cols, (e / tl.sum(e, 0)).to(P.dtype.element_ty), mask=cols < T_k)


@triton.jit
def naive_weighted_sum_kernel(
    P, V, Out,  # P (B, H, T_q, T_k), v (B, H, T_k, d_v), o (B, H, T_q, d_v), all contiguous
    T_q, T_k, d_v,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """Standard attention, step 3: one program reads its rows of ``P`` tile by tile with the matching tiles of ``V``
    and writes ``O = P V`` (algorithm 0, line 3). Grid ``(cdiv(T_q, BLOCK_M), B · H)``."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_DV)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    for start_n in range(0, T_k, BLOCK_N):
        cols = start_n + offs_n
        p = tl.load(
            P + bh * T_q * T_k + rows[:, None] * T_k + cols[None, :],
            mask=(rows[:, None] < T_q) & (cols[None, :] < T_k),
            other=0.0,
        )
        v = tl.load(
            V + bh * T_k * d_v + cols[:, None] * d_v + offs_d[None, :],
            mask=(cols[:, None] < T_k) & (offs_d[None, :] < d_v),
            other=0.0,
        )
        acc += tl.dot(p.to(v.dtype), v)
    tl.store(
        Out + bh * T_q * d_v + rows[:, None] * d_v + offs_d[None, :],
        acc.to(Out.dtype.element_ty),
        mask=(rows[:, None] < T_q) & (offs_d[None, :] < d_v),
    )


def naive_attention_triton(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, block_q: int = 64, block_k: int = 64
) -> torch.Tensor:
    """Standard attention as three kernels that keep ``S`` and ``P`` (``(B, H, T_q, T_k)``, dtype of ``q``) in memory.

    The comparison for the traffic count (Dao et al. 2022, algorithm 0): :func:`naive_scores_kernel` writes ``S``,
    :func:`naive_softmax_kernel` reads it and writes ``P``, :func:`naive_weighted_sum_kernel` reads ``P`` and ``V``.

    Args:
        q, k, v, causal, block_q, block_k: see :func:`flash_attention_triton_forward` (any layout; copied contiguous).

    Returns:
        ``o (B, H, T_q, d_v)``, dtype of ``q``.

    Raises:
        ValueError: see :func:`flash_attention_triton_forward`.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=None)
    _check_blocks(block_q, block_k)
    _check_device(q, k, v)
    q, k, v = (t.contiguous() for t in (q, k, v))
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    S = torch.empty(B, H, T_q, T_k, dtype=q.dtype, device=q.device)  # the tables FlashAttention never writes
    P = torch.empty_like(S)
    o = torch.empty(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    naive_scores_kernel[(triton.cdiv(T_q, block_q), triton.cdiv(T_k, block_k), B * H)](
        q, k, S, T_q, T_k, d_k, 1.0 / math.sqrt(d_k), BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k)
    )
    naive_softmax_kernel[(T_q, B * H)](S, P, T_q, T_k, CAUSAL=causal, BLOCK_T=triton.next_power_of_2(T_k))
    naive_weighted_sum_kernel[(triton.cdiv(T_q, block_q), B * H)](
        P, v, o, T_q, T_k, d_v, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DV=_tile_width(d_v)
    )
    return o


@dataclasses.dataclass
class HBMTraffic:
    """Bytes that kernels moved between HBM and the programs: ``read`` by ``tl.load``, ``written`` by ``tl.store``.

    Only the lanes a mask lets through count: a masked-out lane moves nothing (on a GPU as in the interpreter).
    """

    read: int = 0
    written: int = 0

    @property
    def total(self) -> int:
        """Bytes read plus bytes written."""
        return self.read + self.written


@contextlib.contextmanager
def count_hbm_traffic() -> Iterator[HBMTraffic]:
    """Count the bytes that every ``tl.load`` and ``tl.store`` of the kernels launched in the block moves.

    Wraps the load and store operations of Triton's interpreter (``TRITON_INTERPRET=1``, this module's default
    without a GPU): each adds ``(number of unmasked lanes) × (bytes per element)`` to the counter it yields. This is
    the kernels' own traffic, element by element, as a GPU would move it (without its caches, which the count of
    Dao et al. 2022, theorem 2, leaves out too).

    Yields:
        An :class:`HBMTraffic` that the block's kernel launches fill in.

    Raises:
        RuntimeError: if the kernels are compiled for a GPU (no interpreter to count in).
    """
    if not INTERPRETING:
        raise RuntimeError(
            "count_hbm_traffic counts under Triton's interpreter (TRITON_INTERPRET=1, set before import)"
        )
    import numpy as np
    from triton.runtime.interpreter import interpreter_builder as builder

    traffic = HBMTraffic()
    load, masked_load = builder.create_load, builder.create_masked_load
    store, masked_store = builder.create_store, builder.create_masked_store

    def nbytes(ptrs: Any, lanes: int) -> int:
        return lanes * ptrs.get_element_ty().primitive_bitwidth // 8

    def unmasked(mask: Any) -> int:  # the interpreter's handle, or (block pointers before Triton 3.9) a numpy array
        return int(np.count_nonzero(mask if isinstance(mask, np.ndarray) else mask.data))

    def count_load(ptr, *args):
        traffic.read += nbytes(ptr, ptr.data.size)
        return load(ptr, *args)

    def count_masked_load(ptrs, mask, *args):
        traffic.read += nbytes(ptrs, unmasked(mask))
        return masked_load(ptrs, mask, *args)

    def count_store(ptr, value, *args):
        traffic.written += nbytes(ptr, ptr.data.size)
        return store(ptr, value, *args)

    def count_masked_store(ptrs, value, mask, *args):
        traffic.written += nbytes(ptrs, unmasked(mask))
        return masked_store(ptrs, value, mask, *args)

    patches = {
        "create_load": count_load,
        "create_masked_load": count_masked_load,
        "create_store": count_store,
        "create_masked_store": count_masked_store,
    }
    for name, fn in patches.items():
        setattr(builder, name, fn)  # an instance attribute: shadows the method until deleted
    try:
        yield traffic
    finally:
        for name in patches:
            delattr(builder, name)


def flash_forward_traffic(
    B: int,
    H: int,
    T_q: int,
    T_k: int,
    d_k: int,
    d_v: int,
    *,
    block_q: int,
    block_k: int,
    element_size: int,
    causal: bool = False,
) -> int:
    """Bytes that :func:`flash_attention_forward_kernel` reads and writes, from its grid and its loop.

    Each of the ``cdiv(T_q, block_q)`` programs of a (batch, head) reads its queries once and the ``n`` keys and
    values its loop visits (``n = T_k``; with ``causal``, the key blocks up to its last query's position, ``n`` at
    most ``T_k``), and writes its outputs and log-sum-exps (float32):
    ``e · (T_q d_k + Σ_programs n (d_k + d_v) + T_q d_v) + 4 T_q`` per (batch, head). Without a mask that is about
    ``2 e T_q T_k d / block_q``: the ``Θ(N² d² / M)`` of Dao et al. 2022, theorem 2, once ``block_q`` is as large
    as an SRAM of ``M`` numbers allows (``block_q ∝ M / d``).

    Args:
        B, H, T_q, T_k, d_k, d_v: the sizes; block_q, block_k: the kernel's blocks; element_size: bytes per input
            number.
        causal: with chapter 3's bottom-right aligned causal mask.

    Returns:
        Bytes (int).
    """
    keys = 0
    for start in range(0, T_q, block_q):
        stop = min(T_k, start + block_q + T_k - T_q) if causal else T_k  # the loop's bound
        keys += min(T_k, -(-stop // block_k) * block_k)  # whole key blocks, each read up to T_k
    return B * H * (element_size * (T_q * d_k + keys * (d_k + d_v) + T_q * d_v) + 4 * T_q)


def naive_traffic(
    B: int, H: int, T_q: int, T_k: int, d_k: int, d_v: int, *, block_q: int, block_k: int, element_size: int
) -> int:
    """Bytes that :func:`naive_attention_triton`'s three kernels read and write, from their grids and loops.

    Scores: every ``(block_q, block_k)`` tile reads its queries and keys and writes its scores
    (``T_q d_k · cdiv(T_k, block_k) + T_k d_k · cdiv(T_q, block_q) + T_q T_k``); softmax: reads ``S``, writes ``P``
    (``2 T_q T_k``); weighted sum: reads ``P`` and, per query block, ``V``, writes ``O``
    (``T_q T_k + T_k d_v · cdiv(T_q, block_q) + T_q d_v``); all times ``e`` bytes, per (batch, head). The
    ``4 T_q T_k`` of the tables dominate: Dao et al. 2022, theorem 2's ``Θ(N d + N²)`` for standard attention.

    Args:
        B, H, T_q, T_k, d_k, d_v: the sizes; block_q, block_k: the tiles; element_size: bytes per number.

    Returns:
        Bytes (int).
    """
    n_q, n_k = -(-T_q // block_q), -(-T_k // block_k)
    scores = T_q * d_k * n_k + T_k * d_k * n_q + T_q * T_k
    softmax = 2 * T_q * T_k
    weighted = T_q * T_k + T_k * d_v * n_q + T_q * d_v
    return B * H * element_size * (scores + softmax + weighted)


# The notebook builder (inspect.getsource) reads an exercise's source through __wrapped__: a Triton kernel object
# is no function, its Python function is its .fn.
for _kernel in (flash_attention_forward_kernel, flash_attention_backward_dkdv_kernel):
    _kernel.__wrapped__ = _kernel.fn
