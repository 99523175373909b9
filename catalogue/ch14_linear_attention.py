"""The catalogue of ch14_linear_attention's checks (see catalogue/__init__.py): bugs each caught by some check, correct
answers each given full marks."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

_CH = "ch14_linear_attention"

# The bug catalogue: the mistakes a recurrence, a chunk and a delta rule invite, each caught by some check
# (tests/test_checks.py). The first is the bug of the sample submissions: it costs exercise 1's points only.
MUTANTS = [
    Mutant(
        "normaliser dropped",
        "linear_attention_recurrent",
        (("        if normalize:\n            o_t = o_t /", "        if False:\n            o_t = o_t /"),),
        "normalize=True still returns the unnormalised sum Sᵀφ(q_t)",
    ),
    Mutant(
        "read before write",
        "linear_attention_recurrent",
        (
            (
                "        S = S + phi_k[:, :, t, :, None] * v[:, :, t, None, :]  # (B, H, d_k, d_v) += φ(k_t) v_tᵀ\n"
                "        z = z + phi_k[:, :, t]  # (B, H, d_k)\n"
                "        o_t = (phi_q[:, :, t, :, None] * S).sum(-2)  # (B, H, d_v): Sᵀ φ(q_t)\n"
                "        if normalize:\n"
                "            o_t = o_t / (phi_q[:, :, t] * z).sum(-1, keepdim=True)  # ÷ zᵀ φ(q_t), (B, H, 1)\n",
                "        o_t = (phi_q[:, :, t, :, None] * S).sum(-2)\n"
                "        if normalize:\n"
                "            o_t = o_t / (phi_q[:, :, t] * z).sum(-1, keepdim=True)\n"
                "        S = S + phi_k[:, :, t, :, None] * v[:, :, t, None, :]\n"
                "        z = z + phi_k[:, :, t]\n",
            ),
        ),
        "the output of token t is read from the state before token t writes (strictly causal: 0/0 at t = 0)",
    ),
    Mutant(
        "feature map not applied to the keys",
        "linear_attention_recurrent",
        (
            (
                "    phi_q, phi_k = _features(q, k, feature_map)  # (B, H, T, d_k)\n    if state is None:\n        S = q.new_zeros",
                "    phi_q, phi_k = _features(q, k, feature_map)[0], k\n    if state is None:\n        S = q.new_zeros",
            ),
        ),
        "φ applied to the queries only",
    ),
    Mutant(
        "given state ignored",
        "linear_attention_recurrent",
        (
            (
                "    else:\n        S, z = state\n    outputs = []\n    for t in range(T):",
                "    else:\n        S, z = q.new_zeros(B, H, d_k, d_v), q.new_zeros(B, H, d_k)\n    outputs = []\n    for t in range(T):",
            ),
        ),
        "every call starts from zeros, even when the tokens before these left a state",
    ),
    Mutant(
        "causal mask missing inside a chunk",
        "linear_attention_chunkwise",
        (("A = (Qc @ Kc.transpose(-1, -2)).masked_fill(~causal, 0)", "A = Qc @ Kc.transpose(-1, -2)"),),
        "a token sees the later tokens of its own chunk",
    ),
    Mutant(
        "diagonal masked inside a chunk",
        "linear_attention_chunkwise",
        (
            (
                "causal = torch.ones(e - s, e - s, dtype=torch.bool, device=q.device).tril()",
                "causal = torch.ones(e - s, e - s, dtype=torch.bool, device=q.device).tril(-1)",
            ),
        ),
        "the chunk's mask leaves the token itself out",
    ),
    Mutant(
        "state updated before the chunk's output",
        "linear_attention_chunkwise",
        (
            (
                "        o = Qc @ S + A @ Vc  # (B, H, C, d_v): the chunks before, then this one\n",
                "        S = S + Kc.transpose(-1, -2) @ Vc\n        z = z + Kc.sum(-2)\n        o = Qc @ S + A @ Vc\n",
            ),
            (
                "        S = S + Kc.transpose(-1, -2) @ Vc  # (B, H, d_k, d_v)\n        z = z + Kc.sum(-2)  # (B, H, d_k)\n",
                "",
            ),
        ),
        "the chunk reads a state that already holds it: each chunk counted twice",
    ),
    Mutant(
        "chunk boundary off by one",
        "linear_attention_chunkwise",
        (("e = min(s + chunk_size, T)", "e = min(s + chunk_size - 1, T)"),),
        "each chunk stops one token short: the last token of every chunk is skipped",
    ),
    Mutant(
        "last chunk assumed full",
        "linear_attention_chunkwise",
        (("e = min(s + chunk_size, T)", "e = s + chunk_size"),),
        "a chunk size that does not divide T breaks the last chunk's mask",
    ),
    Mutant(
        "normaliser without the chunk itself",
        "linear_attention_chunkwise",
        (("(Qc @ z.unsqueeze(-1)).squeeze(-1) + A.sum(-1)", "(Qc @ z.unsqueeze(-1)).squeeze(-1)"),),
        "the denominator counts the earlier chunks only",
    ),
    Mutant(
        "state shared across the batch",
        "linear_attention_chunkwise",
        (("S = S + Kc.transpose(-1, -2) @ Vc", "S = S + (Kc.transpose(-1, -2) @ Vc).sum(0, keepdim=True)"),),
        "the sequences of a batch write into one state",
    ),
    Mutant(
        "the whole sequence as one chunk",
        "linear_attention_chunkwise",
        (
            (
                "    for s in range(0, T, chunk_size):\n        e = min(s + chunk_size, T)  # the last chunk may be shorter",
                "    for s in range(0, T, max(T, 1)):\n        e = T",
            ),
        ),
        "the parallel T × T form returned as the chunkwise one",
    ),
    Mutant(
        "β on the wrong side",
        "gated_delta_rule_recurrent",
        (("(beta[:, :, t, None] * (v_t - v_old))", "(beta[:, :, t, None] * v_t - v_old)"),),
        "β scales the new value but not the removal of the old one",
    ),
    Mutant(
        "no delta",
        "gated_delta_rule_recurrent",
        (("(beta[:, :, t, None] * (v_t - v_old))", "(beta[:, :, t, None] * v_t)"),),
        "plain (gated) linear attention: the old value is never removed",
    ),
    Mutant(
        "decay applied twice",
        "gated_delta_rule_recurrent",
        (("S = torch.exp(g[:, :, t])[:, :, None, None] * S", "S = torch.exp(2 * g[:, :, t])[:, :, None, None] * S"),),
        "α_t² instead of α_t",
    ),
    Mutant(
        "decay after the write",
        "gated_delta_rule_recurrent",
        (
            (
                "        if g is not None:\n            S = torch.exp(g[:, :, t])[:, :, None, None] * S  # forget: α_t S\n",
                "",
            ),
            (
                "  # += β k (v - v_old)ᵀ\n",
                "\n        if g is not None:\n            S = torch.exp(g[:, :, t])[:, :, None, None] * S\n",
            ),
        ),
        "the token's own write is decayed too",
    ),
    Mutant(
        "output before the update",
        "gated_delta_rule_recurrent",
        (
            (
                "        v_old = (S * k_t[..., None]).sum(-2)",
                "        outputs.append((S * q[:, :, t, :, None]).sum(-2))\n        v_old = (S * k_t[..., None]).sum(-2)",
            ),
            ("        outputs.append((S * q[:, :, t, :, None]).sum(-2))  # (B, H, d_v): Sᵀ q_t\n", ""),
        ),
        "o_t read from the state before token t writes",
    ),
    Mutant(
        "g used as α",
        "gated_delta_rule_recurrent",
        (("S = torch.exp(g[:, :, t])[:, :, None, None] * S", "S = g[:, :, t][:, :, None, None] * S"),),
        "the log decay taken for the decay itself",
    ),
    Mutant(
        "keys normalised inside",
        "gated_delta_rule_recurrent",
        (
            (
                "k_t, v_t = k[:, :, t], v[:, :, t]",
                "k_t, v_t = torch.nn.functional.normalize(k[:, :, t], dim=-1), v[:, :, t]",
            ),
        ),
        "the function normalises the keys although the layer already does",
    ),
    Mutant(
        "state grows with T",
        "decode_state_bytes",
        (
            (
                "state = n_linear * n_linear_heads * d_k * d_v * bytes_per_element",
                "state = n_linear * n_linear_heads * d_k * d_v * bytes_per_element * T",
            ),
        ),
        "the linear layers' state counted per token",
    ),
    Mutant(
        "softmax layers rounded up",
        "decode_state_bytes",
        (("n_layers // full_attention_interval", "-(-n_layers // full_attention_interval)"),),
        "a last, incomplete group counted as holding a softmax layer",
    ),
    Mutant(
        "state in elements",
        "decode_state_bytes",
        (
            (
                "state = n_linear * n_linear_heads * d_k * d_v * bytes_per_element",
                "state = n_linear * n_linear_heads * d_k * d_v",
            ),
        ),
        "bytes_per_element forgotten on the states",
    ),
    Mutant(
        "every layer cached",
        "decode_state_bytes",
        (("kv = kv_cache_bytes(n_full, n_kv_heads", "kv = kv_cache_bytes(n_layers, n_kv_heads"),),
        "the KV cache counted for the linear layers too",
    ),
]

# Valid answers written differently from the reference, each getting full marks (tests/test_checks.py).
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "einsum outer product",
        "linear_attention_recurrent",
        (
            (
                "S = S + phi_k[:, :, t, :, None] * v[:, :, t, None, :]",
                "S = S + torch.einsum('bhd,bhv->bhdv', phi_k[:, :, t], v[:, :, t])",
            ),
            ("o_t = (phi_q[:, :, t, :, None] * S).sum(-2)", "o_t = torch.einsum('bhd,bhdv->bhv', phi_q[:, :, t], S)"),
        ),
        "the outer product and the read written as einsums",
    ),
    Alternative(
        "torch.where for the chunk's mask",
        "linear_attention_chunkwise",
        (
            (
                "A = (Qc @ Kc.transpose(-1, -2)).masked_fill(~causal, 0)",
                "A = torch.where(causal, Qc @ Kc.transpose(-1, -2), 0.0)",
            ),
        ),
        "the mask applied with torch.where",
    ),
    Alternative(
        "tril of the chunk's scores",
        "linear_attention_chunkwise",
        (("A = (Qc @ Kc.transpose(-1, -2)).masked_fill(~causal, 0)", "A = torch.tril(Qc @ Kc.transpose(-1, -2))"),),
        "torch.tril instead of a boolean mask",
    ),
    Alternative(
        "decay as a method call",
        "gated_delta_rule_recurrent",
        (("S = torch.exp(g[:, :, t])[:, :, None, None] * S", "S = S * g[:, :, t, None, None].exp()"),),
        "α applied by broadcasting on the right",
    ),
    Alternative(
        "the delta update as matrices",
        "gated_delta_rule_recurrent",
        (
            (
                "v_old = (S * k_t[..., None]).sum(-2)",
                "v_old = (S.transpose(-1, -2) @ k_t[..., None]).squeeze(-1)",
            ),
        ),
        "Sᵀk with a matrix product",
    ),
    Alternative(
        "KV bytes written out",
        "decode_state_bytes",
        (
            (
                "kv = kv_cache_bytes(n_full, n_kv_heads, d_head, T, bytes_per_element) if n_full else 0",
                "kv = 2 * n_full * n_kv_heads * d_head * T * bytes_per_element",
            ),
        ),
        "chapter 8's formula instead of its function",
    ),
]

_REC = head(_CH, "linear_attention_recurrent")
_CHUNK = head(_CH, "linear_attention_chunkwise")
_DELTA = head(_CH, "gated_delta_rule_recurrent")
_BYTES = head(_CH, "decode_state_bytes")

# Whole answers written from the page and the notebook, not from the reference (tests/test_alternatives_graded.py).
REWRITES: list[Rewrite] = [
    Rewrite(
        "running sums with cumsum",
        "linear_attention_recurrent",
        _REC
        + """    fq, fk = (q, k) if feature_map is None else (feature_map(q), feature_map(k))
    S_all = torch.einsum("bhtd,bhtv->bhtdv", fk, v).cumsum(2)
    z_all = fk.cumsum(2)
    if state is not None:
        S_all = S_all + state[0].unsqueeze(2)
        z_all = z_all + state[1].unsqueeze(2)
    o = torch.einsum("bhtd,bhtdv->bhtv", fq, S_all)
    if normalize:
        o = o / torch.einsum("bhtd,bhtd->bht", fq, z_all).unsqueeze(-1)
    if T == 0:
        S0 = q.new_zeros(B, H, d_k, d_v) if state is None else state[0]
        z0 = q.new_zeros(B, H, d_k) if state is None else state[1]
        return o, (S0, z0)
    return o, (S_all[:, :, -1], z_all[:, :, -1])
""",
        "every prefix state at once by cumulative sums (memory T · d_k · d_v, fine for a check)",
    ),
    Rewrite(
        "a loop with matrix products",
        "linear_attention_recurrent",
        _REC
        + """    if feature_map is not None:
        q, k = feature_map(q), feature_map(k)
    S = torch.zeros(B, H, d_k, d_v, dtype=q.dtype, device=q.device) if state is None else state[0].clone()
    z = torch.zeros(B, H, d_k, dtype=q.dtype, device=q.device) if state is None else state[1].clone()
    o = torch.empty(B, H, T, d_v, dtype=q.dtype, device=q.device)
    for t in range(T):
        S += k[:, :, t].unsqueeze(-1) @ v[:, :, t].unsqueeze(-2)
        z += k[:, :, t]
        num = (q[:, :, t].unsqueeze(-2) @ S).squeeze(-2)
        o[:, :, t] = num / (q[:, :, t] * z).sum(-1, keepdim=True) if normalize else num
    return o, (S, z)
""",
        "in-place updates of cloned states, outer products as matrix products, a preallocated output",
    ),
    Rewrite(
        "the parallel form and the sums",
        "linear_attention_recurrent",
        _REC
        + """    fq, fk = _features(q, k, feature_map)
    S = fk.transpose(-1, -2) @ v
    z = fk.sum(2)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    A = (fq @ fk.transpose(-1, -2)) * mask
    num = A @ v
    den = A.sum(-1)
    if state is not None:
        num = num + fq @ state[0]
        den = den + (fq * state[1].unsqueeze(2)).sum(-1)
        S, z = S + state[0], z + state[1]
    o = num / den.unsqueeze(-1) if normalize else num
    return o, (S, z)
""",
        "the masked T × T form for the outputs and one product for the final state",
    ),
    Rewrite(
        "chunks by index lists",
        "linear_attention_chunkwise",
        _CHUNK
        + """    fq, fk = _features(q, k, feature_map)
    S = q.new_zeros(B, H, d_k, d_v) if state is None else state[0]
    z = q.new_zeros(B, H, d_k) if state is None else state[1]
    pieces = []
    for idx in torch.arange(T, device=q.device).split(chunk_size):
        Qc, Kc, Vc = fq[:, :, idx], fk[:, :, idx], v[:, :, idx]
        A = torch.tril(torch.einsum("bhid,bhjd->bhij", Qc, Kc))
        num = torch.einsum("bhid,bhdv->bhiv", Qc, S) + A @ Vc
        if normalize:
            num = num / (torch.einsum("bhid,bhd->bhi", Qc, z) + A.sum(-1))[..., None]
        pieces.append(num)
        S = S + torch.einsum("bhjd,bhjv->bhdv", Kc, Vc)
        z = z + Kc.sum(2)
    o = torch.cat(pieces, 2) if pieces else v.new_zeros(B, H, 0, d_v)
    return o, (S, z)
""",
        "torch.split of the positions into chunks, einsums throughout",
    ),
    Rewrite(
        "padding to whole chunks",
        "linear_attention_chunkwise",
        _CHUNK
        + """    fq, fk = _features(q, k, feature_map)
    n_chunks = -(-T // chunk_size)
    pad = n_chunks * chunk_size - T
    fq, fk, vp = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (fq, fk, v))  # zero keys add nothing
    fq = fq.view(B, H, n_chunks, chunk_size, d_k)
    fk = fk.view(B, H, n_chunks, chunk_size, d_k)
    vp = vp.view(B, H, n_chunks, chunk_size, d_v)
    S = q.new_zeros(B, H, d_k, d_v) if state is None else state[0]
    z = q.new_zeros(B, H, d_k) if state is None else state[1]
    mask = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    out = []
    for c in range(n_chunks):
        A = (fq[:, :, c] @ fk[:, :, c].transpose(-1, -2)).masked_fill(~mask, 0.0)
        num = fq[:, :, c] @ S + A @ vp[:, :, c]
        den = (fq[:, :, c] * z[:, :, None]).sum(-1) + A.sum(-1)
        out.append(num / den[..., None] if normalize else num)
        S = S + fk[:, :, c].transpose(-1, -2) @ vp[:, :, c]
        z = z + fk[:, :, c].sum(-2)
    o = torch.cat(out, 2)[:, :, :T] if out else v.new_zeros(B, H, 0, d_v)
    return o, (S, z)
""",
        "the sequence padded with zero-feature tokens to whole chunks, then cut back",
    ),
    Rewrite(
        "one state per chunk, prefix sums between",
        "linear_attention_chunkwise",
        _CHUNK
        + """    fq, fk = _features(q, k, feature_map)
    S0 = q.new_zeros(B, H, d_k, d_v) if state is None else state[0]
    z0 = q.new_zeros(B, H, d_k) if state is None else state[1]
    starts = list(range(0, T, chunk_size))
    sums_S = [fk[:, :, s : s + chunk_size].transpose(-1, -2) @ v[:, :, s : s + chunk_size] for s in starts]
    sums_z = [fk[:, :, s : s + chunk_size].sum(2) for s in starts]
    out = []
    S, z = S0, z0
    for s, dS, dz in zip(starts, sums_S, sums_z):
        e = min(T, s + chunk_size)
        Qc, Kc, Vc = fq[:, :, s:e], fk[:, :, s:e], v[:, :, s:e]
        tri = torch.ones(e - s, e - s, device=q.device, dtype=torch.bool).tril()
        A = torch.where(tri, Qc @ Kc.mT, torch.zeros((), dtype=q.dtype, device=q.device))
        num = Qc @ S + A @ Vc
        out.append(num / (Qc @ z[..., None] + A.sum(-1, keepdim=True)) if normalize else num)
        S, z = S + dS, z + dz
    o = torch.cat(out, 2) if out else v.new_zeros(B, H, 0, d_v)
    return o, (S, z)
""",
        "each chunk's contribution to the state computed first, the states then chained",
    ),
    Rewrite(
        "explicit I - β k kᵀ",
        "gated_delta_rule_recurrent",
        _DELTA
        + """    eye = torch.eye(d_k, dtype=q.dtype, device=q.device)
    S = torch.zeros(B, H, d_k, d_v, dtype=q.dtype, device=q.device) if state is None else state
    outs = []
    for t in range(T):
        kt = k[:, :, t].unsqueeze(-1)  # (B, H, d_k, 1)
        bt = beta[:, :, t][..., None, None]
        alpha = torch.ones_like(bt) if g is None else torch.exp(g[:, :, t])[..., None, None]
        S = alpha * (eye - bt * kt @ kt.mT) @ S + bt * kt @ v[:, :, t].unsqueeze(-2)
        outs.append((S.mT @ q[:, :, t].unsqueeze(-1)).squeeze(-1))
    o = torch.stack(outs, 2) if outs else v.new_zeros(B, H, 0, d_v)
    return o, S
""",
        "the update as the paper's one line with the identity matrix",
    ),
    Rewrite(
        "in the paper's orientation",
        "gated_delta_rule_recurrent",
        _DELTA
        + """    W = q.new_zeros(B, H, d_v, d_k) if state is None else state.transpose(-1, -2)  # Yang et al.'s S
    o = q.new_zeros(B, H, T, d_v)
    for t in range(T):
        if g is not None:
            W = W * g[:, :, t].exp()[..., None, None]
        kt, vt = k[:, :, t], v[:, :, t]
        err = torch.einsum("bhvk,bhk->bhv", W, kt) - vt  # S k - v
        W = W - beta[:, :, t][..., None, None] * torch.einsum("bhv,bhk->bhvk", err, kt)
        o[:, :, t] = torch.einsum("bhvk,bhk->bhv", W, q[:, :, t])
    return o, W.transpose(-1, -2)
""",
        "S ∈ R^{d_v × d_k} as Yang et al. write it, S ← S - β (S k - v) kᵀ, transposed back at the end",
    ),
    Rewrite(
        "decay vector first",
        "gated_delta_rule_recurrent",
        _DELTA
        + """    alphas = torch.ones_like(beta) if g is None else torch.exp(g)
    S = state.clone() if state is not None else torch.zeros(B, H, d_k, d_v, dtype=v.dtype, device=v.device)
    out = []
    for t in range(T):
        S = S * alphas[:, :, t, None, None]
        kt = k[:, :, t]
        retrieved = torch.einsum("bhkv,bhk->bhv", S, kt)
        S = S + torch.einsum("bhk,bhv->bhkv", kt, beta[:, :, t, None] * (v[:, :, t] - retrieved))
        out.append(torch.einsum("bhkv,bhk->bhv", S, q[:, :, t]))
    return (torch.stack(out, dim=2) if T else v.new_zeros(B, H, 0, d_v)), S
""",
        "all decays exponentiated at once, einsums for the reads and the write",
    ),
    Rewrite(
        "a loop over the layers",
        "decode_state_bytes",
        _BYTES
        + """    total = 0
    for i in range(n_layers):
        if full_attention_interval is not None and (i + 1) % full_attention_interval == 0:
            total += 2 * n_kv_heads * d_head * T * bytes_per_element
        else:
            total += n_linear_heads * d_k * d_v * bytes_per_element
    return total
""",
        "the rule of the instructions applied layer by layer",
    ),
    Rewrite(
        "counts, then chapter 8's function",
        "decode_state_bytes",
        _BYTES
        + """    if full_attention_interval is None:
        full = 0
    else:
        full = len(range(full_attention_interval - 1, n_layers, full_attention_interval))
    linear = n_layers - full
    cache = kv_cache_bytes(full, n_kv_heads, d_head, T, bytes_per_element) if full > 0 else 0
    return int(cache + linear * n_linear_heads * d_k * d_v * bytes_per_element)
""",
        "the softmax layers counted as a range, kv_cache_bytes for them",
    ),
    Rewrite(
        "per-layer lists summed",
        "decode_state_bytes",
        _BYTES
        + """    interval = full_attention_interval
    kinds = ["full" if interval and (i + 1) % interval == 0 else "linear" for i in range(n_layers)]
    per_layer = {
        "full": 2 * n_kv_heads * d_head * T,
        "linear": n_linear_heads * d_k * d_v,
    }
    return sum(per_layer[kind] for kind in kinds) * bytes_per_element
""",
        "Qwen3-Next's layer_types list, then a sum of elements times bytes",
    ),
]
