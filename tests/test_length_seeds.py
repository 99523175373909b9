"""Issue 17: the length experiment of chapters 1–2 over several seeds.

``summarize_seeds`` against hand-computed spreads and its refusals; the committed summary
(``results/length_seeds/length_experiment_seeds.json``) recomputed from the per-seed files it names, so the
figure and tables of the two pages cannot drift from the runs.
"""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest

from scripts.train_length_experiment import SEEDS_FILE, SHARED_CONFIG, summarize_seeds

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "results" / "length_seeds" / SEEDS_FILE


def fake_run(seed: int, bleus: list[float], exact: list[float]) -> dict:
    config = {k: f"same {k}" for k in SHARED_CONFIG} | {"seed": seed, "device": "cpu", "torch": "x"}
    buckets = [
        {"bucket": b, "n": n, "bleu": u, "exact_match": e} for b, n, u, e in zip(["1-8", "all"], [3, 5], bleus, exact)
    ]
    return {"config": config, "models": {"m": {"parameters": 10, "train_seconds": 1.0 + seed, "buckets": buckets}}}


def test_summary_spreads_by_hand():
    runs = [
        fake_run(0, [90.0, 80.0], [0.5, 0.4]),
        fake_run(1, [70.0, 80.0], [0.7, 0.4]),
        fake_run(5, [80.0, 80.0], [0.6, 0.4]),
    ]
    s = summarize_seeds(runs, sources=["a", "b", "c"])
    assert s["seeds"] == [0, 1, 5] and s["sources"] == ["a", "b", "c"]
    m = s["models"]["m"]
    assert m["parameters"] == 10 and m["train_seconds"] == [1.0, 2.0, 6.0]
    first, overall = m["buckets"]
    assert (first["bucket"], first["n"], first["bleu"]) == ("1-8", 3, [90.0, 70.0, 80.0])
    assert first["bleu_mean"] == 80.0 and first["bleu_std"] == 10.0  # sample std: sqrt((100 + 100 + 0) / 2)
    assert (first["bleu_min"], first["bleu_max"]) == (70.0, 90.0)
    assert first["exact_match_mean"] == 0.6 and first["exact_match_std"] == 0.1
    assert overall["bleu_std"] == 0.0 and overall["exact_match"] == [0.4, 0.4, 0.4]


@pytest.mark.parametrize("change", ["one run", "seed", "config", "model", "bucket", "parameters"])
def test_summary_refuses_runs_that_are_not_seeds_of_one_experiment(change):
    a, b = fake_run(0, [90.0, 80.0], [0.5, 0.4]), fake_run(1, [70.0, 80.0], [0.7, 0.4])
    if change == "seed":
        b["config"]["seed"] = 0
    elif change == "config":
        b["config"]["steps"] = 2000
    elif change == "model":
        b["models"] = {"other": b["models"]["m"]}
    elif change == "bucket":
        b["models"]["m"]["buckets"][0]["n"] = 4
    elif change == "parameters":
        b["models"]["m"]["parameters"] = 11
    with pytest.raises(ValueError):
        summarize_seeds([a] if change == "one run" else [a, b])


def test_committed_summary_is_the_summary_of_its_runs():
    summary = json.loads(SUMMARY.read_text())
    runs = [json.loads((ROOT / p).read_text()) for p in summary["sources"]]
    assert summary == summarize_seeds(copy.deepcopy(runs), sources=summary["sources"])
    assert len(summary["seeds"]) >= 3 and summary["sources"][0] == "checkpoints/length_experiment.json"
    # the pages' seed-0 content (tables of the stored run, the saved weights) is the first run of the summary
    assert summary["seeds"][0] == runs[0]["config"]["seed"] == 0
    for name, m in summary["models"].items():
        for i, row in enumerate(m["buckets"]):
            assert row["bleu"] == [r["models"][name]["buckets"][i]["bleu"] for r in runs]
            assert row["bleu_min"] <= row["bleu_mean"] <= row["bleu_max"]
            assert row["exact_match_std"] == round(statistics.stdev(row["exact_match"]), 4)
