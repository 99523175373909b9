"""Chapter 9's "Does it work?" experiment (``scripts/train_long_context.py``): the recall task puts the value where it
says, the three attention patterns are the ones the page describes, the window's reach through the layers is
``n_layers · w`` exactly, and a tiny run writes the JSON the book page reads."""

from __future__ import annotations

import json

import pytest
import torch

from scripts import train_long_context as script

SIZES = dict(n_filler=10, n_keys=4, n_values=6)


def test_the_value_sits_at_the_planted_distance_and_the_query_repeats_the_key():
    T = 20
    d = torch.tensor([1, 5, 12, T - 2])
    tokens, targets = script.make_recall_batch(d, T, **SIZES, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (4, T) and targets.shape == (4,) and tokens.dtype == targets.dtype == torch.int64
    vocab = script.vocabulary(**SIZES)
    for b, dist in enumerate(d.tolist()):
        row = tokens[b].tolist()
        pos = T - 1 - dist
        assert row[pos] == targets[b] and targets[b] in vocab["values"]
        assert row[pos - 1] == row[-1] and row[-1] in vocab["keys"]
        others = [t for i, t in enumerate(row) if i not in (pos - 1, pos, T - 1)]
        assert all(t in vocab["filler"] for t in others)  # the value and the key are the only ones of their kind


def test_the_batch_is_a_function_of_the_generator():
    d = torch.tensor([3, 7, 2])
    a = script.make_recall_batch(d, 16, **SIZES, generator=torch.Generator().manual_seed(5))
    b = script.make_recall_batch(d, 16, **SIZES, generator=torch.Generator().manual_seed(5))
    c = script.make_recall_batch(d, 16, **SIZES, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("bad", [0, 15])
def test_a_distance_outside_the_sequence_is_refused(bad):
    with pytest.raises(ValueError, match="distances must lie in"):
        script.make_recall_batch(torch.tensor([3, bad]), 16, **SIZES)


def test_the_three_patterns():
    T, w, every = 24, 3, 8
    full, window, glob = (script.attention_pattern(k, T, w, every) for k in script.MODELS)
    tril = torch.ones(T, T).tril().bool()
    assert torch.equal(full, tril)
    for mask in (window, glob):
        assert not (mask & ~tril).any()  # causal
    assert window.sum(-1).tolist() == [min(i + 1, w + 1) for i in range(T)]
    globals_ = [every - 1, 2 * every - 1]  # 7, 15; 23 = T-1 is the query and stays local
    for g in globals_:
        assert torch.equal(glob[g], tril[g])  # a global token sees every earlier token
        assert glob[g:, g].all()  # and every later token sees it
    assert torch.equal(glob[T - 1], window[T - 1] | torch.isin(torch.arange(T), torch.tensor(globals_)))
    with pytest.raises(ValueError, match="unknown model kind"):
        script.attention_pattern("dense", T, w, every)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_a_window_reaches_exactly_n_layers_times_w_back(n_layers):
    """The receptive-field argument of the page: through ``L`` windowed layers the last position depends on the
    ``L·w`` tokens before it and on none further back."""
    T, w = 24, 3
    torch.manual_seed(0)
    model = script.MaskedDecoder(20, 16, 2, n_layers, script.attention_pattern("window", T, w, 8)).eval()
    tokens = torch.randint(0, 10, (1, T))
    reach = n_layers * w
    base = model(tokens)[0, -1]
    for dist, changes in ((reach, True), (reach + 1, False)):
        moved = tokens.clone()
        moved[0, T - 1 - dist] = 15
        assert torch.equal(model(moved)[0, -1], base) is not changes, dist


def test_a_tiny_run_writes_the_results_the_page_reads(tmp_path):
    argv = "--T 16 --window 2 --global-every 4 --edges 1,3,7,15 --d-model 8 --n-heads 2 --n-layers 1 --steps 3"
    argv += f" --batch-size 4 --warmup 1 --n-eval 8 --seeds 0,1 --out {tmp_path} --no-progress"
    script.main(argv.split())
    results = json.loads((tmp_path / "long_context.json").read_text())
    assert {"config", "seeds", "models", "torch", "device", "per_seed", "summary", "total_seconds"} <= set(results)
    assert results["seeds"] == [0, 1] and list(results["per_seed"]) == ["0", "1"]
    for kind in script.MODELS:
        run = results["per_seed"]["0"][kind]
        assert {"parameters", "train_seconds", "pairs", "pairs_over_T2", "loss_curve", "buckets"} <= set(run)
        assert [b["bucket"] for b in run["buckets"]] == ["1-2", "3-6", "7-14"]
        summary = results["summary"][kind]
        assert [b["bucket"] for b in summary["buckets"]] == ["1-2", "3-6", "7-14"]
        assert all(b["min"] <= b["mean"] <= b["max"] for b in summary["buckets"])
    params = {results["per_seed"]["0"][k]["parameters"] for k in script.MODELS}
    assert len(params) == 1  # same size
    pairs = [results["per_seed"]["0"][k]["pairs"] for k in script.MODELS]
    assert pairs[0] == 16 * 17 // 2 and pairs[1] < pairs[2] < pairs[0]
    assert (tmp_path / "long_context.log").read_text().count("seed 1 ") == 3


def test_the_committed_results_hold_what_the_book_page_reads():
    from pathlib import Path

    results = json.loads((Path(__file__).parents[1] / "results/ch09_sparse_attention/long_context.json").read_text())
    assert set(results["models"]) == set(script.MODELS) and results["seeds"]
    for kind in script.MODELS:
        summary = results["summary"][kind]
        assert {"parameters", "pairs_over_T2", "pairs_over_causal", "train_seconds_mean", "buckets"} <= set(summary)
        assert len(summary["buckets"]) == len(results["config"]["edges"]) - 1


def test_the_training_record_is_on_disk_when_evaluation_fails(tmp_path, monkeypatch):
    """As ``test_training_scripts_keep_results.py`` asks of every training script: what training produced is
    written before anything after it that can fail."""

    def broken(*args, **kwargs):
        raise RuntimeError("evaluation failed")

    monkeypatch.setattr(script, "evaluate", broken)
    argv = "--T 12 --window 2 --edges 1,3,11 --d-model 8 --n-layers 1 --steps 2 --batch-size 4 --warmup 1"
    with pytest.raises(RuntimeError, match="evaluation failed"):
        script.main([*argv.split(), "--models", "window", "--out", str(tmp_path), "--no-progress"])
    saved = json.loads((tmp_path / "long_context.json").read_text())["per_seed"]["0"]["window"]
    assert len(saved["loss_curve"]) == 2 and saved["parameters"] > 0 and "buckets" not in saved
