"""Chapter 8 (KV cache, MQA/GQA, RoPE, MLA): the solution against independent oracles — chapter 6's uncached
``generate`` (token for token, past context_length), ``F.scaled_dot_product_attention(enable_gqa=True)``,
Hugging Face's Llama rotary embedding and attention, Hugging Face's DeepSeek-V2 attention (random small configs,
weights copied), and the cache-size formula checked against the bytes of the tensors actually stored."""

import json
import pathlib
import statistics

import pytest
import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import causal_mask
from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.ch08_kv_cache import (
    CachedGPT,
    GroupedQueryAttention,
    KVCache,
    MultiHeadLatentAttention,
    apply_rope,
    attend_with_cache,
    convert_to_gqa,
    generate_with_cache,
    gpt_forward_with_cache,
    kv_cache_bytes,
    mla_cache_bytes,
    repeat_kv,
    rope_angles,
)
from tests.conftest import tolerance

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMALL = dict(vocab_size=23, context_length=12, n_layers=3, n_heads=4, d_model=32)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _gpt(device, seed=0, **overrides):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**SMALL, **overrides})).eval()
    with torch.no_grad():  # random norms and biases too, so nothing is left at 0 or 1
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(0.0 if name.endswith("bias") else 1.0, 0.2)
    return model.to(device)


# ---------------------------------------------------------------- the cache on chapter 6's GPT


def test_prefill_then_decode_equals_full_forward(device):
    model = _gpt(device)
    idx = torch.randint(23, (2, 11), generator=_gen(1)).to(device)
    cache = KVCache()
    with torch.no_grad():
        full = model(idx)
        parts = [gpt_forward_with_cache(model, idx[:, :6], cache)]
        parts += [gpt_forward_with_cache(model, idx[:, t : t + 1], cache) for t in range(6, 9)]
        parts += [gpt_forward_with_cache(model, idx[:, 9:], cache)]  # two tokens at once: T_q < T_k, T_q > 1
    torch.testing.assert_close(torch.cat(parts, 1), full, **tolerance(torch.float32))
    assert cache.length() == 11 and len(cache.keys) == 3


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cached_greedy_generation_equals_chapter_6_past_the_context(device, n_kv_heads):
    model = _gpt(device, seed=n_kv_heads)
    model = model if n_kv_heads == 4 else convert_to_gqa(model, n_kv_heads)
    idx = torch.randint(23, (3, 4), generator=_gen(2)).to(device)
    n = 3 * SMALL["context_length"]  # well past context_length: the window crops and the cache is recomputed
    wrapped = CachedGPT(model)
    cached = generate(wrapped, idx, n, temperature=0.0)
    assert torch.equal(cached, generate(model, idx, n, temperature=0.0))
    assert wrapped.decode_steps == SMALL["context_length"] - 4  # the cache was used until the window was full
    assert wrapped.prefills == n - wrapped.decode_steps


def test_cached_sampling_equals_chapter_6_with_the_same_seed(device):
    model = _gpt(device, seed=3)
    idx = torch.randint(23, (2, 3), generator=_gen(3)).to(device)
    kw = dict(temperature=0.9, top_k=8, top_p=0.9)
    a = generate(model, idx, 20, generator=torch.Generator(device=device).manual_seed(5), **kw)
    b = generate_with_cache(model, idx, 20, generator=torch.Generator(device=device).manual_seed(5), **kw)
    assert torch.equal(a, b)


def test_cache_refuses_to_overflow_the_position_table():
    model = _gpt("cpu")
    cache = KVCache()
    gpt_forward_with_cache(model, torch.zeros(1, 12, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="context_length"):
        gpt_forward_with_cache(model, torch.zeros(1, 1, dtype=torch.long), cache)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_bytes_equal_the_formula(device, dtype):
    config = GPTConfig(**SMALL)
    model = _gpt(device).to(dtype)
    cache = KVCache()
    with torch.no_grad():
        gpt_forward_with_cache(model, torch.randint(23, (1, 9), generator=_gen(4)).to(device), cache)
    bytes_per_element = torch.finfo(dtype).bits // 8
    d_head = config.d_model // config.n_heads
    assert cache.nbytes() == kv_cache_bytes(config.n_layers, config.n_heads, d_head, 9, bytes_per_element)
    assert cache.nbytes() == sum(t.untyped_storage().nbytes() for t in cache.keys + cache.values)


@pytest.mark.parametrize("n_kv_heads", [2, 1])
def test_gqa_cache_is_n_kv_heads_over_n_heads_of_mha(n_kv_heads):
    model = _gpt("cpu")
    idx = torch.randint(23, (2, 10), generator=_gen(5))
    caches = {}
    for kv, m in ((4, model), (n_kv_heads, convert_to_gqa(model, n_kv_heads))):
        caches[kv] = KVCache()
        with torch.no_grad():
            gpt_forward_with_cache(m, idx, caches[kv])
    assert caches[n_kv_heads].nbytes() * 4 == caches[4].nbytes() * n_kv_heads


def test_update_appends_in_order_and_validates():
    cache = KVCache()
    a, b = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 1, 5)
    cache.update(0, a, a)
    k, _ = cache.update(0, b, b)
    assert torch.equal(k, torch.cat([a, b], 2))
    with pytest.raises(ValueError, match="in order"):
        cache.update(2, b, b)
    with pytest.raises(ValueError, match="do not fit"):
        cache.update(0, torch.randn(2, 2, 1, 5), torch.randn(2, 2, 1, 5))


# ---------------------------------------------------------------- GQA against PyTorch's enable_gqa


@pytest.mark.parametrize("n_kv_heads", [6, 3, 2, 1])
def test_repeat_kv_and_attention_match_torch_enable_gqa(device, n_kv_heads):
    g = _gen(6)
    q = torch.randn(2, 6, 5, 8, generator=g).to(device)
    k = torch.randn(2, n_kv_heads, 5, 8, generator=g).to(device)
    v = torch.randn(2, n_kv_heads, 5, 7, generator=g).to(device)
    assert torch.equal(repeat_kv(k, 6 // n_kv_heads), torch.repeat_interleave(k, 6 // n_kv_heads, dim=1))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    got = attend_with_cache(q, k, v, KVCache(), 0)
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))


def test_decode_step_uses_a_bottom_right_mask(device):
    g = _gen(7)
    q = torch.randn(1, 4, 9, 8, generator=g).to(device)
    k = torch.randn(1, 2, 9, 8, generator=g).to(device)
    v = torch.randn(1, 2, 9, 8, generator=g).to(device)
    cache = KVCache()
    out = [attend_with_cache(q[:, :, :6], k[:, :, :6], v[:, :, :6], cache, 0)]
    out += [attend_with_cache(q[:, :, 6:], k[:, :, 6:], v[:, :, 6:], cache, 0)]  # 3 queries against 9 keys
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(torch.cat(out, 2), expected, **tolerance(torch.float32))


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_gqa_module_paths_agree_with_enable_gqa(device, n_kv_heads):
    torch.manual_seed(8)
    attn = GroupedQueryAttention(24, 4, n_kv_heads, d_head=6, bias=True).to(device)
    x = torch.randn(3, 7, 24, generator=_gen(9)).to(device)
    q, k, v = attn.project(x, torch.arange(7, device=device))
    expected = attn.W_o(
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).flatten(2)
    )
    mask = causal_mask(7, device=device)
    for got in (attn(x)[0], attn(x, mask)[0], attn(x, mask, use_sdpa=True)[0]):
        torch.testing.assert_close(got, expected, **tolerance(torch.float32))
    cache = KVCache()  # prefill 4, then 3 single steps: positions offset by the cache length
    steps = [attn(x[:, :4], cache=cache)[0]] + [attn(x[:, t : t + 1], cache=cache)[0] for t in range(4, 7)]
    torch.testing.assert_close(torch.cat(steps, 1), expected, **tolerance(torch.float32))


def test_mean_pooled_conversion_keeps_mha_and_pools_groups():
    model = _gpt("cpu")
    idx = torch.randint(23, (2, 9), generator=_gen(10))
    with torch.no_grad():
        torch.testing.assert_close(convert_to_gqa(model, 4)(idx), model(idx), **tolerance(torch.float32))
        gqa = convert_to_gqa(model, 2)
    W_k = model.h[0].attn.W_qkv.weight[32:64].view(4, 8, 32)  # (heads, d_head, d_model)
    torch.testing.assert_close(gqa.h[0].attn.W_k.weight.view(2, 8, 32)[1], (W_k[2] + W_k[3]) / 2)
    assert gqa.h[0].attn.W_k.weight.shape == (16, 32) and model.h[0].attn.W_qkv.weight.shape == (96, 32)


# ---------------------------------------------------------------- RoPE and GQA against Hugging Face's Llama


def _llama(device, n_kv_heads, seed=0):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(
        hidden_size=48,
        num_attention_heads=6,
        num_key_value_heads=n_kv_heads,
        head_dim=10,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=11,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        attention_bias=True,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    theirs = modeling_llama.LlamaAttention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.2)
    ours = GroupedQueryAttention(48, 6, n_kv_heads, d_head=10, rope_theta=500.0, bias=True)
    for mine, hf in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "o_proj")):
        getattr(ours, mine).load_state_dict(getattr(theirs, hf).state_dict())
    rotary = modeling_llama.LlamaRotaryEmbedding(config)
    return ours.to(device), theirs.to(device), rotary.to(device), modeling_llama


def test_rope_matches_llama_rotary_embedding(device):
    _, _, rotary, modeling_llama = _llama(device, 2)
    x = torch.randn(2, 3, 9, 10, generator=_gen(11)).to(device)
    y = torch.randn(2, 3, 9, 10, generator=_gen(12)).to(device)
    position_ids = torch.arange(5, 14, device=device)
    cos, sin = rotary(x, position_ids[None])
    expected = modeling_llama.apply_rotary_pos_emb(x, y, cos, sin)
    angles = rope_angles(position_ids, 10, 500.0)
    for got, want in zip((apply_rope(x, angles), apply_rope(y, angles)), expected):
        torch.testing.assert_close(got, want, **tolerance(torch.float32))


def test_rope_scores_depend_on_relative_position_only():
    q, k = torch.randn(1, 1, 1, 16, generator=_gen(13)), torch.randn(1, 1, 1, 16, generator=_gen(14))
    for interleaved in (False, True):
        scores = []
        for m in (3, 10, 40):
            rq = apply_rope(q, rope_angles(torch.tensor([m + 5]), 16), interleaved=interleaved)
            rk = apply_rope(k, rope_angles(torch.tensor([m]), 16), interleaved=interleaved)
            scores.append((rq * rk).sum())
        torch.testing.assert_close(scores[0], scores[1], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(scores[0], scores[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n_kv_heads", [6, 2, 1])
def test_gqa_matches_llama_attention(device, n_kv_heads):
    ours, theirs, rotary, _ = _llama(device, n_kv_heads, seed=n_kv_heads)
    T = 9
    x = torch.randn(2, T, 48, generator=_gen(15)).to(device)
    position_embeddings = rotary(x, torch.arange(T, device=device)[None])
    additive = torch.zeros(T, T, device=device).masked_fill(~causal_mask(T, device=device), float("-inf"))
    with torch.no_grad():
        expected = theirs(x, position_embeddings=position_embeddings, attention_mask=additive[None, None])[0]
        got = ours(x)[0]
        cache = KVCache()
        steps = [ours(x[:, :5], cache=cache)[0]] + [ours(x[:, t : t + 1], cache=cache)[0] for t in range(5, T)]
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))
    torch.testing.assert_close(torch.cat(steps, 1), expected, **tolerance(torch.float32))


# ---------------------------------------------------------------- MLA against Hugging Face's DeepSeek-V2


def _deepseek(device, q_lora_rank, seed=0):
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v2 import modeling_deepseek_v2

    config = transformers.DeepseekV2Config(
        hidden_size=40,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=12,
        q_lora_rank=q_lora_rank,
        qk_nope_head_dim=6,
        qk_rope_head_dim=4,
        v_head_dim=5,
        intermediate_size=32,
        moe_intermediate_size=16,
        num_hidden_layers=1,
        vocab_size=11,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    theirs = modeling_deepseek_v2.DeepseekV2Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.normal_(1.0 if "layernorm" in name else 0.0, 0.3)
    ours = MultiHeadLatentAttention(40, 4, d_c=12, d_head=6, d_rope=4, d_v=5, d_cq=q_lora_rank, rope_theta=1000.0)
    with torch.no_grad():
        kv_a = theirs.kv_a_proj_with_mqa.weight  # rows: [c^KV (d_c) | k^R (d_rope)]
        ours.W_dkv.weight.copy_(kv_a[:12])
        ours.W_kr.weight.copy_(kv_a[12:])
        ours.kv_norm.weight.copy_(theirs.kv_a_layernorm.weight)
        kv_b = theirs.kv_b_proj.weight.view(4, 6 + 5, 12)  # per head: [k^C (d_head) | v (d_v)]
        ours.W_uk.weight.copy_(kv_b[:, :6].reshape(24, 12))
        ours.W_uv.weight.copy_(kv_b[:, 6:].reshape(20, 12))
        ours.W_o.weight.copy_(theirs.o_proj.weight)
        if q_lora_rank is None:
            ours.W_q.weight.copy_(theirs.q_proj.weight)
        else:
            ours.W_dq.weight.copy_(theirs.q_a_proj.weight)
            ours.q_norm.weight.copy_(theirs.q_a_layernorm.weight)
            ours.W_uq.weight.copy_(theirs.q_b_proj.weight)
    rotary = modeling_deepseek_v2.DeepseekV2RotaryEmbedding(config)
    return ours.to(device), theirs.to(device), rotary.to(device)


@pytest.mark.parametrize("q_lora_rank", [None, 10])
def test_mla_matches_deepseek_v2_attention(device, q_lora_rank):
    ours, theirs, rotary = _deepseek(device, q_lora_rank)
    T = 8
    x = torch.randn(2, T, 40, generator=_gen(16)).to(device)
    additive = torch.zeros(T, T, device=device).masked_fill(~causal_mask(T, device=device), float("-inf"))
    with torch.no_grad():
        freqs = rotary(x, torch.arange(T, device=device)[None])
        expected = theirs(x, attention_mask=additive[None, None], position_embeddings=freqs)[0]
        got = ours(x)[0]
        cache = KVCache()
        steps = [ours(x[:, :3], cache=cache)[0]] + [ours(x[:, t : t + 1], cache=cache)[0] for t in range(3, T)]
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))
    torch.testing.assert_close(torch.cat(steps, 1), expected, **tolerance(torch.float32))
    assert cache.keys[0].shape == (2, 1, T, 12) and cache.values[0].shape == (2, 1, T, 4)  # latent + rotary key
    assert cache.nbytes() == 2 * mla_cache_bytes(1, 12, 4, T)  # batch of 2


def test_cache_size_formulas_scale_with_kv_heads_and_latent_width():
    """GQA's cache is n_kv_heads / n_heads of MHA's; MLA's holds d_c + d_rope numbers per token and layer."""
    mha = kv_cache_bytes(4, 8, 64, 1)
    assert kv_cache_bytes(4, 2, 64, 1) * 4 == mha and kv_cache_bytes(4, 1, 64, 1) * 8 == mha
    assert mla_cache_bytes(4, 4 * 64, 32, 1) == 4 * (256 + 32) * 4


# ---------------------------------------------------------------- the committed conversion results


def test_committed_conversion_results_are_consistent():
    path = ROOT / "results/ch08_kv_cache/gqa_conversion.json"
    if not path.exists():
        pytest.skip("results/ch08_kv_cache/gqa_conversion.json not written yet (python -m scripts.convert_gqa)")
    record = json.loads(path.read_text())
    rows = {row["n_kv_heads"]: row for row in record["rows"]}
    n_heads = record["config"]["n_heads"]
    assert rows[n_heads]["val_loss_converted"] == pytest.approx(record["val_loss_mha"], abs=1e-4)
    seeds = record["args"]["seeds"].split(",")
    for row in rows.values():
        assert row["cache_bytes_per_token"] * n_heads == rows[n_heads]["cache_bytes_per_token"] * row["n_kv_heads"]
        # one uptrained loss per seed, and the page's spread is the spread of those (recomputed independently)
        losses = row["val_loss_uptrained"]
        assert len(losses) == len(row["uptrain_seconds"]) == len(seeds) >= 3
        up = row["val_loss_uptrained_spread"]
        assert (up["min"], up["max"]) == (min(losses), max(losses))
        assert up["mean"] == pytest.approx(sum(losses) / len(losses), abs=1e-4)
        assert up["std"] == pytest.approx(statistics.stdev(losses), abs=1e-4)
    # the page: "the seeds move the uptrained loss ... several times less than the gaps between the rows"
    spreads = [r["val_loss_uptrained_spread"] for r in record["rows"]]
    widest = max(s["max"] - s["min"] for s in spreads)
    assert widest <= 0.015
    assert min(abs(a["mean"] - b["mean"]) for a, b in zip(spreads, spreads[1:])) > 3 * widest


def test_past_the_window_prose_agrees_with_the_page_cell():
    """The page's "150 new tokens after a 21-token prompt": the stated length is the page's prompt's, and the decode steps
    and prefills the cell prints add up — decodes = context_length - prompt length, then one prefill per step
    (and the first call's)."""
    import contextlib
    import io
    import re

    from solutions.text_data import CharTokenizer

    page = (ROOT / "book/ch08_kv_cache.md").read_text()
    (cell,) = [c for c in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page, flags=re.S) if "CachedGPT(gpt)" in c]
    ck = torch.load(ROOT / "results/ch06_gpt/gpt_char.pt")
    gpt = GPT(GPTConfig(**ck["config"])).eval()
    gpt.load_state_dict(ck["model"])
    namespace = dict(torch=torch, tok=CharTokenizer(ck["alphabet"]), gpt=gpt, CachedGPT=CachedGPT, generate=generate)
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()) as out:
        exec(cell, namespace)
    n_prompt, wrapped, n_new = namespace["prompt"].shape[1], namespace["wrapped"], 150
    m = re.search(r"(\d+) new tokens after a (\d+)-token prompt", " ".join(page.split()))
    assert m and (int(m[1]), int(m[2])) == (n_new, n_prompt)
    assert namespace["with_cache"].shape[1] == n_prompt + n_new
    assert wrapped.decode_steps == gpt.context_length - n_prompt
    assert wrapped.decode_steps + wrapped.prefills == n_new
    printed = out.getvalue()
    assert "identical tokens: True" in printed
    assert (
        f"decode steps {wrapped.decode_steps} (= {gpt.context_length} - {n_prompt}), prefills {wrapped.prefills}"
        in printed
    )


# ---------------------------------------------------------------- decoding speed (benchmarks/bench_decode.py)


def test_lean_decode_steps_equal_the_modules_cached_forward(device):
    """The benchmark's lean steps (preallocated cache, grouped queries, MLA absorbed) compute the modules' step."""
    from benchmarks import bench_decode

    modules = bench_decode.make_modules(device)
    x = torch.randn(1, 1, bench_decode.D_MODEL, generator=_gen(20)).to(device)
    for name, attn in modules.items():
        buf = bench_decode.random_cache(attn, 10, device)
        expected = bench_decode.module_step(attn, x, bench_decode.module_cache(attn, buf, 10))
        got = bench_decode.lean_step(attn, x, buf, 10)
        torch.testing.assert_close(got, expected, **tolerance(torch.float32), msg=lambda m, name=name: f"{name}: {m}")


def _decode_results():
    import csv

    path = ROOT / "benchmarks/results/ch08_decode_cpu.csv"
    if not path.exists():
        pytest.skip("benchmarks/results/ch08_decode_cpu.csv not written yet (python -m benchmarks.bench_decode)")
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# measured ")  # where, when and how (benchmarks/results_io.py)
    return {(r["variant"], r["form"], int(r["context_length"])): r for r in csv.DictReader(lines[1:])}


def test_decode_results_hold_the_page_claims():
    """The claims of the page's "Decoding speed" section, against the committed results file it draws from."""
    import re

    rows = _decode_results()
    Ts = sorted({T for _, _, T in rows})
    longest, shortest = Ts[-1], Ts[0]
    speedup = {(v, f, T): float(r["speedup_vs_mha"]) for (v, f, T), r in rows.items()}
    for (v, _form, T), r in rows.items():  # cache column = the chapter's formulas; the two forms agree
        n_kv = {"MHA": 16, "GQA": 4, "MQA": 1}.get(v)
        formula = mla_cache_bytes(1, 256, 32, T) if v == "MLA" else kv_cache_bytes(1, n_kv, 64, T)
        assert int(r["cache_bytes"]) == formula and float(r["max_abs_diff_lean_vs_module"]) < 1e-4
    # "At the longest context the lean step of MQA is about 5× as fast as MHA's, of GQA about 2.5× and of MLA
    # about 1.8×": stated ≈ measured (the median over the rounds of the same round's ratio), within 15 %
    page = " ".join((ROOT / "book/ch08_kv_cache.md").read_text().split())
    m = re.search(
        r"lean step of MQA is about ([\d.]+)× as fast as MHA's, of GQA about ([\d.]+)× and of MLA about ([\d.]+)×", page
    )
    assert m, "the page's sentence with the measured speed-ups changed: update this test"
    for v, stated in zip(("MQA", "GQA", "MLA"), map(float, m.groups())):
        assert speedup[(v, "lean", longest)] == pytest.approx(stated, rel=0.15), v
    lean = {v: float(rows[(v, "lean", longest)]["tokens_per_s"]) for v in ("MHA", "GQA", "MQA", "MLA")}
    assert lean["MQA"] > lean["GQA"] > lean["MLA"] > lean["MHA"]  # a smaller cache decodes faster; MLA: see below
    # "below the ratios of the caches (16×, 4×, 7×)"
    mha_cache = int(rows[("MHA", "lean", longest)]["cache_bytes"])
    for v, ratio in (("MQA", 16), ("GQA", 4), ("MLA", 7)):
        assert round(mha_cache / int(rows[(v, "lean", longest)]["cache_bytes"])) == ratio
        assert speedup[(v, "lean", longest)] < ratio
    # "MLA's cache is smaller than GQA's, yet its step is slower here"
    assert int(rows[("MLA", "lean", longest)]["cache_bytes"]) < int(rows[("GQA", "lean", longest)]["cache_bytes"])
    assert speedup[("MLA", "lean", longest)] < speedup[("GQA", "lean", longest)]
    # "At 256 tokens ... the four lean steps are within about a factor of two of one another"
    assert shortest == 256 and f"At {shortest} tokens" in page
    short = [float(rows[(v, "lean", shortest)]["tokens_per_s"]) for v in ("MHA", "GQA", "MQA", "MLA")]
    assert max(short) / min(short) < 2.5
    assert int(rows[("MHA", "lean", shortest)]["cache_bytes"]) < int(rows[("MQA", "lean", shortest)]["weight_bytes"])
    # "at long context their GQA is no faster than their MHA ...; MQA ... keeps a large lead; the plain MLA ... is
    # the slowest of all"
    assert 0.75 < speedup[("GQA", "module", longest)] < 1.3
    assert speedup[("MQA", "module", longest)] > 3
    assert min(float(r["tokens_per_s"]) for (_, _, T), r in rows.items() if T == longest) == float(
        rows[("MLA", "module", longest)]["tokens_per_s"]
    )
