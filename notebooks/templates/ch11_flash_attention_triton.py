# %% [markdown]
# # Chapter 11 — FlashAttention in Triton (用 Triton 写 FlashAttention): exercises
#
# Chapter 10 wrote FlashAttention as PyTorch loops over blocks. Here you write it the way a GPU runs it: as
# Triton kernels (核函数). A grid of *programs* (程序实例) runs the same kernel; each program handles one block of
# rows, sees only what it loads from the GPU's main memory (HBM) with `tl.load` and writes back with `tl.store`.
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `flash_attention_forward_kernel` — the loop over key blocks: masks and the online softmax (在线 softmax) | 5 |
# | 2 | `flash_attention_backward_dkdv_kernel` — the loop over query blocks: dK and dV by recomputation (重计算) | 4 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it launches your kernel on small inputs and compares with PyTorch. The grader runs more (hidden)
# checks of the same kind: other block sizes, `T_q > T_k`, very negative scores, float16.
#
# **On a GPU** (Colab: Runtime → Change runtime type → T4 GPU) the kernels are compiled and run natively. **On a
# CPU** Triton's *interpreter* runs them with numpy (`TRITON_INTERPRET=1`, set by the course before Triton is
# imported): the same results, much slower, no bfloat16. Every check is small enough to take a second or two there.
#
# Do not rename the kernels or change their arguments: the grader launches them by name with these arguments.

# %%
# Triton comes with torch in Colab's GPU runtime, and is kept as it is. Where it is missing (Colab's CPU runtime, a CPU
# machine) it is installed here: the version this torch was released with (torch 2.11 -> triton 3.6.0).
import importlib.util
import subprocess
import sys

from solutions.triton_install import triton_requirement

if importlib.util.find_spec("triton") is None:
    print(f"Installing {triton_requirement()} (on a CPU its interpreter runs the kernels) ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", triton_requirement()], check=True)
    importlib.invalidate_caches()

import math

import torch
import torch.nn.functional as F

from solutions.ch10_flash_attention import flash_attention_forward  # chapter 10's PyTorch loops, for comparison
from solutions.ch11_flash_attention_triton import (  # sets TRITON_INTERPRET=1 first when there is no GPU
    INTERPRETING,
    flash_attention_triton_backward,  # launches your dK/dV kernel and the course's dQ kernel
    flash_attention_triton_forward,  # launches your forward kernel: (o, lse)
)

import triton
import triton.language as tl

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device, "— Triton's interpreter (numpy)" if INTERPRETING else "— compiled for the GPU")

# %% [markdown]
# ## A first kernel: programs, `tl.arange`, masked loads and stores
#
# Each program of the grid below takes `BLOCK` consecutive elements: `tl.program_id(0)` says which block it is,
# `tl.arange(0, BLOCK)` (a power of two) numbers the lanes. The last block runs past the end of the tensor, so the
# load and the store carry a **mask**: a masked-out lane reads nothing (it gets `other`) and writes nothing.

# %%
@triton.jit
def scale_rows_kernel(X, Y, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # the elements of this program
    inside = offs < n  # False past the end: those lanes touch no memory
    x = tl.load(X + offs, mask=inside, other=0.0)
    tl.store(Y + offs, x * factor, mask=inside)


x = torch.arange(10.0, device=device)
y = torch.empty_like(x)
scale_rows_kernel[(triton.cdiv(10, 4),)](x, y, 10, 2.0, BLOCK=4)  # 3 programs of 4 lanes for 10 elements
print(y)

# %% [markdown]
# ## Exercise 1 — the forward kernel's loop (5 points)
#
# One program computes the output of `BLOCK_M` queries of one (batch, head): the grid is
# `(cdiv(T_q, BLOCK_M), B · H)`. The code before the exercise region loads the program's queries once
# (`q`, `(BLOCK_M, BLOCK_DK)`, zeros past `T_q` and past `d_k`) and gives you: `rows` (the queries' positions),
# `offs_n` (`0 … BLOCK_N-1`), `offs_dk`, `offs_dv` (the columns), `K_bh`, `V_bh` (this (batch, head)'s keys and values:
# key `j`, column `c` is at `K_bh + j * stride_kt + c * stride_kd`), `q_pos` (each query's position among the keys:
# `rows + T_k - T_q`) and `qk_scale = scale · log2(e)`. Write the loop over the key blocks (Dao 2023, algorithm 1)
# in **base 2** — GPUs compute `exp2` natively, and $e^x = 2^{x \log_2 e}$:
#
# * start with `m_i = -inf`, `l_i = 0` (`(BLOCK_M,)`) and `acc = 0` (`(BLOCK_M, BLOCK_DV)`), all **float32**;
# * loop `for start_n in range(0, hi, BLOCK_N)` with `hi = T_k`, or with `CAUSAL`
#   `hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)`: later key blocks lie in the future of every query here;
# * load the block's keys `cols = start_n + offs_n` of `K` and `V` **with masks** (`cols < T_k`, columns `< d_k` /
#   `< d_v`, `other=0.0`): the last block is partial;
# * `s = tl.dot(q, tl.trans(k)) * qk_scale`; set `s` to `-inf` where the key is past `T_k` or, with `CAUSAL`, where
#   `cols > q_pos` — **before** the max;
# * $m' = \max(m, \mathrm{rowmax}\, s)$, $\alpha = 2^{m - m'}$, $P = 2^{s - m'}$, $\ell' = \alpha \ell + \mathrm{rowsum}\,P$,
#   $\mathrm{acc}' = \alpha\, \mathrm{acc} + P V$ (`tl.dot(p.to(v.dtype), v)`: the product in the inputs' dtype, the sum
#   in float32);
# * after the loop, `o = acc / l_i[:, None]` and the log-sum-exp in **natural log**, `lse = ln 2 · (m_i + log2(l_i))`:
#   the given code stores both.

# %% exercise="flash_attention_forward_kernel"

# %% [markdown]
# Compare with PyTorch's fused attention and with chapter 10's PyTorch loops, causal, with lengths that are not
# multiples of the blocks:

# %%
q, k, v = (torch.randn(1, 2, T, 16, device=device) for T in (70, 90, 90))
o, lse = flash_attention_triton_forward(q, k, v, causal=True, block_q=32, block_k=32, kernel=flash_attention_forward_kernel)
mask = torch.ones(70, 90, dtype=torch.bool, device=device).tril(90 - 70)
print("max |o - F.sdpa|        :", (o - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item())
o10, lse10 = flash_attention_forward(q, k, v, causal=True, block_q=32, block_k=32)
print("max |lse - chapter 10's|:", (lse - lse10).abs().max().item())

# %% [markdown]
# ## Exercise 2 — the dK/dV kernel's loop (4 points)
#
# The forward pass saved `q, k, v, o` and the log-sum-exp `L`. One program of this kernel owns `BLOCK_N` keys of one
# (batch, head) — grid `(cdiv(T_k, BLOCK_N), B · H)` — and the given code has loaded its `k` and `v` once. Loop over
# the query blocks and accumulate its `dk`, `dv` (Dao 2023, algorithm 2), recomputing each tile of probabilities
# exactly from `L`:
#
# $$S = Q K^\top / \sqrt{d_k}, \quad P = e^{S - L}, \quad dV \mathrel{+}= P^\top dO, \quad dP = dO\, V^\top, \quad dS = P \circ (dP - D), \quad dK \mathrel{+}= dS^\top Q$$
#
# then `dk = dk * scale` (the $1/\sqrt{d_k}$ of $S$). `D = rowsum(dO ∘ O)` is computed by the launcher; `LSE_bh + i`
# and `D_bh + i` point at query `i`'s entries, `Q_bh`, `DO_bh` at this (batch, head)'s rows (strides `stride_qt`,
# `stride_qd`, `stride_dot`, `stride_dod`).
#
# * `dk`, `dv` start at 0 in **float32**; cast `p` and `ds` to the inputs' dtype only for the `tl.dot`s;
# * load `q`, `do`, `lse`, `D` of the block **with masks** (rows `< T_q`, columns `< d_k` / `< d_v`);
# * with `CAUSAL`, query `i` sees key `j` when `j <= i + offset` (`offset = T_k - T_q`): set `p` to 0 elsewhere, and
#   start the loop at the first query block that sees any key of this block,
#   `max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M` (earlier blocks would add only zeros).

# %% exercise="flash_attention_backward_dkdv_kernel"

# %% [markdown]
# The whole backward pass — your dK/dV kernel and the course's dQ kernel — against autograd through PyTorch:

# %%
q, k, v = (torch.randn(1, 2, T, 16, device=device, requires_grad=True) for T in (70, 90, 90))
blocks = dict(causal=True, block_q=32, block_k=32)
o, lse = flash_attention_triton_forward(q.detach(), k.detach(), v.detach(), **blocks, kernel=flash_attention_forward_kernel)
do = torch.randn_like(o)
grads = flash_attention_triton_backward(
    do, q.detach(), k.detach(), v.detach(), o, lse, **blocks, dkdv_kernel=flash_attention_backward_dkdv_kernel
)
mask = torch.ones(70, 90, dtype=torch.bool, device=device).tril(90 - 70)
ref = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), do)
for name, ours, theirs in zip(("dq", "dk", "dv"), grads, ref):
    print(f"max |{name} - autograd|:", (ours - theirs).abs().max().item())

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch11_flash_attention_triton")
