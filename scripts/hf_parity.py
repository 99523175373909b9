"""Measure how closely chapters 6 and 7 match Hugging Face, weight for weight; write results/hf_parity.json.

    pip install transformers   # a test oracle only: the course's code never imports it
    python -m scripts.hf_parity

Builds GPT2LMHeadModel, BertForMaskedLM and BertModel from small random configs (no download), randomises
their layer norms and biases too, copies the weights into ours, and records the largest absolute logit
difference in fp32 (GPT-2 on both attention paths; BERT with padding and two segments) and whether greedy
continuations agree token for token.
"""

import json
import pathlib

import torch
import transformers

from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.ch07_bert import Bert, BertConfig, BertForMaskedLM
from solutions.interop import load_hf_bert, load_hf_gpt2


def randomise(model):
    """Every vector parameter (layer norms and biases) drawn from N(1, 0.1) for a norm's gain, N(0, 0.1) otherwise,
    so that a swapped or missing one shows; returns ``model`` in eval mode."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(
                    1.0 if ("ln_" in name or "LayerNorm.weight" in name) and name.endswith("weight") else 0.0, 0.1
                )
    return model.eval()


def gpt2_config(config: GPTConfig) -> transformers.GPT2Config:
    """Hugging Face's config for our ``config``'s sizes, without dropout, token 0 as BOS, EOS and padding.

    Our names for GPT2Config's n_positions, n_layer, n_head, n_embd: context_length, n_layers, n_heads, d_model."""
    return transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.context_length,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def main():
    torch.manual_seed(0)
    out = {"transformers": transformers.__version__, "torch": torch.__version__}
    cfg_gpt = GPTConfig(vocab_size=101, context_length=32, n_layers=3, n_heads=4, d_model=64)
    hf = randomise(transformers.GPT2LMHeadModel(gpt2_config(cfg_gpt)))
    ours = load_hf_gpt2(GPT(cfg_gpt), hf.state_dict()).eval()
    idx = torch.randint(101, (4, 32))
    with torch.no_grad():
        ref = hf(idx).logits
        for path in (True, False):
            for b in ours.h:
                b.use_sdpa = path
            out[f"gpt2_max_abs_logit_diff_{'sdpa' if path else 'explicit'}"] = (ours(idx) - ref).abs().max().item()
        prompt = idx[:, :6]
        mine = generate(ours, prompt, 26, temperature=0.0)
        theirs = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=26, do_sample=False, pad_token_id=0
        )
    out["gpt2_greedy_identical"] = bool(torch.equal(mine, theirs))
    out["gpt2_logit_scale"] = ref.abs().max().item()

    bc = transformers.BertConfig(
        vocab_size=101,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    cfg = BertConfig(vocab_size=101, context_length=32, n_layers=3, n_heads=4, d_model=64, d_ff=256)
    ids = torch.randint(5, 101, (4, 24))
    types = torch.zeros_like(ids)
    types[:, 12:] = 1
    att = torch.ones_like(ids)
    att[1, 18:] = 0
    att[3, 9:] = 0
    hfm = randomise(transformers.BertForMaskedLM(bc))
    m = load_hf_bert(BertForMaskedLM(cfg), hfm.state_dict()).eval()
    hfb = randomise(transformers.BertModel(bc))
    b = load_hf_bert(Bert(cfg), hfb.state_dict()).eval()
    with torch.no_grad():
        ref = hfm(input_ids=ids, token_type_ids=types, attention_mask=att).logits
        out["bert_mlm_max_abs_logit_diff"] = (m(ids, types, att) - ref).abs().max().item()
        out["bert_logit_scale"] = ref.abs().max().item()
        o = hfb(input_ids=ids, token_type_ids=types, attention_mask=att)
        h = b(ids, types, att)
        out["bert_hidden_max_abs_diff"] = (h - o.last_hidden_state).abs().max().item()
        out["bert_pooler_max_abs_diff"] = (b.pool(h) - o.pooler_output).abs().max().item()
    path = pathlib.Path(__file__).resolve().parent.parent / "results" / "hf_parity.json"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
