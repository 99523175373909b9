"""One vocabulary across chapters (CONTRIBUTING.md, "Names").

Configs, public signatures, saved checkpoint configs and the text of the course use the settled names; the
retired ones occur only at the documented boundaries with PyTorch and Hugging Face (``ALLOWED`` below).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pathlib
import re

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent

# retired name -> the settled name that replaces it
RETIRED = {
    "n_embd": "d_model",
    "n_head": "n_heads",
    "n_layer": "n_layers",
    "block_size": "context_length",
    "max_position": "context_length",
    "max_len": "context_length or max_new_tokens",
    "key_padding_mask": "attention_mask_from_lengths / attention_mask",
    "key_padding": "attention_mask",
    "src_key_padding": "src_attention_mask",
    "tgt_key_padding": "tgt_attention_mask",
    "hidden_dim": "hidden_size",
    "enc_hidden": "enc_hidden_size",
    "dec_hidden": "dec_hidden_size",
}
# Settled names a config dataclass field may use besides chapter-specific ones (layer_norm_eps, pad_id, ...).
SETTLED = {
    "d_model",
    "d_k",
    "d_v",
    "d_ff",
    "n_heads",
    "n_layers",
    "vocab_size",
    "dropout",
    "context_length",
    "max_new_tokens",
    "hidden_size",
}

# The only places a retired name may appear, each a boundary with another library's vocabulary:
ALLOWED = [
    # keyword arguments of nn.MultiheadAttention / nn.Transformer* calls (True = padding there)
    re.compile(r"\b(src_|tgt_|memory_)?key_padding_mask="),
    re.compile(r"""\[["'](src_|tgt_|memory_)key_padding_mask["']\]"""),
    # prose and comments that name PyTorch's argument to explain the opposite polarity
    re.compile(
        r"PyTorch's `{1,2}key_padding_mask|PyTorch's key_padding_mask|PyTorch 的 `key_padding_mask`|"
        r"``\(key_padding_mask, attn_mask\)`` for ``nn.MultiheadAttention``"
    ),
    # building a Hugging Face GPT2Config (its own names) and the comment mapping them to ours
    re.compile(r"GPT2Config"),
    # building nanoGPT's config for the side-by-side benchmark (its own names), marked by this comment
    re.compile(r"# nanoGPT's names"),
]
SCANNED = ["solutions", "autograder", "book", "scripts", "tests", "benchmarks", "README.md"]
# this file lists the retired names; nanoGPT's model.py is vendored unchanged (its own vocabulary)
NOT_SCANNED = {"tests/test_vocabulary.py", "benchmarks/nanogpt/model.py"}


def _solution_modules():
    return sorted(p.stem for p in (ROOT / "solutions").glob("*.py") if p.stem != "__init__")


def _text_files():
    for entry in SCANNED:
        path = ROOT / entry
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*") if p.suffix in {".py", ".md"} and "samples" not in p.parts)
        )
        for p in files:
            if p.relative_to(ROOT).as_posix() not in NOT_SCANNED:
                yield p


@pytest.mark.parametrize("module", _solution_modules())
def test_config_dataclasses_use_settled_names(module):
    mod = importlib.import_module(f"solutions.{module}")
    for name, obj in vars(mod).items():
        if dataclasses.is_dataclass(obj) and isinstance(obj, type) and obj.__module__ == mod.__name__:
            fields = {f.name for f in dataclasses.fields(obj)}
            bad = sorted(fields & RETIRED.keys())
            assert not bad, f"{module}.{name} has retired field(s) {bad}: use {[RETIRED[b] for b in bad]}"
            sizes = {"d_model", "n_heads", "n_layers", "vocab_size", "context_length"}
            # a model's configuration (one that names any model size); ch11's LaunchConfig holds a kernel's launch
            if name.endswith("Config") and fields & (sizes | RETIRED.keys()):
                assert sizes <= fields, (
                    f"{module}.{name} should spell its sizes d_model, n_heads, n_layers, vocab_size, "
                    f"context_length; it has {sorted(fields)}"
                )


@pytest.mark.parametrize("module", _solution_modules())
def test_public_signatures_avoid_retired_names(module):
    mod = importlib.import_module(f"solutions.{module}")
    for name, obj in vars(mod).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
            continue
        callables = []
        if inspect.isfunction(obj):
            callables.append((name, obj))
        elif inspect.isclass(obj):
            callables += [
                (f"{name}.{m}", f)
                for m, f in vars(obj).items()
                if inspect.isfunction(f) and (m in ("__init__", "forward") or not m.startswith("_"))
            ]
        for qualname, fn in callables:
            bad = sorted(set(inspect.signature(fn).parameters) & RETIRED.keys())
            assert not bad, f"{module}.{qualname} has retired argument(s) {bad}: use {[RETIRED[b] for b in bad]}"
    assert not (set(vars(mod)) & RETIRED.keys()), f"{module} defines a retired public name"


def test_saved_configs_use_settled_names():
    checkpoints = sorted((ROOT / "results").rglob("*.pt")) + sorted((ROOT / "checkpoints").glob("*.pt"))
    assert checkpoints
    for path in checkpoints:
        config = torch.load(path, map_location="cpu", weights_only=False)["config"]
        bad = sorted(set(config) & RETIRED.keys())
        assert not bad, f"{path.relative_to(ROOT)} stores retired config key(s) {bad}"
    for path in sorted((ROOT / "results").rglob("*.json")) + sorted((ROOT / "checkpoints").glob("*.json")):
        record = json.loads(path.read_text())
        for key in ("args", "config", "bert_config", "gpt_config"):
            if isinstance(record.get(key), dict):
                bad = sorted(set(record[key]) & RETIRED.keys())
                assert not bad, f"{path.relative_to(ROOT)}[{key!r}] uses retired key(s) {bad}"


def test_retired_names_only_at_documented_boundaries():
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, RETIRED), key=len, reverse=True)) + r")\b")
    found = []
    for path in _text_files():
        depth = 0  # > 0 inside a GPT2Config( ... ) call that spans several lines: its own names are allowed there
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if depth == 0 and "GPT2Config(" in line:
                depth = line.count("(") - line.count(")")
            elif depth > 0:
                depth += line.count("(") - line.count(")")
                continue
            if word.search(line) and not any(p.search(line) for p in ALLOWED):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "retired names (see CONTRIBUTING.md, Names):\n" + "\n".join(found)


def test_h_is_never_a_hidden_size():
    pattern = re.compile(r"\bH (encoder )?hidden|hidden (size )?H\b|hidden_size: hidden size H")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _text_files()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "shape letter H means number of heads; write N for a hidden size: " + ", ".join(found)


def test_contributing_lists_the_names():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    names = text[text.index("## Names") : text.index("## Checks")]
    for settled in sorted(SETTLED | {"attention_mask_from_lengths", "attention_mask"}):
        assert f"`{settled}" in names, f"CONTRIBUTING.md, Names, should list {settled}"
