"""Issue 18's bug, its whole kind: a training script writes what training produced (checkpoint, loss curve)
before anything that can fail afterwards (decoding, sampling); the character tokenizer names unknown characters.

Each test breaks the step after training and checks that the trained model and its curve are on disk
(chapter 14's `scripts/train_hybrid.py`: both language models, before its decoding measurement).
(``scripts/train_gpt.py`` has its own tests in ``test_ch06_gpt.py``; ``scripts/train_bert.py`` saves each model
right after its ``train`` call, before evaluating.)
"""

from __future__ import annotations

import json

import pytest
import torch


def broken(*args, **kwargs):
    raise RuntimeError("decoding failed")


@pytest.mark.slow  # builds the translation data set (minutes on a busy 2-core machine)
def test_length_experiment_keeps_checkpoint_and_curve_when_decoding_fails(tmp_path, monkeypatch):
    from scripts import train_length_experiment as script

    monkeypatch.setattr(script, "translate", broken)
    with pytest.raises(RuntimeError, match="decoding failed"):
        script.main(
            ["--steps", "3", "--batch-size", "4", "--models", "seq2seq", "--out", str(tmp_path), "--no-progress"]
        )
    saved = json.loads((tmp_path / "length_experiment.json").read_text())["models"]["seq2seq"]
    assert len(saved["loss_curve_every_25"]) == 1 and saved["parameters"] > 0
    assert set(torch.load(tmp_path / "seq2seq.pt", weights_only=False)) >= {"config", "state_dict"}


@pytest.mark.slow
def test_transformer_experiment_keeps_checkpoint_and_curve_when_decoding_fails(tmp_path, monkeypatch):
    from scripts import train_transformer as script

    monkeypatch.setattr(script, "transformer_translate", broken)
    argv = ["--steps", "3", "--batch-size", "4", "--warmup", "2", "--models", "transformer", "--out", str(tmp_path)]
    with pytest.raises(RuntimeError, match="decoding failed"):
        script.main([*argv, "--no-progress"])
    saved = json.loads((tmp_path / "transformer_experiment.json").read_text())["models"]["transformer"]
    assert len(saved["loss_curve_every_25"]) == 1 and saved["loss_kind"] == "label-smoothed CE"
    assert set(torch.load(tmp_path / "transformer.pt", weights_only=False)) >= {"config", "state_dict"}


def test_hybrid_script_keeps_both_models_and_curves_when_decoding_fails(tmp_path, monkeypatch):
    """Chapter 14's script writes each trained model and the curves before its decoding measurement."""
    from scripts import train_hybrid as script

    monkeypatch.setattr(script, "decode_step", broken)
    argv = ["--parts", "lm", "decode", "--max_iters", "3", "--warmup", "1", "--eval_interval", "2", "--eval_iters", "1"]
    with pytest.raises(RuntimeError, match="decoding failed"):
        script.main([*argv, "--d_model", "16", "--n_heads", "2", "--out", str(tmp_path), "--no-progress"])
    saved = json.loads((tmp_path / "hybrid_lm.json").read_text())["models"]
    assert set(saved) == {"gpt", "hybrid"}
    assert saved["hybrid"]["layers"] == ["DeltaNetAttention"] * 3 + ["softmax"]
    for kind, results in saved.items():
        assert results["eval_curve"] and results["parameters"] > 0
        assert set(torch.load(tmp_path / f"{kind}.pt", weights_only=False)) >= {"config", "model"}


def test_hybrid_script_writes_each_recall_run(tmp_path):
    from scripts import train_hybrid as script

    argv = ["--parts", "mqar", "--mqar_pairs", "2", "--mqar_steps", "2", "--mqar_models", "softmax", "delta"]
    script.main([*argv, "--mqar_eval_rows", "4", "--out", str(tmp_path), "--no-progress"])
    runs = json.loads((tmp_path / "mqar_2.json").read_text())["runs"]
    assert [(r["model"], r["n_pairs"]) for r in runs] == [("softmax", 2), ("delta", 2)]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in runs)
