"""Issue 17: chapter 5's Transformer-vs-Bahdanau experiment over several seeds.

The committed summary (``results/transformer_seeds/transformer_experiment_seeds.json``) is recomputed from the
per-seed files it names, so the page's table and figure cannot drift from the runs; and the summary refuses runs
that are not seeds of one experiment.
"""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest

from scripts.train_transformer import SEEDS_FILE, SHARED_CONFIG, summarize_seeds

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "results" / "transformer_seeds" / SEEDS_FILE


def test_committed_summary_is_the_summary_of_its_runs():
    summary = json.loads(SUMMARY.read_text())
    runs = [json.loads((ROOT / p).read_text()) for p in summary["sources"]]
    assert summary == summarize_seeds(copy.deepcopy(runs), sources=summary["sources"])
    # seed 0 is the run whose weights the page loads (checkpoints/transformer.pt)
    assert summary["sources"][0] == "checkpoints/transformer_experiment.json" and summary["seeds"][0] == 0
    assert len(set(summary["seeds"])) == len(summary["seeds"]) >= 3
    for name, m in summary["models"].items():
        assert m["train_seconds"] == [r["models"][name]["train_seconds"] for r in runs]
        assert m["eval_seconds"] == [r["models"][name]["eval_seconds"] for r in runs]
        for i, row in enumerate(m["buckets"]):
            assert row["bleu"] == [r["models"][name]["greedy"][i]["bleu"] for r in runs]
            assert row["bleu_min"] <= row["bleu_mean"] <= row["bleu_max"]
            assert row["exact_match_std"] == round(statistics.stdev(row["exact_match"]), 4)
        assert m["buckets"][-1]["bucket"] == "all"  # the page's overall column


def test_summary_refuses_a_run_with_another_configuration():
    runs = [json.loads((ROOT / p).read_text()) for p in json.loads(SUMMARY.read_text())["sources"][:2]]
    for key in SHARED_CONFIG:
        changed = copy.deepcopy(runs)
        changed[1]["config"][key] = "something else"
        with pytest.raises(ValueError, match=key):
            summarize_seeds(changed)


def test_summarize_command_writes_the_committed_summary(tmp_path, capsys):
    """``--summarize`` trains nothing and writes the same file the page reads."""
    from scripts.train_transformer import main

    summary = json.loads(SUMMARY.read_text())
    main(["--summarize", *(str(ROOT / p) for p in summary["sources"]), "--out", str(tmp_path)])
    written = json.loads((tmp_path / SEEDS_FILE).read_text())
    assert written["sources"] == [str(ROOT / p) for p in summary["sources"]]
    assert {k: v for k, v in written.items() if k != "sources"} == {k: v for k, v in summary.items() if k != "sources"}
    assert "seeds [0, 1, 2]" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == [SEEDS_FILE]  # no log, no checkpoint: nothing trained
