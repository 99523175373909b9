"""Tests for the shared translation data module (solutions/translation_data.py)."""

import pytest
import torch

from solutions.translation_data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK_ID,
    TranslationData,
    Vocab,
    collate,
    iterate_batches,
    load_tsv_pairs,
    make_number_splits,
    number_pair,
    pad_sequences,
    sample_numbers,
    source_length_buckets,
    tokenize,
)


@pytest.fixture(scope="module")
def small_splits():
    return make_number_splits(n_train=300, n_valid=60, n_test=60, seed=3)


def test_tokenize_splits_hyphens_and_punctuation():
    assert tokenize("Quatre-vingt-onze") == ["quatre", "-", "vingt", "-", "onze"]
    assert tokenize("one thousand, two") == ["one", "thousand", ",", "two"]
    assert tokenize("   ") == []
    with pytest.raises(TypeError):
        tokenize(12)


def test_number_pairs_have_french_structure():
    # known French forms: vigesimal 80 with plural -s, "et" in 71, invariable "mille"
    assert number_pair(80) == ("eighty", "quatre-vingts")
    assert number_pair(71)[1] == "soixante et onze"
    assert number_pair(2000)[1] == "deux mille"
    with pytest.raises(ValueError):
        number_pair(-1)


def test_splits_deterministic_disjoint_and_seed_dependent(small_splits):
    again = make_number_splits(n_train=300, n_valid=60, n_test=60, seed=3)
    assert again == small_splits
    other = make_number_splits(n_train=300, n_valid=60, n_test=60, seed=4)
    assert other["train"] != small_splits["train"]
    assert [len(small_splits[k]) for k in ("train", "valid", "test")] == [300, 60, 60]
    sets = {k: {s for s, _ in v} for k, v in small_splits.items()}
    assert not sets["train"] & sets["valid"]
    assert not sets["train"] & sets["test"]
    assert not sets["valid"] & sets["test"]
    assert len(sets["train"]) == 300  # no duplicates inside a split either


def test_sample_numbers_spans_lengths():
    nums = sample_numbers(2000, seed=0, max_digits=12)
    assert len(set(nums)) == 2000
    digits = {len(str(x)) for x in nums}
    assert digits == set(range(1, 13))
    lengths = [len(tokenize(number_pair(x)[0])) for x in nums[:400]]
    assert min(lengths) <= 3 and max(lengths) >= 28


def test_vocab_specials_and_roundtrip():
    v = Vocab.build([["b", "a", "b"], ["c", "b"]])
    assert v.itos[:4] == list(SPECIALS)
    assert (v.stoi["<pad>"], v.stoi["<bos>"], v.stoi["<eos>"], v.stoi["<unk>"]) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    assert v.itos[4] == "b"  # most frequent first
    ids = v.encode(["a", "zzz"], add_bos=True, add_eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and ids[2] == UNK_ID
    assert v.decode(ids + [PAD_ID, PAD_ID]) == ["a", "<unk>"]
    assert v.decode(torch.tensor([v.stoi["c"], EOS_ID, v.stoi["a"]])) == ["c"]  # stops at <eos>
    with pytest.raises(ValueError):
        Vocab.build([["a"]], min_freq=0)


def test_vocab_min_freq():
    v = Vocab.build([["a", "a", "b"]], min_freq=2)
    assert "a" in v and "b" not in v


def test_pad_sequences_shapes_and_values():
    x, lens = pad_sequences([[5, 6, 7], [8], [9, 10]])
    assert x.shape == (3, 3) and x.dtype == torch.long
    assert lens.tolist() == [3, 1, 2]
    assert x.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID], [9, 10, PAD_ID]]
    with pytest.raises(ValueError):
        pad_sequences([])
    with pytest.raises(ValueError):
        pad_sequences([[1], []])


def test_translation_data_framing_and_batches(small_splits):
    data = TranslationData(small_splits)
    pair = data.encoded["train"][0]
    src_tokens, tgt_tokens = data.tokens["train"][0]
    assert pair.src == data.src_vocab.encode(src_tokens) + [EOS_ID]
    assert pair.tgt[0] == BOS_ID and pair.tgt[-1] == EOS_ID and len(pair.tgt) == len(tgt_tokens) + 2
    seen = []
    for batch in data.batches("train", batch_size=64):
        B = batch.src.shape[0]
        assert batch.src.shape == (B, int(batch.src_lens.max()))
        assert batch.tgt.shape == (B, int(batch.tgt_lens.max()))
        for b in range(B):
            n = int(batch.src_lens[b])
            assert (
                batch.src[b, n - 1] == EOS_ID
                and (batch.src[b, n:] == PAD_ID).all()
                and (batch.src[b, :n] != PAD_ID).all()
            )
            m = int(batch.tgt_lens[b])
            assert batch.tgt[b, 0] == BOS_ID and batch.tgt[b, m - 1] == EOS_ID and (batch.tgt[b, m:] == PAD_ID).all()
        seen += batch.index
    assert sorted(seen) == list(range(300))
    assert [b.src.shape[0] for b in data.batches("train", 64, drop_last=True)] == [64] * 4


def test_shuffled_batches_reproducible(small_splits):
    data = TranslationData(small_splits)
    a = [b.index for b in iterate_batches(data.encoded["valid"], 16, shuffle=True, seed=7)]
    b = [b.index for b in iterate_batches(data.encoded["valid"], 16, shuffle=True, seed=7)]
    c = [b.index for b in iterate_batches(data.encoded["valid"], 16, shuffle=True, seed=8)]
    assert a == b and a != c
    assert sorted(i for idx in a for i in idx) == list(range(60))


def test_unknown_test_tokens_map_to_unk():
    data = TranslationData({"train": [("a b", "x y")], "test": [("a c", "x z")]})
    assert data.encoded["test"][0].src == [data.src_vocab.stoi["a"], UNK_ID, EOS_ID]
    assert data.encoded["test"][0].tgt == [BOS_ID, data.tgt_vocab.stoi["x"], UNK_ID, EOS_ID]


def test_load_tsv_pairs(tmp_path):
    p = tmp_path / "fra.txt"
    p.write_text(
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\r\n"
        "\n"
        "Hi.\tSalut !\n"
        "I'm OK.\tÇa va.\tattribution\n",
        encoding="utf-8",
    )
    pairs = load_tsv_pairs(p)
    assert pairs == [("Go.", "Va !"), ("Hi.", "Salut !"), ("I'm OK.", "Ça va.")]
    assert load_tsv_pairs(p, max_pairs=2) == pairs[:2]
    data = TranslationData({"train": pairs})
    assert data.tokens["train"][2] == (["i", "'", "m", "ok", "."], ["ça", "va", "."])
    batch = collate(data.encoded["train"])
    assert batch.src.shape == (3, 6)  # "i ' m ok ." + <eos>

    bad = tmp_path / "bad.txt"
    bad.write_text("Go.\tVa !\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=":2:"):
        load_tsv_pairs(bad)


def test_source_length_buckets():
    assert source_length_buckets([1, 5, 6, 10, 11, 40], [5, 10]) == ["1-5", "1-5", "6-10", "6-10", "11+", "11+"]
