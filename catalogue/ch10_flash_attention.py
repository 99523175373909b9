"""ch10_flash_attention's catalogue."""

import textwrap

from catalogue.entries import Alternative, Mutant, Rewrite


class _WholeCell(Mutant):
    """A :class:`Mutant` written as the whole exercise cell (its one edit is ``("", cell)``): an answer that is not an
    edit of the reference."""

    def apply(self, source: str) -> str:
        return textwrap.dedent(self.edits[0][1]).strip("\n") + "\n"

    def build(self, module):
        namespace = dict(vars(module))
        exec(compile(self.apply(""), f"<mutant {self.name}>", "exec"), namespace)
        return namespace[self.target]


# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

_MASK_LINES = (
    "            if allowed is not None:\n"
    "                s_ij = s_ij.masked_fill(~allowed, -math.inf)  # mask before the max\n"
)
_MAX_LINE = "            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))  # (B, H, n_q)\n"

MUTANTS = [
    # online_softmax_update
    Mutant(
        "running sum not rescaled",
        "online_softmax_update",
        (("ell * torch.exp(m - m_safe)", "ell"),),
        "adds the new block's sum without rescaling the old one to the new max",
    ),
    Mutant(
        "rescaled the wrong way",
        "online_softmax_update",
        (("torch.exp(m - m_safe)", "torch.exp(m_safe - m)"),),
        "multiplies by exp(m_new - m) instead of exp(m - m_new)",
    ),
    Mutant(
        "max of the block only",
        "online_softmax_update",
        (("torch.maximum(m, x_block.amax(dim=-1))", "x_block.amax(dim=-1)"),),
        "forgets the running max: m is the max of the last block",
    ),
    Mutant(
        "-inf minus -inf",
        "online_softmax_update",
        (("m_new.masked_fill(m_new == -math.inf, 0.0)", "m_new"),),
        "a block of masked entries makes the state NaN",
    ),
    # flash_attention_forward
    Mutant(
        "accumulator not rescaled",
        "flash_attention_forward",
        (("o_i = alpha[..., None] * o_i + ", "o_i = o_i + "),),
        "the running max grows but the output accumulated so far is not rescaled",
    ),
    Mutant(
        "running sum not rescaled (forward)",
        "flash_attention_forward",
        (("l_i = alpha * l_i + ", "l_i = l_i + "),),
        "the running sum is not rescaled when the max grows",
    ),
    Mutant(
        "masking applied after the max",
        "flash_attention_forward",
        ((_MASK_LINES + _MAX_LINE, _MAX_LINE + _MASK_LINES),),
        "the max includes masked scores: large masked scores underflow every allowed one",
    ),
    Mutant(
        "causal blocks skipped one too many",
        "flash_attention_forward",
        (("min(T_k, q_end + offset) if causal", "min(T_k, q_start + offset) if causal"),),
        "skips the key block that holds the diagonal",
    ),
    Mutant(
        "causal mask top-left aligned",
        "flash_attention_forward",
        (("k_stop = min(T_k, q_end + offset) if causal", "k_stop = min(T_k, q_end) if causal"),),
        "stops at key q_end, as if T_k were T_q: wrong when T_k > T_q",
    ),
    Mutant(
        "log-sum-exp of the wrong block",
        "flash_attention_forward",
        (
            (
                "lse[:, :, q_start:q_end] = m_i + torch.log(l_i)",
                "lse[:, :, q_start:q_end] = s_ij.amax(-1) + torch.log(l_i)",
            ),
        ),
        "uses the last key block's max instead of the running max",
    ),
    Mutant(
        "fully masked rows divide by zero",
        "flash_attention_forward",
        (("o_i / l_safe[..., None]", "o_i / l_i[..., None]"),),
        "a query with no allowed key gets 0 / 0 = NaN",
    ),
    Mutant(
        "no scaling",
        "flash_attention_forward",
        ((".transpose(-2, -1) * scale", ".transpose(-2, -1)"),),
        "forgets 1/sqrt(d_k)",
    ),
    Mutant(
        "last block not clipped",
        "flash_attention_forward",
        (("k_end = min(k_start + block_k, T_k)", "k_end = k_start + block_k"),),
        "assumes T_k is a multiple of block_k",
    ),
    # flash_attention_backward
    Mutant(
        "D not subtracted",
        "flash_attention_backward",
        (("p_ij * (dp_ij - D[:, :, q_start:q_end, None])", "p_ij * dp_ij"),),
        "softmax backward without the rowsum(dO ∘ O) term",
    ),
    Mutant(
        "log-sum-exp of the wrong block (backward)",
        "flash_attention_backward",
        (("lse_safe[:, :, q_start:q_end, None]", "lse_safe[:, :, k_start : k_start + q_end - q_start, None]"),),
        "recomputes P with the log-sum-exp of other queries",
    ),
    Mutant(
        "recomputed scores not masked",
        "flash_attention_backward",
        (("                s_ij = s_ij.masked_fill(~allowed, -math.inf)\n", "                pass\n"),),
        "masked keys get probability exp(s - lse) > 0 in the backward pass",
    ),
    Mutant(
        "causal query blocks skipped one too many",
        "flash_attention_backward",
        (("// block_q) * block_q if causal", "// block_q + 1) * block_q if causal"),),
        "skips the query block that holds the diagonal",
    ),
    Mutant(
        "dK without the scale",
        "flash_attention_backward",
        (("dk_j += ds_ij.transpose(-2, -1) @ q_i * scale", "dk_j += ds_ij.transpose(-2, -1) @ q_i"),),
        "forgets the 1/sqrt(d_k) of the chain rule for K",
    ),
    Mutant(
        "dV from unnormalised scores",
        "flash_attention_backward",
        (("p_ij = torch.exp(s_ij - lse_safe[:, :, q_start:q_end, None])", "p_ij = torch.softmax(s_ij, dim=-1)"),),
        "normalises P within the key block instead of with the saved log-sum-exp",
    ),
    Mutant(
        "dK overwritten per query block",
        "flash_attention_backward",
        (("dk_j += ds_ij", "dk_j = ds_ij"),),
        "keeps only the last query block's contribution to dK",
    ),
    Mutant(
        "accumulators in the inputs' dtype",
        "flash_attention_forward",
        (("acc = torch.promote_types(q.dtype, torch.float32)", "acc = q.dtype"),),
        "running max, sum, output and lse kept in float16 for float16 inputs (lse should be float32)",
    ),
    Mutant(
        "running max on the CPU",
        "flash_attention_forward",
        (
            (
                "torch.full((B, H, q_end - q_start), -math.inf, dtype=acc, device=q.device)",
                "torch.full((B, H, q_end - q_start), -math.inf, dtype=acc)",
            ),
        ),
        "the running max is made on the default device: fails on a GPU",
    ),
]

MUTANTS += [
    Mutant(
        "-inf avoided by clamping the shift",
        "online_softmax_update",
        (("m_new.masked_fill(m_new == -math.inf, 0.0)", "m_new.clamp_min(-1e4)"),),
        "shifts by max(m_new, -1e4): right for ordinary scores, a row of entries below -1e4 sums to 0",
    ),
    Mutant(
        "new terms by the block's own max",
        "online_softmax_update",
        (
            (
                "torch.exp(x_block - m_safe[..., None]).sum(dim=-1)",
                "torch.exp(x_block - x_block.amax(dim=-1, keepdim=True).clamp_min(-1e30)).sum(dim=-1)",
            ),
        ),
        "rescales the old sum to m_new but leaves the block's sum relative to the block's own max",
    ),
    Mutant(
        "running max started at 0",
        "flash_attention_forward",
        (
            (
                "torch.full((B, H, q_end - q_start), -math.inf, dtype=acc, device=q.device)",
                "torch.zeros(B, H, q_end - q_start, dtype=acc, device=q.device)",
            ),
        ),
        "right unless every allowed score of a query is far below 0: then exp(s - 0) underflows",
    ),
    Mutant(
        "running max started at -5e4",
        "flash_attention_forward",
        (
            (
                "torch.full((B, H, q_end - q_start), -math.inf, dtype=acc, device=q.device)",
                "torch.full((B, H, q_end - q_start), -5e4, dtype=acc, device=q.device)",
            ),
        ),
        "a large negative start instead of -inf: scores below it underflow",
    ),
    Mutant(
        "tile scores in the inputs' dtype",
        "flash_attention_forward",
        (
            (
                "s_ij = q_i @ k[:, :, k_start:k_end].to(acc).transpose(-2, -1) * scale",
                "s_ij = (q[:, :, q_start:q_end] @ k[:, :, k_start:k_end].transpose(-2, -1)).to(acc) * scale",
            ),
        ),
        "QK^T in float16, cast afterwards: overflows (and rounds) for large entries",
    ),
    Mutant(
        "recomputed scores in the inputs' dtype",
        "flash_attention_backward",
        (
            (
                "s_ij = q_i @ k_j.transpose(-2, -1) * scale",
                "s_ij = (q[:, :, q_start:q_end] @ k[:, :, k_start:k_end].transpose(-2, -1)).to(acc) * scale",
            ),
        ),
        "QK^T in float16 in the backward pass: overflows for large entries",
    ),
    Mutant(
        "padding mask dropped in the backward",
        "flash_attention_backward",
        (
            (
                "            allowed = tile_mask(q_start, q_end, k_start, k_end)\n"
                "            if allowed is not None:\n"
                "                s_ij = s_ij.masked_fill(~allowed, -math.inf)\n",
                "            allowed = block_mask(\n"
                "                q_start, q_end, k_start, k_end, T_q=T_q, T_k=T_k, causal=causal, attention_mask=None,"
                " device=q.device\n"
                "            )\n"
                "            if allowed is not None:\n"
                "                s_ij = s_ij.masked_fill(~allowed, -math.inf)\n",
            ),
        ),
        "recomputes the scores with the causal mask only: padding keys get gradient",
    ),
    Mutant(
        "masked scores filled with finfo.min (forward)",
        "flash_attention_forward",
        (
            (
                "s_ij.masked_fill(~allowed, -math.inf)  # mask before the max",
                "s_ij.masked_fill(~allowed, torch.finfo(acc).min)",
            ),
        ),
        "a finite fill: right wherever a query has an allowed key, a query with none averages every value",
    ),
    Mutant(
        "padding mask dropped in the forward",
        "flash_attention_forward",
        (
            (
                "            allowed = tile_mask(q_start, q_end, k_start, k_end)\n",
                "            allowed = block_mask(\n"
                "                q_start, q_end, k_start, k_end, T_q=T_q, T_k=T_k, causal=causal, attention_mask=None,"
                " device=q.device\n"
                "            )\n",
            ),
        ),
        "masks the causal future only: padding keys get weight",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
# issue 38: the tiled passes are the exercise; full-matrix attention gives the right numbers without them
_FULL_MASK = """
    def _full_mask(T_q, T_k, causal, attention_mask, device):
        mask = torch.ones(T_q, T_k, dtype=torch.bool, device=device)
        if causal:
            mask = mask.tril(T_k - T_q)
        if attention_mask is not None:
            mask = mask & attention_mask[:, None, None, :]
        return mask
"""
MUTANTS += [
    _WholeCell(
        "whole score matrix in the forward pass",
        "flash_attention_forward",
        (
            (
                "",
                _FULL_MASK
                + """
    def flash_attention_forward(q, k, v, *, causal=False, attention_mask=None, block_q=64, block_k=64):
        acc = torch.promote_types(q.dtype, torch.float32)
        s = q.to(acc) @ k.to(acc).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
        s = s.masked_fill(~_full_mask(q.shape[-2], k.shape[-2], causal, attention_mask, q.device), -math.inf)
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse.masked_fill(lse == -math.inf, 0.0)[..., None])
        return (p @ v.to(acc)).to(q.dtype), lse
""",
            ),
        ),
        "plain attention on the whole (B, H, T_q, T_k) score matrix: right numbers, none of the tiling the exercise is",
    ),
    _WholeCell(
        "torch.autograd through the whole matrices in the backward pass",
        "flash_attention_backward",
        (
            (
                "",
                _FULL_MASK
                + """
    def flash_attention_backward(do, q, k, v, o, lse, *, causal=False, attention_mask=None, block_q=64, block_k=64):
        acc = torch.promote_types(q.dtype, torch.float32)
        qg, kg, vg = (t.detach().to(acc).requires_grad_() for t in (q, k, v))
        with torch.enable_grad():
            s = qg @ kg.transpose(-2, -1) / math.sqrt(q.shape[-1])
            s = s.masked_fill(~_full_mask(q.shape[-2], k.shape[-2], causal, attention_mask, q.device), -math.inf)
            p = torch.softmax(s, dim=-1).nan_to_num(0.0)
            out = p @ vg
            dq, dk, dv = torch.autograd.grad(out, (qg, kg, vg), do.to(acc))
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
""",
            ),
        ),
        "recomputes attention on the whole matrices and lets torch.autograd differentiate it: right gradients, no tiles",
    ),
]

ALTERNATIVES: list[Alternative] = [
    Alternative(
        "torch.where for the safe max",
        "online_softmax_update",
        (("m_new.masked_fill(m_new == -math.inf, 0.0)", "torch.where(torch.isneginf(m_new), 0.0, m_new)"),),
        "torch.where and isneginf instead of masked_fill",
    ),
    Alternative(
        "max(...).values",
        "online_softmax_update",
        (("x_block.amax(dim=-1)", "x_block.max(dim=-1).values"),),
        "Tensor.max instead of amax",
    ),
    Alternative(
        "einsum tile scores",
        "flash_attention_forward",
        (
            (
                "q_i @ k[:, :, k_start:k_end].to(acc).transpose(-2, -1) * scale",
                'torch.einsum("bhqd,bhkd->bhqk", q_i, k[:, :, k_start:k_end].to(acc)) * scale',
            ),
        ),
        "torch.einsum instead of matmul with a transpose",
    ),
    Alternative(
        "clamped denominator",
        "flash_attention_forward",
        (("l_i.masked_fill(l_i == 0, 1.0)", "l_i.clamp_min(torch.finfo(l_i.dtype).tiny)"),),
        "clamps the sum instead of replacing zeros (the output is 0 there either way)",
    ),
    Alternative(
        "einsum for dV",
        "flash_attention_backward",
        (("p_ij.transpose(-2, -1) @ do_i", 'torch.einsum("bhqk,bhqd->bhkd", p_ij, do_i)'),),
        "torch.einsum instead of matmul with a transpose",
    ),
    Alternative(
        "out-of-place dK",
        "flash_attention_backward",
        (("dk_j += ds_ij.transpose(-2, -1) @ q_i * scale", "dk_j = dk_j + scale * (ds_ij.transpose(-2, -1) @ q_i)"),),
        "accumulates out of place, scale applied last",
    ),
]


REWRITES: list[Rewrite] = []

# Whole answers written from scratch, as students write them from the page and the notebook's instructions.
REWRITES += [
    Rewrite(
        "the block added through its log-sum-exp",
        "online_softmax_update",
        """
        def online_softmax_update(m, ell, x_block):
            # ell' = ell * e^(m - m') + e^(LSE(x) - m'): exact in real arithmetic (issue 38: a stable formula that does
            # not subtract the block's max itself must pass the check of very negative rows)
            m_new = torch.maximum(m, x_block.amax(dim=-1))
            shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            ell_new = ell * torch.exp(m - shift) + torch.exp(torch.logsumexp(x_block, dim=-1) - shift)
            return m_new, ell_new
        """,
        "the block's sum as exp(logsumexp(x) - m'), torch.logsumexp doing the block's own shift",
    ),
    Rewrite(
        "own block max, both sides rescaled",
        "online_softmax_update",
        '''
        def online_softmax_update(m, ell, x_block):
            """Fold x_block into (m, ell): the block is summed relative to its own max, then both parts move to m_new."""
            block_max = x_block.max(dim=-1).values
            m_new = torch.maximum(m, block_max)
            # a shift that is -inf would give exp(-inf - (-inf)) = NaN: use 0 there (every term is exp(-inf) = 0 anyway)
            own = torch.where(torch.isinf(block_max), torch.zeros_like(block_max), block_max)
            new = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            block_sum = torch.exp(x_block - own.unsqueeze(-1)).sum(dim=-1)
            ell_new = ell * torch.exp(m - new) + block_sum * torch.exp(block_max - new)
            return m_new, ell_new
        ''',
        "the block's sum relative to its own max, then both sums rescaled to the new max",
    ),
    Rewrite(
        "entry by entry",
        "online_softmax_update",
        """
        def online_softmax_update(m, ell, x_block):
            # Milakov & Gimelshein's loop, one entry at a time (vectorised over the leading dims)
            for j in range(x_block.shape[-1]):
                x_j = x_block[..., j]
                m_new = torch.maximum(m, x_j)
                shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
                ell = ell * torch.exp(m - shift) + torch.exp(x_j - shift)
                m = m_new
            return m, ell
        """,
        "a Python loop over the block's entries, each folded in as a block of one",
    ),
    Rewrite(
        "max over the state and the block together",
        "online_softmax_update",
        """
        def online_softmax_update(m, ell, x_block):
            m_new = torch.cat([m.unsqueeze(-1), x_block], dim=-1).amax(dim=-1)
            finite = torch.isfinite(m_new)
            m_ref = torch.where(finite, m_new, torch.zeros_like(m_new))
            old = ell * torch.exp(m - m_ref)
            new = torch.sum(torch.exp(x_block - m_ref[..., None]), dim=-1)
            return m_new, old + new
        """,
        "the running max taken over the old max and the block at once (torch.cat), torch.where for the shift",
    ),
    Rewrite(
        "nan_to_num for the shift",
        "online_softmax_update",
        """
        def online_softmax_update(m, ell, x_block):
            m_new = torch.max(m, torch.amax(x_block, dim=-1))
            m_shift = torch.nan_to_num(m_new, neginf=0.0)  # -inf (nothing seen yet) -> 0
            return m_new, torch.exp(m - m_shift) * ell + torch.exp(x_block - m_shift[..., None]).sum(-1)
        """,
        "torch.nan_to_num(neginf=0) makes the shift finite",
    ),
    Rewrite(
        "own block max, masks from positions, no block skipped",
        "flash_attention_forward",
        '''
        def flash_attention_forward(q, k, v, *, causal=False, attention_mask=None, block_q=64, block_k=64):
            """Tiled attention with the online softmax; each tile is summed relative to its own max."""
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            B, H, T_q, d_k = q.shape
            T_k, d_v = k.shape[-2], v.shape[-1]
            acc = torch.promote_types(q.dtype, torch.float32)
            outs, lses = [], []
            for qs in range(0, T_q, block_q):
                qe = min(qs + block_q, T_q)
                q_i = q[:, :, qs:qe].to(acc) / math.sqrt(d_k)
                m = torch.full((B, H, qe - qs), float("-inf"), dtype=acc, device=q.device)
                l = torch.zeros_like(m)
                acc_o = torch.zeros(B, H, qe - qs, d_v, dtype=acc, device=q.device)
                for ks in range(0, T_k, block_k):
                    ke = min(ks + block_k, T_k)
                    s = torch.einsum("bhqd,bhkd->bhqk", q_i, k[:, :, ks:ke].to(acc))
                    keep = torch.ones(B, 1, qe - qs, ke - ks, dtype=torch.bool, device=q.device)
                    if causal:
                        qpos = torch.arange(qs, qe, device=q.device) + (T_k - T_q)
                        kpos = torch.arange(ks, ke, device=q.device)
                        keep = keep & (kpos[None, :] <= qpos[:, None])
                    if attention_mask is not None:
                        keep = keep & attention_mask[:, None, None, ks:ke]
                    s = s.masked_fill(~keep, float("-inf"))
                    tile_max = s.amax(dim=-1)  # -inf where the whole tile row is masked
                    tile_ref = torch.where(tile_max == float("-inf"), torch.zeros_like(tile_max), tile_max)
                    p = torch.exp(s - tile_ref[..., None])
                    m_new = torch.maximum(m, tile_max)
                    m_ref = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
                    old, new = torch.exp(m - m_ref), torch.exp(tile_max - m_ref)
                    l = old * l + new * p.sum(dim=-1)
                    acc_o = old[..., None] * acc_o + new[..., None] * (p @ v[:, :, ks:ke].to(acc))
                    m = m_new
                denom = torch.where(l > 0, l, torch.ones_like(l))
                outs.append((acc_o / denom[..., None]).to(q.dtype))
                lses.append(m + torch.log(l))
            return torch.cat(outs, dim=2), torch.cat(lses, dim=2)
        ''',
        "each tile summed relative to its own max and both sides rescaled; masks built from positions; queries "
        "pre-scaled; einsum; blocks collected in lists; every key block visited",
    ),
    Rewrite(
        "normalised output kept (FlashAttention-1 order)",
        "flash_attention_forward",
        """
        def flash_attention_forward(q, k, v, *, causal=False, attention_mask=None, block_q=64, block_k=64):
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            B, H, T_q, d_k = q.shape
            T_k, d_v = k.shape[-2], v.shape[-1]
            acc = torch.promote_types(q.dtype, torch.float32)
            scale = d_k**-0.5
            o = q.new_zeros(B, H, T_q, d_v)
            lse = torch.empty(B, H, T_q, dtype=acc, device=q.device)
            for q_start in range(0, T_q, block_q):
                q_end = min(q_start + block_q, T_q)
                q_i = q[:, :, q_start:q_end].to(acc)
                n = q_end - q_start
                m_i = torch.full((B, H, n), torch.finfo(acc).min, dtype=acc, device=q.device)
                l_i = torch.zeros(B, H, n, dtype=acc, device=q.device)
                o_i = torch.zeros(B, H, n, d_v, dtype=acc, device=q.device)  # kept normalised: o_i = sum p v / l_i
                for k_start in range(0, T_k, block_k):
                    k_end = min(k_start + block_k, T_k)
                    if causal and k_start > q_end - 1 + T_k - T_q:
                        break  # this key block and the later ones are in the future of every query of the block
                    s = torch.matmul(q_i, k[:, :, k_start:k_end].to(acc).mT) * scale
                    allowed = block_mask(
                        q_start, q_end, k_start, k_end, T_q=T_q, T_k=T_k, causal=causal,
                        attention_mask=attention_mask, device=q.device,
                    )
                    if allowed is not None:
                        s = torch.where(allowed, s, float("-inf"))
                    m_new = torch.maximum(m_i, s.max(dim=-1).values)  # finite: m_i starts at the lowest float
                    p = torch.exp(s - m_new.unsqueeze(-1))
                    l_new = torch.exp(m_i - m_new) * l_i + p.sum(-1)
                    l_div = l_new.clamp_min(torch.finfo(acc).tiny)
                    o_i = (
                        (torch.exp(m_i - m_new) * l_i / l_div)[..., None] * o_i
                        + (p @ v[:, :, k_start:k_end].to(acc)) / l_div[..., None]
                    )
                    m_i, l_i = m_new, l_new
                o[:, :, q_start:q_end] = o_i.to(q.dtype)
                lse[:, :, q_start:q_end] = torch.where(l_i > 0, m_i + torch.log(l_i), float("-inf"))
            return o, lse
        """,
        "FlashAttention-1's update (the output kept normalised at every step), running max started at the lowest "
        "finite float, torch.where masks, a break for the causal future, q.new_zeros",
    ),
    Rewrite(
        "masked fill with -inf and an explicit first block",
        "flash_attention_forward",
        """
        def flash_attention_forward(q, k, v, *, causal=False, attention_mask=None, block_q=64, block_k=64):
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            B, H, T_q, d_k = q.shape
            T_k = k.shape[2]
            work = torch.float64 if q.dtype == torch.float64 else torch.float32
            qf, kf, vf = q.to(work), k.to(work), v.to(work)
            o = torch.zeros(B, H, T_q, v.shape[-1], dtype=q.dtype, device=q.device)
            lse = torch.full((B, H, T_q), float("-inf"), dtype=work, device=q.device)
            shift = T_k - T_q
            for i0 in range(0, T_q, block_q):
                i1 = min(i0 + block_q, T_q)
                last_key = min(T_k, i1 + shift) if causal else T_k
                m = l = acc = None
                for j0 in range(0, last_key, block_k):
                    j1 = min(j0 + block_k, T_k)
                    s = qf[:, :, i0:i1] @ kf[:, :, j0:j1].transpose(2, 3) / math.sqrt(d_k)
                    mask = block_mask(i0, i1, j0, j1, T_q=T_q, T_k=T_k, causal=causal, attention_mask=attention_mask,
                                      device=q.device)
                    if mask is not None:
                        s = s.masked_fill(mask.logical_not(), float("-inf"))
                    if m is None:  # the first key block starts the running state
                        m = s.amax(-1)
                        safe = m.masked_fill(m.isneginf(), 0)
                        p = (s - safe[..., None]).exp()
                        l, acc = p.sum(-1), p @ vf[:, :, j0:j1]
                        continue
                    m_new = torch.maximum(m, s.amax(-1))
                    safe = m_new.masked_fill(m_new.isneginf(), 0)
                    p = (s - safe[..., None]).exp()
                    r = (m - safe).exp()
                    l = r * l + p.sum(-1)
                    acc = r[..., None] * acc + p @ vf[:, :, j0:j1]
                    m = m_new
                if m is None:  # no key block at all (cannot happen with T_q <= T_k, kept for safety)
                    continue
                o[:, :, i0:i1] = torch.nan_to_num(acc / l[..., None], nan=0.0).to(q.dtype)
                lse[:, :, i0:i1] = m + l.log()
            return o, lse
        """,
        "the first key block initialises the state (no -inf start), 0/0 cleaned with nan_to_num",
    ),
    Rewrite(
        "query blocks inside, dq accumulated in place of a local sum",
        "flash_attention_backward",
        """
        def flash_attention_backward(
            do, q, k, v, o, lse, *, causal=False, attention_mask=None, block_q=64, block_k=64
        ):
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            B, H, T_q, d_k = q.shape
            T_k = k.shape[-2]
            acc = torch.promote_types(q.dtype, torch.float32)
            scale = 1.0 / math.sqrt(d_k)
            qa, ka, va, doa = q.to(acc), k.to(acc), v.to(acc), do.to(acc)
            lse_a = lse.to(acc)
            lse_a = torch.where(torch.isinf(lse_a), torch.zeros_like(lse_a), lse_a)
            dq, dk, dv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(va)
            for qs in range(0, T_q, block_q):  # query blocks outside, key blocks inside (FlashAttention-2's forward order)
                qe = min(qs + block_q, T_q)
                q_i, do_i = qa[:, :, qs:qe], doa[:, :, qs:qe]
                D_i = (do_i * o[:, :, qs:qe].to(acc)).sum(-1, keepdim=True)
                dq_i = torch.zeros_like(q_i)
                for ks in range(0, T_k, block_k):
                    ke = min(ks + block_k, T_k)
                    s = q_i @ ka[:, :, ks:ke].transpose(-1, -2) * scale
                    allowed = block_mask(
                        qs, qe, ks, ke, T_q=T_q, T_k=T_k, causal=causal, attention_mask=attention_mask, device=q.device
                    )
                    if allowed is not None:
                        s = s.masked_fill(~allowed, float("-inf"))
                    p = torch.exp(s - lse_a[:, :, qs:qe, None])
                    dv[:, :, ks:ke] += p.transpose(-1, -2) @ do_i
                    ds = p * (do_i @ va[:, :, ks:ke].transpose(-1, -2) - D_i)
                    dq_i += ds @ ka[:, :, ks:ke]
                    dk[:, :, ks:ke] += ds.transpose(-1, -2) @ q_i
                dq[:, :, qs:qe] = dq_i * scale
            return dq.to(q.dtype), (dk * scale).to(k.dtype), dv.to(v.dtype)
        """,
        "query blocks in the outer loop, the scale applied once at the end, D per query block",
    ),
    Rewrite(
        "einsum and masks from positions",
        "flash_attention_backward",
        """
        def flash_attention_backward(
            do, q, k, v, o, lse, *, causal=False, attention_mask=None, block_q=64, block_k=64
        ):
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            T_q, d_k = q.shape[-2:]
            T_k = k.shape[-2]
            acc = torch.float64 if q.dtype == torch.float64 else torch.float32
            D = torch.einsum("bhqd,bhqd->bhq", do.to(acc), o.to(acc))
            lse_f = torch.nan_to_num(lse.to(acc), neginf=0.0)
            dq = torch.zeros(q.shape, dtype=acc, device=q.device)
            dk = torch.zeros(k.shape, dtype=acc, device=q.device)
            dv = torch.zeros(v.shape, dtype=acc, device=q.device)
            for j0 in range(0, T_k, block_k):
                j1 = min(j0 + block_k, T_k)
                k_j, v_j = k[:, :, j0:j1].to(acc), v[:, :, j0:j1].to(acc)
                key_pos = torch.arange(j0, j1, device=q.device)
                for i0 in range(0, T_q, block_q):
                    i1 = min(i0 + block_q, T_q)
                    q_i, do_i = q[:, :, i0:i1].to(acc), do[:, :, i0:i1].to(acc)
                    s = torch.einsum("bhqd,bhkd->bhqk", q_i, k_j) / math.sqrt(d_k)
                    if causal:
                        query_pos = torch.arange(i0, i1, device=q.device) + T_k - T_q
                        s = s.masked_fill(key_pos[None, :] > query_pos[:, None], float("-inf"))
                    if attention_mask is not None:
                        s = s.masked_fill(~attention_mask[:, None, None, j0:j1], float("-inf"))
                    p = torch.exp(s - lse_f[:, :, i0:i1].unsqueeze(-1))
                    dv[:, :, j0:j1] += torch.einsum("bhqk,bhqd->bhkd", p, do_i)
                    dp = torch.einsum("bhqd,bhkd->bhqk", do_i, v_j)
                    ds = p * (dp - D[:, :, i0:i1].unsqueeze(-1)) / math.sqrt(d_k)
                    dq[:, :, i0:i1] += torch.einsum("bhqk,bhkd->bhqd", ds, k_j)
                    dk[:, :, j0:j1] += torch.einsum("bhqk,bhqd->bhkd", ds, q_i)
            return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
        """,
        "einsum for every product, masks from positions and the padding mask, no block skipped, nan_to_num",
    ),
    Rewrite(
        "D from a first pass over the key blocks",
        "flash_attention_backward",
        """
        def flash_attention_backward(
            do, q, k, v, o, lse, *, causal=False, attention_mask=None, block_q=64, block_k=64
        ):
            check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
            B, H, T_q, d_k = q.shape
            T_k = k.shape[-2]
            acc = torch.promote_types(q.dtype, torch.float32)
            scale = 1 / math.sqrt(d_k)
            safe_lse = lse.to(acc).masked_fill(lse.isneginf(), 0.0)

            def tile(i0, i1, j0, j1):
                # recomputed probabilities P_ij = exp(S_ij - L_i) of one tile
                s = q[:, :, i0:i1].to(acc) @ k[:, :, j0:j1].to(acc).transpose(-2, -1) * scale
                allowed = block_mask(i0, i1, j0, j1, T_q=T_q, T_k=T_k, causal=causal, attention_mask=attention_mask,
                                     device=q.device)
                if allowed is not None:
                    s = s.masked_fill(~allowed, -math.inf)
                return torch.exp(s - safe_lse[:, :, i0:i1, None])

            blocks_q = [(i, min(i + block_q, T_q)) for i in range(0, T_q, block_q)]
            blocks_k = [(j, min(j + block_k, T_k)) for j in range(0, T_k, block_k)]
            # D_i = rowsum(P ∘ dP) over all keys, accumulated tile by tile (equal to rowsum(dO ∘ O))
            D = torch.zeros(B, H, T_q, dtype=acc, device=q.device)
            for i0, i1 in blocks_q:
                for j0, j1 in blocks_k:
                    dp = do[:, :, i0:i1].to(acc) @ v[:, :, j0:j1].to(acc).transpose(-2, -1)
                    D[:, :, i0:i1] += (tile(i0, i1, j0, j1) * dp).sum(-1)
            dq = torch.zeros(q.shape, dtype=acc, device=q.device)
            dk = torch.zeros(k.shape, dtype=acc, device=q.device)
            dv = torch.zeros(v.shape, dtype=acc, device=q.device)
            for j0, j1 in blocks_k:
                for i0, i1 in blocks_q:
                    p = tile(i0, i1, j0, j1)
                    do_i = do[:, :, i0:i1].to(acc)
                    dv[:, :, j0:j1] += p.transpose(-2, -1) @ do_i
                    ds = p * (do_i @ v[:, :, j0:j1].to(acc).transpose(-2, -1) - D[:, :, i0:i1, None])
                    dq[:, :, i0:i1] += ds @ k[:, :, j0:j1].to(acc) * scale
                    dk[:, :, j0:j1] += ds.transpose(-2, -1) @ q[:, :, i0:i1].to(acc) * scale
            return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
        """,
        "D = rowsum(P ∘ dP) from a first pass instead of rowsum(dO ∘ O), a helper for the recomputed tile",
    ),
]


# The checks at the edge of the dtype's range (``extremes=True``) -> correct answers of this catalogue that compute
# what they test by another stable formula: such a check's tolerance must let those through (issue 38).
STABLE_FOR: dict[str, tuple[str, ...]] = {
    "_update_large_values": ("the block added through its log-sum-exp", "own block max, both sides rescaled"),
    "_update_very_negative": ("the block added through its log-sum-exp", "own block max, both sides rescaled"),
    "_forward_masked_keys_with_huge_scores": ("own block max, masks from positions, no block skipped",),
    "_forward_float64_large_scores": ("normalised output kept (FlashAttention-1 order)",),
    "_forward_very_negative_scores": ("masked fill with -inf and an explicit first block",),
    "_forward_half_large": ("own block max, masks from positions, no block skipped",),
    "_backward_half_large": ("D from a first pass over the key blocks",),
}
