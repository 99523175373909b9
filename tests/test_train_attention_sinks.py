"""scripts/train_attention_sinks.py, whose results chapter 13's page reads: the task's targets against a loop over
pairs, the two models' shared start, the evicted start token, and the record the script writes."""

from __future__ import annotations

import json

import torch

from scripts import train_attention_sinks as script


def test_targets_say_whether_the_symbol_appeared_earlier():
    x, seen = script.seen_before_batch(8, 5, 12, torch.Generator().manual_seed(0))
    assert x.shape == (8, 13) and seen.shape == (8, 12) and (x[:, 0] == 5).all()
    symbols = x[:, 1:].tolist()
    expected = [[row[i] in row[:i] for i in range(len(row))] for row in symbols]
    assert seen.tolist() == expected


def test_both_models_start_from_the_same_weights_and_differ_only_by_the_sink():
    torch.manual_seed(3)
    plain = script.OneHead(5, 12, 16, with_sink=False)
    torch.manual_seed(3)
    with_sink = script.OneHead(5, 12, 16, with_sink=True)
    plain_state, sink_state = plain.state_dict(), with_sink.state_dict()
    assert set(sink_state) - set(plain_state) == {"sink"}
    for name, tensor in plain_state.items():
        assert torch.equal(tensor, sink_state[name]), name


def test_weights_sum_to_one_without_a_sink_and_the_evicted_start_gets_none():
    torch.manual_seed(0)
    x, _ = script.seen_before_batch(4, 5, 12, torch.Generator().manual_seed(1))
    plain, with_sink = script.OneHead(5, 12, 16, with_sink=False), script.OneHead(5, 12, 16, with_sink=True)
    with torch.no_grad():
        with_sink.sink.fill_(2.0)
        plain(x)
        torch.testing.assert_close(plain.weights.sum(-1), torch.ones(4, 1, 13))
        with_sink(x)
        assert (with_sink.weights.sum(-1) < 1).all()
        plain(x, evict_start=True)
        assert (plain.weights[:, 0, 1:, 0] == 0).all()  # rows 1.. may not attend to position 0
        torch.testing.assert_close(plain.weights[:, 0, 1:].sum(-1), torch.ones(4, 12))


def test_the_script_writes_every_run_with_its_measurements(tmp_path):
    out = tmp_path / "sinks.json"
    script.main(["--steps", "2", "--seeds", "0", "--batch_size", "8", "--out", str(out)])
    record = json.loads(out.read_text())
    assert [(r["sink"], r["seed"]) for r in record["runs"]] == [(False, 0), (True, 0)]
    keys = {"accuracy", "accuracy_evicted_new", "accuracy_evicted_seen", "start_new", "sink_new", "start_seen"}
    for run in record["runs"]:
        assert keys <= set(run) and all(0 <= run[k] <= 1 for k in keys)
    assert record["runs"][0]["sink_new"] == 0 and record["runs"][0]["sink_logit"] is None
    assert record["config"]["steps"] == 2 and record["meta"]["command"] == "python -m scripts.train_attention_sinks"
