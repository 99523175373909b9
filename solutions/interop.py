"""The boundary with other libraries: mask conversion and weight copying (not a chapter's idea).

The chapters build attention and the Transformer from scratch; the tests, the benchmarks, ``scripts/hf_parity.py``
and the book pages check them against PyTorch's and Hugging Face's implementations, weight for weight. What that
needs lives here, so that a chapter module reads like its page:

1. ``torch.nn.MultiheadAttention`` (chapter 4): mask conversion — its boolean masks mean True = masked **out**,
   the course's True = may attend — and weight copying for :class:`MultiHeadAttention` and
   :class:`FusedMultiHeadSelfAttention`;
2. ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` / ``Transformer`` (chapter 5);
3. Hugging Face ``GPT2LMHeadModel`` (chapter 6), ``BertForMaskedLM`` / ``BertModel`` and ``AlbertModel`` /
   ``AlbertForPreTraining`` (chapter 7), from their ``state_dict()`` — ``transformers`` is not needed to run this module.
"""

from __future__ import annotations

from typing import TypeVar, cast

import torch
from torch import nn

from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention, MultiHeadAttention
from solutions.ch05_transformer import Decoder, DecoderLayer, Encoder, EncoderLayer
from solutions.ch06_gpt import GPT
from solutions.ch07_bert import Albert, AlbertForPreTraining, Bert, BertForMaskedLM

Layer = TypeVar("Layer", EncoderLayer, DecoderLayer)
TorchLayer = TypeVar("TorchLayer", nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)

__all__ = [
    "load_hf_albert",
    "to_torch_mask",
    "from_torch_mask",
    "torch_mha_masks",
    "copy_mha_from_torch",
    "copy_mha_to_torch",
    "copy_fused_from_torch",
    "torch_mha_like",
    "copy_layer_from_torch",
    "copy_layer_to_torch",
    "copy_stacks_to_torch",
    "load_hf_gpt2",
    "load_hf_bert",
]


# --------------------------------------------------------------------------------------------------
# torch.nn.MultiheadAttention (chapter 4): masks (True = masked OUT there) and weights
# --------------------------------------------------------------------------------------------------


def to_torch_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Course mask (True = may attend) -> ``nn.MultiheadAttention`` bool mask (True = **not** allowed). ``None`` stays.

    Use it for both PyTorch's ``key_padding_mask`` argument (``(B, T_k)``, True = padding; from the course's
    ``attention_mask_from_lengths(lengths)``, True = real token) and a 2-D ``attn_mask`` (``(T_q, T_k)``, e.g.
    ``causal_mask``). ``nn.MultiheadAttention`` also accepts float masks, which are *added* to the scores
    (``-inf`` = blocked); this helper always returns bool.

    Raises:
        ValueError: if ``mask`` is not bool.
    """
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"expected a bool mask, got dtype {mask.dtype}")
    return ~mask


def from_torch_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """``nn.MultiheadAttention`` mask -> course mask (True = may attend).

    Accepts a bool mask (True = masked out) or a float additive mask (``-inf`` = masked out, anything finite is
    treated as allowed; non-zero finite biases cannot be expressed as a bool mask and raise ValueError).
    """
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return ~mask
    finite = torch.isfinite(mask)
    if (mask[finite] != 0).any():
        raise ValueError("a float mask with finite non-zero entries is a bias, not a mask")
    return finite


def torch_mha_masks(
    attention_mask: torch.Tensor | None = None,
    attn: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Course masks -> ``(key_padding_mask, attn_mask)`` for ``nn.MultiheadAttention``, plus the combined course mask.

    PyTorch's ``key_padding_mask`` is True at **padding**; the course's ``attention_mask`` is True at real tokens.

    Args:
        attention_mask: ``(B, T_k)`` bool, True at real tokens (course polarity), or None.
        attn: ``(T_q, T_k)`` bool, True = may attend (course polarity), or None.

    Returns:
        ``(torch_key_padding_mask (B, T_k), torch_attn_mask (T_q, T_k), course_mask)``: the first two inverted
        for ``nn.MultiheadAttention``; ``course_mask`` broadcastable to ``(B, H, T_q, T_k)`` for
        :class:`MultiHeadAttention` (None when both are None).
    """
    course = None
    if attention_mask is not None:
        course = attention_mask[:, None, None, :]  # (B, 1, 1, T_k)
    if attn is not None:
        course = attn if course is None else course & attn  # (T_q, T_k) broadcasts to (B, 1, T_q, T_k)
    return to_torch_mask(attention_mask), to_torch_mask(attn), course


def _check_compatible(ours: MultiHeadAttention | FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention) -> None:
    if theirs.embed_dim != ours.d_model or theirs.num_heads != ours.n_heads:
        raise ValueError(
            f"size mismatch: ours d_model={ours.d_model}, n_heads={ours.n_heads}; nn.MultiheadAttention "
            f"embed_dim={theirs.embed_dim}, num_heads={theirs.num_heads}"
        )
    if not theirs._qkv_same_embed_dim or theirs.bias_k is not None:
        raise ValueError("nn.MultiheadAttention with kdim/vdim or add_bias_kv has no counterpart here")
    if (theirs.in_proj_bias is None) != (ours.W_o.bias is None):
        raise ValueError("one of the two modules has biases and the other has not")


def _mha_pairs(
    ours: MultiHeadAttention | FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(our tensor, their tensor or slice of it)`` for every weight and bias, after :func:`_check_compatible`.

    ``theirs.in_proj_weight`` is ``[W^Q; W^K; W^V]`` stacked along dim 0 (each ``(d_model, d_model)`` in
    ``nn.Linear`` layout, ``out × in``) — exactly the fused form's ``W_qkv`` — and ``theirs.out_proj`` is ``W^O``.
    """
    _check_compatible(ours, theirs)
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    if isinstance(ours, FusedMultiHeadSelfAttention):
        pairs.append((ours.W_qkv.weight, theirs.in_proj_weight))
        if theirs.in_proj_bias is not None:
            pairs.append((ours.W_qkv.bias, theirs.in_proj_bias))
    else:
        projections = (ours.W_q, ours.W_k, ours.W_v)
        pairs += [(lin.weight, w) for lin, w in zip(projections, theirs.in_proj_weight.chunk(3))]
        if theirs.in_proj_bias is not None:
            pairs += [(lin.bias, b) for lin, b in zip(projections, theirs.in_proj_bias.chunk(3))]
    pairs.append((ours.W_o.weight, theirs.out_proj.weight))
    if theirs.out_proj.bias is not None:
        pairs.append((ours.W_o.bias, theirs.out_proj.bias))
    return pairs


@torch.no_grad()
def copy_mha_from_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy ``nn.MultiheadAttention`` weights into a :class:`MultiHeadAttention` (in place; returns ``ours``).

    Raises:
        ValueError: if sizes differ or ``theirs`` has separate k/v dims (``kdim``/``vdim``) or bias_k/v.
    """
    _copy(_mha_pairs(ours, theirs), into_ours=True)
    return ours


@torch.no_grad()
def copy_fused_from_torch(
    ours: FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention
) -> FusedMultiHeadSelfAttention:
    """Copy ``nn.MultiheadAttention`` weights into the fused form: ``W_qkv`` *is* ``in_proj_weight``."""
    _copy(_mha_pairs(ours, theirs), into_ours=True)
    return ours


@torch.no_grad()
def copy_mha_to_torch(
    ours: MultiHeadAttention | FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention
) -> nn.MultiheadAttention:
    """Copy our weights (teaching or fused form) into an ``nn.MultiheadAttention`` (in place; returns ``theirs``)."""
    _copy(_mha_pairs(ours, theirs), into_ours=False)
    return theirs


def torch_mha_like(ours: MultiHeadAttention | FusedMultiHeadSelfAttention) -> nn.MultiheadAttention:
    """A ``nn.MultiheadAttention(batch_first=True)`` with the same sizes, weights, device and dtype as ``ours``."""
    ref = ours.W_o.weight
    theirs = nn.MultiheadAttention(
        ours.d_model,
        ours.n_heads,
        dropout=ours.dropout.p,
        bias=ours.W_o.bias is not None,
        batch_first=True,
        device=ref.device,
        dtype=ref.dtype,
    )
    return copy_mha_to_torch(ours, theirs)


# --------------------------------------------------------------------------------------------------
# torch.nn.Transformer (chapter 5): layers and stacks
# --------------------------------------------------------------------------------------------------


def _weight_bias(
    mine: nn.Linear | nn.LayerNorm, their: nn.Linear | nn.LayerNorm
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``[(mine.weight, their.weight), (mine.bias, their.bias)]``; ValueError if only one of them has a bias."""
    if (mine.bias is None) != (their.bias is None):
        raise ValueError(f"{type(mine).__name__}: one of the two modules has a bias and the other has not")
    pairs = [(mine.weight, their.weight)]
    if mine.bias is not None and their.bias is not None:
        pairs.append((mine.bias, their.bias))
    return pairs


def _layer_pairs(
    ours: EncoderLayer | DecoderLayer, theirs: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(our tensor, theirs)`` for every weight and bias of a layer: attention (a decoder's ``cross_attn`` is
    their ``multihead_attn``), the FFN's ``W_1, W_2`` (their ``linear1, linear2``) and the norms."""
    if isinstance(ours, DecoderLayer) != isinstance(theirs, nn.TransformerDecoderLayer):
        raise ValueError(f"cannot copy between {type(ours).__name__} and {type(theirs).__name__}")
    pairs = _mha_pairs(ours.self_attn, theirs.self_attn)
    modules: list[tuple[nn.Linear | nn.LayerNorm, nn.Linear | nn.LayerNorm]] = [
        (ours.ffn.W_1, theirs.linear1),
        (ours.ffn.W_2, theirs.linear2),
        (ours.norm1, theirs.norm1),
        (ours.norm2, theirs.norm2),
    ]
    if isinstance(ours, DecoderLayer) and isinstance(theirs, nn.TransformerDecoderLayer):
        pairs += _mha_pairs(ours.cross_attn, theirs.multihead_attn)
        modules.append((ours.norm3, theirs.norm3))
    for mine, their in modules:
        pairs += _weight_bias(mine, their)
    return pairs


@torch.no_grad()
def _copy(pairs: list[tuple[torch.Tensor, torch.Tensor]], *, into_ours: bool) -> None:
    """Copy each pair's second tensor into its first (``into_ours``) or the first into the second, in place."""
    for mine, their in pairs:
        if into_ours:
            mine.copy_(their)
        else:
            their.copy_(mine)


def copy_layer_from_torch(ours: Layer, theirs: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> Layer:
    """Copy ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` weights into our :class:`EncoderLayer` /
    :class:`DecoderLayer` of the same sizes (in place, returns ``ours``); ValueError if the kinds or sizes differ."""
    _copy(_layer_pairs(ours, theirs), into_ours=True)
    return ours


def copy_layer_to_torch(ours: EncoderLayer | DecoderLayer, theirs: TorchLayer) -> TorchLayer:
    """The other way: our layer's weights into ``nn.Transformer{Encoder,Decoder}Layer`` (in place, returns it)."""
    _copy(_layer_pairs(ours, theirs), into_ours=False)
    return theirs


@torch.no_grad()
def copy_stacks_to_torch(encoder: Encoder, decoder: Decoder, theirs: nn.Transformer) -> nn.Transformer:
    """Copy our encoder and decoder stacks into ``nn.Transformer(batch_first=True)`` of the same sizes.

    ``nn.Transformer`` always ends both stacks with a LayerNorm. When ours have none (post-LN, as the paper),
    that LayerNorm is removed from ``theirs`` (set to None) so both compute the same function.
    """
    for enc_layer, their_enc_layer in zip(encoder.layers, theirs.encoder.layers, strict=True):
        copy_layer_to_torch(cast(EncoderLayer, enc_layer), cast(nn.TransformerEncoderLayer, their_enc_layer))
    for dec_layer, their_dec_layer in zip(decoder.layers, theirs.decoder.layers, strict=True):
        copy_layer_to_torch(cast(DecoderLayer, dec_layer), cast(nn.TransformerDecoderLayer, their_dec_layer))
    for ours_stack, their_stack in ((encoder, theirs.encoder), (decoder, theirs.decoder)):
        if ours_stack.norm is None:
            their_stack.norm = None
        else:
            _copy(_weight_bias(ours_stack.norm, their_stack.norm), into_ours=False)
    return theirs


# --------------------------------------------------------------------------------------------------
# Hugging Face (chapters 6 and 7): weights from a state_dict
# --------------------------------------------------------------------------------------------------


@torch.no_grad()
def load_hf_gpt2(model: GPT, hf_state_dict: dict[str, torch.Tensor]) -> GPT:
    """Copy the weights of a Hugging Face ``GPT2LMHeadModel`` (its ``state_dict()``) into ``model``.

    HF's GPT-2 stores its linear layers as ``Conv1D`` with weight ``(in, out)`` — the transpose of
    ``nn.Linear``'s ``(out, in)`` — and fuses q, k, v into ``c_attn`` (our ``W_qkv``, same q|k|v order).
    Returns ``model``; raises KeyError if a tensor is missing and ValueError if a shape differs.
    """
    sd = {k.removeprefix("transformer."): v for k, v in hf_state_dict.items()}
    ours = {
        "wte.weight": sd["wte.weight"],
        "wpe.weight": sd["wpe.weight"],
        "ln_f.weight": sd["ln_f.weight"],
        "ln_f.bias": sd["ln_f.bias"],
    }
    conv1d = {"attn.W_qkv": "attn.c_attn", "attn.W_o": "attn.c_proj", "mlp.W_1": "mlp.c_fc", "mlp.W_2": "mlp.c_proj"}
    for i in range(len(model.h)):
        for ln in ("ln_1", "ln_2"):
            for p in ("weight", "bias"):
                ours[f"h.{i}.{ln}.{p}"] = sd[f"h.{i}.{ln}.{p}"]
        for mine, theirs in conv1d.items():
            ours[f"h.{i}.{mine}.weight"] = sd[f"h.{i}.{theirs}.weight"].t()  # Conv1D (in, out) -> Linear (out, in)
            ours[f"h.{i}.{mine}.bias"] = sd[f"h.{i}.{theirs}.bias"]
    own = model.state_dict()
    for name, tensor in ours.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"{name}: ours {tuple(own[name].shape)} vs Hugging Face {tuple(tensor.shape)}")
        own[name].copy_(tensor)
    return model


# The embedding tensors have the same names in our BertEmbeddings/AlbertEmbeddings and in Hugging Face's.
_EMBEDDING_NAMES = (
    "word_embeddings.weight",
    "position_embeddings.weight",
    "token_type_embeddings.weight",
    "LayerNorm.weight",
    "LayerNorm.bias",
)


def _weight_bias_pairs(mine: str, theirs: str, modules: dict[str, str]) -> dict[str, str]:
    """Our ``{mine}.{a}.weight/bias`` -> HF's ``{theirs}.{b}.weight/bias`` for each ``a: b`` of ``modules``."""
    return {f"{mine}.{a}.{p}": f"{theirs}.{b}.{p}" for a, b in modules.items() for p in ("weight", "bias")}


def _copy_named(module: nn.Module, sd: dict[str, torch.Tensor], pairs: dict[str, str], *, strict: bool) -> None:
    """``module``'s tensor ``mine`` := ``sd[theirs]`` for each ``mine: theirs`` of ``pairs`` (in place); one that
    ``sd`` lacks raises ``KeyError`` when ``strict``, else is left as it is."""
    own = module.state_dict()
    for mine, theirs in pairs.items():
        if strict or theirs in sd:
            own[mine].copy_(sd[theirs])


def _mlm_head_pairs(transform: str, bias: str) -> dict[str, str]:
    """Our masked-LM head's tensors -> HF's: its transform's ``{transform}dense.*`` and ``{transform}LayerNorm.*``,
    and the output bias ``bias`` (the output weight is tied to the word embeddings in both)."""
    return {
        "dense.weight": f"{transform}dense.weight",
        "dense.bias": f"{transform}dense.bias",
        "LayerNorm.weight": f"{transform}LayerNorm.weight",
        "LayerNorm.bias": f"{transform}LayerNorm.bias",
        "decoder.bias": bias,
    }


@torch.no_grad()
def load_hf_bert(model: BertForMaskedLM | Bert, hf_state_dict: dict[str, torch.Tensor]) -> nn.Module:
    """Copy a Hugging Face ``BertForMaskedLM`` or ``BertModel`` ``state_dict()`` into ``model`` (in place).

    Names map one to one (HF's ``attention.self.query`` is our ``self_attn.W_q`` …, ``attention.output.
    LayerNorm`` our ``norm1``); all are ``nn.Linear`` in both, so nothing is transposed. Tensors HF does not
    have (the pooler of ``BertForMaskedLM``) are left as they are. Returns ``model``.
    """
    sd = {k.removeprefix("bert."): v for k, v in hf_state_dict.items()}
    bert = model.bert if isinstance(model, BertForMaskedLM) else model
    pairs = {f"embeddings.{n}": f"embeddings.{n}" for n in _EMBEDDING_NAMES}
    per_layer = {
        "self_attn.W_q": "attention.self.query",
        "self_attn.W_k": "attention.self.key",
        "self_attn.W_v": "attention.self.value",
        "self_attn.W_o": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "ffn.W_1": "intermediate.dense",
        "ffn.W_2": "output.dense",
        "norm2": "output.LayerNorm",
    }
    for i in range(len(bert.layers)):
        pairs.update(_weight_bias_pairs(f"layers.{i}", f"encoder.layer.{i}", per_layer))
    pairs.update({f"pooler.{p}": f"pooler.dense.{p}" for p in ("weight", "bias")})
    _copy_named(bert, sd, pairs, strict=False)
    if isinstance(model, BertForMaskedLM) and "cls.predictions.transform.dense.weight" in hf_state_dict:
        _copy_named(
            model.mlm, hf_state_dict, _mlm_head_pairs("cls.predictions.transform.", "cls.predictions.bias"), strict=True
        )
    return model


def load_hf_albert(model: AlbertForPreTraining | Albert, hf_state_dict: dict[str, torch.Tensor]) -> nn.Module:
    """Copy a Hugging Face ``AlbertForPreTraining`` or ``AlbertModel`` ``state_dict()`` into ``model`` (in place).

    Only the all-shared configuration (``num_hidden_groups = inner_group_num = 1``, ALBERT's default): HF's one
    layer ``encoder.albert_layer_groups.0.albert_layers.0`` is our ``layer``; HF's ``encoder.embedding_hidden_
    mapping_in`` is our ``embeddings.projection``; the SOP head ``sop_classifier.classifier`` is our ``sop``.
    Everything is ``nn.Linear`` in both, nothing is transposed. Returns ``model``.

    Raises ``ValueError`` if the state dict has more than one layer group or layer.
    """
    sd = {k.removeprefix("albert."): v for k, v in hf_state_dict.items()}
    if any(
        k.startswith(("encoder.albert_layer_groups.1.", "encoder.albert_layer_groups.0.albert_layers.1.")) for k in sd
    ):
        raise ValueError("only ALBERT with one shared layer (num_hidden_groups = inner_group_num = 1) is supported")
    albert = model.albert if isinstance(model, AlbertForPreTraining) else model
    pairs = {f"embeddings.{n}": f"embeddings.{n}" for n in _EMBEDDING_NAMES}
    per_layer = {
        "self_attn.W_q": "attention.query",
        "self_attn.W_k": "attention.key",
        "self_attn.W_v": "attention.value",
        "self_attn.W_o": "attention.dense",
        "norm1": "attention.LayerNorm",
        "ffn.W_1": "ffn",
        "ffn.W_2": "ffn_output",
        "norm2": "full_layer_layer_norm",
    }
    pairs.update(_weight_bias_pairs("layer", "encoder.albert_layer_groups.0.albert_layers.0", per_layer))
    pairs.update(_weight_bias_pairs("embeddings", "encoder", {"projection": "embedding_hidden_mapping_in"}))
    pairs.update({f"pooler.{p}": f"pooler.{p}" for p in ("weight", "bias")})
    _copy_named(albert, sd, pairs, strict=False)
    if isinstance(model, AlbertForPreTraining) and "predictions.dense.weight" in hf_state_dict:
        _copy_named(model.mlm, hf_state_dict, _mlm_head_pairs("predictions.", "predictions.bias"), strict=True)
        _copy_named(
            model.sop, hf_state_dict, {p: f"sop_classifier.classifier.{p}" for p in ("weight", "bias")}, strict=True
        )
    return model
