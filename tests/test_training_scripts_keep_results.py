"""Issue 18's bug, its whole kind: a training script writes what training produced (checkpoint, loss curve)
before anything that can fail afterwards (decoding, sampling); the character tokenizer names unknown characters.

Each test breaks the step after training and checks that the trained model and its curve are on disk.
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
