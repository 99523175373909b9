"""ch06_gpt's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import before, head, pieces

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "post-LN",
        "Block",
        (
            (
                "x = x + self.attn(self.ln_1(x), use_sdpa=self.use_sdpa, is_causal=True)[0]",
                "x = self.ln_1(x + self.attn(x, use_sdpa=self.use_sdpa, is_causal=True)[0])",
            ),
            ("x = x + self.mlp(self.ln_2(x))", "x = self.ln_2(x + self.mlp(x))"),
        ),
        "post-LN (Vaswani et al., BERT) where GPT-2's pre-LN is asked",
    ),
    Mutant("not causal", "Block", (("is_causal=True", "is_causal=False"),), "attention sees the future"),
    Mutant(
        "no residual around the MLP",
        "Block",
        (("x = x + self.mlp(self.ln_2(x))", "x = self.mlp(self.ln_2(x))"),),
        "drops a residual connection",
    ),
    Mutant(
        "lm head not tied",
        "GPT",
        (("self.lm_head.weight = self.wte.weight", "pass"),),
        "the LM head keeps its own weight",
    ),
    Mutant(
        "tied then broken by a copy",
        "GPT",
        (
            (
                "self.lm_head.weight = self.wte.weight",
                "self.lm_head.weight = nn.Parameter(self.wte.weight.detach().clone())",
            ),
        ),
        "same values at initialisation, two tensors afterwards",
    ),
    Mutant("final layer norm missing", "GPT", (("x = self.ln_f(x)", "pass"),), "no ln_f after the last block"),
    Mutant(
        "position embeddings ignored",
        "GPT",
        (("self.wte(idx) + self.wpe(position_ids)", "self.wte(idx)"),),
        "no position information",
    ),
    Mutant(
        "position ids ignored",
        "GPT",
        (("self.wpe(position_ids)", "self.wpe(torch.arange(T, device=idx.device))"),),
        "always uses 0..T-1, whatever position_ids says",
    ),
    Mutant(
        "positions not offset when cropping",
        "generate",
        (
            (
                "torch.arange(idx_cond.shape[1], device=idx.device)",
                "torch.arange(idx.shape[1] - idx_cond.shape[1], idx.shape[1], device=idx.device)",
            ),
        ),
        "after cropping, uses positions of the full sequence instead of restarting the window at 0",
    ),
    Mutant(
        "context not cropped",
        "generate",
        (("idx[:, -model.context_length :]", "idx"),),
        "feeds more than context_length tokens",
    ),
    Mutant(
        "sampling ignores the generator",
        "generate",
        (("torch.multinomial(probs, num_samples=1, generator=generator)", "torch.multinomial(probs, num_samples=1)"),),
        "draws from torch's global generator: runs cannot be repeated, and the caller's random state changes",
    ),
    Mutant(
        "position ids on the CPU",
        "generate",
        (("torch.arange(idx_cond.shape[1], device=idx.device)", "torch.arange(idx_cond.shape[1])"),),
        "position ids made without device=: generation fails as soon as the model is on a GPU",
    ),
    Mutant(
        "top-k keeps k+1",
        "generate",
        (("min(top_k, logits.shape[-1])", "min(top_k + 1, logits.shape[-1])"),),
        "off by one upwards",
    ),
    Mutant(
        "top-k keeps k-1",
        "generate",
        (("min(top_k, logits.shape[-1])", "min(max(top_k - 1, 1), logits.shape[-1])"),),
        "off by one downwards",
    ),
    Mutant(
        "temperature after softmax",
        "generate",
        (
            ("logits = logits / temperature", "pass"),
            ("probs = torch.softmax(logits, dim=-1)", "probs = torch.softmax(logits, dim=-1) / temperature"),
        ),
        "dividing probabilities by T changes nothing once multinomial renormalises",
    ),
    Mutant(
        "top-p drops the crossing token",
        "generate",
        (("cum - torch.softmax(sorted_logits, dim=-1) >= top_p", "cum > top_p"),),
        "keeps only tokens strictly below p: one token too few",
    ),
    Mutant(
        "embedding dropout in eval mode",
        "GPT",
        (
            (
                "x = self.drop(self.wte(idx) + self.wpe(position_ids))",
                "x = F.dropout(self.wte(idx) + self.wpe(position_ids), self.drop.p)",
            ),
        ),
        "F.dropout without training=self.training: the model is random at evaluation time too",
    ),
    Mutant(
        "logits cast to float32",
        "GPT",
        (("return self.lm_head(x)", "return self.lm_head(x).float()"),),
        "the logits leave the model's dtype: a float16 model returns float32",
    ),
    Mutant(
        "attention by hand without its dropout",
        "Block",
        (
            (
                "x = x + self.attn(self.ln_1(x), use_sdpa=self.use_sdpa, is_causal=True)[0]",
                "B, T, C = x.shape\n"
                "        q, k, v = self.attn.W_qkv(self.ln_1(x)).split(C, dim=-1)\n"
                "        q, k, v = (t.view(B, T, self.attn.n_heads, -1).transpose(1, 2) for t in (q, k, v))\n"
                "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)\n"
                "        x = x + self.attn.W_o(y)",
            ),
        ),
        "re-implements the attention with F.scaled_dot_product_attention but leaves out dropout_p",
    ),
    Mutant(
        "MLP by hand without its dropout",
        "Block",
        (
            (
                "x = x + self.mlp(self.ln_2(x))",
                'x = x + self.mlp.W_2(F.gelu(self.mlp.W_1(self.ln_2(x)), approximate="tanh"))',
            ),
        ),
        "writes the MLP out with W_1 and W_2 and loses the dropout between them",
    ),
    Mutant(
        "residual dropout in eval mode",
        "Block",
        (("x = x + self.mlp(self.ln_2(x))", "x = x + F.dropout(self.mlp(self.ln_2(x)), self.mlp.dropout.p)"),),
        "an extra F.dropout without training=self.training: the block is random at evaluation time",
    ),
    Mutant(
        "layer norms without their eps",
        "Block",
        (
            ("self.ln_1(x)", "F.layer_norm(x, x.shape[-1:], self.ln_1.weight, self.ln_1.bias)"),
            ("self.ln_2(x)", "F.layer_norm(x, x.shape[-1:], self.ln_2.weight, self.ln_2.bias)"),
        ),
        "functional layer norms with PyTorch's default eps=1e-5 instead of config.layer_norm_eps",
    ),
    Mutant(
        "attention weights kept instead of the output",
        "Block",
        (("is_causal=True)[0]", "is_causal=True)[-1]"),),
        "takes the second return value (None on the fast path)",
    ),
    Mutant(
        "embedding dropout forgotten",
        "GPT",
        (
            (
                "x = self.drop(self.wte(idx) + self.wpe(position_ids))",
                "x = self.wte(idx) + self.wpe(position_ids)",
            ),
        ),
        "no dropout on the embeddings (the blocks' dropout hides it in a plain train/eval test)",
    ),
    Mutant(
        "dropout on the token embeddings only",
        "GPT",
        (
            (
                "x = self.drop(self.wte(idx) + self.wpe(position_ids))",
                "x = self.drop(self.wte(idx)) + self.wpe(position_ids)",
            ),
        ),
        "the position embeddings are added after the dropout",
    ),
    Mutant(
        "final layer norm without its eps",
        "GPT",
        (("x = self.ln_f(x)", "x = F.layer_norm(x, x.shape[-1:], self.ln_f.weight, self.ln_f.bias)"),),
        "functional ln_f with PyTorch's default eps=1e-5 instead of config.layer_norm_eps",
    ),
    Mutant(
        "position embeddings unsqueezed for the batch",
        "GPT",
        (("self.wpe(position_ids))", "self.wpe(position_ids).unsqueeze(0))"),),
        "adds a batch axis to the position embeddings: (B, T) position_ids give a (1, B, T, C) sum",
    ),
    Mutant(
        "context cropped from the front",
        "generate",
        (("idx[:, -model.context_length :]", "idx[:, : model.context_length]"),),
        "keeps the first context_length tokens instead of the last ones",
    ),
    Mutant(
        "prompt cropped in the output",
        "generate",
        (
            (
                "    for _ in range(max_new_tokens):",
                "    idx = idx[:, -model.context_length :]\n    for _ in range(max_new_tokens):",
            ),
        ),
        "crops the prompt once before the loop: a long prompt comes back shortened",
    ),
    Mutant(
        "temperature after top-p",
        "generate",
        (
            ("logits = logits / temperature  #", "pass  #"),
            ("probs = torch.softmax(logits, dim=-1)  # (B, V)", "probs = torch.softmax(logits / temperature, dim=-1)"),
        ),
        "the nucleus is chosen from the untempered distribution",
    ),
    Mutant(
        "temperature ignored with top-k",
        "generate",
        (("logits = logits / temperature  #", "logits = logits / temperature if top_k is None else logits  #"),),
        "an if/elif that skips the temperature when top_k is given",
    ),
    Mutant(
        "layer norms built without config.layer_norm_eps",
        "Block",
        (("nn.LayerNorm(C, eps=config.layer_norm_eps)", "nn.LayerNorm(C)"),),
        "the given __init__ edited: PyTorch's eps 1e-5 whatever the config says (caught since the oracle takes "
        "eps from the check's config, not from the module)",
    ),
    Mutant(
        "ln_f built without config.layer_norm_eps",
        "GPT",
        (("nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)", "nn.LayerNorm(config.d_model)"),),
        "the given __init__ edited: PyTorch's eps 1e-5 for the final layer norm",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "explicit causal mask",
        "Block",
        (
            (
                "self.attn(self.ln_1(x), use_sdpa=self.use_sdpa, is_causal=True)",
                "self.attn(self.ln_1(x), mask=torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, "
                "device=x.device).tril(), use_sdpa=self.use_sdpa)",
            ),
        ),
        "passes a lower-triangular mask instead of is_causal=True",
    ),
    Alternative(
        "tied the other way",
        "GPT",
        (("self.lm_head.weight = self.wte.weight", "self.wte.weight = self.lm_head.weight"),),
        "the embedding takes the head's Parameter (one Parameter either way)",
    ),
    Alternative(
        "head as F.linear on the embedding",
        "GPT",
        (("return self.lm_head(x)", "return F.linear(x, self.wte.weight)"),),
        "uses the tied matrix directly",
    ),
    Alternative(
        "functional layer norm",
        "GPT",
        (("x = self.ln_f(x)", "x = F.layer_norm(x, x.shape[-1:], self.ln_f.weight, self.ln_f.bias, self.ln_f.eps)"),),
        "F.layer_norm with ln_f's parameters",
    ),
    Alternative(
        "top-k by torch.where and slicing",
        "generate",
        (
            ("values[:, [-1]]", "values[:, -1:]"),
            ('logits.masked_fill(logits < kth, float("-inf"))', 'torch.where(logits < kth, float("-inf"), logits)'),
        ),
        "torch.where and a slice instead of masked_fill and a list index",
    ),
    Alternative(
        "cat on the last dim",
        "generate",
        (("torch.cat([idx, next_id], dim=1)", "torch.cat((idx, next_id), dim=-1)"),),
        "appends along dim -1",
    ),
]


# Correct answers written from scratch (whole cells, from the page and the notebook); each gets full marks.
_BLOCK_INIT = before(head("ch06_gpt", "Block"), "    def forward")  # the given class up to forward

_GPT_INIT_HEAD = head("ch06_gpt", "GPT")  # the stub's given text, as the release notebook has it

_GPT_INIT_TAIL = before(pieces("ch06_gpt", "GPT")[1], "    def forward")  # given: the rest of __init__, num_parameters

_GENERATE_HEAD = before(
    head("ch06_gpt", "generate"), "    for _ in range(max_new_tokens)"
)  # signature, docstring, checks


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
