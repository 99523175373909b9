"""ch07_bert's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import before, head

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "selects special tokens",
        "mask_tokens",
        (("coin(mlm_probability) & ~special", "coin(mlm_probability)"),),
        "[CLS]/[SEP]/[PAD] can be selected",
    ),
    Mutant("90/5/5 instead of 80/10/10", "mask_tokens", (("coin(0.8)", "coin(0.9)"),), "wrong proportions"),
    Mutant(
        "80/20/0: no kept tokens",
        "mask_tokens",
        (("~to_mask & coin(0.5)", "~to_mask"),),
        "every non-[MASK] selected token is replaced",
    ),
    Mutant("100% [MASK]", "mask_tokens", (("selected & coin(0.8)", "selected"),), "no random or kept tokens"),
    Mutant(
        "loss on unselected positions",
        "mask_tokens",
        (("labels = input_ids.masked_fill(~selected, -100)", "labels = input_ids.clone()"),),
        "labels everywhere: the loss includes positions that were never corrupted",
    ),
    Mutant(
        "random tokens outside the selection",
        "mask_tokens",
        (("to_random = selected & ~to_mask & coin(0.5)", "to_random = ~to_mask & coin(0.05)"),),
        "corrupts unselected positions",
    ),
    Mutant("fixed 15%", "mask_tokens", (("coin(mlm_probability)", "coin(0.15)"),), "ignores mlm_probability"),
    Mutant(
        "hard-coded specials",
        "mask_tokens",
        (("coin(mlm_probability) & ~special", "coin(mlm_probability) & (input_ids >= 5)"),),
        "assumes the special tokens are ids 0-4",
    ),
    Mutant(
        "global random state",
        "mask_tokens",
        (("torch.rand(input_ids.shape, generator=generator, device=", "torch.rand(input_ids.shape, device="),),
        "the selection ignores `generator` and draws from torch's global generator",
    ),
    Mutant(
        "random ids on the CPU",
        "mask_tokens",
        (("generator=generator, device=input_ids.device)\n    inputs", "generator=generator)\n    inputs"),),
        "torch.randint without device=: the replacement ids stay on the CPU when the batch is on a GPU",
    ),
    Mutant(
        "positions on the CPU",
        "BertEmbeddings",
        (("torch.arange(input_ids.shape[1], device=input_ids.device)", "torch.arange(input_ids.shape[1])"),),
        "position ids made without device=: fails as soon as the model is on a GPU",
    ),
    Mutant(
        "segment embeddings ignored",
        "BertEmbeddings",
        (("+ self.token_type_embeddings(token_type_ids)\n", "+ 0\n"),),
        "no token type embeddings",
    ),
    Mutant(
        "position embeddings missing",
        "BertEmbeddings",
        (("+ self.position_embeddings(positions)  # (T, d), broadcast over the batch", ""),),
        "no position information",
    ),
    Mutant(
        "no LayerNorm",
        "BertEmbeddings",
        (("self.dropout(self.LayerNorm(x))", "self.dropout(x)"),),
        "the sum is not normalised",
    ),
    Mutant(
        "embedding dropout forgotten",
        "BertEmbeddings",
        (("return self.dropout(self.LayerNorm(x))", "return self.LayerNorm(x)"),),
        "no dropout on the embeddings",
    ),
    Mutant(
        "embedding dropout in eval mode",
        "BertEmbeddings",
        (("return self.dropout(self.LayerNorm(x))", "return F.dropout(self.LayerNorm(x), self.dropout.p)"),),
        "F.dropout without training=self.training: embeddings are random at evaluation time too",
    ),
    Mutant(
        "no projection to d_model",
        "AlbertEmbeddings",
        (("return self.projection(x)  # (B, T, d_model)", "return x  # (B, T, d_model)"),),
        "the factorised embedding stays in width E: the encoder expects d_model",
    ),
    Mutant(
        "ALBERT: segment embeddings ignored",
        "AlbertEmbeddings",
        (("+ self.token_type_embeddings(token_type_ids)\n", "+ 0\n"),),
        "no token type embeddings",
    ),
    Mutant(
        "ALBERT: no LayerNorm",
        "AlbertEmbeddings",
        (("x = self.dropout(self.LayerNorm(x))", "x = self.dropout(x)"),),
        "the sum is not normalised before the projection",
    ),
    Mutant(
        "ALBERT: LayerNorm in width d_model after the projection",
        "AlbertEmbeddings",
        (
            ("x = self.dropout(self.LayerNorm(x))", "x = self.dropout(x)"),
            (
                "return self.projection(x)  # (B, T, d_model)",
                "return F.layer_norm(self.projection(x), (self.projection.out_features,))  # (B, T, d_model)",
            ),
        ),
        "normalises after projecting (BERT's place for it) instead of in the small space E",
    ),
    Mutant(
        "ALBERT: position embeddings missing",
        "AlbertEmbeddings",
        (("+ self.position_embeddings(positions)  # (T, E), broadcast over the batch", ""),),
        "no position information",
    ),
    Mutant(
        "LayerNorm upcast and not cast back",
        "BertEmbeddings",
        (
            (
                "self.dropout(self.LayerNorm(x))",
                "self.dropout(self.LayerNorm.float()(x.float()))",
            ),
        ),
        "LayerNorm in float32 for stability, result left in float32 (and the module's LayerNorm turned float32)",
    ),
    Mutant(
        "random ids drawn from the batch",
        "mask_tokens",
        (
            (
                "random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device)",
                "random_ids = input_ids.flatten()[torch.randint(input_ids.numel(), input_ids.shape, "
                "generator=generator, device=input_ids.device)]",
            ),
        ),
        "replacements are other tokens of the batch: uniform over the vocabulary only if the batch is",
    ),
    Mutant(
        "random ids one short of the vocabulary",
        "mask_tokens",
        (("torch.randint(vocab_size, input_ids.shape", "torch.randint(vocab_size - 1, input_ids.shape"),),
        "the last id of the vocabulary is never drawn",
    ),
    Mutant(
        "one random id for the whole batch",
        "mask_tokens",
        (("torch.randint(vocab_size, input_ids.shape", "torch.randint(vocab_size, (1,)"),),
        "every replaced position gets the same random token",
    ),
    Mutant(
        "10% of the remaining 20% random",
        "mask_tokens",
        (("~to_mask & coin(0.5)", "~to_mask & coin(0.1)"),),
        "the conditional probability of a random token taken as 0.1: 80/2/18 instead of 80/10/10",
    ),
    Mutant(
        "masks input_ids in place",
        "mask_tokens",
        (("inputs = input_ids.masked_fill(to_mask, mask_id)", "inputs = input_ids.masked_fill_(to_mask, mask_id)"),),
        "the caller's batch is corrupted too",
    ),
    Mutant(
        "assumes (B, T) input",
        "mask_tokens",
        (
            (
                "torch.rand(input_ids.shape, generator=generator",
                "torch.rand(input_ids.shape[0], input_ids.shape[-1], generator=generator",
            ),
        ),
        "draws the coins for a (B, T) batch: any other shape fails",
    ),
    Mutant(
        "dropout before the LayerNorm",
        "BertEmbeddings",
        (("return self.dropout(self.LayerNorm(x))", "return self.LayerNorm(self.dropout(x))"),),
        "drops elements of the sum, then normalises",
    ),
    Mutant(
        "LayerNorm without its eps",
        "BertEmbeddings",
        (
            (
                "self.dropout(self.LayerNorm(x))",
                "self.dropout(F.layer_norm(x, x.shape[-1:], self.LayerNorm.weight, self.LayerNorm.bias))",
            ),
        ),
        "functional layer norm with PyTorch's default eps=1e-5 instead of config.layer_norm_eps",
    ),
    Mutant(
        "positions from the batch size",
        "BertEmbeddings",
        (("torch.arange(input_ids.shape[1]", "torch.arange(input_ids.shape[0]"),),
        "counts positions along the batch axis",
    ),
    Mutant(
        "ALBERT: dropout after the projection",
        "AlbertEmbeddings",
        (
            ("x = self.dropout(self.LayerNorm(x))", "x = self.LayerNorm(x)"),
            ("return self.projection(x)  # (B, T, d_model)", "return self.dropout(self.projection(x))"),
        ),
        "dropout in width d_model, after the projection (the notebook asks for it before)",
    ),
    Mutant(
        "ALBERT: dropout before the LayerNorm",
        "AlbertEmbeddings",
        (("x = self.dropout(self.LayerNorm(x))", "x = self.LayerNorm(self.dropout(x))"),),
        "drops elements of the sum, then normalises",
    ),
    Mutant(
        "ALBERT: dropout forgotten",
        "AlbertEmbeddings",
        (("x = self.dropout(self.LayerNorm(x))", "x = self.LayerNorm(x)"),),
        "no dropout on the embeddings",
    ),
    Mutant(
        "ALBERT: LayerNorm without its eps",
        "AlbertEmbeddings",
        (
            (
                "x = self.dropout(self.LayerNorm(x))",
                "x = self.dropout(F.layer_norm(x, x.shape[-1:], self.LayerNorm.weight, self.LayerNorm.bias))",
            ),
        ),
        "functional layer norm with PyTorch's default eps=1e-5 instead of config.layer_norm_eps",
    ),
    Mutant(
        "ALBERT: projection upcast",
        "AlbertEmbeddings",
        (("return self.projection(x)  # (B, T, d_model)", "return self.projection.float()(x.float())"),),
        "the projection run in float32 and the result left there (a float16 model returns float32)",
    ),
    Mutant(
        "a fixed count per row",
        "mask_tokens",
        (
            (
                "selected = coin(mlm_probability) & ~special",
                "score = torch.rand(input_ids.shape, generator=generator, device=input_ids.device).masked_fill("
                "special, 2.0)\n    n_pick = round(mlm_probability * input_ids.shape[-1])\n    selected = torch."
                "zeros_like(special).scatter(-1, score.argsort(-1)[..., :n_pick], True) & ~special",
            ),
        ),
        "exactly round(p·T) tokens per row (the lowest random scores), not each token independently",
    ),
    Mutant(
        "LayerNorm built without config.layer_norm_eps",
        "BertEmbeddings",
        (("nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)", "nn.LayerNorm(config.d_model)"),),
        "the given __init__ edited: PyTorch's eps 1e-5 whatever the config says (caught since the oracle takes "
        "eps from the check's config, not from the module)",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "index assignment for random tokens",
        "mask_tokens",
        (
            (
                "inputs = torch.where(to_random, random_ids, inputs)",
                "inputs = inputs.clone()\n    inputs[to_random] = random_ids[to_random]",
            ),
        ),
        "boolean-index assignment instead of torch.where",
    ),
    Alternative(
        "labels by torch.where",
        "mask_tokens",
        (("input_ids.masked_fill(~selected, -100)", "torch.where(selected, input_ids, -100)"),),
        "torch.where instead of masked_fill",
    ),
    Alternative(
        "torch.bernoulli draws",
        "mask_tokens",
        (
            (
                "torch.rand(input_ids.shape, generator=generator, device=input_ids.device) < p",
                "torch.bernoulli(torch.full(input_ids.shape, p, device=input_ids.device), generator=generator).bool()",
            ),
        ),
        "Bernoulli draws from the same generator",
    ),
    Alternative(
        "positions expanded over the batch",
        "BertEmbeddings",
        (
            (
                "torch.arange(input_ids.shape[1], device=input_ids.device)",
                "torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)",
            ),
        ),
        "(B, T) position ids, as Hugging Face",
    ),
    Alternative(
        "F.dropout with the module's mode",
        "BertEmbeddings",
        (
            (
                "return self.dropout(self.LayerNorm(x))",
                "return F.dropout(self.LayerNorm(x), self.dropout.p, self.training)",
            ),
        ),
        "functional dropout that follows .train()/.eval()",
    ),
    Alternative(
        "functional layer norm",
        "BertEmbeddings",
        (
            (
                "self.LayerNorm(x)",
                "F.layer_norm(x, x.shape[-1:], self.LayerNorm.weight, self.LayerNorm.bias, self.LayerNorm.eps)",
            ),
        ),
        "F.layer_norm with the module's parameters",
    ),
]


# Correct answers written from scratch (whole cells, from the page and the notebook); each gets full marks.
_MASK_HEAD = head("ch07_bert", "mask_tokens")  # the stub's given text, as the release notebook has it

_BERT_INIT = before(head("ch07_bert", "BertEmbeddings"), "    def forward")  # the given class up to forward

_ALBERT_INIT = before(head("ch07_bert", "AlbertEmbeddings"), "    def forward")  # the given class up to forward

_CHECK_2D = """
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got {tuple(input_ids.shape)}")
"""


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
