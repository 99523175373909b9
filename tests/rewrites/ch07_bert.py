"""Answers to the exercises of ch07_bert written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch07_bert as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "mask_tokens: Bernoulli draws on probability matrices (Hugging Face's recipe)",
        "mask_tokens",
        _MASK_HEAD
        + """
    shape = input_ids.shape
    probability = torch.full(shape, mlm_probability, device=input_ids.device)
    probability.masked_fill_(special, 0.0)
    selected = torch.bernoulli(probability, generator=generator).bool()
    labels = input_ids.clone()
    labels[~selected] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(shape, 0.8, device=input_ids.device), generator=generator).bool()
    replaced &= selected
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(shape, 0.5, device=input_ids.device), generator=generator).bool()
    randomised = randomised & selected & ~replaced
    words = torch.randint(vocab_size, shape, dtype=torch.long, generator=generator, device=input_ids.device)
    inputs[randomised] = words[randomised]
    return inputs, labels
""",
        "selection probabilities with 0 at the specials, torch.bernoulli for each decision, index assignment",
    ),
    Rewrite(
        "mask_tokens: one uniform number cut into 80/10/10 bands",
        "mask_tokens",
        _MASK_HEAD
        + """
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    selected = (u < mlm_probability) & ~special
    band = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = selected & (band < 0.8)
    to_random = selected & (band >= 0.8) & (band < 0.9)  # the last band (0.9 ... 1) keeps the token
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(to_random, random_ids, inputs)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, -100))
    return inputs, labels
""",
        "one uniform draw per token decides [MASK] / random / kept by the band it falls in; torch.where throughout",
    ),
    Rewrite(
        "mask_tokens: flattened, random ids drawn only where needed",
        "mask_tokens",
        _MASK_HEAD
        + """
    flat = input_ids.reshape(-1)
    n = flat.numel()
    dev = input_ids.device
    selected = (torch.rand(n, generator=generator, device=dev) < mlm_probability) & ~special.reshape(-1)
    labels = torch.full_like(flat, -100)
    labels[selected] = flat[selected]
    decide = torch.rand(n, generator=generator, device=dev)
    to_mask = selected & (decide < 0.8)
    to_random = selected & (decide >= 0.9)
    inputs = flat.clone()
    inputs[to_mask] = mask_id
    count = int(to_random.sum())
    inputs[to_random] = torch.randint(vocab_size, (count,), generator=generator, device=dev)
    return inputs.view(input_ids.shape), labels.view(input_ids.shape)
""",
        "works on the flattened ids (any shape), one draw for the 80/10/10 choice, exactly as many random ids as "
        "needed, reshaped back",
    ),
    Rewrite(
        "BertEmbeddings: position ids registered as a buffer",
        "BertEmbeddings",
        _BERT_INIT
        + """
        positions = torch.arange(config.context_length).unsqueeze(0)  # (1, context_length), as Hugging Face
        self.register_buffer("position_ids", positions, persistent=False)

    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        seq_len = input_ids.size(1)
        words = self.word_embeddings(input_ids)
        where = self.position_embeddings(self.position_ids[:, :seq_len])
        segments = self.token_type_embeddings(token_type_ids)
        embeddings = self.LayerNorm(words + where + segments)
        return self.dropout(embeddings)
""",
        "(1, context_length) position ids in a non-persistent buffer (it follows the module's device), sliced to T",
    ),
    Rewrite(
        "BertEmbeddings: tables indexed, functional LayerNorm and dropout",
        "BertEmbeddings",
        _BERT_INIT
        + """
    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        T = input_ids.shape[-1]
        x = self.word_embeddings.weight[input_ids] + self.position_embeddings.weight[:T]
        if token_type_ids is not None:
            x = x + self.token_type_embeddings.weight[token_type_ids]
        else:
            x = x + self.token_type_embeddings.weight[0]  # every token in segment 0
        ln = self.LayerNorm
        x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        return F.dropout(x, p=self.dropout.p, training=self.training)
""",
        "the weight tables indexed directly, segment 0's row added when no token_type_ids are given, "
        "F.layer_norm with the module's eps, F.dropout following the module's mode",
    ),
    Rewrite(
        "BertEmbeddings: positions by cumsum, sum accumulated",
        "BertEmbeddings",
        _BERT_INIT
        + """
    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        if token_type_ids is None:
            token_type_ids = input_ids.new_zeros(input_ids.shape)
        position_ids = torch.ones_like(input_ids).cumsum(dim=1) - 1  # (B, T): 0 ... T-1 on the ids' device
        total = self.word_embeddings(input_ids)
        total = total + self.token_type_embeddings(token_type_ids)
        total = total + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(total))
""",
        "segments defaulted with new_zeros, (B, T) positions from a cumulative sum of ones_like",
    ),
    Rewrite(
        "AlbertEmbeddings: named steps, positions expanded",
        "AlbertEmbeddings",
        _ALBERT_INIT
        + """
    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        B, T = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros(B, T, dtype=torch.long, device=input_ids.device)
        position_ids = torch.arange(T, device=input_ids.device).expand(B, T)
        small = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(position_ids)
            + self.token_type_embeddings(token_type_ids)
        )  # (B, T, E)
        small = self.LayerNorm(small)
        small = self.dropout(small)
        return self.projection(small)  # (B, T, d_model)
""",
        "segment ids made with device=, (B, T) positions by expand, each step named",
    ),
    Rewrite(
        "AlbertEmbeddings: functional pieces, projection as F.linear",
        "AlbertEmbeddings",
        _ALBERT_INIT
        + """
    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        pos = torch.arange(input_ids.size(1)).to(input_ids.device)
        x = F.embedding(input_ids, self.word_embeddings.weight)
        x = x + F.embedding(pos, self.position_embeddings.weight)[None]
        x = x + F.embedding(token_type_ids, self.token_type_embeddings.weight)
        x = F.layer_norm(x, x.shape[-1:], self.LayerNorm.weight, self.LayerNorm.bias, eps=self.LayerNorm.eps)
        x = F.dropout(x, self.dropout.p, self.training)
        return F.linear(x, self.projection.weight, self.projection.bias)
""",
        "F.embedding, positions moved with .to(input_ids.device), F.layer_norm with the module's eps, F.dropout "
        "with the module's mode, F.linear with the projection's parameters",
    ),
    Rewrite(
        "AlbertEmbeddings: position buffer, einsum projection",
        "AlbertEmbeddings",
        _ALBERT_INIT
        + """
        self.register_buffer("positions", torch.arange(config.context_length), persistent=False)

    def forward(self, input_ids, token_type_ids=None):
"""
        + _CHECK_2D
        + """
        T = input_ids.shape[1]
        segments = (
            self.token_type_embeddings(token_type_ids)
            if token_type_ids is not None
            else self.token_type_embeddings.weight[0]
        )
        x = self.word_embeddings(input_ids) + self.position_embeddings(self.positions[:T]) + segments
        x = self.dropout(self.LayerNorm(x))  # still in width E
        W, b = self.projection.weight, self.projection.bias  # (d_model, E), (d_model,)
        return torch.einsum("bte,de->btd", x, W) + b
""",
        "positions from a registered buffer, segment 0's row broadcast when no segments are given, the "
        "projection written as an einsum",
    ),
]
