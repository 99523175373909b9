"""Chapter 6 — GPT: a decoder-only Transformer (生成式预训练 / 因果语言模型).

The GPT-2 arrangement (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", section
2.3; the code is OpenAI's ``gpt-2/src/model.py``):

* token embeddings plus *learned* position embeddings (位置嵌入),
* ``n_layers`` pre-LN blocks: ``x + attn(LN(x))`` then ``x + mlp(LN(x))``, with causal (因果) multi-head
  self-attention and a GELU (tanh approximation) MLP four times as wide,
* a final layer norm after the last block (GPT-2 added it; GPT-1 had none),
* an LM head whose weight *is* the token embedding matrix (weight tying, Press & Wolf 2017),
* GPT-2 initialisation: N(0, 0.02) everywhere, residual output projections scaled by 1/sqrt(2·n_layers).

Reading order follows the book: block, model, generation. The parts are imported, not copied: the fused
multi-head self-attention (``W_qkv``, ``W_o``, causal with ``is_causal=True``) from chapter 4, the position-wise feed-forward network (``W_1``, ``W_2``, GELU-tanh) from chapter 5. Weights can be copied from
Hugging Face's ``GPT2LMHeadModel`` (:func:`solutions.interop.load_hf_gpt2`); the chapter's tests check the logits
agree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention
from solutions.ch05_transformer import PositionwiseFeedForward
from solutions.training import count_parameters

__all__ = ["GPTConfig", "Block", "GPT", "LanguageModel", "generate"]


@dataclasses.dataclass
class GPTConfig:
    """Sizes of a GPT. Defaults: the chapter's yardstick (4 layers, 4 heads, 128 wide, 64-token context)."""

    vocab_size: int = 96
    context_length: int = 64  # the longest context (上下文窗口) the position table covers
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0  # on the embeddings, the attention weights and inside the MLP
    layer_norm_eps: float = 1e-5


# --------------------------------------------------------------------------------------------------
# The block (解码器块): pre-LN, causal
# --------------------------------------------------------------------------------------------------


class Block(nn.Module):
    r"""One GPT-2 block, pre-LN: :math:`x \leftarrow x + \mathrm{Attn}(\mathrm{LN}_1(x))`, then
    :math:`x \leftarrow x + \mathrm{MLP}(\mathrm{LN}_2(x))`, the attention causal.

    Layer norm *before* each sub-layer (Radford et al. 2019, section 2.3; Xiong et al. 2020 explain why the
    residual stream then trains without warm-up) — unlike the post-LN of Vaswani et al. 2017 and BERT.

    Sub-layers: ``attn`` is chapter 4's :class:`FusedMultiHeadSelfAttention`, which returns
    ``(output, weights)``; ``mlp`` is chapter 5's :class:`PositionwiseFeedForward` with ``d_ff = 4·C``.

    Shapes: ``forward(x (B, T, C)) -> (B, T, C)``; position ``t`` of the output depends only on ``x[:, :t+1]``.
    The attention is asked to be causal (``is_causal=True``) rather than given a mask: PyTorch's fused kernel
    then skips the future itself and no ``(T, T)`` mask is built.

    Attributes:
        use_sdpa: True: attention through ``torch.nn.functional.scaled_dot_product_attention`` (the fast path);
            False: chapter 3's explicit softmax, which also returns the weights. The tests, the checks and
            ``scripts/hf_parity.py`` run both paths and compare them.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        C = config.d_model
        self.ln_1 = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.attn = FusedMultiHeadSelfAttention(C, config.n_heads, config.dropout)  # chapter 4: W_qkv, W_o
        self.ln_2 = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.mlp = PositionwiseFeedForward(C, 4 * C, config.dropout, "gelu_tanh")  # chapter 5: W_1, W_2
        self.use_sdpa = True  # PyTorch's fused attention kernel; False: chapter 3's explicit softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3:
            raise ValueError(f"x must be (B, T, C), got {tuple(x.shape)}")
        ### BEGIN SOLUTION
        x = x + self.attn(self.ln_1(x), use_sdpa=self.use_sdpa, is_causal=True)[0]  # (B, T, C), no peeking ahead
        x = x + self.mlp(self.ln_2(x))  # (B, T, C)
        return x
        ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


class GPT(nn.Module):
    """A GPT-2-style language model: ``forward(idx (B, T) int64, position_ids (T,) or (B, T) | None)
    -> logits (B, T, vocab_size)``.

    ``position_ids`` default to ``0 … T-1``: every window the model sees, in training or in generation, starts
    at position 0. ``T`` may not exceed ``config.context_length`` (ValueError).

    The LM head shares its weight with the token embedding ``wte`` (weight tying, 权重共享; Press & Wolf
    2017): a token's input vector is also its output vector, which saves ``vocab_size × d_model`` parameters
    and trains better on small data.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.context_length = config.context_length
        self.wte = nn.Embedding(config.vocab_size, config.d_model)  # token embeddings
        self.wpe = nn.Embedding(config.context_length, config.d_model)  # learned position embeddings
        self.drop = nn.Dropout(config.dropout)
        blocks = [Block(config) for _ in range(config.n_layers)]
        self.h = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        ### BEGIN SOLUTION
        self.lm_head.weight = self.wte.weight  # one Parameter, two uses
        ### END SOLUTION
        self.apply(self._init_weights)
        for block in blocks:  # residual projections: std 0.02 / sqrt(2·n_layers) (Radford et al. 2019, 2.3)
            for proj in (block.attn.W_o, block.mlp.W_2):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self, non_embedding: bool = False) -> int:
        """All parameters, each counted once (:func:`~solutions.training.count_parameters`: the tied LM head is
        not counted twice); ``non_embedding`` leaves out the position table (and, by convention, not the token
        table: it is also the output layer)."""
        n = count_parameters(self)
        return n - self.wpe.weight.numel() if non_embedding else n

    def forward(self, idx: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        if idx.ndim != 2:
            raise ValueError(f"idx must be (B, T) token ids, got shape {tuple(idx.shape)}")
        B, T = idx.shape
        if T > self.context_length:
            raise ValueError(f"sequence of length {T} is longer than context_length={self.context_length}")
        if position_ids is None:
            position_ids = torch.arange(T, device=idx.device)  # (T,)
        ### BEGIN SOLUTION
        x = self.drop(self.wte(idx) + self.wpe(position_ids))  # (B, T, C) + (T, C) or (B, T, C)
        for block in self.h:
            x = block(x)  # (B, T, C), causal
        x = self.ln_f(x)  # (B, T, C): GPT-2's final layer norm
        return self.lm_head(x)  # (B, T, vocab_size)
        ### END SOLUTION

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy (nats per token); ``targets`` is ``idx`` shifted left, ``(B, T)``."""
        logits = self(idx)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


# --------------------------------------------------------------------------------------------------
# Generation (生成): temperature, top-k, top-p
# --------------------------------------------------------------------------------------------------


class LanguageModel(Protocol):
    """What :func:`generate` needs of a model (:class:`GPT`, or the checks' toy models): the longest context
    ``context_length``, and ``model(idx (B, T), position_ids (T,)) -> logits (B, T, vocab)``."""

    context_length: int

    def __call__(self, idx: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor: ...


@torch.no_grad()
def generate(
    model: LanguageModel,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend ``idx (B, T0)`` by ``max_new_tokens`` sampled tokens; returns ``(B, T0 + max_new_tokens)``.

    Each step feeds the model at most its last ``model.context_length`` tokens (the context is cropped), with
    position ids ``0 … T-1`` for that window — the positions it was trained with — and samples from
    ``softmax(logits / temperature)`` restricted to

    * the ``top_k`` most likely tokens (Fan et al. 2018), and/or
    * the smallest set of most likely tokens whose probability reaches ``top_p`` (nucleus sampling, 核采样;
      Holtzman et al. 2020); the token that crosses ``top_p`` is kept, so at least one token always is.

    ``temperature=0`` means greedy decoding (argmax). ``model(idx, position_ids)`` must return
    ``(B, T, vocab)`` logits. Sampling draws from ``generator`` (on the device of ``idx``) when given.

    Raises:
        ValueError: for a negative temperature, ``top_k < 1`` or ``top_p`` outside (0, 1].
    """
    if temperature < 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"need temperature >= 0, top_k >= 1, 0 < top_p <= 1; got {temperature}, {top_k}, {top_p}")
    for _ in range(max_new_tokens):
        ### BEGIN SOLUTION
        idx_cond = idx[:, -model.context_length :]  # (B, T) with T <= context_length
        position_ids = torch.arange(idx_cond.shape[1], device=idx.device)  # the window starts at position 0
        logits = model(idx_cond, position_ids)[:, -1, :].float()  # (B, V): the last position predicts the next
        if temperature == 0:
            next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1) greedy
        else:
            logits = logits / temperature  # temperature scales the logits, before the softmax
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, [-1]]  # (B, 1)
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if top_p is not None:
                sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V)
                cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
                drop_sorted = cum - torch.softmax(sorted_logits, dim=-1) >= top_p  # mass before it already >= p
                drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
                logits = logits.masked_fill(drop, float("-inf"))
            probs = torch.softmax(logits, dim=-1)  # (B, V)
            next_id = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
        ### END SOLUTION
    return idx
