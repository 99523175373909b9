"""The catalogue of ch12_flex_attention's checks (see catalogue/__init__.py): bugs each caught by some check, correct
answers each given full marks."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# The bug catalogue: the mistakes a mask_mod or score_mod invites, each caught by some check (tests/test_checks.py).
# The first is the bug of the sample submissions: it costs exercise 1's points only.
MUTANTS = [
    Mutant(
        "window one too narrow",
        "sliding_window_with_globals",
        (("(q_idx - kv_idx).abs() <= window", "(q_idx - kv_idx).abs() < window"),),
        "off by one: the key exactly `window` away is hidden",
    ),
    Mutant(
        "window one too wide",
        "sliding_window_with_globals",
        (("(q_idx - kv_idx).abs() <= window", "(q_idx - kv_idx).abs() <= window + 1"),),
        "off by one the other way: `window` read as the number of keys behind the query",
    ),
    Mutant(
        "window on the wrong side",
        "sliding_window_with_globals",
        (("return kv_idx <= q_idx", "return kv_idx >= q_idx"),),
        "the causal part keeps the future instead of the past",
    ),
    Mutant(
        "and for or",
        "sliding_window_with_globals",
        (("or_masks(in_window, is_global)", "and_masks(in_window, is_global)"),),
        "window AND global instead of window OR global",
    ),
    Mutant(
        "global tokens see nothing more",
        "sliding_window_with_globals",
        (("(q_idx < n_global) | (kv_idx < n_global)", "kv_idx < n_global"),),
        "only the columns of the global tokens are added, not their rows",
    ),
    Mutant(
        "globals ignore causality",
        "sliding_window_with_globals",
        (
            (
                "mask_mod = or_masks(in_window, is_global)\n    return and_masks(mask_mod, not_future) if causal else mask_mod",
                "return or_masks(and_masks(in_window, not_future) if causal else in_window, is_global)",
            ),
        ),
        "the causal rule applied to the window only: global tokens see and are seen from the future",
    ),
    Mutant(
        "causal flag ignored",
        "sliding_window_with_globals",
        (("if causal else mask_mod", "if False else mask_mod"),),
        "causal=True still sees the future",
    ),
    Mutant(
        "one global token too many",
        "sliding_window_with_globals",
        (("(q_idx < n_global) | (kv_idx < n_global)", "(q_idx <= n_global) | (kv_idx <= n_global)"),),
        "positions 0 … n_global are global instead of 0 … n_global - 1",
    ),
    Mutant(
        "document ids compared across the batch",
        "document_mask",
        (("document_ids[b, kv_idx]", "document_ids[0, kv_idx]"),),
        "the key's document is read from the first row of the batch",
    ),
    Mutant(
        "first row's documents for every row",
        "document_mask",
        (("document_ids[b, q_idx] == document_ids[b, kv_idx]", "document_ids[0, q_idx] == document_ids[0, kv_idx]"),),
        "the batch index is ignored",
    ),
    Mutant(
        "document mask not causal",
        "document_mask",
        (("if causal else same", "if False else same"),),
        "tokens see later tokens of their document",
    ),
    Mutant(
        "document mask keeps the future",
        "document_mask",
        (("same & (kv_idx <= q_idx)", "same & (kv_idx >= q_idx)"),),
        "the causal comparison the wrong way round",
    ),
    Mutant(
        "query's document compared with itself",
        "document_mask",
        (("document_ids[b, kv_idx]", "document_ids[b, q_idx]"),),
        "always True: every token sees the whole row",
    ),
    Mutant(
        "document mask hides the query itself",
        "document_mask",
        (("same & (kv_idx <= q_idx)", "same & (kv_idx < q_idx)"),),
        "strictly causal: a token cannot attend to itself (the first token of a document sees nothing)",
    ),
    Mutant(
        "prefix one too long",
        "prefix_lm_mask",
        (("kv_idx < prefix_lengths[b]", "kv_idx <= prefix_lengths[b]"),),
        "the first token after the prefix is seen by every query",
    ),
    Mutant(
        "first row's prefix for every row",
        "prefix_lm_mask",
        (("prefix_lengths[b]", "prefix_lengths[0]"),),
        "prefix lengths compared across the batch",
    ),
    Mutant(
        "prefix and for or",
        "prefix_lm_mask",
        (("(kv_idx <= q_idx) | (kv_idx < prefix_lengths[b])", "(kv_idx <= q_idx) & (kv_idx < prefix_lengths[b])"),),
        "only prefix keys that are not in the future",
    ),
    Mutant(
        "prefix tested on the query",
        "prefix_lm_mask",
        (("kv_idx < prefix_lengths[b]", "q_idx < prefix_lengths[b]"),),
        "prefix queries see everything instead of everyone seeing the prefix",
    ),
    Mutant(
        "ALiBi sign flipped",
        "alibi_score_mod",
        (("score + slope * (kv_idx - q_idx)", "score + slope * (q_idx - kv_idx)"),),
        "farther keys get a bonus instead of a penalty",
    ),
    Mutant(
        "ALiBi slopes in reverse order",
        "alibi_score_mod",
        (("(h + 1)", "(n_heads - h)"),),
        "head 0 gets the smallest slope",
    ),
    Mutant(
        "ALiBi slope off by one head",
        "alibi_score_mod",
        (("(h + 1)", "h"),),
        "slopes 1, 2^(-8/H), …: head 0 gets slope 1",
    ),
    Mutant(
        "ALiBi bias replaces the score",
        "alibi_score_mod",
        (("return score + slope * (kv_idx - q_idx)", "return slope * (kv_idx - q_idx)"),),
        "the score_mod returns the bias alone",
    ),
    Mutant(
        "ALiBi slopes in base e",
        "alibi_score_mod",
        (("torch.exp2(", "torch.exp("),),
        "e^(-8 (h + 1) / H) instead of 2^(-8 (h + 1) / H)",
    ),
    Mutant(
        "ALiBi without slopes",
        "alibi_score_mod",
        (("score + slope * (kv_idx - q_idx)", "score + (kv_idx - q_idx)"),),
        "the same penalty of 1 per position in every head",
    ),
]

# issue 48: mistakes that held on inputs the first checks never tried
MUTANTS += [
    Mutant(
        "document ids assumed to ascend",
        "document_mask",
        (
            (
                "return same & (kv_idx <= q_idx) if causal else same",
                "return (document_ids[b, kv_idx] >= document_ids[b, q_idx]) & (kv_idx <= q_idx) if causal else same",
            ),
        ),
        "under causal, 'an earlier key of a document not before the query's' stands for 'the same document': right "
        "only while ids ascend along the row ([[2, 2, 2, 0, 0, 1, 1, 1]]: the tokens of document 0 see document 2)",
    ),
    Mutant(
        "documents as runs of equal ids",
        "document_mask",
        (
            (
                "    def mask_mod(b, h, q_idx, kv_idx):\n        same = document_ids[b, q_idx] == document_ids[b, kv_idx]",
                "    change = (document_ids[:, 1:] != document_ids[:, :-1]).long()\n"
                "    runs = torch.cat([torch.zeros_like(change[:, :1]), change.cumsum(-1)], dim=-1)\n\n"
                "    def mask_mod(b, h, q_idx, kv_idx):\n        same = runs[b, q_idx] == runs[b, kv_idx]",
            ),
        ),
        "each run of equal ids numbered as its own document: an id that comes back later in the row "
        "([[1, 1, 0, 0, 0, 1, 1, 2]]) is a different document, though the rule compares the ids",
    ),
    Mutant(
        "ALiBi slopes of the ALiBi repository's get_slopes",
        "alibi_score_mod",
        (
            (
                "        slope = torch.exp2(-8.0 * (h + 1) / n_heads)  # m_h, on h's device\n",
                "        slope = slopes[h]\n",
            ),
            (
                "    def score_mod(score, b, h, q_idx, kv_idx):\n",
                "    def get_slopes(n):  # ofirpress/attention_with_linear_biases\n"
                "        def get_slopes_power_of_2(n):\n"
                "            start = 2 ** (-(2 ** -(math.log2(n) - 3)))\n"
                "            return [start * start**i for i in range(n)]\n\n"
                "        if math.log2(n).is_integer():\n"
                "            return get_slopes_power_of_2(n)\n"
                "        closest = 2 ** math.floor(math.log2(n))\n"
                "        return get_slopes_power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]\n\n"
                "    slopes = torch.tensor(get_slopes(n_heads))\n\n"
                "    def score_mod(score, b, h, q_idx, kv_idx):\n",
            ),
        ),
        "the paper's code: the exercise's slopes for 1, 2, 4, 8 or 16 heads, but for H = 3 or 12 the power-of-two "
        "slopes interleaved with the next power's (H = 3: 1/16, 1/256, 1/4 instead of 2^(-8/3), 2^(-16/3), 2^(-8))",
    ),
]

# Valid answers written differently from the reference, each getting full marks (tests/test_checks.py).
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "window as two comparisons",
        "sliding_window_with_globals",
        (("(q_idx - kv_idx).abs() <= window", "(kv_idx >= q_idx - window) & (kv_idx <= q_idx + window)"),),
        "the band without abs",
    ),
    Alternative(
        "causal part with torch.where",
        "sliding_window_with_globals",
        (("return kv_idx <= q_idx", "return torch.where(kv_idx <= q_idx, True, False)"),),
        "torch.where with Python booleans",
    ),
    Alternative(
        "document mask with logical_and",
        "document_mask",
        (("same & (kv_idx <= q_idx)", "torch.logical_and(same, kv_idx <= q_idx)"),),
        "functional logical op instead of &",
    ),
    Alternative(
        "prefix with logical_or",
        "prefix_lm_mask",
        (
            (
                "(kv_idx <= q_idx) | (kv_idx < prefix_lengths[b])",
                "torch.logical_or(kv_idx <= q_idx, kv_idx < prefix_lengths[b])",
            ),
        ),
        "functional logical op instead of |",
    ),
    Alternative(
        "slope as a power of two",
        "alibi_score_mod",
        (("slope = torch.exp2(-8.0 * (h + 1) / n_heads)", "slope = 2.0 ** (-8.0 * (h + 1) / n_heads)"),),
        "Python's ** on a tensor exponent",
    ),
    Alternative(
        "ALiBi as minus the distance",
        "alibi_score_mod",
        (("score + slope * (kv_idx - q_idx)", "score - slope * (q_idx - kv_idx).abs()"),),
        "the symmetric form: the same on every pair a causal query sees",
    ),
]

# Correct answers written from the notebook's instructions, each getting full marks (tests/test_checks.py in
# process, tests/test_alternatives_graded.py through the real grader).
_WG = head("ch12_flex_attention", "sliding_window_with_globals")
_DOC = head("ch12_flex_attention", "document_mask")
_PRE = head("ch12_flex_attention", "prefix_lm_mask")
_ALI = head("ch12_flex_attention", "alibi_score_mod")

REWRITES: list[Rewrite] = [
    Rewrite(
        "one function, signed distance",
        "sliding_window_with_globals",
        _WG
        + """    def mask_mod(b, h, q_idx, kv_idx):
        distance = q_idx - kv_idx
        near = (distance <= window) & (distance >= -window)
        involves_global = (kv_idx < n_global) | (q_idx < n_global)
        allowed = near | involves_global
        if causal:
            allowed = allowed & (distance >= 0)
        return allowed

    return mask_mod
""",
        "one mask_mod of tensor comparisons, the causal flag read once when it is built",
    ),
    Rewrite(
        "torch.where chain",
        "sliding_window_with_globals",
        _WG
        + """    def mask_mod(b, h, q_idx, kv_idx):
        allowed = torch.where(kv_idx < n_global, True, (q_idx - kv_idx).abs() <= window)
        allowed = torch.where(q_idx < n_global, True, allowed)
        return allowed & (kv_idx <= q_idx) if causal else allowed

    return mask_mod
""",
        "globals by torch.where over the window",
    ),
    Rewrite(
        "three or_masks and an optional and_masks of lambdas",
        "sliding_window_with_globals",
        _WG
        + """    window_mod = lambda b, h, q, kv: (q - kv).abs() <= window  # noqa: E731
    sees_globals = lambda b, h, q, kv: kv < n_global  # noqa: E731
    global_sees = lambda b, h, q, kv: q < n_global  # noqa: E731
    mods = [or_masks(window_mod, sees_globals, global_sees)]
    if causal:
        mods.append(lambda b, h, q, kv: q >= kv)
    return and_masks(*mods)
""",
        "composition with the library's combinators only",
    ),
    Rewrite(
        "torch.where for the future",
        "document_mask",
        _DOC
        + """    def mask_mod(b, h, q_idx, kv_idx):
        same = torch.eq(document_ids[b, q_idx], document_ids[b, kv_idx])
        if not causal:
            return same
        return torch.where(kv_idx <= q_idx, same, False)

    return mask_mod
""",
        "torch.eq and torch.where",
    ),
    Rewrite(
        "and_masks of a same-document rule and a causal lambda",
        "document_mask",
        _DOC
        + """    ids = document_ids

    def same_document(b, h, q_idx, kv_idx):
        return ids[b][q_idx] == ids[b][kv_idx]

    if not causal:
        return same_document
    return and_masks(same_document, lambda b, h, q_idx, kv_idx: q_idx >= kv_idx)
""",
        "chained indexing and the library's and_masks",
    ),
    Rewrite(
        "difference of ids",
        "document_mask",
        _DOC
        + """    def mask_mod(b, h, q_idx, kv_idx):
        row = document_ids[b]
        allowed = (row[q_idx] - row[kv_idx]) == 0
        if causal:
            allowed = allowed & ~(kv_idx > q_idx)
        return allowed

    return mask_mod
""",
        "a zero difference of the ids, the future excluded by negation",
    ),
    Rewrite(
        "torch.where on the prefix",
        "prefix_lm_mask",
        _PRE
        + """    def mask_mod(b, h, q_idx, kv_idx):
        return torch.where(kv_idx < prefix_lengths[b], True, kv_idx <= q_idx)

    return mask_mod
""",
        "torch.where",
    ),
    Rewrite(
        "or_masks of two lambdas",
        "prefix_lm_mask",
        _PRE
        + """    return or_masks(
        lambda b, h, q, kv: q >= kv,
        lambda b, h, q, kv: kv < prefix_lengths[b],
    )
""",
        "the library's or_masks",
    ),
    Rewrite(
        "De Morgan",
        "prefix_lm_mask",
        _PRE
        + """    def mask_mod(b, h, q_idx, kv_idx):
        hidden = (kv_idx > q_idx) & (kv_idx >= prefix_lengths[b])  # future and outside the prefix
        return ~hidden

    return mask_mod
""",
        "the masked pairs described, then negated",
    ),
    Rewrite(
        "table of slopes moved to the score's device",
        "alibi_score_mod",
        _ALI
        + """    slopes = torch.tensor([2 ** (-8 * (i + 1) / n_heads) for i in range(n_heads)])

    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes.to(score.device)[h] * (q_idx - kv_idx)

    return score_mod
""",
        "a slopes tensor built once, indexed by the head",
    ),
    Rewrite(
        "geometric sequence",
        "alibi_score_mod",
        _ALI
        + """    ratio = 2 ** (-8 / n_heads)  # the first slope and the ratio of the sequence

    def score_mod(score, b, h, q_idx, kv_idx):
        slope = ratio ** (h + 1)
        return score + slope * (kv_idx - q_idx)

    return score_mod
""",
        "the slopes as powers of the first one",
    ),
    Rewrite(
        "torch.pow and abs",
        "alibi_score_mod",
        _ALI
        + """    def score_mod(score, b, h, q_idx, kv_idx):
        m = torch.pow(2.0, -8.0 * (h + 1) / n_heads)
        return score - m * torch.abs(q_idx - kv_idx)

    return score_mod
""",
        "the penalty as minus the absolute distance (the same on every pair a causal query sees)",
    ),
    # issue 48: answers right for ids in any order and for head counts that are not powers of two
    Rewrite(
        "ids not different, causal as a non-negative distance",
        "document_mask",
        _DOC
        + """    def mask_mod(b, h, q_idx, kv_idx):
        row = document_ids[b]
        allowed = ~(row[q_idx] != row[kv_idx])
        return allowed & (q_idx - kv_idx >= 0) if causal else allowed

    return mask_mod
""",
        "the ids of one row compared, whatever their order; the future excluded by the sign of the distance",
    ),
    Rewrite(
        "slopes as a tensor of every head, exp of a multiple of ln 2",
        "alibi_score_mod",
        _ALI
        + """    import math

    exponents = -8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads
    slopes = torch.exp(exponents * math.log(2.0))  # 2^(-8 (h + 1) / H), for any H

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + (slopes[h] * (kv_idx - q_idx)).to(score.dtype)

    return score_mod
""",
        "every head's slope computed once in float64 from the exponent, for any head count",
    ),
]
