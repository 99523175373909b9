"""ch05_transformer's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import before, head, tail

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "sin and cos concatenated",
        "PositionalEncoding",
        (
            ("pe[:, 0::2] = torch.sin(angle)", "pe[:, : (d_model + 1) // 2] = torch.sin(angle)"),
            (
                "pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])",
                "pe[:, (d_model + 1) // 2:] = torch.cos(angle[:, : d_model // 2])",
            ),
        ),
        "sine block then cosine block instead of interleaved dims",
    ),
    Mutant(
        "sin and cos swapped",
        "PositionalEncoding",
        (
            ("torch.sin(angle)", "torch.COS(angle)"),
            ("torch.cos(angle[", "torch.sin(angle["),
            ("torch.COS(", "torch.cos("),
        ),
        "cosine on even dims, sine on odd",
    ),
    Mutant(
        "frequency 10000^(i/d)",
        "PositionalEncoding",
        (("10000 ** (two_i / d_model)", "10000 ** (two_i / 2 / d_model)"),),
        "uses i instead of 2i in the exponent",
    ),
    Mutant(
        "missing embedding scale",
        "TokenEmbedding",
        ((" * math.sqrt(self.d_model)", ""),),
        "forgets to multiply the embeddings by sqrt(d_model)",
    ),
    Mutant(
        "embedding scaled by d_model",
        "TokenEmbedding",
        (("math.sqrt(self.d_model)", "self.d_model"),),
        "multiplies by d_model",
    ),
    Mutant(
        "pre-LN where post-LN is asked",
        "EncoderLayer",
        (("if self.norm_first:", "if True:"),),
        "always normalises before the sublayer",
    ),
    Mutant(
        "post-LN where pre-LN is asked",
        "EncoderLayer",
        (("if self.norm_first:", "if False:"),),
        "always normalises after the residual sum",
    ),
    Mutant(
        "attention residual dropped",
        "EncoderLayer",
        (("x = self.norm1(x + self.dropout1(", "x = self.norm1(self.dropout1("),),
        "post-LN attention without x +",
    ),
    Mutant(
        "FFN residual dropped (pre-LN)",
        "EncoderLayer",
        (("x = x + self.dropout2(self.ffn(self.norm2(x)))", "x = self.dropout2(self.ffn(self.norm2(x)))"),),
        "pre-LN feed-forward without the residual",
    ),
    Mutant(
        "one LayerNorm for both sublayers",
        "EncoderLayer",
        (("self.norm2(x + self.dropout2(self.ffn(x)))", "self.norm1(x + self.dropout2(self.ffn(x)))"),),
        "reuses norm1 after the FFN",
    ),
    Mutant(
        "encoder mask not passed",
        "EncoderLayer",
        (
            ("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h, None)"),
            ("self.self_attn(x, x, x, mask)", "self.self_attn(x, x, x, None)"),
        ),
        "ignores the padding / causal mask",
    ),
    Mutant(
        "no causal mask in the decoder",
        "DecoderLayer",
        (
            (
                "self_mask = causal_mask(T, device=y.device)",
                "self_mask = torch.ones(T, T, dtype=torch.bool, device=y.device)",
            ),
        ),
        "the decoder's self-attention sees future target tokens",
    ),
    Mutant(
        "cross-attention keys and values from the decoder",
        "DecoderLayer",
        (
            ("self.cross_attn(y, memory, memory, cross_mask)", "self.cross_attn(y, y, y, cross_mask)"),
            ("self.cross_attn(h, memory, memory, cross_mask)", "self.cross_attn(h, h, h, cross_mask)"),
        ),
        "second self-attention instead of attending to the encoder output",
    ),
    Mutant(
        "padding mask missing in cross-attention",
        "DecoderLayer",
        (
            (
                "cross_mask = None if src_attention_mask is None else src_attention_mask[:, None, None, :]",
                "cross_mask = None",
            ),
        ),
        "attends to source padding",
    ),
    Mutant(
        "target padding ignored",
        "DecoderLayer",
        (("self_mask = self_mask & tgt_attention_mask[:, None, None, :]", "pass"),),
        "attends to target padding",
    ),
    Mutant(
        "decoder FFN residual dropped",
        "DecoderLayer",
        (("y = self.norm3(y + self.dropout3(self.ffn(y)))", "y = self.norm3(self.dropout3(self.ffn(y)))"),),
        "post-LN feed-forward without the residual",
    ),
    Mutant(
        "decoder pre-LN where post-LN is asked",
        "DecoderLayer",
        (("if self.norm_first:", "if True:"),),
        "always normalises before the sublayer",
    ),
    Mutant(
        "causal mask on the CPU",
        "DecoderLayer",
        (("causal_mask(T, device=y.device)", "causal_mask(T)"),),
        "the look-ahead mask is built on the CPU: the layer fails on a GPU",
    ),
    Mutant(
        "odd d_model crashes",
        "PositionalEncoding",
        (("torch.cos(angle[:, : d_model // 2])", "torch.cos(angle)"),),
        "the cosine half is sized for an even d_model: an odd width raises a shape error",
    ),
    Mutant(
        "residual dropout in eval mode",
        "EncoderLayer",
        (
            (
                "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
                "x = self.norm1(x + F.dropout(self.self_attn(x, x, x, mask)[0], self.dropout1.p))",
            ),
        ),
        "F.dropout without training=self.training: the layer is random at evaluation time too",
    ),
    Mutant(
        "table added in float32",
        "PositionalEncoding",
        (("x + self.pe[: x.shape[1]].to(x.dtype)", "x + self.pe[: x.shape[1]]"),),
        "the float32 table promotes float16 inputs to float32",
    ),
    Mutant(
        "table sized 5000 rows",
        "PositionalEncoding",
        (
            ("torch.arange(context_length, dtype=torch.float64)", "torch.arange(5000, dtype=torch.float64)"),
            ("torch.zeros(context_length, d_model", "torch.zeros(5000, d_model"),
        ),
        "a table of 5000 rows (the Annotated Transformer's default length) instead of context_length: pe is not (context_length, d_model)",
    ),
    Mutant(
        "table one row short",
        "PositionalEncoding",
        (
            (
                "torch.arange(context_length, dtype=torch.float64)",
                "torch.arange(context_length - 1, dtype=torch.float64)",
            ),
            ("torch.zeros(context_length, d_model", "torch.zeros(context_length - 1, d_model"),
        ),
        "positions 0 .. context_length - 2: a sequence of the full context length does not fit",
    ),
    Mutant(
        "odd dims with their own exponent",
        "PositionalEncoding",
        (
            (
                "torch.cos(angle[:, : d_model // 2])",
                "torch.cos(pos / 10000 ** ((two_i + 1) / d_model))[:, : d_model // 2]",
            ),
        ),
        "cos(pos / 10000^((2i+1)/d)): dims 2i and 2i+1 no longer share a frequency",
    ),
    Mutant(
        "table indexed directly",
        "TokenEmbedding",
        (("self.embedding(tokens)", "self.embedding.weight[tokens]"),),
        "indexes the weight instead of calling the module: the <pad> row gets gradients (padding_idx ignored)",
    ),
    Mutant(
        "attention output without dropout1 (post-LN)",
        "EncoderLayer",
        (
            (
                "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
                "x = self.norm1(x + self.self_attn(x, x, x, mask)[0])",
            ),
        ),
        "no dropout on the attention sublayer's output (the FFN's dropout still makes training random)",
    ),
    Mutant(
        "FFN output without dropout2 (pre-LN)",
        "EncoderLayer",
        (("x = x + self.dropout2(self.ffn(self.norm2(x)))", "x = x + self.ffn(self.norm2(x))"),),
        "no dropout on the feed-forward sublayer's output in the pre-LN branch",
    ),
    Mutant(
        "dropout on the residual sum",
        "EncoderLayer",
        (("x = self.norm2(x + self.dropout2(self.ffn(x)))", "x = self.norm2(self.dropout2(x + self.ffn(x)))"),),
        "drops entries of x + FFN(x) instead of FFN(x): the residual stream itself is dropped",
    ),
    Mutant(
        "LayerNorm with the default eps",
        "EncoderLayer",
        (("h = self.norm1(x)", "h = F.layer_norm(x, x.shape[-1:], self.norm1.weight, self.norm1.bias)"),),
        "F.layer_norm with the norm's gain and bias but not its eps (layer_norm_eps ignored)",
    ),
    Mutant(
        "cross-attention without dropout2 (post-LN)",
        "DecoderLayer",
        (
            (
                "y = self.norm2(y + self.dropout2(self.cross_attn(y, memory, memory, cross_mask)[0]))",
                "y = self.norm2(y + self.cross_attn(y, memory, memory, cross_mask)[0])",
            ),
        ),
        "no dropout on the cross-attention sublayer's output",
    ),
    Mutant(
        "self-attention without dropout1 (pre-LN)",
        "DecoderLayer",
        (
            (
                "y = y + self.dropout1(self.self_attn(h, h, h, self_mask)[0])",
                "y = y + self.self_attn(h, h, h, self_mask)[0]",
            ),
        ),
        "no dropout on the masked self-attention's output in the pre-LN branch",
    ),
    Mutant(
        "FFN without dropout3 (post-LN)",
        "DecoderLayer",
        (("y = self.norm3(y + self.dropout3(self.ffn(y)))", "y = self.norm3(y + self.ffn(y))"),),
        "no dropout on the decoder's feed-forward output",
    ),
    Mutant(
        "decoder dropout on the residual stream (pre-LN)",
        "DecoderLayer",
        (
            (
                "y = y + self.dropout3(self.ffn(self.norm3(y)))",
                "y = self.dropout3(y + self.ffn(self.norm3(y)))",
            ),
        ),
        "drops entries of y + FFN(LayerNorm(y)): the residual stream itself is dropped",
    ),
    Mutant(
        "decoder LayerNorm with the default eps",
        "DecoderLayer",
        (
            (
                "y = self.norm3(y + self.dropout3(self.ffn(y)))",
                "y = F.layer_norm(y + self.dropout3(self.ffn(y)), y.shape[-1:], self.norm3.weight, self.norm3.bias)",
            ),
        ),
        "F.layer_norm without the norm's eps after the feed-forward sublayer",
    ),
    Mutant(
        "causal and padding masks joined by |",
        "DecoderLayer",
        (("self_mask & tgt_attention_mask", "self_mask | tgt_attention_mask"),),
        "or instead of and: future real tokens become visible",
    ),
    Mutant(
        "target padding as a query mask",
        "DecoderLayer",
        (("tgt_attention_mask[:, None, None, :]", "tgt_attention_mask[:, None, :, None]"),),
        "masks the padded queries' rows instead of the padded keys",
    ),
    Mutant(
        "target padding only with a source mask",
        "DecoderLayer",
        (
            (
                "if tgt_attention_mask is not None:",
                "if tgt_attention_mask is not None and src_attention_mask is not None:",
            ),
        ),
        "the target padding is applied only when a source padding mask is given too",
    ),
    Mutant(
        "causal mask transposed",
        "DecoderLayer",
        (("self_mask = causal_mask(T, device=y.device)", "self_mask = causal_mask(T, device=y.device).T"),),
        "position t sees the targets after it, not before",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "exp-log frequencies",
        "PositionalEncoding",
        (("pos / 10000 ** (two_i / d_model)", "pos * torch.exp(two_i * (-math.log(10000.0) / d_model))"),),
        "the frequencies as exp(-2i ln(10000)/d_model), as the Annotated Transformer",
    ),
    Alternative(
        "odd width: the cosines cut to the odd columns",
        "PositionalEncoding",
        (
            (
                "pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])",
                "odd = pe[:, 1::2]\n        odd[:] = torch.cos(angle)[:, : odd.shape[1]]",
            ),
        ),
        "written from the instructions for any width: the cosine of every frequency, cut to as many columns as the "
        "odd dims have (one fewer than the sines for an odd d_model), written through a view",
    ),
    Alternative(
        "float32 table",
        "PositionalEncoding",
        (("dtype=torch.float64", "dtype=torch.float32"),),
        "builds the table in float32 instead of float64",
    ),
    Alternative(
        "F.embedding",
        "TokenEmbedding",
        (
            (
                "self.embedding(tokens) * math.sqrt(self.d_model)",
                "F.embedding(tokens, self.embedding.weight, self.embedding.padding_idx) * self.d_model**0.5",
            ),
        ),
        "functional embedding lookup and d_model**0.5",
    ),
    Alternative(
        "one dropout module for both sublayers",
        "EncoderLayer",
        (("self.dropout2(", "self.dropout1("),),
        "reuses dropout1 (same p) after the feed-forward sublayer",
    ),
    Alternative(
        "causal mask by tril, masks by unsqueeze",
        "DecoderLayer",
        (
            ("causal_mask(T, device=y.device)", "torch.ones(T, T, dtype=torch.bool, device=y.device).tril()"),
            ("src_attention_mask[:, None, None, :]", "src_attention_mask.unsqueeze(1).unsqueeze(2)"),
        ),
        "builds the masks with tril and unsqueeze",
    ),
    Alternative(
        "torch.logical_and for the target mask",
        "DecoderLayer",
        (
            (
                "self_mask & tgt_attention_mask[:, None, None, :]",
                "torch.logical_and(self_mask, tgt_attention_mask.view(-1, 1, 1, T))",
            ),
        ),
        "logical_and and view instead of & and None-indexing",
    ),
]


# Whole answers written from the page and the notebook, not from the reference (each a complete exercise cell).
_PE_HEAD = head("ch05_transformer", "PositionalEncoding")  # the stub's given text, as the release notebook has it

_PE_TAIL = tail("ch05_transformer", "PositionalEncoding")  # the stub's given text after the student's part

_EMB_HEAD = head("ch05_transformer", "TokenEmbedding")  # the stub's given text, as the release notebook has it

_ENC_HEAD = before(head("ch05_transformer", "EncoderLayer"), "    def forward")  # the given class up to forward

_DEC_HEAD = head("ch05_transformer", "DecoderLayer")  # the stub's given text, as the release notebook has it


REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "PE: Python loops with math.sin and math.cos",
        "PositionalEncoding",
        _PE_HEAD
        + """
        rows = []
        for p in range(context_length):
            row = []
            for j in range(d_model):
                angle = p / 10000 ** ((j // 2) * 2 / d_model)
                row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
            rows.append(row)
        pe = torch.tensor(rows, dtype=torch.float64).reshape(context_length, d_model)
"""
        + _PE_TAIL,
        "the formula entry by entry in Python floats (double precision), then one torch.tensor",
    ),
    Rewrite(
        "PE: outer product, sin and cos stacked and interleaved",
        "PositionalEncoding",
        _PE_HEAD
        + """
        positions = torch.arange(context_length, dtype=torch.float64)
        inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        angles = torch.outer(positions, inv_freq)  # (context_length, ceil(d_model / 2))
        pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :d_model]  # sin, cos, sin, cos, ...
"""
        + _PE_TAIL,
        "torch.outer of positions and exp-log frequencies; sin/cos stacked on a last axis and flattened (odd width cut)",
    ),
    Rewrite(
        "PE: one frequency per dim, torch.where",
        "PositionalEncoding",
        _PE_HEAD
        + """
        j = torch.arange(d_model, dtype=torch.float64)
        freq = torch.pow(10000.0, -(j - j % 2) / d_model)  # dims 2i and 2i+1 share 10000^(-2i/d)
        angle = torch.arange(context_length, dtype=torch.float64).unsqueeze(1) * freq
        pe = torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))
"""
        + _PE_TAIL,
        "the frequency of every dim (j - j % 2), sine or cosine chosen per dim with torch.where",
    ),
    Rewrite(
        "PE: float32, sin and cos filled separately by range",
        "PositionalEncoding",
        _PE_HEAD
        + """
        pe = torch.zeros(context_length, d_model)
        position = torch.arange(0, context_length).float().unsqueeze(1)
        for i in range(0, d_model, 2):
            pe[:, i] = torch.sin(position[:, 0] / (10000 ** (i / d_model)))
            if i + 1 < d_model:
                pe[:, i + 1] = torch.cos(position[:, 0] / (10000 ** (i / d_model)))
"""
        + _PE_TAIL,
        "a loop over the frequency pairs filling columns i and i+1, in float32 as many tutorials do",
    ),
    Rewrite(
        "embedding: d_model ** 0.5",
        "TokenEmbedding",
        _EMB_HEAD + "        return self.embedding(tokens) * self.d_model**0.5\n",
        "the square root as a power",
    ),
    Rewrite(
        "embedding: embedding_dim and mul",
        "TokenEmbedding",
        _EMB_HEAD + "        return self.embedding(tokens).mul(math.sqrt(self.embedding.embedding_dim))\n",
        "the width read from the nn.Embedding, Tensor.mul",
    ),
    Rewrite(
        "embedding: a 0-dim tensor scale",
        "TokenEmbedding",
        _EMB_HEAD
        + """        scale = torch.tensor(float(self.d_model)).sqrt()  # a 0-dim CPU tensor mixes with any device
        return self.embedding(tokens) * scale
""",
        "the scale as a 0-dim float32 tensor (keeps float16 embeddings float16, works on a GPU)",
    ),
    Rewrite(
        "encoder: a residual helper",
        "EncoderLayer",
        _ENC_HEAD
        + """
    def _residual(self, x, sublayer, norm, drop):
        if self.norm_first:
            return x + drop(sublayer(norm(x)))
        return norm(x + drop(sublayer(x)))

    def forward(self, x, mask=None):
        x = self._residual(x, lambda h: self.self_attn(h, h, h, mask)[0], self.norm1, self.dropout1)
        x = self._residual(x, self.ffn, self.norm2, self.dropout2)
        return x
""",
        "one residual helper for both sublayers (the Annotated Transformer's SublayerConnection), lambdas",
    ),
    Rewrite(
        "encoder: functional layer norm and dropout",
        "EncoderLayer",
        _ENC_HEAD
        + """
    def forward(self, x, mask=None):
        def ln(t, norm):
            return F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

        def drop(t, module):
            return F.dropout(t, module.p, training=self.training)

        if not self.norm_first:
            attn_out, _ = self.self_attn(x, x, x, mask=mask)
            x = ln(x + drop(attn_out, self.dropout1), self.norm1)
            return ln(x + drop(self.ffn(x), self.dropout2), self.norm2)
        h = ln(x, self.norm1)
        attn_out, _ = self.self_attn(h, h, h, mask=mask)
        x = x + drop(attn_out, self.dropout1)
        return x + drop(self.ffn(ln(x, self.norm2)), self.dropout2)
""",
        "F.layer_norm with each norm's shape, gain, bias and eps; F.dropout following the layer's mode",
    ),
    Rewrite(
        "encoder: a loop over the two sublayers",
        "EncoderLayer",
        _ENC_HEAD
        + """
    def forward(self, x, mask=None):
        sublayers = [
            (self.norm1, self.dropout1, lambda t: self.self_attn(t, t, t, mask)[0]),
            (self.norm2, self.dropout2, lambda t: self.ffn(t)),
        ]
        for norm, dropout, fn in sublayers:
            if self.norm_first:
                x = x + dropout(fn(norm(x)))
            else:
                residual = x
                x = dropout(fn(x))
                x = norm(residual + x)
        return x
""",
        "the two sublayers as (norm, dropout, function) triples in a loop, residual kept in a variable",
    ),
    Rewrite(
        "decoder: causal_mask(T) moved with .to, masks unsqueezed",
        "DecoderLayer",
        _DEC_HEAD
        + """
        self_mask = causal_mask(T).to(y.device)
        if tgt_attention_mask is not None:
            self_mask = tgt_attention_mask.unsqueeze(1).unsqueeze(2) & self_mask
        cross_mask = src_attention_mask
        if cross_mask is not None:
            cross_mask = cross_mask.unsqueeze(1).unsqueeze(1)
        if self.norm_first:
            h = self.norm1(y)
            y = y + self.dropout1(self.self_attn(h, h, h, self_mask)[0])
            h = self.norm2(y)
            y = y + self.dropout2(self.cross_attn(h, memory, memory, cross_mask)[0])
            return y + self.dropout3(self.ffn(self.norm3(y)))
        y = self.norm1(y + self.dropout1(self.self_attn(y, y, y, self_mask)[0]))
        y = self.norm2(y + self.dropout2(self.cross_attn(y, memory, memory, cross_mask)[0]))
        return self.norm3(y + self.dropout3(self.ffn(y)))
""",
        "the notebook's causal_mask(T) made on the CPU and moved with .to(y.device); unsqueeze for the masks",
    ),
    Rewrite(
        "decoder: arange comparison, a list of sublayers",
        "DecoderLayer",
        _DEC_HEAD
        + """
        idx = torch.arange(T, device=y.device)
        self_mask = idx[None, :] <= idx[:, None]  # key j visible from query i when j <= i
        if tgt_attention_mask is not None:
            B = y.shape[0]
            self_mask = self_mask.expand(B, 1, T, T) & tgt_attention_mask.view(B, 1, 1, T)
        cross_mask = None if src_attention_mask is None else src_attention_mask[:, None, None]
        steps = [
            (self.norm1, self.dropout1, lambda q: self.self_attn(q, q, q, self_mask)[0]),
            (self.norm2, self.dropout2, lambda q: self.cross_attn(q, memory, memory, cross_mask)[0]),
            (self.norm3, self.dropout3, self.ffn),
        ]
        for norm, drop, fn in steps:
            y = y + drop(fn(norm(y))) if self.norm_first else norm(y + drop(fn(y)))
        return y
""",
        "the causal mask by comparing positions, the self mask expanded to (B, 1, T, T); a loop over sublayers",
    ),
    Rewrite(
        "decoder: new_ones tril, torch.where on the padding, a method per sublayer",
        "DecoderLayer",
        _DEC_HEAD
        + """
        allowed = y.new_ones(T, T, dtype=torch.bool).tril()
        if tgt_attention_mask is not None:
            pad = tgt_attention_mask[:, None, None, :]
            allowed = torch.where(pad, allowed, torch.zeros_like(allowed))
        src = None if src_attention_mask is None else src_attention_mask.reshape(src_attention_mask.shape[0], 1, 1, -1)
        y = self._block(y, self.norm1, self.dropout1, lambda h: self.self_attn(h, h, h, allowed)[0])
        y = self._block(y, self.norm2, self.dropout2, lambda h: self.cross_attn(h, memory, memory, src)[0])
        return self._block(y, self.norm3, self.dropout3, self.ffn)

    def _block(self, y, norm, drop, fn):
        if self.norm_first:
            return y + drop(fn(norm(y)))
        return norm(y + drop(fn(y)))
""",
        "y.new_ones(...).tril() on y's device, the padding applied with torch.where, a helper method per sublayer",
    ),
]
