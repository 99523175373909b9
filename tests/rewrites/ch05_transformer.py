"""Answers to the exercises of ch05_transformer written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch05_transformer as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

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
