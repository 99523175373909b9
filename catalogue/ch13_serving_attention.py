"""ch13_serving_attention's catalogue: bugs each caught by some check, correct answers each given full marks."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head, pieces

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check. The first is the
# bug of the sample submissions (it costs gather_kv's points, not the others').
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    # gather_kv
    Mutant(
        "last block dropped",
        "gather_kv",
        (("n_blocks = -(-length // page_size)", "n_blocks = length // page_size"),),
        "off by one in the last block: length // page_size blocks lose the partly filled one",
    ),
    Mutant(
        "whole last block returned",
        "gather_kv",
        (("return flat[:, :length]", "return flat"),),
        "returns every slot of the last block, the unused ones too",
    ),
    Mutant(
        "heads mixed into time",
        "gather_kv",
        (("used.transpose(0, 1).reshape(", "used.reshape("),),
        "flattens (n, H_kv, page_size, d) without moving the head axis first: heads and blocks interleave",
    ),
    Mutant(
        "block table ignored",
        "gather_kv",
        (("blocks[block_table[:n_blocks].to(device=blocks.device, dtype=torch.long)]", "blocks[:n_blocks]"),),
        "reads the pool's first blocks instead of the ones the block table lists",
    ),
    Mutant(
        "table read from its end",
        "gather_kv",
        (("block_table[:n_blocks]", "block_table[-n_blocks:]"),),
        "reads the table's last entries instead of its first (wrong whenever the table has padding)",
    ),
    # paged_attention_decode
    Mutant(
        "one position too many",
        "paged_attention_decode",
        (("[None, :] < lengths.to(q.device)[:, None]", "[None, :] <= lengths.to(q.device)[:, None]"),),
        "attends to position length too: an unused slot of the last block",
    ),
    Mutant(
        "heads grouped by repeat",
        "paged_attention_decode",
        (
            (
                "repeat_kv(k, H // H_kv).to(acc), repeat_kv(v, H // H_kv).to(acc)",
                "k.repeat(1, H // H_kv, 1, 1).to(acc), v.repeat(1, H // H_kv, 1, 1).to(acc)",
            ),
        ),
        "query head h reads key/value head h % H_kv instead of h // (H / H_kv)",
    ),
    Mutant(
        "no scaling",
        "paged_attention_decode",
        ((" / math.sqrt(d_k)  # (B, H, T_max)", "  # (B, H, T_max)"),),
        "forgets the 1/sqrt(d_k) scaling of the scores",
    ),
    Mutant(
        "NaN for an empty sequence",
        "paged_attention_decode",
        ((".nan_to_num(0.0)", ""),),
        "a sequence of length 0 gets softmax over only -inf: NaN",
    ),
    Mutant(
        "no padding mask",
        "paged_attention_decode",
        (("scores = scores.masked_fill(~allowed[:, None, :], -math.inf)", "scores = scores"),),
        "attends to every slot of every block in the table, the unused ones and the padding too",
    ),
    # merge_attention_states
    Mutant(
        "merge without rescaling",
        "merge_attention_states",
        (("w[..., None] * o_c.to(acc)", "o_c.to(acc)"),),
        "adds the chunks' outputs without weighing them by exp(lse_c - lse)",
    ),
    Mutant(
        "outputs averaged",
        "merge_attention_states",
        (
            (
                "o = sum(w[..., None] * o_c.to(acc) for w, o_c in zip(weights, outputs))",
                "o = sum(o_c.to(acc) for o_c in outputs) / len(outputs)",
            ),
        ),
        "averages the chunks' outputs, as if every chunk had the same share of the denominator",
    ),
    Mutant(
        "lse is the max",
        "merge_attention_states",
        (
            ("lse = torch.logsumexp(stacked_lse, dim=0)", "lse = stacked_lse.amax(dim=0)"),
            (
                "weights = torch.exp(stacked_lse - lse_safe)",
                "weights = torch.softmax(stacked_lse.nan_to_num(neginf=-1e30), dim=0)",
            ),
        ),
        "weighs the outputs right but returns the largest lse_c as the merged log-sum-exp",
    ),
    Mutant(
        "unshifted exp",
        "merge_attention_states",
        (("weights = torch.exp(stacked_lse - lse_safe)", "weights = torch.exp(stacked_lse) / torch.exp(lse_safe)"),),
        "takes exp(lse_c) before dividing: overflows for log-sum-exps in the hundreds",
    ),
    Mutant(
        "-inf minus -inf",
        "merge_attention_states",
        (("lse_safe = lse.masked_fill(lse == -math.inf, 0.0)", "lse_safe = lse"),),
        "where every chunk is empty, exp(-inf - (-inf)) makes the output NaN",
    ),
    # ring_attention_step
    Mutant(
        "the wrong shard's causal mask",
        "ring_attention_step",
        (("shard_positions(T, world_size, source, split", "shard_positions(T, world_size, rank, split"),),
        "masks the visiting shard as if its keys sat at the query shard's positions (the diagonal pair's mask)",
    ),
    Mutant(
        "local positions",
        "ring_attention_step",
        (
            (
                "q_positions=q_pos, k_positions=k_pos",
                "q_positions=torch.arange(q.shape[-2]), k_positions=torch.arange(k.shape[-2])",
            ),
        ),
        "builds the causal mask from the rows' indices within their shards, not their positions in the sequence",
    ),
    Mutant(
        "step not merged",
        "ring_attention_step",
        (
            (
                "new_o, new_lse = merge_attention_states([o, o_part], [lse, lse_part])",
                "new_o, new_lse = o_part, lse_part",
            ),
        ),
        "returns the visiting shard's state alone, forgetting the running one",
    ),
    Mutant(
        "zig-zag ignored",
        "ring_attention_step",
        (
            ("shard_positions(T, world_size, rank, split,", 'shard_positions(T, world_size, rank, "contiguous",'),
            ("shard_positions(T, world_size, source, split,", 'shard_positions(T, world_size, source, "contiguous",'),
        ),
        "always takes the contiguous split's positions",
    ),
    # flash_attention_with_sink_forward
    Mutant(
        "sink added after normalising",
        "flash_attention_with_sink_forward",
        (("l_i = alpha * l_i + torch.exp(sink_h - m_new)", "l_i = alpha * l_i * (1 + torch.exp(sink_h))"),),
        "divides the normalised softmax by 1 + exp(sink): the sink's term is not on the running max's scale",
    ),
    Mutant(
        "sink outside the running max",
        "flash_attention_with_sink_forward",
        (("m_new = torch.maximum(m_i, sink_h)", "m_new = m_i.masked_fill(m_i == -math.inf, 0.0)"),),
        "adds exp(sink - m) without letting the sink raise the max: overflows for a large sink",
    ),
    Mutant(
        "output not rescaled",
        "flash_attention_with_sink_forward",
        (("o_i = alpha[..., None] * o_i", "o_i = o_i"),),
        "rescales the running sum to the new max but not the unnormalised output",
    ),
    Mutant(
        "sink ignored",
        "flash_attention_with_sink_forward",
        (("l_i = alpha * l_i + torch.exp(sink_h - m_new)", "l_i = alpha * l_i"),),
        "the sink's term never joins the denominator: plain attention",
    ),
    Mutant(
        "lse without the new max",
        "flash_attention_with_sink_forward",
        (("        m_i = m_new\n        ### END SOLUTION", "        ### END SOLUTION"),),
        "keeps the old running max, so lse = m + log(ell) mixes two scales",
    ),
]

# --------------------------------------------------------------------------------------------------
# Valid answers written differently from the reference: each gets full marks.
# --------------------------------------------------------------------------------------------------

ALTERNATIVES: list[Alternative] = [
    Alternative(
        "gather by index_select and permute",
        "gather_kv",
        (
            (
                "used = blocks[block_table[:n_blocks].to(device=blocks.device, dtype=torch.long)]",
                "used = blocks.index_select(0, block_table[:n_blocks].long().to(blocks.device))",
            ),
            ("used.transpose(0, 1).reshape(", "used.permute(1, 0, 2, 3).reshape("),
        ),
        "index_select on the block axis, permute for the transpose",
    ),
    Alternative(
        "decode with einsum and torch.where",
        "paged_attention_decode",
        (
            (
                "scores = (k @ q.to(acc)[..., None]).squeeze(-1) / math.sqrt(d_k)",
                'scores = torch.einsum("bhtd,bhd->bht", k, q.to(acc)) / math.sqrt(d_k)',
            ),
            (
                "scores = scores.masked_fill(~allowed[:, None, :], -math.inf)",
                "scores = torch.where(allowed[:, None, :], scores, torch.tensor(-math.inf, device=q.device))",
            ),
        ),
        "einsum for the scores, torch.where for the mask",
    ),
    Alternative(
        "merge by max-shifted weights",
        "merge_attention_states",
        (
            (
                "lse = torch.logsumexp(stacked_lse, dim=0)  # (..., T_q); -inf where every chunk is empty\n"
                "    lse_safe = lse.masked_fill(lse == -math.inf, 0.0)\n"
                "    weights = torch.exp(stacked_lse - lse_safe)",
                "top = stacked_lse.amax(dim=0)\n"
                "    top = torch.where(top == -math.inf, torch.zeros_like(top), top)\n"
                "    e = torch.exp(stacked_lse - top)\n"
                "    total = e.sum(dim=0)\n"
                "    lse = top + torch.log(total)\n"
                "    weights = e / torch.where(total == 0, torch.ones_like(total), total)",
            ),
        ),
        "shift by the largest lse_c, normalise the exponentials, lse = max + log(sum)",
    ),
    Alternative(
        "merge folded pairwise with logaddexp",
        "merge_attention_states",
        (
            (
                "stacked_lse = torch.stack([lse_c.to(acc) for lse_c in lses])  # (C, ..., T_q)\n"
                "    lse = torch.logsumexp(stacked_lse, dim=0)  # (..., T_q); -inf where every chunk is empty\n"
                "    lse_safe = lse.masked_fill(lse == -math.inf, 0.0)\n"
                "    weights = torch.exp(stacked_lse - lse_safe)  # (C, ..., T_q): each chunk's share, 0 for an empty one\n"
                "    o = sum(w[..., None] * o_c.to(acc) for w, o_c in zip(weights, outputs))  # (..., T_q, d_v)\n",
                "o, lse = outputs[0].to(acc), lses[0].to(acc)\n"
                "    for o_c, lse_c in zip(outputs[1:], lses[1:]):\n"
                "        new = torch.logaddexp(lse, lse_c.to(acc))\n"
                "        safe = torch.where(new == -math.inf, torch.zeros_like(new), new)\n"
                "        o = torch.exp(lse - safe)[..., None] * o + torch.exp(lse_c.to(acc) - safe)[..., None] * o_c.to(acc)\n"
                "        lse = new\n",
            ),
        ),
        "two states at a time, the running merge of the online softmax",
    ),
    Alternative(
        "ring step with the mask written out",
        "ring_attention_step",
        (
            (
                "o_part, lse_part = attention_with_lse(q, k, v, causal=causal, q_positions=q_pos, k_positions=k_pos)",
                "s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                "    if causal:\n"
                "        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], -math.inf)\n"
                "    lse_part = torch.logsumexp(s, dim=-1)\n"
                "    p = torch.exp(s - lse_part.nan_to_num(neginf=0.0)[..., None])\n"
                "    o_part = (p @ v.float()).to(q.dtype)\n"
                "    lse_part = lse_part.to(lse.dtype)",
            ),
        ),
        "the step's scores, mask and log-sum-exp written out instead of attention_with_lse",
    ),
    Alternative(
        "sink merged by logaddexp",
        "flash_attention_with_sink_forward",
        (
            (
                "        m_new = torch.maximum(m_i, sink_h)  # (B, H, n_q): the sink joins the running max (finite from here on)\n"
                "        alpha = torch.exp(m_i - m_new)  # rescales what was summed under the old max (0 where m_i = -inf)\n"
                "        l_i = alpha * l_i + torch.exp(sink_h - m_new)  # ℓ += exp(sink − m): the sink's term in the denominator\n"
                "        o_i = alpha[..., None] * o_i  # the sink's value is zero: the output is only rescaled\n"
                "        m_i = m_new\n",
                "        lse_keys = m_i + torch.log(l_i)  # -inf where no key was seen\n"
                "        lse_all = torch.logaddexp(lse_keys, sink_h.expand_as(lse_keys))\n"
                "        keep = torch.exp(lse_keys - lse_all)  # the keys' share of the denominator\n"
                "        l_safe = torch.where(l_i == 0, torch.ones_like(l_i), l_i)\n"
                "        o_i = (o_i / l_safe[..., None]) * keep[..., None]  # normalised over keys and sink\n"
                "        m_i, l_i = lse_all, torch.ones_like(l_i)\n",
            ),
        ),
        "the keys' log-sum-exp merged with the sink by logaddexp; the state written back as (lse, 1, o)",
    ),
]

# The checks at the edge of the dtype's range, each with the other stable formulas it must let through.
STABLE_FOR: dict[str, tuple[str, ...]] = {
    "_merge_large_lse": ("merge by max-shifted weights", "merge folded pairwise with logaddexp"),
    "_sink_far_away": ("sink merged by logaddexp",),
}

# --------------------------------------------------------------------------------------------------
# Whole answers written from the page and the notebook's instructions (tests/test_alternatives_graded.py).
# --------------------------------------------------------------------------------------------------

_SINK_HEAD, _SINK_TAIL = pieces("ch13_serving_attention", "flash_attention_with_sink_forward")

REWRITES: list[Rewrite] = [
    Rewrite(
        "position by position",
        "gather_kv",
        head("ch13_serving_attention", "gather_kv")
        + "    rows = [blocks[int(block_table[t // page_size]), :, t % page_size] for t in range(length)]\n"
        "    if not rows:\n"
        "        return blocks.new_zeros(blocks.shape[1], 0, blocks.shape[3])\n"
        "    return torch.stack(rows, dim=1)  # (H_kv, length, d)\n",
        "the definition read literally: slot t % page_size of block block_table[t // page_size]",
    ),
    Rewrite(
        "concatenate the blocks",
        "gather_kv",
        head("ch13_serving_attention", "gather_kv") + "    n = math.ceil(length / page_size)\n"
        "    parts = [blocks[int(b)] for b in block_table[:n]]  # each (H_kv, page_size, d)\n"
        "    if not parts:\n"
        "        return blocks[:0].sum(0)[:, :0]\n"
        "    return torch.cat(parts, dim=1)[:, :length]\n",
        "one block after the other along the time axis, then cut at length",
    ),
    Rewrite(
        "einops-free rearrange",
        "gather_kv",
        head("ch13_serving_attention", "gather_kv") + "    idx = torch.arange(length, device=blocks.device)\n"
        "    which = block_table.to(blocks.device).long()[idx // page_size]  # (length,) physical block per position\n"
        "    return blocks[which, :, idx % page_size].transpose(0, 1)  # (length, H_kv, d) -> (H_kv, length, d)\n",
        "advanced indexing with a block id and a slot per position",
    ),
    Rewrite(
        "loop over sequences",
        "paged_attention_decode",
        head("ch13_serving_attention", "paged_attention_decode") + "    B, H, d_k = q.shape\n"
        "    H_kv, bs = k_blocks.shape[1], k_blocks.shape[2]\n"
        "    out = torch.zeros(B, H, v_blocks.shape[-1], dtype=q.dtype, device=q.device)\n"
        "    for b in range(B):\n"
        "        n = int(lengths[b])\n"
        "        if n == 0:\n"
        "            continue\n"
        "        ids = block_tables[b, : -(-n // bs)].long()\n"
        "        k = k_blocks[ids].transpose(0, 1).reshape(H_kv, -1, d_k)[:, :n].float()\n"
        "        v = v_blocks[ids].transpose(0, 1).reshape(H_kv, -1, v_blocks.shape[-1])[:, :n].float()\n"
        "        k = k.repeat_interleave(H // H_kv, dim=0)\n"
        "        v = v.repeat_interleave(H // H_kv, dim=0)\n"
        "        w = torch.softmax((k @ q[b].float()[:, :, None]).squeeze(-1) / d_k**0.5, dim=-1)  # (H, n)\n"
        "        out[b] = (w[:, None, :] @ v).squeeze(1).to(q.dtype)\n"
        "    return out\n",
        "each sequence gathered and attended on its own, repeat_interleave for the groups",
    ),
    Rewrite(
        "PyTorch's attention with a mask",
        "paged_attention_decode",
        head("ch13_serving_attention", "paged_attention_decode") + "    B, H, d_k = q.shape\n"
        "    N, H_kv, bs, _ = k_blocks.shape\n"
        "    T = block_tables.shape[1] * bs\n"
        "    k = k_blocks[block_tables.long()].permute(0, 2, 1, 3, 4).reshape(B, H_kv, T, d_k).float()\n"
        "    v = v_blocks[block_tables.long()].permute(0, 2, 1, 3, 4).reshape(B, H_kv, T, -1).float()\n"
        "    mask = torch.arange(T, device=q.device) < lengths.to(q.device)[:, None]  # (B, T), True = may attend\n"
        "    o = torch.nn.functional.scaled_dot_product_attention(\n"
        "        q.float()[:, :, None], k, v, attn_mask=mask[:, None, None, :], enable_gqa=True\n"
        "    )[:, :, 0]\n"
        "    o = torch.where((lengths.to(q.device) > 0)[:, None, None], o, torch.zeros_like(o))\n"
        "    return o.to(q.dtype)\n",
        "F.scaled_dot_product_attention with a boolean mask and enable_gqa; empty sequences zeroed",
    ),
    Rewrite(
        "gathered by group with einsum",
        "paged_attention_decode",
        head("ch13_serving_attention", "paged_attention_decode") + "    B, H, d_k = q.shape\n"
        "    H_kv, bs = k_blocks.shape[1], k_blocks.shape[2]\n"
        "    g = H // H_kv\n"
        "    T = block_tables.shape[1] * bs\n"
        "    k = k_blocks[block_tables.long()].transpose(1, 2).reshape(B, H_kv, T, d_k).double()\n"
        "    v = v_blocks[block_tables.long()].transpose(1, 2).reshape(B, H_kv, T, -1).double()\n"
        "    qg = q.double().reshape(B, H_kv, g, d_k)  # query heads j*g ... j*g+g-1 share kv head j\n"
        '    s = torch.einsum("bjgd,bjtd->bjgt", qg, k) / math.sqrt(d_k)\n'
        "    valid = (torch.arange(T, device=q.device) < lengths.to(q.device)[:, None])[:, None, None, :]\n"
        "    s = s.masked_fill(~valid, float('-inf'))\n"
        "    m = s.amax(-1, keepdim=True).clamp_min(-1e300)\n"
        "    e = torch.exp(s - m)\n"
        "    w = e / e.sum(-1, keepdim=True).clamp_min(1e-300)\n"
        '    return torch.einsum("bjgt,bjtd->bjgd", w, v).reshape(B, H, -1).to(q.dtype)\n',
        "query heads grouped under their key/value head, einsum, float64 inside",
    ),
    Rewrite(
        "max-shifted sum",
        "merge_attention_states",
        head("ch13_serving_attention", "merge_attention_states")
        + "    lse_all = torch.stack([l.double() for l in lses])  # (C, ..., T_q)\n"
        "    m = lse_all.max(dim=0).values\n"
        "    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)\n"
        "    w = torch.exp(lse_all - m)\n"
        "    total = w.sum(dim=0)\n"
        "    o = sum(w_c.unsqueeze(-1) * o_c.double() for w_c, o_c in zip(w, outputs))\n"
        "    o = o / torch.where(total > 0, total, torch.ones_like(total)).unsqueeze(-1)\n"
        "    lse = m + torch.log(total)\n"
        "    return o.to(outputs[0].dtype), lse.to(torch.promote_types(outputs[0].dtype, torch.float32))\n",
        "float64 inside, the largest lse as the shift",
    ),
    Rewrite(
        "softmax over the chunks",
        "merge_attention_states",
        head("ch13_serving_attention", "merge_attention_states")
        + "    dtype = torch.promote_types(outputs[0].dtype, torch.float32)\n"
        "    L = torch.stack(list(lses)).to(dtype)\n"
        "    lse = torch.logsumexp(L, dim=0)\n"
        "    share = torch.softmax(L, dim=0).nan_to_num(0.0)  # NaN where every chunk is -inf\n"
        "    O = torch.stack(list(outputs)).to(dtype)\n"
        "    return (share.unsqueeze(-1) * O).sum(dim=0).to(outputs[0].dtype), lse\n",
        "each chunk's share is the softmax of the lses over the chunk axis",
    ),
    Rewrite(
        "running merge",
        "merge_attention_states",
        head("ch13_serving_attention", "merge_attention_states")
        + "    acc = torch.promote_types(outputs[0].dtype, torch.float32)\n"
        "    o, lse = torch.zeros_like(outputs[0], dtype=acc), torch.full_like(lses[0], -math.inf, dtype=acc)\n"
        "    for o_c, lse_c in zip(outputs, lses):\n"
        "        lse_c = lse_c.to(acc)\n"
        "        m = torch.maximum(lse, lse_c)\n"
        "        m = torch.where(m == -math.inf, torch.zeros_like(m), m)\n"
        "        a, b = torch.exp(lse - m), torch.exp(lse_c - m)\n"
        "        total = a + b\n"
        "        safe = torch.where(total == 0, torch.ones_like(total), total)\n"
        "        o = (a / safe)[..., None] * o + (b / safe)[..., None] * o_c.to(acc)\n"
        "        lse = m + torch.log(total)\n"
        "    return o.to(outputs[0].dtype), lse\n",
        "one chunk at a time, like the online softmax",
    ),
    Rewrite(
        "positions by hand",
        "ring_attention_step",
        head("ch13_serving_attention", "ring_attention_step") + "    n = q.shape[-2]\n"
        "    def positions(r):\n"
        '        if split == "contiguous":\n'
        "            return torch.arange(r * n, (r + 1) * n)\n"
        "        c = n // 2\n"
        "        first, second = r, 2 * world_size - 1 - r\n"
        "        return torch.cat([torch.arange(first * c, first * c + c), torch.arange(second * c, second * c + c)])\n"
        "    o_new, lse_new = attention_with_lse(\n"
        "        q, k, v, causal=causal, q_positions=positions(rank), k_positions=positions(source)\n"
        "    )\n"
        "    return merge_attention_states([o, o_new], [lse, lse_new])\n",
        "the split's positions computed in the cell, the chapter's attention_with_lse and the student's merge",
    ),
    Rewrite(
        "mask tensor and explicit merge",
        "ring_attention_step",
        head("ch13_serving_attention", "ring_attention_step") + "    T = world_size * q.shape[-2]\n"
        "    qp = shard_positions(T, world_size, rank, split, device=q.device)\n"
        "    kp = shard_positions(T, world_size, source, split, device=q.device)\n"
        "    scores = torch.einsum('bhid,bhjd->bhij', q.double(), k.double()) / math.sqrt(q.shape[-1])\n"
        "    if causal:\n"
        "        allowed = kp[None, :] <= qp[:, None]  # True = may attend\n"
        "        scores = torch.where(allowed, scores, torch.full_like(scores, -math.inf))\n"
        "    lse_s = torch.logsumexp(scores, dim=-1)\n"
        "    new_lse = torch.logaddexp(lse.double(), lse_s)\n"
        "    shift = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)\n"
        "    o_new = torch.exp(lse.double() - shift)[..., None] * o.double()\n"
        "    o_new = o_new + torch.exp(scores - shift[..., None]) @ v.double()\n"
        "    return o_new.to(q.dtype), new_lse.to(lse.dtype)\n",
        "float64 scores, the merge folded in: exp(lse - lse') o + exp(s - lse') v",
    ),
    Rewrite(
        "skip a pair wholly in the future",
        "ring_attention_step",
        head("ch13_serving_attention", "ring_attention_step") + "    T = q.shape[-2] * world_size\n"
        "    q_pos = shard_positions(T, world_size, rank, split, device=q.device)\n"
        "    k_pos = shard_positions(T, world_size, source, split, device=q.device)\n"
        "    if causal and int(k_pos.min()) > int(q_pos.max()):\n"
        "        return o, lse  # every key after every query: nothing to add\n"
        "    part = attention_with_lse(q, k, v, causal=causal, q_positions=q_pos, k_positions=k_pos)\n"
        "    o2, lse2 = merge_attention_states([o, part[0]], [lse, part[1]])\n"
        "    return o2.to(q.dtype), lse2\n",
        "returns the state unchanged for a pair wholly masked (the work a real ring skips)",
    ),
    Rewrite(
        "sink as one more block",
        "flash_attention_with_sink_forward",
        _SINK_HEAD + "        s_sink = sink_h.expand(B, H, q_end - q_start)  # the sink's score for every query\n"
        "        m_next = torch.max(m_i, s_sink)\n"
        "        factor = torch.exp(m_i - m_next)\n"
        "        l_i = l_i * factor + torch.exp(s_sink - m_next)\n"
        "        o_i = o_i * factor.unsqueeze(-1)  # a zero value adds nothing to o\n"
        "        m_i = m_next\n" + _SINK_TAIL,
        "the online-softmax update written for one more 'key' of score sink and value 0",
    ),
    Rewrite(
        "through the log-sum-exp",
        "flash_attention_with_sink_forward",
        _SINK_HEAD + "        keys_lse = m_i + torch.log(l_i)  # log of the keys' sum, -inf when there are none\n"
        "        total = torch.logaddexp(keys_lse, sink_h.expand_as(keys_lse))\n"
        "        o_i = o_i * torch.exp(m_i - total).nan_to_num(0.0)[..., None]  # now o_i / 1 is the output\n"
        "        m_i = total\n"
        "        l_i = torch.ones_like(l_i)\n" + _SINK_TAIL,
        "the denominator including the sink as a log-sum-exp; the state rewritten as (lse, 1, o)",
    ),
    Rewrite(
        "sink added with where",
        "flash_attention_with_sink_forward",
        _SINK_HEAD + "        sink_b = sink_h.expand_as(m_i)\n"
        "        m_new = torch.where(sink_b > m_i, sink_b, m_i)\n"
        "        scale_old = torch.where(m_i == -math.inf, torch.zeros_like(m_i), torch.exp(m_i - m_new))\n"
        "        l_i = scale_old * l_i + torch.exp(sink_b - m_new)\n"
        "        o_i = scale_old.unsqueeze(-1) * o_i\n"
        "        m_i = m_new\n" + _SINK_TAIL,
        "the new max by torch.where, the old terms' factor set to 0 explicitly when nothing was seen",
    ),
]
