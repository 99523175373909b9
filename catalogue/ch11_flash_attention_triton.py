"""ch11_flash_attention_triton's catalogue."""

import inspect
import linecache
import textwrap
from typing import Any

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head, tail

_FWD_HEAD = head(
    "ch11_flash_attention_triton", "flash_attention_forward_kernel"
)  # the stub's given text, as the release notebook has it
_FWD_TAIL = tail(
    "ch11_flash_attention_triton", "flash_attention_forward_kernel"
)  # the stub's given text, as the release notebook has it

_DKDV_HEAD = head(
    "ch11_flash_attention_triton", "flash_attention_backward_dkdv_kernel"
)  # the stub's given text, as the release notebook has it
_DKDV_TAIL = tail(
    "ch11_flash_attention_triton", "flash_attention_backward_dkdv_kernel"
)  # the stub's given text, as the release notebook has it


# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------


def _with_source(entry: Any, module: Any, source: str) -> Any:
    """Run ``source`` (an edited or rewritten kernel cell) in a copy of ``module``'s namespace, with its text in
    ``linecache`` under the entry's file name: ``@triton.jit`` reads a kernel's source (as it does a notebook
    cell's, which IPython keeps there), to compile it for a GPU, or to rewrite it for the interpreter."""
    filename = f"<{entry.kind} {entry.name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = dict(vars(module))
    exec(compile(source, filename, "exec"), namespace)
    return namespace[entry.target]


def _reference_source(module: Any, target: str) -> str:
    kernel = getattr(module, target)
    return textwrap.dedent(inspect.getsource(getattr(kernel, "fn", kernel)))


class KernelMutant(Mutant):
    """A :class:`~catalogue.entries.Mutant` of a Triton kernel: built with its source where ``@triton.jit`` finds it."""

    def build(self, module) -> Any:
        return _with_source(self, module, self.apply(_reference_source(module, self.target)))


class CellMutant(KernelMutant):
    """A :class:`KernelMutant` written as the whole exercise cell (its one edit is ``("", cell)``), for answers that
    are not edits of the reference (no kernel at all, a construct Triton refuses)."""

    def apply(self, source: str) -> str:
        return textwrap.dedent(self.edits[0][1]).strip("\n") + "\n"


class KernelAlternative(Alternative):
    """An :class:`~autograder.core.Alternative` of a Triton kernel, built as :class:`KernelMutant` is."""

    def build(self, module) -> Any:
        return _with_source(self, module, self.apply(_reference_source(module, self.target)))


class KernelRewrite(Rewrite):
    """A :class:`~catalogue.entries.Rewrite` whose cell defines Triton kernels, built as :class:`KernelMutant` is."""

    def build(self, module) -> Any:
        return _with_source(self, module, self.apply(""))


_FWD, _DKDV = "flash_attention_forward_kernel", "flash_attention_backward_dkdv_kernel"
_WHERE = '        s = tl.where(allowed, s, float("-inf"))  # mask before the max\n'
_MAX = "        m_new = tl.maximum(m_i, tl.max(s, 1))  # (BLOCK_M,)\n"

MUTANTS = [
    KernelMutant(
        "no scaling",
        _FWD,
        (("s = tl.dot(q, tl.trans(k)) * qk_scale", "s = tl.dot(q, tl.trans(k))"),),
        "forgets 1/sqrt(d_k) (and the base-2 factor log2 e)",
    ),
    KernelMutant(
        "accumulator not rescaled",
        _FWD,
        (("acc = acc * alpha[:, None] + ", "acc = acc + "),),
        "the running max grows but the output accumulated so far is not rescaled",
    ),
    KernelMutant(
        "running sum not rescaled",
        _FWD,
        (("l_i = l_i * alpha + ", "l_i = l_i + "),),
        "the running sum is not rescaled when the max grows",
    ),
    KernelMutant(
        "key mask from offsets within the block",
        _FWD,
        (("allowed = cols[None, :] < T_k", "allowed = offs_n[None, :] < T_k"),),
        "compares the keys' offsets inside the block with T_k: the last, partial block's padding keys get weight",
    ),
    KernelMutant(
        "key mask off by one",
        _FWD,
        (("allowed = cols[None, :] < T_k", "allowed = cols[None, :] <= T_k"),),
        "lets key T_k, the first padding key of the last block, through",
    ),
    KernelMutant(
        "causal blocks skipped one too many",
        _FWD,
        (("(pid_m + 1) * BLOCK_M + T_k - T_q", "pid_m * BLOCK_M + T_k - T_q"),),
        "stops the loop before the key block that holds the diagonal",
    ),
    KernelMutant(
        "causal bound top-left aligned",
        _FWD,
        (("hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)", "hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M)"),),
        "stops at key (pid_m + 1) * BLOCK_M, as if T_k were T_q: wrong when T_k > T_q",
    ),
    KernelMutant(
        "masking applied after the max",
        _FWD,
        ((_WHERE + _MAX, _MAX + _WHERE),),
        "the max includes masked scores: large masked scores underflow every allowed one",
    ),
    KernelMutant(
        "running max started at 0",
        _FWD,
        (('m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)', "m_i = tl.zeros([BLOCK_M], dtype=tl.float32)"),),
        "right unless every allowed score of a query is far below 0: then exp2(s - 0) underflows",
    ),
    KernelMutant(
        "log-sum-exp stored in base 2",
        _FWD,
        (("lse = (m_i + tl.log2(l_i)) * 0.6931471805599453", "lse = m_i + tl.log2(l_i)"),),
        "stores log2 of the sum (the kernel's base-2 units) instead of the natural log-sum-exp",
    ),
    KernelMutant(
        "exp instead of exp2",
        _FWD,
        (
            ("alpha = tl.exp2(m_i - m_new)", "alpha = tl.exp(m_i - m_new)"),
            ("p = tl.exp2(s - m_new[:, None])", "p = tl.exp(s - m_new[:, None])"),
        ),
        "scores in base 2 (times log2 e) but exponentiated with e: softmax(log2(e) s) instead of softmax(s)",
    ),
    KernelMutant(
        "accumulation in float16",
        _FWD,
        (
            (
                "acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)",
                "acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=V.dtype.element_ty)",
            ),
            (
                "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                "acc = (acc * alpha[:, None]).to(v.dtype) + tl.dot(p.to(v.dtype), v, out_dtype=v.dtype)",
            ),
        ),
        "keeps the unnormalised output in the inputs' dtype: for float16 it overflows past 65504",
    ),
    KernelMutant(
        "value loads without a mask",
        _FWD,
        (
            (
                "            V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,\n"
                "            mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v),\n"
                "            other=0.0,\n",
                "            V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,\n",
            ),
        ),
        "reads past the last value and past d_v: whatever lies there (NaN in the checks) enters the output",
    ),
    # the dK/dV kernel
    KernelMutant(
        "D not subtracted",
        _DKDV,
        (("ds = p * (dp - delta[:, None])", "ds = p * dp"),),
        "softmax backward without the rowsum(dO ∘ O) term",
    ),
    KernelMutant(
        "dK without the scale",
        _DKDV,
        (("    dk = dk * scale  # the 1/sqrt(d_k) of S = Q K^T / sqrt(d_k)\n", ""),),
        "forgets the 1/sqrt(d_k) of the chain rule for K",
    ),
    KernelMutant(
        "recomputed P not masked",
        _DKDV,
        (("            p = tl.where(cols[None, :] <= rows[:, None] + offset, p, 0.0)\n", "            p = p\n"),),
        "keys in a query's future get probability exp(s - lse) > 0 in the backward pass",
    ),
    KernelMutant(
        "causal query blocks skipped one too many",
        _DKDV,
        (("// BLOCK_M * BLOCK_M", "// BLOCK_M * BLOCK_M + BLOCK_M"),),
        "starts after the query block that holds the diagonal",
    ),
    KernelMutant(
        "dK overwritten per query block",
        _DKDV,
        (("dk += tl.dot(tl.trans(ds.to(q.dtype)), q)", "dk = tl.dot(tl.trans(ds.to(q.dtype)), q)"),),
        "keeps only the last query block's contribution to dK",
    ),
    KernelMutant(
        "output gradients loaded without a mask",
        _DKDV,
        (
            (
                "            DO_bh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod,\n"
                "            mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v),\n"
                "            other=0.0,\n",
                "            DO_bh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod,\n",
            ),
        ),
        "reads dO past the last query and past d_v: whatever lies there (NaN in the checks) enters dK and dV",
    ),
    KernelMutant(
        "P normalised within the tile",
        _DKDV,
        (
            (
                "p = tl.exp(s - lse[:, None])",
                "p = tl.exp(s - tl.max(s, 1)[:, None])\n        p = p / tl.sum(p, 1)[:, None]",
            ),
        ),
        "a softmax over the tile's keys instead of exp(s - lse), the probabilities over all keys",
    ),
]

# issue 38: what the checks claim to test (block skipping, ragged causal gaps, clamped starts, long accumulations,
# kernels only) is what they test
MUTANTS += [
    KernelMutant(
        "causal gap rounded to the nearest key block",
        _FWD,
        (
            (
                "hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)",
                "hi = tl.minimum(T_k, (pid_m + 1 + (T_k - T_q + BLOCK_N // 2) // BLOCK_N) * BLOCK_N)",
            ),
        ),
        "counts the causal bound in whole key blocks, rounding T_k - T_q to the nearest: one block short when the gap "
        "is not a multiple of BLOCK_N and its remainder is under half a block",
    ),
    KernelMutant(
        "future key blocks loaded and masked, never skipped",
        _FWD,
        (("hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)", "hi = T_k"),),
        "right values, but every program loads every key block (the causal mask zeroes the future ones): the skip "
        "the exercise asks for is missing",
    ),
    CellMutant(
        "PyTorch code behind a launcher object",
        _FWD,
        (
            (
                "",
                """
import torch


class _Launcher:
    \"\"\"Looks like a kernel (kernel[grid](...) and .run) but computes with PyTorch on the tensors it is given.\"\"\"

    def run(self, *args, **kwargs):
        pass

    def __getitem__(self, grid):
        def launch(Q, K, V, Out, LSE, *rest, CAUSAL, **kwargs):
            scale = rest[-1]
            s = (Q.float() @ K.float().transpose(-2, -1)) * scale
            if CAUSAL:
                T_q, T_k = s.shape[-2:]
                s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q), float("-inf"))
            Out.copy_((torch.softmax(s, dim=-1) @ V.float()).to(Out.dtype))
            LSE.copy_(torch.logsumexp(s, dim=-1))

        return launch


flash_attention_forward_kernel = _Launcher()
""",
            ),
        ),
        "not a Triton kernel: an object with .run and [grid] that runs PyTorch's attention on the launch's tensors",
    ),
    KernelMutant(
        "block pointers (removed in Triton 3.9)",
        _FWD,
        (
            (
                "        k = tl.load(\n"
                "            K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,\n"
                "            mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k),\n"
                "            other=0.0,\n"
                "        )  # (BLOCK_N, BLOCK_DK)\n",
                "        k_block = tl.make_block_ptr(K_bh, shape=(T_k, d_k), strides=(stride_kt, stride_kd),\n"
                "                                    offsets=(start_n, 0), block_shape=(BLOCK_N, BLOCK_DK), order=(1, 0))\n"
                '        k = tl.load(k_block, boundary_check=(0, 1), padding_option="zero")\n',
            ),
        ),
        "loads K through tl.make_block_ptr, which Triton 3.9 no longer has (it raises NotImplementedError): the "
        "checks must say so, not that the exercise is not filled in (with Triton 3.6 to 3.8 it is a right answer)",
    ),
    KernelMutant(
        "causal start not clamped at 0",
        _DKDV,
        (
            (
                "lo = tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M",
                "lo = (pid_n * BLOCK_N - offset) // BLOCK_M * BLOCK_M",
            ),
        ),
        "where queries are fewer than keys by more than a block, the first key blocks' loops start at a negative row "
        "and load q, do, lse and D from before the tensors",
    ),
    KernelMutant(
        "dK and dV accumulated in float16",
        _DKDV,
        (
            (
                "dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32)",
                "dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=DK.dtype.element_ty)",
            ),
            (
                "dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)",
                "dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=DV.dtype.element_ty)",
            ),
            (
                "dv += tl.dot(tl.trans(p.to(do.dtype)), do)",
                "dv += tl.dot(tl.trans(p.to(do.dtype)), do).to(DV.dtype.element_ty)",
            ),
            (
                "dk += tl.dot(tl.trans(ds.to(q.dtype)), q)",
                "dk += tl.dot(tl.trans(ds.to(q.dtype)), q).to(DK.dtype.element_ty)",
            ),
        ),
        "keeps the running dK and dV in the inputs' dtype: for float16, the contributions of later query blocks round "
        "away once the sums are large (visible over many query blocks)",
    ),
    KernelMutant(
        "query blocks before the key block loaded, never skipped",
        _DKDV,
        (("lo = tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M", "lo = 0"),),
        "right values, but every program loads every query block (the causal mask zeroes p there): the skip the "
        "exercise asks for is missing",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative | Rewrite] = [
    KernelAlternative(
        "additive -inf bias",
        _FWD,
        (
            (
                '        s = tl.where(allowed, s, float("-inf"))  # mask before the max\n',
                '        s = s + tl.where(allowed, 0.0, float("-inf"))\n',
            ),
        ),
        "adds a bias of 0 / -inf instead of selecting with tl.where",
    ),
    KernelAlternative(
        "dot with an accumulator",
        _FWD,
        (
            (
                "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])",
            ),
        ),
        "tl.dot(a, b, acc) adds into the rescaled accumulator",
    ),
    KernelAlternative(
        "scores masked before the exponential",
        _DKDV,
        (
            (
                "        p = tl.exp(s - lse[:, None])  # the forward's probabilities, already normalised\n"
                "        if CAUSAL:\n"
                "            p = tl.where(cols[None, :] <= rows[:, None] + offset, p, 0.0)\n",
                "        if CAUSAL:\n"
                '            s = tl.where(cols[None, :] <= rows[:, None] + offset, s, float("-inf"))\n'
                "        p = tl.exp(s - lse[:, None])\n",
            ),
        ),
        "masks the scores with -inf, so that exp gives 0, instead of zeroing p",
    ),
    KernelAlternative(
        "scale applied to ds",
        _DKDV,
        (
            ("        ds = p * (dp - delta[:, None])\n", "        ds = p * (dp - delta[:, None]) * scale\n"),
            ("    dk = dk * scale  # the 1/sqrt(d_k) of S = Q K^T / sqrt(d_k)\n", ""),
        ),
        "scales every dS tile instead of dK once at the end",
    ),
]

# issue 48: the causal loop bound one short, caught where a query block's last visible key starts a key block; the
# bound written as a whole number of key blocks, still right
MUTANTS += [
    KernelMutant(
        "causal loop bound one short",
        _FWD,
        (
            (
                "hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)",
                "hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q - 1)",
            ),
        ),
        "the loop stops at the block's last visible key instead of one past it: the key block that this key starts "
        "is never visited (T_q = 16, T_k = 17 with 16 × 16 blocks: the last query never sees key 16)",
    ),
]
ALTERNATIVES += [
    KernelAlternative(
        "causal loop bound in whole key blocks",
        _FWD,
        (
            (
                "hi = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)",
                "n_visible = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q)  # keys up to the last query's\n"
                "        hi = tl.cdiv(n_visible, BLOCK_N) * BLOCK_N  # rounded up to whole key blocks",
            ),
        ),
        "the bound rounded up to a multiple of BLOCK_N: the same blocks visited (the partial one masked as before)",
    ),
]


REWRITES: list[Rewrite] = []

# ---------------------------------------------------------------- the forward kernel's loop
REWRITES += [
    KernelRewrite(
        "natural exp, additive -inf bias",
        "flash_attention_forward_kernel",
        _FWD_HEAD
        + """
    m = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    denom = tl.zeros([BLOCK_M], dtype=tl.float32)
    out = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    end = T_k
    if CAUSAL:
        end = tl.minimum(T_k, pid_m * BLOCK_M + BLOCK_M + (T_k - T_q))
    for start in range(0, end, BLOCK_N):
        keys = start + offs_n
        in_range = keys < T_k
        kb = tl.load(K_bh + keys[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
                     mask=in_range[:, None] & (offs_dk[None, :] < d_k), other=0.0)
        vb = tl.load(V_bh + keys[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
                     mask=in_range[:, None] & (offs_dv[None, :] < d_v), other=0.0)
        bias = tl.where(in_range, 0.0, float("-inf"))[None, :]  # (1, BLOCK_N)
        if CAUSAL:
            bias = bias + tl.where(keys[None, :] > q_pos[:, None], float("-inf"), 0.0)
        scores = tl.dot(q, tl.trans(kb)) * scale + bias  # natural units
        new_m = tl.maximum(m, tl.max(scores, axis=1))
        weights = tl.exp(scores - new_m[:, None])
        correction = tl.exp(m - new_m)
        denom = denom * correction + tl.sum(weights, axis=1)
        out = out * correction[:, None] + tl.dot(weights.to(vb.dtype), vb)
        m = new_m
    o = out / denom[:, None]
    lse = m + tl.log(denom)
"""
        + _FWD_TAIL,
        "the online softmax in natural exponentials with the scale applied directly, masks as an additive 0 / -inf "
        "bias, the causal bound written pid_m * BLOCK_M + BLOCK_M + offset",
    ),
    KernelRewrite(
        "two loops: unmasked blocks, then masked ones (the Triton tutorial's split)",
        "flash_attention_forward_kernel",
        '''
@triton.jit
def _fold_key_blocks(acc, l_i, m_i, q, K_bh, V_bh, start, stop, rows_pos, offs_n, offs_dk, offs_dv,
                     stride_kt, stride_kd, stride_vt, stride_vd, T_k, d_k, d_v, qk_scale,
                     BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """Fold the key blocks start, start + BLOCK_N, ... (< stop) into (acc, l_i, m_i); masks only if MASKED."""
    for start_n in range(start, stop, BLOCK_N):
        cols = start_n + offs_n
        if MASKED:
            k = tl.load(K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
                        mask=(cols[:, None] < T_k) & (offs_dk[None, :] < d_k), other=0.0)
            v = tl.load(V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
                        mask=(cols[:, None] < T_k) & (offs_dv[None, :] < d_v), other=0.0)
        else:  # every key of the block exists and every query may see it: only the head width is padded
            k = tl.load(K_bh + cols[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
                        mask=offs_dk[None, :] < d_k, other=0.0)
            v = tl.load(V_bh + cols[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
                        mask=offs_dv[None, :] < d_v, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            ok = (cols[None, :] < T_k) & (cols[None, :] <= rows_pos[:, None])
            s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing allowed yet stays at 0
        p = tl.exp2(s - m_ref[:, None])
        alpha = tl.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i
'''
        + _FWD_HEAD
        + """
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    if CAUSAL:
        # blocks that end at or before the program's first query position need no mask
        full = tl.minimum(T_k // BLOCK_N, (pid_m * BLOCK_M + (T_k - T_q) + 1) // BLOCK_N) * BLOCK_N
        stop = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + (T_k - T_q))
        positions = q_pos
    else:
        full = T_k // BLOCK_N * BLOCK_N
        stop = T_k
        positions = q_pos * 0 + T_k  # no causal limit: every key position is allowed
    acc, l_i, m_i = _fold_key_blocks(acc, l_i, m_i, q, K_bh, V_bh, 0, full, positions, offs_n, offs_dk, offs_dv,
                                     stride_kt, stride_kd, stride_vt, stride_vd, T_k, d_k, d_v, qk_scale,
                                     BLOCK_N, False)
    acc, l_i, m_i = _fold_key_blocks(acc, l_i, m_i, q, K_bh, V_bh, full, stop, positions, offs_n, offs_dk, offs_dv,
                                     stride_kt, stride_kd, stride_vt, stride_vd, T_k, d_k, d_v, qk_scale,
                                     BLOCK_N, True)
    o = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) / 1.4426950408889634
"""
        + _FWD_TAIL,
        "a @triton.jit helper folding key blocks, called once for the full blocks without masks and once for the "
        "diagonal and ragged blocks with them; a guarded shift; lse divided by log2 e",
    ),
    KernelRewrite(
        "key blocks in reverse order",
        "flash_attention_forward_kernel",
        _FWD_HEAD
        + """
    running_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    last = T_k
    if CAUSAL:
        last = tl.minimum(T_k, (pid_m + 1) * BLOCK_M + (T_k - T_q))
    n_blocks = tl.cdiv(last, BLOCK_N)
    for j in range(0, n_blocks):
        start_n = (n_blocks - 1 - j) * BLOCK_N  # the diagonal block first: some rows may see none of its keys
        key_pos = start_n + offs_n
        k = tl.load(K_bh + key_pos[:, None] * stride_kt + offs_dk[None, :] * stride_kd,
                    mask=(key_pos[:, None] < T_k) & (offs_dk[None, :] < d_k), other=0.0)
        v = tl.load(V_bh + key_pos[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
                    mask=(key_pos[:, None] < T_k) & (offs_dv[None, :] < d_v), other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        visible = key_pos[None, :] < T_k
        if CAUSAL:
            visible = visible & (key_pos[None, :] <= q_pos[:, None])
        qk = tl.where(visible, qk, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(qk, axis=1))
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)  # never exp2(-inf - (-inf))
        p = tl.exp2(qk - shift[:, None])
        factor = tl.exp2(running_max - shift)
        running_sum = factor * running_sum + tl.sum(p, axis=1)
        acc = factor[:, None] * acc + tl.dot(p.to(v.dtype), v)
        running_max = new_max
    o = acc / running_sum[:, None]
    lse = 0.6931471805599453 * (running_max + tl.log2(running_sum))
"""
        + _FWD_TAIL,
        "visits the key blocks from the last to the first (the online softmax does not care about the order), so the "
        "first block can leave a row with no allowed key: the shift is guarded against -inf",
    ),
]

# ---------------------------------------------------------------- the dK/dV kernel's loop
REWRITES += [
    KernelRewrite(
        "transposed tiles (k q^T), as the Triton tutorial",
        "flash_attention_backward_dkdv_kernel",
        _DKDV_HEAD
        + """
    dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
    first = 0
    if CAUSAL:
        first = (tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M) * BLOCK_M
    for start_m in range(first, T_q, BLOCK_M):
        qi = start_m + offs_m
        q_rows = tl.load(Q_bh + qi[:, None] * stride_qt + offs_dk[None, :] * stride_qd,
                         mask=(qi[:, None] < T_q) & (offs_dk[None, :] < d_k), other=0.0)
        do_rows = tl.load(DO_bh + qi[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
                          mask=(qi[:, None] < T_q) & (offs_dv[None, :] < d_v), other=0.0)
        lse_i = tl.load(LSE_bh + qi, mask=qi < T_q, other=0.0)
        d_i = tl.load(D_bh + qi, mask=qi < T_q, other=0.0)
        sT = tl.dot(k, tl.trans(q_rows)) * scale  # (BLOCK_N, BLOCK_M): keys along the rows
        pT = tl.exp(sT - lse_i[None, :])
        if CAUSAL:
            pT = tl.where(cols[:, None] <= qi[None, :] + offset, pT, 0.0)
        dv += tl.dot(pT.to(do_rows.dtype), do_rows)
        dpT = tl.dot(v, tl.trans(do_rows))  # (BLOCK_N, BLOCK_M)
        dsT = pT * (dpT - d_i[None, :])
        dk += tl.dot(dsT.to(q_rows.dtype), q_rows)
    dk = dk * scale
"""
        + _DKDV_TAIL,
        "computes the tiles transposed, (BLOCK_N, BLOCK_M), so that no tl.trans is needed on P and dS",
    ),
    KernelRewrite(
        "base-2 recomputation, first query block counted in blocks, scores masked with -inf",
        "flash_attention_backward_dkdv_kernel",
        _DKDV_HEAD
        + """
    LOG2E = 1.4426950408889634
    dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
    first_block = 0
    if CAUSAL:  # the first query that sees key pid_n * BLOCK_N is pid_n * BLOCK_N - offset (none before query 0)
        first_block = tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M
    for block in range(first_block, tl.cdiv(T_q, BLOCK_M)):
        rows = block * BLOCK_M + offs_m
        q = tl.load(Q_bh + rows[:, None] * stride_qt + offs_dk[None, :] * stride_qd,
                    mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k), other=0.0)
        do = tl.load(DO_bh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
                     mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v), other=0.0)
        lse2 = tl.load(LSE_bh + rows, mask=rows < T_q, other=0.0) * LOG2E
        delta = tl.load(D_bh + rows, mask=rows < T_q, other=0.0)
        s2 = tl.dot(q, tl.trans(k)) * (scale * LOG2E)
        if CAUSAL:
            s2 = tl.where(cols[None, :] <= rows[:, None] + offset, s2, float("-inf"))
        p = tl.exp2(s2 - lse2[:, None])
        dv = dv + tl.dot(tl.trans(p.to(do.dtype)), do)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dk = dk + scale * tl.dot(tl.trans(ds.to(q.dtype)), q)
"""
        + _DKDV_TAIL,
        "recomputes P with exp2 in base 2, loops over query block numbers from the first one a key block needs, masks "
        "the scores rather than P, scales each block's dK",
    ),
    KernelRewrite(
        "advancing pointers for a counted number of steps",
        "flash_attention_backward_dkdv_kernel",
        _DKDV_HEAD
        + """
    dk = tl.zeros([BLOCK_N, BLOCK_DK], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], dtype=tl.float32)
    start = 0
    if CAUSAL:
        start = tl.maximum(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M
    steps = tl.cdiv(T_q - start, BLOCK_M)
    rows = start + offs_m
    q_ptrs = Q_bh + rows[:, None] * stride_qt + offs_dk[None, :] * stride_qd
    do_ptrs = DO_bh + rows[:, None] * stride_dot + offs_dv[None, :] * stride_dod
    for _ in range(0, steps):
        q = tl.load(q_ptrs, mask=(rows[:, None] < T_q) & (offs_dk[None, :] < d_k), other=0.0)
        do = tl.load(do_ptrs, mask=(rows[:, None] < T_q) & (offs_dv[None, :] < d_v), other=0.0)
        L = tl.load(LSE_bh + rows, mask=rows < T_q, other=float("inf"))  # past T_q: p = exp(-inf) = 0
        Di = tl.load(D_bh + rows, mask=rows < T_q, other=0.0)
        p = tl.exp(tl.dot(q, tl.trans(k)) * scale - L[:, None])
        if CAUSAL:
            p = tl.where(cols[None, :] - offset <= rows[:, None], p, 0.0)
        dv += tl.dot(tl.trans(p).to(do.dtype), do)
        dS = p * (tl.dot(do, tl.trans(v)) - Di[:, None])
        dk += tl.dot(tl.trans(dS).to(q.dtype), q)
        rows += BLOCK_M
        q_ptrs += BLOCK_M * stride_qt
        do_ptrs += BLOCK_M * stride_dot
    dk *= scale
"""
        + _DKDV_TAIL,
        "a loop of cdiv(T_q - start, BLOCK_M) steps that advances its pointers (the tutorial's habit), lse padded "
        "with +inf so that rows past T_q give p = 0, the causal test written j - offset <= i",
    ),
]


# The checks at the edge of the dtype's range (``extremes=True``) -> correct answers of this catalogue that compute
# what they test by another stable formula: such a check's tolerance must let those through (issue 38).
STABLE_FOR: dict[str, tuple[str, ...]] = {
    "_forward_very_negative_scores": ("natural exp, additive -inf bias",),
    "_forward_half": ("natural exp, additive -inf bias",),
}
