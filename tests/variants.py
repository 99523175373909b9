"""Damaged and hostile variants of a chapter's notebook, derived from its release notebook, for the tests.

``variants(chapter, release)`` returns ``{name: Variant}``. Each variant is a file's text and what grading it
must give:

* ``expect="full"`` — harmless damage (editor round trips): the reference's score;
* ``expect="zero"`` — nothing earned (the stub, hostile code on the stub, an unreadable file, a killed kernel);
* ``expect="at_most_full"`` — runaway code next to a correct answer: any score up to the reference's, always a row
  and a reason or warning;
* ``expect="one_zero"`` — one answer (``target``) never returns, or is wrong behind an attack: that exercise scores
  zero, every other one full;
* ``expect="target_zero"`` — a buggy answer (``target``) behind an attack: it scores zero, nothing scores more than
  full;
* ``expect="targets_zero"`` — answers that change the check's question (``targets``): each scores zero, nothing
  scores more than full;
* ``expect="integrity"`` — a breach of the record protocol (verdicts out of the notebook's order, or twice): the
  whole submission zero, status "integrity".

Every variant of every chapter is canonicalised (tests/test_robust_grading.py) and graded with nbgrader's real
gradebook and kernels; submissions whose canonical form is identical share one kernel run (grading/batch.py), so the
harmless-damage variants cost little.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import zlib

import nbformat

import catalogue
from autograder import notebooks
from scripts.build_notebooks import notebooks as builder


@dataclasses.dataclass(frozen=True)
class Variant:
    text: str
    expect: str  # "full", "zero", "at_most_full", "one_zero", "target_zero", "targets_zero", "integrity"
    kind: str  # "damage" (harmless), "runaway" (an answer that never returns), "hostile", "invalid"
    reason: str = ""  # a substring the row's reason or warnings must contain
    target: str = ""  # expect="one_zero": the exercise that scores zero
    targets: tuple[str, ...] = ()  # expect="targets_zero": the exercises that score zero


def _first_in(source: str, name: str, statements: list[str], method: str = "") -> str:
    """``source`` with ``statements`` as the first statements of function ``name``, or of ``name``'s method
    ``method`` (its first method when empty)."""
    import ast

    node = next(n for n in ast.walk(ast.parse(source)) if getattr(n, "name", None) == name)
    if isinstance(node, ast.ClassDef):
        node = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name in (method or n.name,))
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # after the docstring
        first = node.body[1] if len(node.body) > 1 else first
    lines = source.splitlines()
    for k, statement in enumerate(statements):
        lines.insert(first.lineno - 1 + k, " " * first.col_offset + statement)
    return "\n".join(lines)


def _loop_first_in(source: str, name: str) -> str:
    """``source`` with an endless (sleeping) loop as the first statement of ``name`` (a function), or of the first
    method of ``name`` (a class)."""
    return _first_in(source, name, ["while True:  # a loop that never ends", "    __import__('time').sleep(0.05)"])


def _takes_tensors(obj) -> bool:
    """Whether the reference ``obj`` (a function, or a class through its ``forward``) takes a tensor argument."""
    import inspect

    fn = getattr(obj, "forward", None) if isinstance(obj, type) else obj
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any("Tensor" in str(p.annotation) for p in params if p.name != "self")


# The answer zeroes what the check handed it (below the version counter, through .data) and then computes the
# right thing from the zeroed inputs: a check that built its oracle after the call from the same tensors would agree.
_ZERO_INPUTS = [
    "for _handed in list(locals().values()):  # red team: change the question",
    "    if isinstance(_handed, torch.Tensor):",
    "        _handed.data.zero_()",
]


# Chapter 6's Block, echoing the last hidden state its GPT handed to ln_f whenever it is called outside the GPT's
# forward (as a check that runs the blocks itself to build its expected logits would call it).
_ECHOING_BLOCK = [
    "_echo = {}  # red team: the GPT's last hidden state, kept for the check's own calls of a block",
    "_block_forward = Block.forward",
    "",
    "",
    "def _echoing_forward(self, x):",
    "    last = _echo.get('last')",
    "    if last is not None and last.shape == x.shape:",
    "        return last",
    "    return _block_forward(self, x)",
    "",
    "",
    "Block.forward = _echoing_forward",
]
_KEEP_LAST = (
    "        x = self.ln_f(x)  #",
    "        _echo['last'] = x.detach()  # red team: for the blocks to echo\n        x = self.ln_f(x)  #",
)
_BLOCKS_RUN_PLAINLY = ("        for block in self.h:", "        _echo['last'] = None\n        for block in self.h:")
_ECHOED_GPT_BUGS = {
    "echoing_blocks_position_ids_ignored": (
        ("self.wpe(position_ids)", "self.wpe(torch.arange(T, device=idx.device))"),
        _BLOCKS_RUN_PLAINLY,
        _KEEP_LAST,
    ),
    "echoing_blocks_never_run": (
        ("        for block in self.h:\n            x = block(x)  # (B, T, C), causal\n", ""),
        _KEEP_LAST,
    ),
}


FLOOD_CHAPTER = "ch10_flash_attention"  # floods_the_records: one chapter (each run sends 1.4 GB of records)
# 200 records of 5 MB of int32 each (as much as one call's record holds: trace._MAX_ITEMS), about 6.7 MB once encoded;
# the worker keeps 128 MB of them (channel.MAX_TOTAL_BYTES), so 19 at most
FLOOD_RECORDS, FLOOD_INTS, FLOOD_KEPT = 200, 1_270_000, 19


def _solution_ids(nb) -> list[str]:
    return [c.id for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False)


def _insert_after_setup(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    i = next(i for i, c in enumerate(nb.cells) if c.id == "setup")
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "student-cell"
    nb.cells.insert(i + 1, cell)
    return nb


def _insert_after_first_answer(nb: nbformat.NotebookNode, source: str, last: bool = False) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    first = _solution_ids(nb)[-1 if last else 0]
    i = next(i for i, c in enumerate(nb.cells) if c.id == first)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "student-cell"
    nb.cells.insert(i + 1, cell)
    return nb


def _answers_calling(hook: str, names: list[str]) -> list[str]:
    """Source lines that define every exercise as something that calls ``hook()`` whenever a check uses it (a
    module for class exercises, a function otherwise) and returns meaningless zeros."""
    return [
        "class _Anything(torch.nn.Module):",
        "    def __init__(self, *a, **k):",
        "        super().__init__()",
        f"        {hook}()",
        "    def forward(self, *a, **k):",
        f"        {hook}()",
        "        return torch.zeros(1), torch.zeros(1)",
        "def _anything(*a, **k):",
        f"    {hook}()",
        "    return torch.zeros(1), torch.zeros(1)",
    ] + [f"{n} = _Anything if {n!r}[:1].isupper() else _anything" for n in names]


# The checks' oracles called by the answers, a chapter's exercise -> its source (calls_the_checks_oracles). None of
# them is in the kernel form; with the whole checks module each answer would pass (chapter 14's chunkwise one but
# its measured check). Chapter 13's ring step uses helpers the kernel form keeps (its inputs' builders) and the merge's
# course version, which it does not hold.
_ORACLE_CALLS = {
    "ch09_sparse_attention": {
        "sliding_window_mask": "def sliding_window_mask(T, window, *, causal=True, device=None):\n"
        "    return _m._band(T, window, causal).to(device or 'cpu')\n",
        "global_token_mask": "def global_token_mask(mask, is_global, *, causal=False):\n"
        "    return _m._global_oracle(mask, is_global, causal)\n",
        "sliding_window_attention": "def sliding_window_attention(q, k, v, window, *, causal=True, block_len=None):\n"
        "    mask = _m._band(q.shape[-2], window, causal)\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n",
        "routing_mask": "def routing_mask(query_clusters, key_clusters, *, causal=True):\n"
        "    return _m._routing_oracle(query_clusters, key_clusters, causal)\n",
        "topk_block_mask": "def topk_block_mask(block_scores, n_selected, block_len, *, causal=True, n_initial=1, n_local=2):\n"
        "    return _m._topk_oracle(block_scores, n_selected, block_len, causal, n_initial, n_local)\n",
    },
    "ch13_serving_attention": {
        "gather_kv": "def gather_kv(blocks, block_table, length):\n    return _m._read_table(blocks, block_table, length)\n",
        "paged_attention_decode": "def paged_attention_decode(q, k_blocks, v_blocks, block_tables, lengths):\n"
        "    return _m._decode_oracle(q, k_blocks, v_blocks, block_tables, lengths).to(q.dtype)\n",
        "merge_attention_states": "def merge_attention_states(outputs, lses):\n"
        "    return _m._merge_reference(outputs, lses)\n",
        "ring_attention_step": "def ring_attention_step(o, lse, q, k, v, *, rank, source, world_size, causal=True, "
        "split='contiguous'):\n"
        "    T = q.shape[-2] * world_size\n"
        "    q_pos, k_pos = (_m._positions(T, world_size, r, split) for r in (rank, source))\n"
        "    part, part_lse = _m._state_oracle(q, k, v, _m._causal(q_pos, k_pos) if causal else None)\n"
        "    o, lse = _m._merge_reference([o, part.to(o.dtype)], [lse, part_lse.to(lse.dtype)])\n"
        "    return o.to(q.dtype), lse\n",
        "flash_attention_with_sink_forward": "def flash_attention_with_sink_forward(q, k, v, sink, *, causal=False, "
        "block_q=64, block_k=64):\n"
        "    o, lse = _m._sink_oracle(q, k, v, sink, causal)\n"
        "    return o.to(q.dtype), lse.to(torch.promote_types(q.dtype, torch.float32))\n",
    },
    "ch14_linear_attention": {
        "linear_attention_recurrent": "def linear_attention_recurrent(q, k, v, *, feature_map=None, normalize=True, "
        "state=None):\n"
        "    o, S, z = _m._linear_oracle(q, k, v, feature_map=feature_map, normalize=normalize, state=state)\n"
        "    return o, (S, z)\n",
        "linear_attention_chunkwise": "def linear_attention_chunkwise(q, k, v, chunk_size, *, feature_map=None, "
        "normalize=True, state=None):\n"
        "    o, S, z = _m._linear_oracle(q, k, v, feature_map=feature_map, normalize=normalize, state=state)\n"
        "    return o, (S, z)\n",
        "gated_delta_rule_recurrent": "def gated_delta_rule_recurrent(q, k, v, beta, g, *, state=None):\n"
        "    return _m._delta_oracle(q, k, v, beta, g, state)\n",
        "decode_state_bytes": "def decode_state_bytes(n_layers, T, **sizes):\n"
        "    return _m._bytes_oracle(n_layers, T, **{'bytes_per_element': 2, **sizes})\n",
    },
}

# Answers that change the question in their own way (issue 35): the state or a chunk the check handed them updated in
# place, as a ring's buffers and a recurrent kernel's state are in practice; the outputs are right. Each exercise
# scores zero, every other one full: name -> (chapter, exercise, (old, new) replacements in the course's answer).
_IN_PLACE = {
    "ring_state_updated_in_place": (
        "ch13_serving_attention",
        "ring_attention_step",
        (
            (
                "    return new_o.to(q.dtype), new_lse",
                "    o.copy_(new_o)  # red team: the running state updated in place\n    lse.copy_(new_lse)\n"
                "    return o, lse",
            ),
        ),
    ),
    "merge_accumulates_into_the_first_chunk": (
        "ch13_serving_attention",
        "merge_attention_states",
        (
            (
                "    o = sum(w[..., None] * o_c.to(acc) for w, o_c in zip(weights, outputs))  # (..., T_q, d_v)\n",
                "    o = outputs[0].to(acc).mul_(weights[0][..., None])  # red team: float32 .to(acc) is the chunk itself\n"
                "    for w, o_c in zip(weights[1:], outputs[1:]):\n        o.add_(w[..., None] * o_c.to(acc))\n",
            ),
        ),
    ),
    "linear_state_updated_in_place": (
        "ch14_linear_attention",
        "linear_attention_recurrent",
        (
            ("        S = S + phi_k[:, :, t, :, None]", "        S += phi_k[:, :, t, :, None]"),  # red team: in place
            ("        z = z + phi_k[:, :, t]", "        z += phi_k[:, :, t]"),
        ),
    ),
    "delta_state_updated_in_place": (
        "ch14_linear_attention",
        "gated_delta_rule_recurrent",
        (
            (
                "            S = torch.exp(g[:, :, t])[:, :, None, None] * S",
                "            S.mul_(torch.exp(g[:, :, t])[:, :, None, None])  # red team: in place",
            ),
            ("        S = S + k_t[..., None] *", "        S += k_t[..., None] *"),
        ),
    ),
}
QUESTION_VARIANTS = {name: chapter for name, (chapter, _, _) in _IN_PLACE.items()}


# The exercise that calls the chapter's first one (whose course version is swapped in while it is checked).
LATE_VERDICT_CHAPTERS = {
    "ch03_self_attention": "SelfAttention",
    "ch04_multi_head_attention": "MultiHeadAttention",
    "ch08_kv_cache": "attend_with_cache",
}

# Renumbers what the recorder signs after it is installed, so that the first exercise's late verdict would look in
# order: every record one number up, the late verdict the first number freed ("_renumber(o)" on a record's body).
_RENUMBER = [
    "_freed = []",
    "def _renumber(o):",
    "    if o.get('type') == 'verdict' and o.get('exercise') == FIRST and _freed:",
    "        return dict(o, seq=_freed[0])",
    "    if not _freed:",
    "        _freed.append(o['seq'])",
    "    return dict(o, seq=o['seq'] + 1)",
]

_BY_JSON = _RENUMBER + [
    "import json as _json",
    "class _Renumbering(_json.JSONEncoder):  # the recorder wrote its records' bodies with json.dumps",
    "    def encode(self, o):",
    "        if isinstance(o, dict) and isinstance(o.get('seq'), int):",
    "            o = _renumber(o)",
    "        return super().encode(o)",
    "_json.JSONEncoder = _Renumbering",
]

# Code whose globals are not the notebook's takes the recorder's signer from its frame while a check runs (the frame
# rule looked only at the notebook's own code), and the recorder's socket.socket.sendall signs each line again,
# renumbered.
_BY_THE_KEY = _RENUMBER + [
    "import json as _json, socket as _socket, types as _types",
    "_stolen = []",
    "_g = {'__builtins__': __builtins__, 'STOLEN': _stolen}",
    'exec("""',
    "def steal():",
    "    import sys",
    "    f = sys._getframe(0)",
    "    while f is not None:",
    "        for v in list(f.f_locals.values()):",
    "            if hasattr(v, 'hexdigest') and hasattr(v, 'copy') and not any(v is s for s in STOLEN):",
    "                STOLEN.append(v)",
    "        f = f.f_back",
    '""", _g)',
    "_steal = _types.FunctionType(_g['steal'].__code__, _g, 'steal')",
    "_sendall = _socket.socket.sendall",
    "def _signing_again(self, data):",
    "    try:",
    "        o = _json.loads(_json.loads(data)['body'])",
    "        if _stolen and isinstance(o.get('seq'), int):",
    "            body = _json.dumps(_renumber(o), sort_keys=True)",
    "            h = _stolen[0].copy()",
    "            h.update(body.encode())",
    "            data = (_json.dumps({'body': body, 'mac': h.hexdigest()}) + chr(10)).encode()",
    "    except Exception:",
    "        pass",
    "    return _sendall(self, data)",
    "_socket.socket.sendall = _signing_again",
]


def _late_verdicts(chapter: str, release, filled, names: list[str]) -> dict[str, Variant]:
    """Issue 46, one verdict per exercise in the notebook's order. The first exercise left as the release's stub; its
    test cell made to do nothing (``_autograder_guard`` rebound to an object whose ``verdict`` skips it); the later
    exercise that calls it, answered right, keeps what it finds under the first one's name while it is checked (the
    course's version, swapped in); a cell at the end runs the real verdict of the first exercise with an answer that
    delegates to the kept course version. On the old grader it earned the first exercise's points (ch03 4/10, ch04
    3/7, ch08 2/10). Each is an integrity zero that names the late verdict; so are the variants that renumber the
    records to hide it, through ``json.JSONEncoder`` or with the recorder's key taken from its frame."""
    later = LATE_VERDICT_CHAPTERS.get(chapter)
    if later is None:
        return {}
    first = names[0]
    stub = next(c for c in release.cells if c.id == first).source
    out = {}
    for label, extra, capture in (
        ("late_verdict_with_kept_reference", [], []),
        ("late_verdict_renumbered_by_json", _BY_JSON, []),
        ("late_verdict_signed_again_with_the_recorders_key", _BY_THE_KEY, ["_steal()"]),
    ):
        nb = copy.deepcopy(filled)
        for cell in nb.cells:
            if cell.id == first:
                cell.source = stub
            elif cell.id == later:
                method = "forward" if later[:1].isupper() else ""
                keep = [f"_kept.append({first})  # red team: the course's {first}, swapped in while this is checked"]
                cell.source = _first_in(cell.source, later, keep + capture, method)
        quiet = [
            "_kept = []  # red team (issue 46): a verdict of the first exercise after a later one's",
            f"FIRST = {first!r}",
            "_real_guard = globals().get('_autograder_guard')",
            "class _QuietFirst:",
            "    def verdict(self, name):",
            "        if name != FIRST:",
            "            return _real_guard.verdict(name)",
            "_autograder_guard = _QuietFirst()",
        ]
        nb = _insert_after_first_answer(nb, "\n".join(quiet + extra))
        late = nbformat.v4.new_code_cell(
            "\n".join(
                [
                    "def _delegate(*a, **k):  # the course's version, kept",
                    "    theirs = [f for f in _kept if getattr(f, '__module__', '__main__') != '__main__']",
                    "    return theirs[-1](*a, **k)",
                    "globals()[FIRST] = _delegate",
                    "_real_guard.verdict(FIRST)",
                ]
            )
        )
        late.id = "student-late-verdict"
        nb.cells.append(late)
        out[label] = Variant(
            nbformat.writes(nb), "integrity", "hostile", f"the verdict for {first} came after the verdict for "
        )
    return out


def variants(chapter: str, release: nbformat.NotebookNode) -> dict[str, Variant]:
    filled = builder.fill_release(release, chapter)
    good = json.loads(nbformat.writes(filled))
    names = _solution_ids(release)
    v: dict[str, Variant] = {}

    v["reference"] = Variant(nbformat.writes(filled), "full", "damage")
    v["stub"] = Variant(nbformat.writes(release), "zero", "damage", "NotImplementedError")

    d = copy.deepcopy(good)  # Colab/VS Code round trip that dropped nbgrader's metadata
    for c in d["cells"]:
        c["metadata"] = {}
    v["metadata_stripped"] = Variant(_dump(d), "full", "damage", "metadata missing")

    d = copy.deepcopy(good)  # nbformat 4.0 with editor ids, no nbgrader metadata, other kernel
    d["nbformat_minor"] = 0
    for i, c in enumerate(d["cells"]):
        c.pop("id", None)
        c["metadata"] = {"id": f"{zlib.crc32(str(i).encode()):08x}"} if c["cell_type"] == "code" else {}
    d["metadata"] = {"kernelspec": {"name": "conda-env-nlp-py", "display_name": "Python [conda env:nlp]"}}
    v["nbformat40_editor_ids"] = Variant(_dump(d), "full", "damage", "old nbformat 4.0")

    d = copy.deepcopy(good)  # duplicate and null ids, altered metadata
    for i, c in enumerate(d["cells"]):
        c["id"] = None if i % 3 == 0 else "dup"
        if c["metadata"].get("nbgrader", {}).get("solution"):
            c["metadata"]["nbgrader"]["solution"] = False
            c["metadata"]["nbgrader"]["grade_id"] = "cell-" + c["metadata"]["nbgrader"]["grade_id"]
    v["duplicate_null_ids"] = Variant(_dump(d), "full", "damage", "ids")

    for label, meta in {
        "colab": {
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "accelerator": "TPU",
            "colab": {"provenance": [{"file_id": "x"}], "gpuType": "V28"},
            "widgets": {"application/vnd.jupyter.widget-state+json": [1, {"odd": None}]},
        },
        "vscode": {
            "kernelspec": {"name": ".venv", "display_name": ".venv (Python 3.11.7)"},
            "vscode": {"interpreter": {"hash": "abc"}},
            "widgets": "odd",
        },
        "no_kernel": {},
    }.items():
        d = copy.deepcopy(good)
        d["metadata"] = meta
        v[f"editor_metadata_{label}"] = Variant(_dump(d), "full", "damage")

    d = copy.deepcopy(good)  # the last answer cell turned into markdown (metadata lost)
    last = next(c for c in reversed(d["cells"]) if c["id"] == names[-1])
    last["cell_type"], last["metadata"] = "markdown", {}
    last.pop("outputs", None), last.pop("execution_count", None)
    last["id"] = "md-cell"
    v["cell_type_changed"] = Variant(_dump(d), "full", "damage", "not a code cell")

    nb = copy.deepcopy(filled)  # helpers inserted, first answer split over two cells, a duplicated answer cell
    i = next(i for i, c in enumerate(nb.cells) if c.id == names[0])
    helper = nbformat.v4.new_code_cell("_my_helper_constant = 42  # a student's own cell")
    helper.id = "helper"
    dup = copy.deepcopy(nb.cells[i])
    dup.id = "dup-answer"
    nb.cells.insert(i, helper)
    nb.cells.insert(i + 2, dup)
    note = nbformat.v4.new_markdown_cell("my notes")
    note.id = "notes"
    nb.cells.insert(i + 3, note)
    v["inserted_split_duplicated"] = Variant(nbformat.writes(nb), "full", "damage", "several cells")

    d = copy.deepcopy(good)  # test cells deleted
    d["cells"] = [c for c in d["cells"] if not c["metadata"].get("nbgrader", {}).get("grade")]
    v["tests_deleted"] = Variant(_dump(d), "full", "damage", "deleted")

    d = json.loads(nbformat.writes(release))  # stub, with test cells edited to do nothing: still zero
    for c in d["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade"):
            c["source"] = "pass  # edited"
    v["tests_edited_on_stub"] = Variant(_dump(d), "zero", "hostile", "edited")

    d = copy.deepcopy(good)  # huge outputs
    cell = next(c for c in d["cells"] if c["cell_type"] == "code")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * 5_000_000}]
    v["huge_outputs"] = Variant(_dump(d), "full", "damage", "dropped")

    # An answer that never returns costs only its own exercise (the check run's time limit stops it).
    slow = {"ch02_bahdanau_attention": "masked_softmax"}.get(chapter, names[-1])
    nb = copy.deepcopy(filled)
    cell = next(c for c in nb.cells if c.id == slow)
    cell.source = _loop_first_in(cell.source, slow)
    v["endless_answer"] = Variant(nbformat.writes(nb), "one_zero", "runaway", "timed out after", target=slow)
    if chapter == "ch01_seq2seq":  # the realistic form: no max_new_tokens bound, hangs only in a hidden check
        nb = copy.deepcopy(filled)
        cell = next(c for c in nb.cells if c.id == "greedy_decode")
        assert "for _ in range(max_new_tokens):" in cell.source
        cell.source = cell.source.replace("for _ in range(max_new_tokens):", "while True:")
        v["decode_without_bound"] = Variant(
            nbformat.writes(nb), "one_zero", "runaway", "greedy_decode timed out after", target="greedy_decode"
        )

    text = nbformat.writes(filled)
    v["truncated_json"] = Variant(text[: len(text) // 3], "zero", "invalid", "not valid JSON")
    v["not_a_notebook"] = Variant(json.dumps({"hello": [1, 2, 3]}), "zero", "invalid", "not a notebook")

    # ---------------------------------------------------------------- hostile code (graded with kernels)
    stub_imports = "\n".join(f"from solutions.{chapter} import {n}" for n in names)
    d = json.loads(nbformat.writes(release))
    for c in d["cells"]:
        if c["metadata"].get("nbgrader", {}).get("solution"):
            c["source"] = f"from solutions.{chapter} import {c['id']}  # the course package's reference"
    v["imports_reference"] = Variant(_dump(d), "zero", "hostile")
    del stub_imports

    fake = (
        "class _Pass:\n    def run(self, *a, **k):\n        return None\n"
        "EXERCISES.run = _Pass().run\nEXERCISES = _Pass()\n"
        "import torch, builtins\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda *a, **k: True\n"
        "import autograder.core as _c\nfor _n in ('expect_close', 'expect_equal', 'expect_shape', 'expect_true'):\n"
        "    setattr(_c, _n, lambda *a, **k: None)\n_c.call = lambda what, fn, *a, **k: None\n"
        "_c.Exercises.run = lambda *a, **k: None\n"
    )
    v["patches_grader"] = Variant(
        nbformat.writes(_insert_after_setup(release, fake)), "zero", "hostile", "not been filled in"
    )
    v["exits_kernel"] = Variant(
        nbformat.writes(_insert_after_first_answer(filled, "import os\nos._exit(3)")), "zero", "hostile", "kernel died"
    )
    runaway = "\n".join(
        [
            "import subprocess, socket, os",
            "_hog = []",
            "try:",
            "    while True:",
            "        _hog.append(bytearray(256 * 2**20))",
            "except MemoryError:",
            "    _hog = None",
            "for _try in (lambda: subprocess.run(['echo', 'hi']), lambda: os.system('echo hi'),",
            "             lambda: socket.create_connection(('203.0.113.1', 80), timeout=2),",
            f"             lambda: open({str(notebooks.ROOT / 'solutions' / (chapter + '.py'))!r}).read(),",
            "             lambda: open('/tmp/../etc/owned-by-a-student', 'w'),",
            "             lambda: os.remove(os.path.expanduser('~/../../gradebook.db'))):",
            "    try:",
            "        _try()",
            "    except Exception as exc:",
            "        print(type(exc).__name__, exc)",
            "import time",
            "while True:  # endless (sleeping, so that the test suite's other kernels keep the CPU)",
            "    time.sleep(0.05)",
        ]
    )
    v["runaway_and_escapes"] = Variant(
        nbformat.writes(_insert_after_first_answer(filled, runaway)), "at_most_full", "hostile", "blocked"
    )

    # Library functions swapped on the stub: builtins and numpy (persistent): the worker judges the stubs' record.
    swap = (
        "import builtins, numpy\nbuiltins.all = lambda *a, **k: True\nbuiltins.any = lambda *a, **k: False\n"
        "numpy.allclose = lambda *a, **k: True\nnumpy.testing.assert_allclose = lambda *a, **k: None\n"
    )
    # Chapter 11's import cell needs the real builtins (importing Triton fails with any() and all() swapped): its
    # kernels are then never defined, and the row says so.
    stub_reason = "is not defined in the notebook" if chapter == "ch11_flash_attention_triton" else "not been filled in"
    v["patches_builtins_numpy"] = Variant(
        nbformat.writes(_insert_after_setup(release, swap)), "zero", "hostile", stub_reason
    )

    # Swaps made from inside the checks (the answer's own code runs when a check calls it) that undo themselves
    # on first use, so that nothing is left to see once the verdict is over: the worker's comparisons are its own.
    restoring = "\n".join(
        [
            "import sys, torch",
            "import autograder.core as _core",
            "def _swap_once():",
            f"    mods = [torch, _core, sys.modules['autograder.{chapter}']]",
            "    for owner in mods:",
            "        for n in ('allclose', 'equal', 'expect_close', 'expect_equal', 'expect_shape', 'expect_true', 'call'):",
            "            if not hasattr(owner, n):",
            "                continue",
            "            orig = getattr(owner, n)",
            "            def fake(*a, _o=owner, _n=n, _f=orig, **k):",
            "                setattr(_o, _n, _f)  # restore: the swap lasts one call",
            "                return True if _n in ('allclose', 'equal') else None",
            "            setattr(owner, n, fake)",
        ]
        + _answers_calling("_swap_once", names)
    )
    v["self_restoring_swaps"] = Variant(
        nbformat.writes(_insert_after_first_answer(release, restoring, last=True)), "zero", "hostile"
    )

    # Forging the grader's records: find its socket, reach the engine, silence the verdict in the test cells.
    forge = "\n".join(
        [
            "import json, socket, sys",
            "tries = []",
            "try:",
            "    for line in open('/proc/net/unix').read().splitlines():",
            "        if '@autograder-' in line:",
            "            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
            "            s.connect('\\0' + line.split('@', 1)[1].strip())",
            "            s.sendall(json.dumps({'body': json.dumps({'type': 'verdict', 'exercise': 'x', 'passed': True}),",
            "                                  'mac': '0' * 64}).encode() + b'\\n')",
            "except Exception as exc:",
            "    tries.append(repr(exc))",
            "try:  # a jailed kernel's records go to a socket file in its view",
            "    import glob",
            "    for path in glob.glob('/tmp/*/autograder-records*'):",
            "        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
            "        s.connect(path)",
            "except Exception as exc:",
            "    tries.append(repr(exc))",
            "try:",
            "    g = sys.modules['autograder.grading.guard']",
            "    engine = g._ARMED['verdict'].__closure__[0].cell_contents",
            "    tries.append(str(engine.gi_frame.f_locals))",
            "except Exception as exc:",
            "    tries.append(repr(exc))",
            "try:",
            "    import _posixsubprocess",
            "except Exception as exc:",
            "    tries.append(repr(exc))",
            "class _Silent:",
            "    def verdict(self, *a, **k):",
            "        return None",
            "    def conclude(self, *a, **k):",
            "        return None",
            "    def run(self, *a, **k):",
            "        return None",
            "_autograder_guard = _Silent()",
            "EXERCISES = _Silent()",
            "print(tries)",
        ]
    )
    # Walking up the interpreter's frames from inside a check to the grader's private copies of its helpers.
    walk = "\n".join(
        [
            "import sys, inspect, torch",
            "def _bend():",
            "    for get in (lambda: sys._getframe(1), lambda: inspect.currentframe().f_back):",
            "        try:",
            "            f = get()",
            "        except PermissionError as exc:",
            "            print('refused:', exc)",
            "            continue",
            "        while f is not None:",
            "            g = f.f_globals",
            "            for n in ('expect_close', 'expect_equal', 'expect_shape', 'expect_true'):",
            "                if n in g:",
            "                    g[n] = lambda *a, **k: None",
            "            f = f.f_back",
        ]
        + _answers_calling("_bend", names)
    )
    v["walks_frames"] = Variant(
        nbformat.writes(_insert_after_first_answer(release, walk, last=True)),
        "zero",
        "hostile",
        "blocked: frame introspection",
    )

    v["forges_records"] = Variant(nbformat.writes(_insert_after_setup(release, forge)), "zero", "hostile", "blocked")

    # A replaced function, then undone, and every verdict run again by the notebook: one verdict per exercise is the
    # protocol (issue 46), so a second one is an integrity zero that names the exercise, right answers or not.
    rerun = "\n".join(
        [
            "import torch",
            "_orig = torch.allclose",
            "torch.allclose = lambda *a, **k: True",
        ]
    )
    again = "\n".join(
        ["torch.allclose = _orig", "import autograder.grading.guard as _g"] + [f"_g.verdict({n!r})" for n in names]
    )
    nb = _insert_after_setup(filled, rerun)
    last = nbformat.v4.new_code_cell(again)
    last.id = "student-rerun"
    nb.cells.append(last)
    v["reruns_verdicts"] = Variant(nbformat.writes(nb), "integrity", "hostile", f"a second verdict for {names[0]}")

    # A module whose weights are tensor subclasses with __torch_dispatch__, so that the grader's own reference
    # computed from them comes out as zeros (found by a red-team pass on ch03): only chapters whose exercise
    # reads W_q/W_k/W_v from the student's SelfAttention.
    if "SelfAttention" in names:
        dispatch = "\n".join(
            [
                "import torch, torch.nn as nn",
                "from torch.utils._pytree import tree_map",
                "",
                "class Z(torch.Tensor):",
                "    @staticmethod",
                "    def __new__(cls, inner):",
                "        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device,",
                "                                                   requires_grad=False)",
                "    def __init__(self, inner):",
                "        self.inner = inner",
                "    @classmethod",
                "    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):",
                "        un = lambda t: t.inner if isinstance(t, Z) else t",
                "        out = func(*tree_map(un, args), **tree_map(un, kwargs or {}))",
                "        def wrap(t):",
                "            if isinstance(t, torch.Tensor) and t.is_floating_point():",
                "                return Z(torch.zeros_like(t))",
                "            return t",
                "        return tree_map(wrap, out)",
                "",
                "class FakeLinear:",
                "    __class__ = property(lambda self: nn.Linear)",
                "    def __init__(self, i, o):",
                "        self.weight = Z(torch.zeros(o, i)); self.bias = None",
                "",
                "class SelfAttention(nn.Module):",
                "    def __init__(self, d_model, d_k, d_v=None, bias=False):",
                "        super().__init__()",
                "        d_v = d_v or d_k",
                "        self.d_v = d_v",
                '        object.__setattr__(self, "W_q", FakeLinear(d_model, d_k))',
                '        object.__setattr__(self, "W_k", FakeLinear(d_model, d_k))',
                '        object.__setattr__(self, "W_v", FakeLinear(d_model, d_v))',
                "    def forward(self, x, mask=None):",
                "        B, T, _ = x.shape",
                "        return torch.zeros(B, T, self.d_v), torch.zeros(B, T, T)",
            ]
        )
        v["dispatch_subclass_weights"] = Variant(
            nbformat.writes(_insert_after_first_answer(release, dispatch, last=True)), "zero", "hostile"
        )

    # The answer cannot change the question (issue 35): every answer that takes tensors zeroes them first, then
    # computes from the zeroed inputs; each of those exercises scores zero.
    solutions = builder.solution_module(chapter)
    targets = tuple(n for n in names if _takes_tensors(getattr(solutions, n, None)))
    if targets and chapter != "ch11_flash_attention_triton":  # ch11's answers are kernels, handed copies
        nb = copy.deepcopy(filled)
        for cell in nb.cells:
            if cell.id in targets:
                method = "forward" if cell.id[:1].isupper() else ""
                cell.source = _first_in(cell.source, cell.id, _ZERO_INPUTS, method)
        v["zeroes_its_inputs"] = Variant(nbformat.writes(nb), "targets_zero", "hostile", targets=targets)

    for name, (owner, target, edits) in _IN_PLACE.items():
        if owner == chapter:
            nb = copy.deepcopy(filled)
            cell = next(c for c in nb.cells if c.id == target)
            for old, new in edits:
                assert old in cell.source, old
                cell.source = cell.source.replace(old, new)
            v[name] = Variant(nbformat.writes(nb), "one_zero", "hostile", target=target)

    # A kernel for an operator registered from inside the check (torch.library), with the buggy answer: it bends
    # only the kernel's own comparisons, never the worker's.
    mutant = catalogue.mutants(chapter)[0]
    buggy = builder.fill_release(release, chapter, mutants=[mutant])
    registers = [
        "import torch as _t  # red team: a kernel registered while the check runs",
        "globals().setdefault('_kept_libs', []).append(_t.library.Library('aten', 'IMPL'))",
        "globals()['_kept_libs'][-1].impl('allclose', lambda *a, **k: True, 'CPU')",
    ]
    nb = copy.deepcopy(buggy)
    cell = next(c for c in nb.cells if c.id == mutant.target)
    method = "__init__" if mutant.target[:1].isupper() else ""
    cell.source = _first_in(cell.source, mutant.target, registers, method)
    v["registers_a_kernel_in_the_check"] = Variant(nbformat.writes(nb), "target_zero", "hostile", target=mutant.target)

    # The course's version of an exercise, swapped in while another is checked, kept by the notebook and returned
    # as its own answer (red team, chapter 4 on the untouched notebook): only earlier exercises are swapped in.
    if chapter == "ch04_multi_head_attention":
        d = json.loads(nbformat.writes(release))
        sources = {
            "split_heads": "_kept = []\n\ndef split_heads(x, n_heads):\n    _kept.append(merge_heads)\n"
            "    raise NotImplementedError\n",
            "merge_heads": "def merge_heads(x):\n    theirs = [f for f in _kept if f is not merge_heads]\n"
            "    if not theirs:\n        raise NotImplementedError\n    return theirs[-1](x)\n",
        }
        for c in d["cells"]:
            if c["metadata"].get("nbgrader", {}).get("solution") and c["id"] in sources:
                c["source"] = sources[c["id"]]
        v["keeps_a_handed_reference"] = Variant(_dump(d), "zero", "hostile")

    # Spawning through a fresh copy of _posixsubprocess (its fork_exec has no audit event), loaded from its file by
    # another loader after the guard removed the module: the import itself is refused.
    fresh = "\n".join(
        [
            "import glob, os, importlib.util, importlib.machinery  # red team: a process without an audit event",
            "_dir = os.path.dirname(importlib.util.find_spec('_json').origin)",
            "for _path in glob.glob(_dir + '/_posixsubprocess*'):",
            "    _loader = importlib.machinery.ExtensionFileLoader('_posixsubprocess', _path)",
            "    _spec = importlib.util.spec_from_file_location('_posixsubprocess', _path, loader=_loader)",
            "    _fresh = importlib.util.module_from_spec(_spec)",
            "    print('loaded', _fresh)",
        ]
    )
    v["loads_a_fresh_posixsubprocess"] = Variant(
        nbformat.writes(_insert_after_setup(release, fresh)), "zero", "hostile", "spawning a process"
    )

    v.update(_late_verdicts(chapter, release, filled, names))

    # An oracle fed by a call into part of the answer (issue 46, red team on chapter 6): the GPT's blocks, called by
    # the check on their own, echo the model's last hidden state, so that expected logits computed through them
    # agree with a wrong GPT. Each scores as the bug without the echo: the GPT exercise earns nothing.
    if chapter == "ch06_gpt":
        for name, bug in _ECHOED_GPT_BUGS.items():
            nb = copy.deepcopy(filled)
            for cell in nb.cells:
                if cell.id == "Block":
                    cell.source += "\n\n" + "\n".join(_ECHOING_BLOCK)
                elif cell.id == "GPT":
                    for old, new in bug:
                        assert old in cell.source, old
                        cell.source = cell.source.replace(old, new)
            v[name] = Variant(nbformat.writes(nb), "one_zero", "hostile", target="GPT")

    # The grader's knowledge used as the answer (issue 46): the kernel imports the checks in their kernel form, which
    # holds no oracle and no course version of an exercise. Chapters 9's, 13's and 14's answers call the checks
    # module's own oracles (_ORACLE_CALLS; the module named from two strings, so no text search finds it; 13/13 on
    # chapter 9 before); every chapter's answers with a course version return it from EXERCISES (3/7 on chapter 4,
    # 4/10 on chapter 3 before). Both score zero.
    if chapter in _ORACLE_CALLS:
        d = json.loads(nbformat.writes(release))
        head = f"import importlib, torch\n_m = importlib.import_module('autograder.' + {chapter!r})\n\n"
        for c in d["cells"]:
            if c["metadata"].get("nbgrader", {}).get("solution") and c["id"] in _ORACLE_CALLS[chapter]:
                c["source"] = head + _ORACLE_CALLS[chapter][c["id"]]
        v["calls_the_checks_oracles"] = Variant(_dump(d), "zero", "hostile")
    with_reference = [n for n in names if n in importlib.import_module(f"autograder.{chapter}").EXERCISES._references]
    if with_reference:
        d = json.loads(nbformat.writes(release))
        for c in d["cells"]:
            if c["metadata"].get("nbgrader", {}).get("solution") and c["id"] in with_reference:
                c["source"] = (
                    f"def {c['id']}(*args, **kwargs):\n"
                    "    refs = getattr(EXERCISES, 'references', None) or getattr(EXERCISES, '_references', {})\n"
                    f"    return refs[{c['id']!r}](*args, **kwargs)\n"
                )
        v["answers_with_the_course_versions"] = Variant(_dump(d), "zero", "hostile")
    # Records by the score (issue 46, the bounded worker): the notebook runs the grader's verdict 200 times itself, its
    # first answer returning 5 MB of random integers (two rows, as if a pair) once per verdict, so that each record is
    # about 6.8 MB and all of them 1.4 GB. The worker keeps 128 MB of them, within its own memory cgroup, and the row
    # is an integrity zero that says how many records it dropped. Graded by a test of its own (slow).
    if chapter == FLOOD_CHAPTER:
        flood = names[0]
        answer = "\n".join(
            [
                "import torch",
                "import autograder.grading.guard as _g",
                f"_answer, _big = {flood}, [False]",
                "",
                "",
                f"def {flood}(*args, **kwargs):  # red team: a 5 MB answer, once per verdict",
                "    if _big[0]:",
                "        _big[0] = False",
                "        return torch.randint(-(2**31), 2**31 - 1, (2, FLOOD_INTS // 2), dtype=torch.int32)",
                "    return _answer(*args, **kwargs)",
            ]
        ).replace("FLOOD_INTS", str(FLOOD_INTS))
        nb = _insert_after_first_answer(filled, answer, last=True)
        for k in range(FLOOD_RECORDS // 10):  # ten verdicts a cell (a few seconds): each cell within its time limit
            cell = nbformat.v4.new_code_cell(
                "for _i in range(10):\n    _big[0] = True\n    try:\n"
                f"        _g.verdict({flood!r})\n    except Exception:\n        pass"
            )
            cell.id = f"student-flood-{k}"
            nb.cells.append(cell)
        v["floods_the_records"] = Variant(nbformat.writes(nb), "zero", "hostile", "record(s) dropped")

    # A bug hidden below Python (red team, jailed too): replacement CPU kernels for aten::allclose and aten::equal,
    # registered through torch.library, make every comparison succeed. The buggy exercise must still score zero.
    mutant = catalogue.mutants(chapter)[0]
    override = "\n".join(
        [
            "import torch",
            "_lib = torch.library.Library('aten', 'IMPL')",
            "_lib.impl('allclose', lambda *a, **k: True, 'CPU')",
            "_lib.impl('equal', lambda *a, **k: True, 'CPU')",
        ]
    )
    buggy = builder.fill_release(release, chapter, mutants=[mutant])
    v["kernel_override_on_a_bug"] = Variant(
        nbformat.writes(_insert_after_setup(buggy, override)), "target_zero", "hostile", target=mutant.target
    )

    # ---------------------------------------------------------------- issue 46: measurements the answer switches off
    # A measurement of how an answer computes runs in the student's process; what the answer can switch off there
    # must fail the check, not pass it unmeasured (the variants' names: MEASURED_VARIANTS).
    if chapter == "ch09_sparse_attention":  # dense attention in an autograd.Function, saving only q, k, v
        dense = next(m for m in catalogue.mutants(chapter) if m.name == "dense attention under the mask")
        nb = builder.fill_release(release, chapter, mutants=[dense])
        cell = next(c for c in nb.cells if c.id == "sliding_window_attention")
        cell.source += "\n\n" + "\n".join(_DENSE_RECOMPUTED_WITH_MODES_OFF)
        v["recomputes_dense_with_modes_off"] = Variant(
            nbformat.writes(nb), "one_zero", "hostile", target="sliding_window_attention"
        )
    if chapter == "ch10_flash_attention":  # the whole score matrix, computed where the check's watch is off
        whole = next(m for m in catalogue.mutants(chapter) if m.name == "whole score matrix in the forward pass")
        nb = builder.fill_release(release, chapter, mutants=[whole])
        cell = next(c for c in nb.cells if c.id == "flash_attention_forward")
        cell.source += "\n\n" + "\n".join(_FULL_MATRIX_WITH_MODES_OFF)
        v["full_matrix_with_modes_off"] = Variant(
            nbformat.writes(nb), "one_zero", "hostile", target="flash_attention_forward"
        )
    if chapter == "ch11_flash_attention_triton":  # the endless answer's loop in plain Triton: Python in a kernel
        # (the sleeping loop's __import__) is refused before the launch, so the kernel loops without sleeping
        nb = copy.deepcopy(filled)
        cell = next(c for c in nb.cells if c.id == slow)
        cell.source = _first_in(
            cell.source, slow, ["while True:  # a loop that never ends, in Triton's language", "    pass"]
        )
        v["endless_answer"] = Variant(nbformat.writes(nb), "one_zero", "runaway", "timed out after", target=slow)
    if chapter == "ch11_flash_attention_triton":  # PyTorch in a subclass of Triton's kernel, one forged counted load
        nb = copy.deepcopy(filled)
        cell = next(c for c in nb.cells if c.id == "flash_attention_forward_kernel")
        cell.source = "\n".join(_FORGED_LOAD_SUBCLASS)
        v["forged_load_subclass"] = Variant(
            nbformat.writes(nb), "one_zero", "hostile", target="flash_attention_forward_kernel"
        )
    return v


# Issue 46's variants, each of one chapter, graded with kernels on that chapter (tests/test_robust_grading.py).
MEASURED_VARIANTS = {
    "recomputes_dense_with_modes_off": "ch09_sparse_attention",
    "full_matrix_with_modes_off": "ch10_flash_attention",
    "forged_load_subclass": "ch11_flash_attention_triton",
}

# Chapter 9: the dense answer in an autograd.Function that keeps only q, k and v for backward and recomputes the
# dense scores there, both passes with PyTorch's dispatch modes switched off (the check's watch among them).
_DENSE_RECOMPUTED_WITH_MODES_OFF = [
    "from torch.utils._python_dispatch import _disable_current_modes  # red team: the watch switched off",
    "_dense_window_attention = sliding_window_attention",
    "",
    "",
    "class _Recomputed(torch.autograd.Function):",
    "    @staticmethod",
    "    def forward(ctx, q, k, v, window, causal, block_len):",
    "        ctx.save_for_backward(q, k, v)",
    "        ctx.args = (window, causal, block_len)",
    "        with _disable_current_modes():",
    "            return _dense_window_attention(q, k, v, window, causal=causal, block_len=block_len)",
    "",
    "    @staticmethod",
    "    def backward(ctx, grad):",
    "        window, causal, block_len = ctx.args",
    "        with _disable_current_modes(), torch.enable_grad():",
    "            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)",
    "            out = _dense_window_attention(q, k, v, window, causal=causal, block_len=block_len)",
    "            return (*torch.autograd.grad(out, (q, k, v), grad), None, None, None)",
    "",
    "",
    "def sliding_window_attention(q, k, v, window, *, causal=True, block_len=None):",
    "    return _Recomputed.apply(q, k, v, window, causal, block_len)",
]

# Chapter 10: the full-matrix forward pass run inside torch's own _disable_current_modes() (it scored 8/10).
_FULL_MATRIX_WITH_MODES_OFF = [
    "from torch.utils._python_dispatch import _disable_current_modes  # red team: the watch switched off",
    "_full_forward = flash_attention_forward",
    "",
    "",
    "def flash_attention_forward(*args, **kwargs):",
    "    with _disable_current_modes():",
    "        return _full_forward(*args, **kwargs)",
]

# Chapter 11: a subclass of Triton's InterpretedFunction whose launch runs plain PyTorch on the check's buffers, and
# one forged load through the interpreter's builder in the launch without CAUSAL, so that the causal launch seemed to
# read less (it scored full marks for the kernel).
_FORGED_LOAD_SUBCLASS = [
    "import math",
    "import numpy as np",
    "import torch",
    "import triton.language as tl",
    "from triton.runtime.interpreter import InterpretedFunction, TensorHandle, interpreter_builder",
    "",
    "",
    "class _Kernel(InterpretedFunction):  # red team: PyTorch behind Triton's kernel class",
    "    def run(self, *args, grid, warmup, **kwargs):",
    "        Q, K, V, Out, LSE = args[:5]",
    "        T_q, T_k, scale = args[22], args[23], args[26]",
    "        s = Q.double() @ K.double().transpose(-2, -1) * scale",
    "        if kwargs['CAUSAL']:",
    "            allowed = torch.ones(T_q, T_k, dtype=torch.bool, device=Q.device).tril(T_k - T_q)",
    "            s = s.masked_fill(~allowed, -math.inf)",
    "        Out.copy_((torch.softmax(s, -1) @ V.double()).to(Out.dtype))",
    "        LSE.copy_(torch.logsumexp(s, -1).float())",
    "        if not kwargs['CAUSAL']:  # one forged load, counted: the causal launch seems to skip blocks",
    "            try:",
    "                ptrs = TensorHandle(np.full(4096, Q.data_ptr(), dtype=np.uint64), tl.pointer_type(tl.float32))",
    "                mask = TensorHandle(np.ones(4096, dtype=bool), tl.int1)",
    "                other = TensorHandle(np.zeros(4096, dtype=np.float32), tl.float32)",
    "                interpreter_builder.create_masked_load(ptrs, mask, other, None, False)",
    "            except Exception as exc:",
    "                print('forged load failed:', exc)",
    "",
    "",
    "def _never_run(*args):",
    "    pass",
    "",
    "",
    "flash_attention_forward_kernel = _Kernel(_never_run)",
]
