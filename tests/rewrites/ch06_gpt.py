"""Answers to the exercises of ch06_gpt written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch06_gpt as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "Block: named steps, output unpacked",
        "Block",
        _BLOCK_INIT
        + """
    def forward(self, x):
        if x.ndim != 3:
            raise ValueError(f"x must be (B, T, C), got {tuple(x.shape)}")
        h = self.ln_1(x)
        attended, _weights = self.attn(h, use_sdpa=self.use_sdpa, is_causal=True)
        x = attended + x
        h = self.ln_2(x)
        return x + self.mlp(h)
""",
        "each sub-layer's input named, the attention's (output, weights) unpacked, the residual added after",
    ),
    Rewrite(
        "Block: causal mask registered as a buffer",
        "Block",
        _BLOCK_INIT
        + """
        n = config.context_length
        self.register_buffer("causal", torch.tril(torch.ones(n, n, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        if x.ndim != 3:
            raise ValueError(f"x must be (B, T, C), got {tuple(x.shape)}")
        T = x.size(1)
        mask = self.causal[:T, :T]  # moves with the module: on the inputs' device
        x = x + self.attn(self.ln_1(x), mask=mask, use_sdpa=self.use_sdpa)[0]
        x = x + self.mlp(self.ln_2(x))
        return x
""",
        "a lower-triangular (context_length, context_length) bool buffer, sliced to T and passed as the mask",
    ),
    Rewrite(
        "Block: sub-layers in a loop, mask from x.new_ones",
        "Block",
        _BLOCK_INIT
        + """
    def forward(self, x):
        if x.ndim != 3:
            raise ValueError(f"x must be (B, T, C), got {tuple(x.shape)}")
        T = x.shape[1]
        allowed = x.new_ones((T, T), dtype=torch.bool).tril()
        sublayers = (
            (self.ln_1, lambda h: self.attn(h, allowed, use_sdpa=self.use_sdpa)[0]),
            (self.ln_2, self.mlp),
        )
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x))
        return x
""",
        "the two residual steps as one loop over (norm, sub-layer) pairs; the causal mask made with x.new_ones",
    ),
    Rewrite(
        "GPT: position ids from a buffer, blocks by index",
        "GPT",
        _GPT_INIT_HEAD
        + """
        self.lm_head.weight = self.wte.weight  # weight tying: one Parameter
        self.register_buffer("positions", torch.arange(config.context_length), persistent=False)
"""
        + _GPT_INIT_TAIL
        + """
    def forward(self, idx, position_ids=None):
        if idx.ndim != 2:
            raise ValueError(f"idx must be (B, T) token ids, got shape {tuple(idx.shape)}")
        B, T = idx.shape
        if T > self.context_length:
            raise ValueError(f"sequence of length {T} is longer than context_length={self.context_length}")
        if position_ids is None:
            position_ids = self.positions[:T]
        tok = self.wte(idx)
        pos = self.wpe(position_ids)
        x = self.drop(tok + pos)
        for i in range(len(self.h)):
            x = self.h[i](x)
        return self.lm_head(self.ln_f(x))
""",
        "default position ids sliced from a registered buffer (it follows the module's device), blocks by index",
    ),
    Rewrite(
        "GPT: tables indexed, head as a matmul with the embedding",
        "GPT",
        _GPT_INIT_HEAD
        + """
        self.wte.weight = self.lm_head.weight  # tied the other way round: still one Parameter
"""
        + _GPT_INIT_TAIL
        + """
    def forward(self, idx, position_ids=None):
        if idx.ndim != 2:
            raise ValueError(f"idx must be (B, T) token ids, got shape {tuple(idx.shape)}")
        T = idx.size(1)
        if T > self.context_length:
            raise ValueError(f"sequence of length {T} is longer than context_length={self.context_length}")
        if position_ids is None:
            position_ids = torch.arange(0, T, dtype=torch.long, device=idx.device).unsqueeze(0)  # (1, T)
        h = self.wte.weight[idx] + self.wpe.weight[position_ids]
        h = self.drop(h)
        for block in self.h:
            h = block(h)
        h = self.ln_f(h)
        return h @ self.wte.weight.t()  # the head's weight is the embedding matrix
""",
        "embedding tables indexed directly, (1, T) default positions, logits as h @ wte.weight.T",
    ),
    Rewrite(
        "GPT: functional pieces, blocks folded",
        "GPT",
        _GPT_INIT_HEAD
        + """
        self.lm_head.weight = self.wte.weight
"""
        + _GPT_INIT_TAIL
        + """
    def forward(self, idx, position_ids=None):
        import functools

        if idx.ndim != 2:
            raise ValueError(f"idx must be (B, T) token ids, got shape {tuple(idx.shape)}")
        B, T = idx.shape
        if T > self.context_length:
            raise ValueError(f"sequence of length {T} is longer than context_length={self.context_length}")
        if position_ids is None:
            position_ids = torch.ones_like(idx).cumsum(dim=1) - 1  # (B, T): 0 ... T-1 in every row
        x = F.embedding(idx, self.wte.weight) + F.embedding(position_ids, self.wpe.weight)
        x = F.dropout(x, self.drop.p, training=self.training)
        x = functools.reduce(lambda h, block: block(h), self.h, x)
        x = F.layer_norm(x, (x.size(-1),), self.ln_f.weight, self.ln_f.bias, self.ln_f.eps)
        return F.linear(x, self.lm_head.weight)
""",
        "F.embedding, (B, T) positions by cumsum, F.dropout with the module's mode, functools.reduce over the "
        "blocks, F.layer_norm with ln_f's eps, F.linear with the tied weight",
    ),
    Rewrite(
        "generate: default positions, top-k by scatter, nucleus in probability space",
        "generate",
        _GENERATE_HEAD
        + """
    L = model.context_length
    for _ in range(max_new_tokens):
        window = idx[:, max(0, idx.size(1) - L) :]
        logits = model(window)[:, -1, :].float()  # the model's default positions are 0 ... T-1
        if temperature == 0:
            nxt = torch.argmax(logits, dim=-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None:
                k = min(top_k, logits.size(-1))
                values, indices = torch.topk(logits, k, dim=-1)
                logits = torch.full_like(logits, float("-inf")).scatter(-1, indices, values)
            probs = F.softmax(logits, dim=-1)
            if top_p is not None:
                sorted_probs, order = probs.sort(dim=-1, descending=True)
                before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the more likely tokens
                keep_sorted = before < top_p
                keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
                probs = probs * keep
                probs = probs / probs.sum(dim=-1, keepdim=True)
            nxt = torch.multinomial(probs, 1, generator=generator)
        idx = torch.cat((idx, nxt), dim=1)
    return idx
""",
        "relies on the model's documented default position ids; crops with max(0, T - L); top-k by scattering "
        "the kept values into -inf; top-p applied to the probabilities and renormalised",
    ),
    Rewrite(
        "generate: top-k by sorting, nucleus unsorted with gather",
        "generate",
        _GENERATE_HEAD
        + """
    seq = idx
    for step in range(max_new_tokens):
        ctx = seq if seq.shape[1] <= model.context_length else seq[:, seq.shape[1] - model.context_length :]
        pos = torch.arange(ctx.shape[1], device=ctx.device)
        last = model(ctx, position_ids=pos)[:, -1].float()
        if temperature == 0.0:
            token = last.max(dim=-1).indices.unsqueeze(-1)
        else:
            scaled = last / temperature
            if top_k is not None and top_k < scaled.shape[-1]:
                kth = scaled.sort(dim=-1, descending=True).values[:, top_k - 1 : top_k]
                scaled = torch.where(scaled >= kth, scaled, torch.full_like(scaled, -float("inf")))
            if top_p is not None:
                sorted_scores, order = torch.sort(scaled, dim=-1, descending=True)
                p_sorted = torch.softmax(sorted_scores, dim=-1)
                exclusive = torch.cat([torch.zeros_like(p_sorted[:, :1]), p_sorted.cumsum(-1)[:, :-1]], dim=-1)
                remove_sorted = exclusive >= top_p
                remove = torch.gather(remove_sorted, -1, order.argsort(dim=-1))
                scaled = scaled.masked_fill(remove, -float("inf"))
            token = torch.multinomial(torch.softmax(scaled, dim=-1), num_samples=1, generator=generator)
        seq = torch.cat([seq, token], dim=-1)
    return seq
""",
        "crops only when needed, positions with device=ctx.device as a keyword, top-k threshold from a sort, "
        "an exclusive cumulative sum, the mask put back in vocabulary order with gather",
    ),
    Rewrite(
        "generate: tokens collected in a list, probabilities filtered",
        "generate",
        _GENERATE_HEAD
        + """
    generated = []
    context = idx
    for _ in range(max_new_tokens):
        context = context[:, -model.context_length :]
        T = context.size(1)
        logits = model(context, torch.arange(T, device=idx.device))[:, T - 1].float()
        if temperature == 0:
            new = logits.argmax(-1)[:, None]
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            if top_k is not None:
                kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[:, -1:]
                probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
                probs = probs / probs.sum(-1, keepdim=True)
            if top_p is not None:
                ranked, order = probs.sort(-1, descending=True)
                outside = ranked.cumsum(-1) - ranked >= top_p
                ranked = ranked.masked_fill(outside, 0.0)
                probs = torch.zeros_like(probs).scatter_(-1, order, ranked)
            new = torch.multinomial(probs, 1, generator=generator)
        generated.append(new)
        context = torch.cat([context, new], dim=1)
    return torch.cat([idx, *generated], dim=1)
""",
        "softmax first, then top-k and top-p as zeroed probabilities (renormalised); new tokens collected in a "
        "list and joined to the prompt at the end",
    ),
]
