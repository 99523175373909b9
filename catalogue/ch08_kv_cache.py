"""ch08_kv_cache's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "kv heads tiled instead of interleaved",
        "repeat_kv",
        (("x[:, :, None].expand(B, H_kv, n_rep, T, d)", "x[:, None].expand(B, n_rep, H_kv, T, d)"),),
        "x.repeat order: query head i gets key head i % H_kv, the wrong groups",
    ),
    Mutant(
        "repeated along time",
        "repeat_kv",
        (("x[:, :, None].expand(B, H_kv, n_rep, T, d)", "x[:, :, :, None].expand(B, H_kv, T, n_rep, d)"),),
        "copies positions instead of heads, then reshapes into garbled heads",
    ),
    Mutant(
        "n_rep ignored",
        "repeat_kv",
        (("x = x[:, :, None].expand(B, H_kv, n_rep, T, d)", "return x"),),
        "returns the key/value heads unrepeated",
    ),
    Mutant(
        "new keys not cached",
        "attend_with_cache",
        (("k, v = cache.update(layer, k, v)", "pass"),),
        "attends to the new tokens only and never fills the cache",
    ),
    Mutant(
        "cached keys ignored",
        "attend_with_cache",
        (("k, v = cache.update(layer, k, v)", "cache.update(layer, k, v)"),),
        "fills the cache but attends to the new keys only",
    ),
    Mutant(
        "top-left causal alignment with a cache",
        "attend_with_cache",
        (
            (
                "causal_mask(T_q, T_k, device=q.device)",
                "torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril()",
            ),
        ),
        "query i attends to keys 0..i instead of 0..T_cached+i",
    ),
    Mutant(
        "no causal mask",
        "attend_with_cache",
        (("repeat_kv(v, n_rep), mask)", "repeat_kv(v, n_rep), None)"),),
        "a prefill sees the future",
    ),
    Mutant(
        "kv heads repeated in the wrong order",
        "attend_with_cache",
        (("repeat_kv(k, n_rep), repeat_kv(v, n_rep)", "k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"),),
        "repeat where repeat_interleave is needed: query heads meet the wrong key/value heads",
    ),
    Mutant(
        "latent not normalised",
        "MultiHeadLatentAttention",
        (("self.kv_norm(self.W_dkv(x))", "self.W_dkv(x)"),),
        "skips the RMS norm on c_KV",
    ),
    Mutant(
        "rotary key not rotated",
        "MultiHeadLatentAttention",
        (("apply_rope(self.W_kr(x)[:, None], angles, interleaved=True)", "self.W_kr(x)[:, None]"),),
        "the decoupled key carries no position",
    ),
    Mutant(
        "values from the key up-projection",
        "MultiHeadLatentAttention",
        (("v = split_heads(self.W_uv(", "v = split_heads(self.W_uk("),),
        "W^UK used for the values",
    ),
    Mutant(
        "latent cache not used",
        "MultiHeadLatentAttention",
        (("c_kv, k_r = cache.update(layer, c_kv, k_r)", "cache.update(layer, c_kv, k_r)"),),
        "up-projects the new tokens' latents only",
    ),
    Mutant(
        "square mask with a cache",
        "MultiHeadLatentAttention",
        (("causal_mask(T, T_k, device=x.device)", "causal_mask(T, device=x.device)"),),
        "the (T, T) mask of the new tokens only",
    ),
    Mutant(
        "masked scores filled with -1e9",
        "attend_with_cache",
        (
            (
                "heads, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)",
                "scores = q @ repeat_kv(k, n_rep).transpose(-2, -1) / q.shape[-1] ** 0.5\n"
                "    heads = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1) @ repeat_kv(v, n_rep)",
            ),
        ),
        "attention written out with a -1e9 fill, which overflows float16",
    ),
    Mutant(
        "cache mask on the CPU",
        "attend_with_cache",
        (("causal_mask(T_q, T_k, device=q.device)", "causal_mask(T_q, T_k)"),),
        "the causal mask is made on the default device: fails on a GPU",
    ),
    Mutant(
        "latent mask on the CPU",
        "MultiHeadLatentAttention",
        (("causal_mask(T, T_k, device=x.device)", "causal_mask(T, T_k)"),),
        "the causal mask is made on the default device: fails on a GPU",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "repeat_interleave",
        "repeat_kv",
        (("x = x[:, :, None].expand(B, H_kv, n_rep, T, d)", "return x.repeat_interleave(n_rep, dim=1)"),),
        "Tensor.repeat_interleave (a copy) instead of expand and reshape",
    ),
    Alternative(
        "no shortcut for n_rep = 1",
        "repeat_kv",
        (("if n_rep == 1:", "if False:"),),
        "always expands (a view of the same values when n_rep is 1)",
    ),
    Alternative(
        "repeat_interleave in the attention",
        "attend_with_cache",
        (
            (
                "repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
                "k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)",
            ),
        ),
        "repeats the key/value heads inline",
    ),
    Alternative(
        "mask by tril",
        "attend_with_cache",
        (
            (
                "causal_mask(T_q, T_k, device=q.device)",
                "torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril(diagonal=T_k - T_q)",
            ),
        ),
        "a bottom-right aligned mask from tril",
    ),
    Alternative(
        "rotary key repeated",
        "MultiHeadLatentAttention",
        (("k_r.expand(-1, self.n_heads, -1, -1)", "k_r.repeat(1, self.n_heads, 1, 1)"),),
        "Tensor.repeat (a copy) instead of expand",
    ),
    Alternative(
        "squeeze instead of indexing",
        "MultiHeadLatentAttention",
        (("c_kv[:, 0]", "c_kv.squeeze(1)"),),
        "drops the head axis of the latent with squeeze",
    ),
]


MUTANTS += [
    Mutant(
        "kv heads repeated along the batch",
        "repeat_kv",
        (("x = x[:, :, None].expand(B, H_kv, n_rep, T, d)", "x = x.repeat_interleave(n_rep, dim=0)"),),
        "repeat_interleave on dim 0, then reshaped: heads mixed with other sequences",
    ),
    Mutant(
        "layer ignored by the cache",
        "attend_with_cache",
        (("cache.update(layer, k, v)", "cache.update(0, k, v)"),),
        "every layer appends to layer 0's cache",
    ),
    Mutant(
        "square mask of the new tokens",
        "attend_with_cache",
        (("causal_mask(T_q, T_k, device=q.device)", "causal_mask(T_q, device=q.device)"),),
        "a (T_q, T_q) mask: right for a prefill and a single decode step, wrong for a chunk after the cache",
    ),
    Mutant(
        "RoPE base hard-coded",
        "MultiHeadLatentAttention",
        (("self.d_rope, self.rope_theta)", "self.d_rope, 10000.0)"),),
        "rotates with the default base whatever rope_theta says",
    ),
    Mutant(
        "latent cached in layer 0",
        "MultiHeadLatentAttention",
        (("cache.update(layer, c_kv, k_r)", "cache.update(0, c_kv, k_r)"),),
        "every layer's latents go to layer 0's slot",
    ),
    Mutant(
        "scaled by the content width only",
        "MultiHeadLatentAttention",
        (
            (
                "heads, _ = scaled_dot_product_attention(q, k, v, mask)",
                "scores = q @ k.transpose(-2, -1) / self.d_head**0.5\n"
                "        heads = torch.softmax(scores.masked_fill(~mask, float('-inf')), dim=-1) @ v",
            ),
        ),
        "1/sqrt(d_head) instead of 1/sqrt(d_head + d_rope)",
    ),
]

_MLA_INIT = head("ch08_kv_cache", "MultiHeadLatentAttention")  # the stub's given text, as the release notebook has it


REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "torch.repeat_interleave",
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            if x.ndim != 4:
                raise ValueError("repeat_kv expects (B, H_kv, T, d)")
            if n_rep < 1:
                raise ValueError("n_rep must be >= 1")
            return torch.repeat_interleave(x, repeats=n_rep, dim=1)
        """,
        "the function the instructions name, on dim 1",
    ),
    Rewrite(
        "one slice per key/value head",
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            if x.ndim != 4:
                raise ValueError("repeat_kv expects (B, H_kv, T, d)")
            if n_rep < 1:
                raise ValueError("n_rep must be >= 1")
            groups = [x[:, h : h + 1].expand(-1, n_rep, -1, -1) for h in range(x.shape[1])]
            return torch.cat(groups, dim=1)
        """,
        "a loop over the key/value heads, each expanded to its group, then concatenated",
    ),
    Rewrite(
        "index_select by integer division",
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            if x.ndim != 4:
                raise ValueError("repeat_kv expects (B, H_kv, T, d)")
            if n_rep < 1:
                raise ValueError("n_rep must be >= 1")
            source = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep  # output head i is kv head i // n_rep
            return x.index_select(1, source)
        """,
        "head i taken from head i // n_rep with index_select (indices on x's device)",
    ),
    Rewrite(
        "unsqueeze, repeat, flatten",
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            if x.ndim != 4 or n_rep < 1:
                raise ValueError("repeat_kv expects (B, H_kv, T, d) and n_rep >= 1")
            return x.unsqueeze(2).repeat(1, 1, n_rep, 1, 1).flatten(1, 2)
        """,
        "a new axis after the heads, Tensor.repeat on it, flatten into the head axis",
    ),
    Rewrite(
        "causal_mask(...).to(q.device)",
        "attend_with_cache",
        """
        def attend_with_cache(q, k, v, cache, layer):
            k_all, v_all = cache.update(layer, k, v)
            T_q, T_k = q.shape[2], k_all.shape[2]
            n_rep = q.shape[1] // k_all.shape[1]
            mask = causal_mask(T_q, T_k).to(q.device)
            out, _ = scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), mask)
            return out
        """,
        "the mask made on the default device and moved to the queries' device",
    ),
    Rewrite(
        "attention written out, -inf fill",
        "attend_with_cache",
        """
        def attend_with_cache(q, k, v, cache, layer):
            keys, values = cache.update(layer, k, v)
            group = q.shape[1] // keys.shape[1]
            keys = keys.repeat_interleave(group, dim=1)
            values = values.repeat_interleave(group, dim=1)
            T_q, T_k = q.shape[-2], keys.shape[-2]
            scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / q.shape[-1] ** 0.5
            allowed = causal_mask(T_q, T_k, device=q.device)
            scores = scores.masked_fill(~allowed, float("-inf"))  # each query sees at least key 0
            return torch.softmax(scores, dim=-1) @ values
        """,
        "einsum scores, a -inf fill and softmax by hand; repeat_interleave for the groups",
    ),
    Rewrite(
        "grouped queries, no repeated keys",
        "attend_with_cache",
        """
        def attend_with_cache(q, k, v, cache, layer):
            import math

            k, v = cache.update(layer, k, v)
            B, H, T_q, d = q.shape
            H_kv, T_k = k.shape[1], k.shape[2]
            qg = q.reshape(B, H_kv, H // H_kv, T_q, d)  # query heads j*g ... j*g + g - 1 form group j
            scores = qg @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)  # (B, H_kv, g, T_q, T_k)
            query_pos = torch.arange(T_k - T_q, T_k, device=q.device)[:, None]
            key_pos = torch.arange(T_k, device=q.device)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, torch.finfo(scores.dtype).min)
            out = torch.softmax(scores, dim=-1) @ v[:, :, None]  # (B, H_kv, g, T_q, d_v)
            return out.reshape(B, H, T_q, v.shape[-1])
        """,
        "the query heads grouped by key/value head and broadcast against it, the mask from positions",
    ),
    Rewrite(
        "no mask for a single new token",
        "attend_with_cache",
        """
        def attend_with_cache(q, k, v, cache, layer):
            k, v = cache.update(layer, k, v)
            n_rep = q.size(1) // k.size(1)
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
            if q.size(2) == 1:  # one new token sees every key: no mask needed
                return scaled_dot_product_attention(q, k, v)[0]
            mask = causal_mask(q.size(2), k.size(2), device=q.device)
            return scaled_dot_product_attention(q, k, v, mask)[0]
        """,
        "the decode step without a mask, as the docstring allows",
    ),
    Rewrite(
        "manual heads, einsum, .to(x.device) mask",
        "MultiHeadLatentAttention",
        _MLA_INIT
        + """
        B, T_k = x.shape[0], T_past + T
        c_kv = self.kv_norm(self.W_dkv(x)).unsqueeze(1)  # (B, 1, T, d_c)
        k_r = apply_rope(self.W_kr(x).unsqueeze(1), angles, interleaved=True)  # (B, 1, T, d_rope)
        c_kv, k_r = cache.update(layer, c_kv, k_r)
        latent = c_kv.squeeze(1)  # (B, T_k, d_c)
        k_c = self.W_uk(latent).view(B, T_k, self.n_heads, self.d_head).transpose(1, 2)
        v = self.W_uv(latent).view(B, T_k, self.n_heads, self.d_v).transpose(1, 2)
        k = torch.cat([k_c, k_r.repeat(1, self.n_heads, 1, 1)], dim=-1)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (self.d_head + self.d_rope) ** 0.5
        mask = causal_mask(T, T_k).to(x.device)
        scores = scores.masked_fill(~mask, float("-inf"))
        heads = torch.softmax(scores, dim=-1) @ v
        return self.W_o(merge_heads(heads)), None
""",
        "heads split by view and transpose, attention written out with einsum, the mask moved with .to",
    ),
    Rewrite(
        "absorbed up-projections",
        "MultiHeadLatentAttention",
        "import math\n"
        + _MLA_INIT
        + """
        c_kv = self.kv_norm(self.W_dkv(x))[:, None]
        k_r = apply_rope(self.W_kr(x)[:, None], angles, interleaved=True)
        c_kv, k_r = cache.update(layer, c_kv, k_r)  # (B, 1, T_k, d_c), (B, 1, T_k, d_rope)
        H, d_head = self.n_heads, self.d_head
        W_uk = self.W_uk.weight.view(H, d_head, self.d_c)  # k_c of head h = c W_uk[h]^T
        W_uv = self.W_uv.weight.view(H, self.d_v, self.d_c)
        q_c, q_r = q[..., :d_head], q[..., d_head:]
        q_lat = torch.einsum("bhtd,hdc->bhtc", q_c, W_uk)  # q_c W_uk[h]: the query in latent space
        scores = (q_lat @ c_kv.transpose(-1, -2) + q_r @ k_r.transpose(-1, -2)) / math.sqrt(d_head + self.d_rope)
        T_k = c_kv.shape[-2]
        allowed = torch.arange(T_k, device=x.device)[None, :] <= torch.arange(T_k - T, T_k, device=x.device)[:, None]
        weights = torch.softmax(scores.masked_fill(~allowed, torch.finfo(scores.dtype).min), dim=-1)
        heads = torch.einsum("bhtc,hvc->bhtv", weights @ c_kv, W_uv)  # (P c) W_uv[h]^T = P (c W_uv[h]^T)
        return self.W_o(merge_heads(heads)), None
""",
        "DeepSeek-V2's absorbed form: W_uk folded into the query, W_uv applied after the weighted sum of latents",
    ),
    Rewrite(
        "rotary key expanded, mask from the cache length",
        "MultiHeadLatentAttention",
        _MLA_INIT
        + """
        latent_new = self.kv_norm(self.W_dkv(x)).unsqueeze(1)
        rot_new = apply_rope(self.W_kr(x).unsqueeze(1), angles, interleaved=True)
        latent, rot = cache.update(layer, latent_new, rot_new)
        B, _, T_k, _ = latent.shape
        k = torch.cat(
            [split_heads(self.W_uk(latent[:, 0]), self.n_heads), rot.expand(B, self.n_heads, T_k, self.d_rope)],
            dim=-1,
        )
        v = split_heads(self.W_uv(latent[:, 0]), self.n_heads)
        query_pos = torch.arange(T_past, T_past + T, device=x.device)
        key_pos = torch.arange(T_k, device=x.device)
        heads = scaled_dot_product_attention(q, k, v, key_pos[None, :] <= query_pos[:, None])[0]
        return self.W_o(merge_heads(heads)), None
""",
        "keys with the rotary part expanded to (B, H, T_k, d_rope), the causal mask from T_past",
    ),
]
