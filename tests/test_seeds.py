"""``scripts.seeds``: the one home of the spread over seeds that chapters 1–2, 5, 8 and 9 show.

The committed summaries are recomputed from their runs in ``test_length_seeds.py``, ``test_transformer_seeds.py``
and the chapters' own tests; here the helper itself, against values worked out by hand.
"""

from __future__ import annotations

import pytest

from scripts.seeds import spread, summarize_runs


def test_spread_by_hand():
    # mean 2, deviations -1, 0, 1 -> sample variance (1 + 0 + 1) / 2 = 1
    assert spread([1.0, 2.0, 3.0]) == {"mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0}
    assert spread([0.1, 0.2]) == {"mean": 0.15, "std": 0.0707, "min": 0.1, "max": 0.2}  # sqrt(0.005) = 0.07071


def test_one_value_has_no_spread_and_none_is_refused():
    assert spread([4.0]) == {"mean": 4.0, "std": None, "min": 4.0, "max": 4.0}
    with pytest.raises(ValueError, match="at least one value"):
        spread([])


def run(seed: int, key: str, acc: float) -> dict:
    config = {"steps": 10, "seed": seed, "device": "cpu", "torch": "x"}
    rows = [{"bucket": "all", "n": 4, "accuracy": acc}]
    return {"config": config, "models": {"m": {"parameters": 3, key: rows, "train_seconds": 1.0, "eval_seconds": 2.0}}}


def test_summary_takes_the_bucket_key_metrics_and_per_seed_fields_it_is_given():
    s = summarize_runs(
        [run(0, "greedy", 0.5), run(1, "greedy", 0.7)],
        ("steps",),
        buckets_key="greedy",
        metrics=("accuracy",),
        per_seed=("eval_seconds", "absent"),
    )
    m = s["models"]["m"]
    assert m["eval_seconds"] == [2.0, 2.0] and "absent" not in m and "train_seconds" not in m
    (row,) = m["buckets"]
    assert row["accuracy"] == [0.5, 0.7] and row["accuracy_mean"] == 0.6 and row["accuracy_std"] == 0.1414
    assert s["config"] == {"steps": 10, "devices": ["cpu", "cpu"], "torch": ["x", "x"]}
    with pytest.raises(KeyError):  # a run without the named bucket list is not silently summarised as empty
        summarize_runs([run(0, "buckets", 0.5), run(1, "buckets", 0.7)], ("steps",), buckets_key="greedy")
