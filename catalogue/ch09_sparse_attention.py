"""ch09_sparse_attention's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "window one too narrow",
        "sliding_window_mask",
        (("(i - j).abs() <= window", "(i - j).abs() < window"),),
        "off by one: the key at distance exactly `window` is hidden",
    ),
    Mutant(
        "window counts keys",
        "sliding_window_mask",
        (("(i - j).abs() <= window", "(i - j).abs() <= window + 1"),),
        "off by one the other way: one key too many on each side",
    ),
    Mutant(
        "window causal ignored",
        "sliding_window_mask",
        (("if causal:", "if False:"),),
        "a causal window that still sees the future",
    ),
    Mutant(
        "window keeps the future",
        "sliding_window_mask",
        (("band & causal_mask(T, device=device)", "band & causal_mask(T, device=device).T"),),
        "the upper band instead of the lower one",
    ),
    Mutant(
        "window ignores device",
        "sliding_window_mask",
        (
            ("torch.arange(T, device=device)[:, None]", "torch.arange(T)[:, None]"),
            ("torch.arange(T, device=device)[None, :]", "torch.arange(T)[None, :]"),
            ("causal_mask(T, device=device)", "causal_mask(T)"),
        ),
        "always builds the mask on the CPU",
    ),
    Mutant(
        "global tokens do not attend to everything",
        "global_token_mask",
        (("mask | is_global[..., :, None] | ", "mask | "),),
        "only the columns of the global tokens are added",
    ),
    Mutant(
        "global tokens not attended to",
        "global_token_mask",
        ((" | is_global[..., None, :]", ""),),
        "only the rows of the global tokens are added",
    ),
    Mutant(
        "global causal leaks the future",
        "global_token_mask",
        (("if causal:", "if False:"),),
        "global tokens see (and are seen from) the future in the causal case",
    ),
    Mutant(
        "global replaces the mask",
        "global_token_mask",
        (("merged = mask | ", "merged = torch.zeros_like(mask) | "),),
        "drops the base (window) mask",
    ),
    Mutant(
        "slab looks ahead in the causal case",
        "sliding_window_attention",
        (("left, right = window, 0 if causal else window", "left, right = window, window"),),
        "future keys leak into causal window attention",
    ),
    Mutant(
        "padding keys attended",
        "sliding_window_attention",
        (
            (
                "allowed = in_band[None, :, :] & real_key[:, None, :]",
                "allowed = in_band[None, :, :].expand(n_blocks, b, S)",
            ),
        ),
        "the zero keys padded in front of the sequence get weight",
    ),
    Mutant(
        "band one too narrow",
        "sliding_window_attention",
        (("(offset <= left)", "(offset < left)"),),
        "the key at distance exactly `window` is dropped",
    ),
    Mutant(
        "window attention not scaled",
        "sliding_window_attention",
        ((" / math.sqrt(q.shape[-1])", ""),),
        "missing 1/sqrt(d_k)",
    ),
    Mutant(
        "dense attention under the mask",
        "sliding_window_attention",
        (
            (
                "n_blocks = math.ceil(T / b)",
                "return scaled_dot_product_attention(q, k, v, sliding_window_mask(T, window, causal=causal,"
                " device=q.device))[0]",
            ),
        ),
        "the right output, but T x T scores: no memory saved",
    ),
    Mutant(
        "routing ignores causality",
        "routing_mask",
        (("if causal:", "if False:"),),
        "queries see future keys of their cluster",
    ),
    Mutant(
        "routing compares queries with queries",
        "routing_mask",
        (("key_clusters[..., None, :]", "query_clusters[..., None, :]"),),
        "uses the queries' clusters for the keys",
    ),
    Mutant(
        "routing causal top-left aligned",
        "routing_mask",
        (("causal_mask(query_clusters.shape[-1], key_clusters.shape[-1],", "causal_mask(key_clusters.shape[-1],"),),
        "wrong when T_k > T_q (decoding with a cache)",
    ),
    Mutant(
        "selection leaks a future block",
        "topk_block_mask",
        (("visible = j <= own if causal", "visible = j <= own + 1 if causal"),),
        "the block after the query's own block can be selected (it holds only future keys)",
    ),
    Mutant(
        "selection ignores causality",
        "topk_block_mask",
        (("visible = j <= own if causal", "visible = j <= own if False"),),
        "every block is visible, also in the causal case",
    ),
    Mutant(
        "own block off by one",
        "topk_block_mask",
        (("own = t // block_len", "own = (t + 1) // block_len"),),
        "the last query of a block takes the next block as its own",
    ),
    Mutant(
        "top-k over the queries",
        "topk_block_mask",
        (("dim=-1).indices", "dim=-2).indices"),),
        "ranks the queries of a block instead of the blocks of a query",
    ),
    Mutant(
        "forced blocks not forced",
        "topk_block_mask",
        ((".masked_fill(forced, math.inf)", ""),),
        "the initial and local blocks compete on score",
    ),
    Mutant(
        "lowest scores selected",
        "topk_block_mask",
        (("dim=-1).indices", "dim=-1, largest=False).indices"),),
        "topk(largest=False)",
    ),
    Mutant(
        "forced blocks on top of n",
        "topk_block_mask",
        (("min(n_selected, n_blocks)", "min(n_selected + n_initial + n_local, n_blocks)"),),
        "n counts only the blocks chosen by score, so rows select too many",
    ),
    Mutant(
        "invisible blocks fill the row",
        "topk_block_mask",
        (("return chosen & visible", "return chosen"),),
        "an early query with fewer visible blocks than n gets future blocks",
    ),
    Mutant(
        "one local block too many",
        "topk_block_mask",
        (("(j > own - n_local)", "(j >= own - n_local)"),),
        "n_local + 1 local blocks forced",
    ),
    Mutant(
        "masked scores filled with -1e9",
        "sliding_window_attention",
        (("scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)", "scores.masked_fill(~allowed, -1e9)"),),
        "a -1e9 fill, which overflows float16",
    ),
]

MUTANTS += [
    Mutant(
        "global causal transposed",
        "global_token_mask",
        (("merged & causal_mask(T, device=mask.device)", "merged & causal_mask(T, device=mask.device).T"),),
        "the causal part transposed: global tokens see the future only",
    ),
    Mutant(
        "global rows from the first sequence only",
        "global_token_mask",
        (
            (
                "mask | is_global[..., :, None] | is_global[..., None, :]",
                "mask | is_global.reshape(-1, T)[0][:, None] | is_global.reshape(-1, T)[0][None, :]",
            ),
        ),
        "uses the first sequence's global tokens for every sequence (batched is_global)",
    ),
    Mutant(
        "routing needs a batch dimension",
        "routing_mask",
        (
            (
                "same = query_clusters[..., :, None] == key_clusters[..., None, :]",
                "same = query_clusters[:, :, None] == key_clusters[:, None, :]",
            ),
        ),
        "indexes dim 1 as the time axis: wrong for unbatched or (B, H, T) clusters",
    ),
    Mutant(
        "n_initial hard-coded",
        "topk_block_mask",
        (("(j < n_initial)", "(j < 1)"),),
        "always forces exactly one initial block (the default), whatever n_initial says",
    ),
    Mutant(
        "n_local hard-coded",
        "topk_block_mask",
        (("(j > own - n_local)", "(j > own - 2)"),),
        "always forces two local blocks (the default), whatever n_local says",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "band by two comparisons",
        "sliding_window_mask",
        (("(i - j).abs() <= window", "(j >= i - window) & (j <= i + window)"),),
        "two one-sided comparisons instead of abs",
    ),
    Alternative(
        "causal by comparing positions",
        "sliding_window_mask",
        (("band & causal_mask(T, device=device)", "band & (j <= i)"),),
        "j <= i instead of causal_mask",
    ),
    Alternative(
        "logical_or and unsqueeze",
        "global_token_mask",
        (
            (
                "mask | is_global[..., :, None] | is_global[..., None, :]",
                "torch.logical_or(mask, is_global.unsqueeze(-1) | is_global.unsqueeze(-2))",
            ),
        ),
        "torch.logical_or and unsqueeze instead of | and None-indexing",
    ),
    Alternative(
        "eq and unsqueeze",
        "routing_mask",
        (
            (
                "query_clusters[..., :, None] == key_clusters[..., None, :]",
                "query_clusters.unsqueeze(-1).eq(key_clusters.unsqueeze(-2))",
            ),
        ),
        "Tensor.eq with unsqueeze",
    ),
    Alternative(
        "einsum and -inf",
        "sliding_window_attention",
        (
            ("q_blocks @ k_slabs", 'torch.einsum("...nbd,...nds->...nbs", q_blocks, k_slabs)'),
            ("torch.finfo(scores.dtype).min", 'float("-inf")'),
        ),
        "torch.einsum for the block scores and -inf for the fill (every query sees itself)",
    ),
]


REWRITES: list[Rewrite] = []

# Whole answers written from scratch, as students write them from the page and the notebook's instructions.
REWRITES += [
    Rewrite(
        "tril and triu of ones",
        "sliding_window_mask",
        """
        def sliding_window_mask(T, window, *, causal=True, device=None):
            if T < 1 or window < 0:
                raise ValueError("need T >= 1 and window >= 0")
            ones = torch.ones(T, T, dtype=torch.bool, device=device)
            band = ones.tril(diagonal=window).triu(diagonal=-window)  # j - i <= window and i - j <= window
            return band.tril() if causal else band
        """,
        "a band cut from a matrix of ones by tril and triu",
    ),
    Rewrite(
        "row by row",
        "sliding_window_mask",
        """
        def sliding_window_mask(T, window, *, causal=True, device=None):
            mask = torch.zeros(T, T, dtype=torch.bool, device=device)
            for i in range(T):
                first = max(0, i - window)
                last = i if causal else min(T - 1, i + window)
                mask[i, first : last + 1] = True
            return mask
        """,
        "a Python loop setting each query's slice of keys",
    ),
    Rewrite(
        "signed distance",
        "sliding_window_mask",
        """
        def sliding_window_mask(T, window, *, causal=True, device=None):
            pos = torch.arange(T, device=device)
            diff = pos.unsqueeze(1) - pos.unsqueeze(0)  # i - j
            lowest = 0 if causal else -window
            return (diff <= window) & (diff >= lowest)
        """,
        "one signed distance i - j compared with both ends of the window",
    ),
    Rewrite(
        "causal masks subtracted",
        "sliding_window_mask",
        """
        def sliding_window_mask(T, window, *, causal=True, device=None):
            past = causal_mask(T, device=device)  # j <= i
            too_far_back = causal_mask(T, device=device).tril(diagonal=-window - 1)  # i - j > window
            left = past & ~too_far_back
            if causal:
                return left
            return left | left.T  # the bidirectional band is symmetric
        """,
        "the causal mask minus what lies too far back, mirrored for the bidirectional case",
    ),
    Rewrite(
        "logical_or and tril",
        "global_token_mask",
        """
        def global_token_mask(mask, is_global, *, causal=False):
            rows = is_global.unsqueeze(-1)  # (..., T, 1): a global query sees every key
            cols = is_global.unsqueeze(-2)  # (..., 1, T): every query sees a global key
            out = torch.logical_or(torch.logical_or(mask, rows), cols)
            if causal:
                out = out.tril()  # tril works on the last two dims of a batch of matrices
            return out
        """,
        "torch.logical_or, unsqueeze, and Tensor.tril for the causal part",
    ),
    Rewrite(
        "expanded rows, transposed columns",
        "global_token_mask",
        """
        def global_token_mask(mask, is_global, *, causal=False):
            T = mask.shape[-1]
            rows = is_global[..., None].expand(*is_global.shape, T)  # row i all True when token i is global
            cols = rows.transpose(-1, -2)  # column j all True when token j is global
            out = mask | rows | cols
            if causal:
                out = torch.where(causal_mask(T, device=mask.device), out, torch.zeros_like(out))
            return out
        """,
        "rows expanded and transposed into columns, torch.where with the causal mask",
    ),
    Rewrite(
        "either end global, by De Morgan",
        "global_token_mask",
        """
        def global_token_mask(mask, is_global, *, causal=False):
            not_g = ~is_global
            neither = not_g[..., :, None] & not_g[..., None, :]  # neither the query nor the key is global
            out = mask | ~neither
            if causal:
                T = mask.shape[-1]
                future = torch.ones(T, T, dtype=torch.bool, device=mask.device).triu(1)
                out = out & ~future
            return out
        """,
        "a pair is added unless neither end is global; the future removed with triu",
    ),
    Rewrite(
        "a loop over query blocks, slices of keys",
        "sliding_window_attention",
        """
        def sliding_window_attention(q, k, v, window, *, causal=True, block_len=None):
            check_qkv_shapes(q, k, v)
            T = q.shape[-2]
            b = block_len or max(window, 1)
            outs = []
            for start in range(0, T, b):
                end = min(start + b, T)
                k_lo = max(0, start - window)
                k_hi = end if causal else min(T, end + window)
                s = q[..., start:end, :] @ k[..., k_lo:k_hi, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
                i = torch.arange(start, end, device=q.device)[:, None]
                j = torch.arange(k_lo, k_hi, device=q.device)[None, :]
                keep = (i - j <= window) & (j - i <= (0 if causal else window))
                s = s.masked_fill(~keep, float("-inf"))  # every query keeps itself: no row is all -inf
                outs.append(torch.softmax(s, dim=-1) @ v[..., k_lo:k_hi, :])
            return torch.cat(outs, dim=-2)
        """,
        "a Python loop over query blocks, each attending to its slice of the keys (no padding, no unfold)",
    ),
    Rewrite(
        "unfold of a both-sided padding, einsum",
        "sliding_window_attention",
        """
        def sliding_window_attention(q, k, v, window, *, causal=True, block_len=None):
            check_qkv_shapes(q, k, v)
            T, d_k = q.shape[-2], q.shape[-1]
            b = max(window, 1) if block_len is None else block_len
            n = -(-T // b)  # ceil(T / b)
            extra = n * b - T
            S = b + 2 * window  # the same slab for both cases; the causal one masks its right part
            qb = F.pad(q, (0, 0, 0, extra)).reshape(*q.shape[:-2], n, b, d_k)
            kp = F.pad(k, (0, 0, window, window + extra)).unfold(-2, S, b)  # (..., n, d_k, S)
            vp = F.pad(v, (0, 0, window, window + extra)).unfold(-2, S, b)  # (..., n, d_v, S)
            s = torch.einsum("...nbd,...nds->...nbs", qb, kp) * d_k**-0.5
            query = (torch.arange(n, device=q.device)[:, None] * b + torch.arange(b, device=q.device))[:, :, None]
            key = (torch.arange(n, device=q.device)[:, None] * b - window + torch.arange(S, device=q.device))[:, None, :]
            ok = ((query - key).abs() <= window) & (key >= 0) & (key < T)  # (n, b, S)
            if causal:
                ok = ok & (key <= query)
            s = s.masked_fill(~ok, float("-inf"))
            w = torch.softmax(s, dim=-1).nan_to_num(0.0)  # padded query rows have no key: 0, then dropped
            out = torch.einsum("...nbs,...nds->...nbd", w, vp)
            return out.reshape(*q.shape[:-2], n * b, v.shape[-1])[..., :T, :]
        """,
        "pads window zeros on both sides in both cases (the causal mask drops the right part), einsum, absolute "
        "positions for the mask",
    ),
    Rewrite(
        "gathered slabs",
        "sliding_window_attention",
        """
        def sliding_window_attention(q, k, v, window, *, causal=True, block_len=None):
            check_qkv_shapes(q, k, v)
            T = q.shape[-2]
            b = block_len if block_len is not None else max(window, 1)
            n_blocks = math.ceil(T / b)
            right = 0 if causal else window
            S = b + window + right
            starts = torch.arange(n_blocks, device=q.device) * b
            key_pos = starts[:, None] - window + torch.arange(S, device=q.device)  # (n_blocks, S)
            idx = key_pos.clamp(0, T - 1)
            k_slab = k[..., idx, :]  # (..., n_blocks, S, d_k): the keys each block may need
            v_slab = v[..., idx, :]
            q_pos = starts[:, None] + torch.arange(b, device=q.device)  # (n_blocks, b)
            q_blocks = q[..., q_pos.clamp(max=T - 1), :]  # (..., n_blocks, b, d_k)
            scores = q_blocks @ k_slab.transpose(-1, -2) / math.sqrt(q.shape[-1])
            dist = q_pos[:, :, None] - key_pos[:, None, :]  # i - j
            allowed = (dist <= window) & (dist >= -right) & (key_pos[:, None, :] >= 0) & (key_pos[:, None, :] < T)
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1) * allowed
            out = weights @ v_slab  # (..., n_blocks, b, d_v)
            return out.flatten(-3, -2)[..., :T, :]
        """,
        "slabs gathered by index (clamped positions, masked afterwards) instead of padding and unfold",
    ),
    Rewrite(
        "positions by hand",
        "routing_mask",
        """
        def routing_mask(query_clusters, key_clusters, *, causal=True):
            T_q, T_k = query_clusters.shape[-1], key_clusters.shape[-1]
            same = query_clusters.unsqueeze(-1).eq(key_clusters.unsqueeze(-2))
            if not causal:
                return same
            query_pos = torch.arange(T_k - T_q, T_k, device=query_clusters.device)  # the last T_q positions
            key_pos = torch.arange(T_k, device=query_clusters.device)
            return same & (key_pos[None, :] <= query_pos[:, None])
        """,
        "Tensor.eq with unsqueeze; the bottom-right causal rule from positions",
    ),
    Rewrite(
        "one-hot clusters",
        "routing_mask",
        """
        def routing_mask(query_clusters, key_clusters, *, causal=True):
            import torch.nn.functional as F

            n = int(max(query_clusters.max(), key_clusters.max())) + 1
            qh = F.one_hot(query_clusters.long(), n).float()  # (..., T_q, n)
            kh = F.one_hot(key_clusters.long(), n).float()  # (..., T_k, n)
            same = (qh @ kh.transpose(-1, -2)) > 0  # 1 exactly where the clusters agree
            if causal:
                same = same & causal_mask(query_clusters.shape[-1], key_clusters.shape[-1]).to(same.device)
            return same
        """,
        "one-hot cluster vectors and a matrix product; causal_mask(...).to(device)",
    ),
    Rewrite(
        "tril with an offset",
        "routing_mask",
        """
        def routing_mask(query_clusters, key_clusters, *, causal=True):
            T_q, T_k = query_clusters.shape[-1], key_clusters.shape[-1]
            same = torch.eq(query_clusters[..., None], key_clusters[..., None, :])
            if causal:
                allowed = torch.ones(T_q, T_k, dtype=torch.bool, device=same.device).tril(diagonal=T_k - T_q)
                same = torch.logical_and(same, allowed)
            return same
        """,
        "torch.eq; the causal part from tril with the offset T_k - T_q",
    ),
    Rewrite(
        "query by query",
        "topk_block_mask",
        """
        def topk_block_mask(block_scores, n_selected, block_len, *, causal=True, n_initial=1, n_local=2):
            T_q, n_blocks = block_scores.shape[-2:]
            out = torch.zeros_like(block_scores, dtype=torch.bool)
            blocks = torch.arange(n_blocks, device=block_scores.device)
            for t in range(T_q):
                own = t // block_len
                visible = blocks <= own if causal else torch.ones_like(blocks, dtype=torch.bool)
                forced = ((blocks < n_initial) | ((blocks <= own) & (blocks > own - n_local))) & visible
                row = block_scores[..., t, :]
                row = torch.where(forced, torch.full_like(row, float("inf")), row)
                row = torch.where(visible, row, torch.full_like(row, float("-inf")))
                n = min(n_selected, int(visible.sum()))  # the same for every row of the batch
                top = row.topk(n, dim=-1).indices
                out[..., t, :] = torch.zeros_like(row, dtype=torch.bool).scatter(-1, top, True)
            return out
        """,
        "a loop over the queries, topk of exactly min(n, visible) blocks",
    ),
    Rewrite(
        "ranks from argsort",
        "topk_block_mask",
        """
        def topk_block_mask(block_scores, n_selected, block_len, *, causal=True, n_initial=1, n_local=2):
            T_q, n_blocks = block_scores.shape[-2:]
            dev = block_scores.device
            own = (torch.arange(T_q, device=dev) // block_len)[:, None]  # (T_q, 1)
            j = torch.arange(n_blocks, device=dev)[None, :]  # (1, n_blocks)
            visible = (j <= own) if causal else torch.ones(T_q, n_blocks, dtype=torch.bool, device=dev)
            forced = visible & ((j < n_initial) | ((j > own - n_local) & (j <= own)))
            key = block_scores.masked_fill(forced, float("inf")).masked_fill(~visible, float("-inf"))
            order = key.argsort(dim=-1, descending=True)
            rank = order.argsort(dim=-1)  # rank of each block in its row, 0 = best
            count = visible.sum(-1, keepdim=True).clamp(max=n_selected)  # (T_q, 1)
            return rank < count
        """,
        "the rank of every block from a double argsort, kept when below min(n, visible blocks)",
    ),
    Rewrite(
        "threshold at the n-th value",
        "topk_block_mask",
        """
        def topk_block_mask(block_scores, n_selected, block_len, *, causal=True, n_initial=1, n_local=2):
            T_q, n_blocks = block_scores.shape[-2:]
            t = torch.arange(T_q, device=block_scores.device).unsqueeze(-1)
            j = torch.arange(n_blocks, device=block_scores.device)
            own = torch.div(t, block_len, rounding_mode="floor")
            visible = j <= own if causal else j >= 0
            local = (own - j >= 0) & (own - j < n_local)
            forced = (local | (j < n_initial)) & visible
            ranked = torch.where(forced, math.inf, block_scores)
            ranked = torch.where(visible, ranked, -math.inf)
            kth = ranked.topk(min(n_selected, n_blocks), dim=-1).values[..., -1:]  # the n-th largest of each row
            return (ranked >= kth) & visible
        """,
        "every visible block at least as high as the row's n-th value (scores do not tie)",
    ),
]
