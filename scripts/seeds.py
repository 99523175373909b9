"""The spread of an experiment over training seeds: one home for the summaries the book's pages show.

Chapters 1–2 (``scripts/train_length_experiment.py``), chapter 5 (``scripts/train_transformer.py``) and chapter 9
(``scripts/train_long_context.py``) each train several models once per seed. A *run* is one seed's parsed results
file: ``{"config": {..., "seed": int}, "models": {name: {"parameters": int, <buckets_key>: [row, ...], ...}}}``
where each row has ``bucket`` and ``n`` and one number per metric. :func:`summarize_runs` checks that the runs are
seeds of one experiment and gives, per model and bucket, each seed's value and the spread of the values.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, sample standard deviation (n - 1 in the denominator), min and max of ``values``.

    Mean and standard deviation are rounded to 4 decimals (the results files' precision); min and max are the
    values themselves. The standard deviation of a single value is ``None`` (one run has no spread). Raises
    ``ValueError`` for no values.
    """
    if not values:
        raise ValueError("a spread needs at least one value, got none")
    return {
        "mean": round(statistics.fmean(values), 4),
        "std": round(statistics.stdev(values), 4) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
    }


def summarize_runs(
    runs: list[dict],
    shared_config: Sequence[str],
    *,
    buckets_key: str = "buckets",
    metrics: Sequence[str] = ("bleu", "exact_match"),
    per_seed: Sequence[str] = ("train_seconds",),
    sources: list[str] | None = None,
) -> dict:
    """One summary of several runs that differ only in their seed.

    Args:
        runs: the parsed results files, one per seed (see the module docstring).
        shared_config: the ``config`` keys every run must agree on (all but the seed, the machine and the times).
        buckets_key: each model's list of per-bucket rows.
        metrics: the row keys summarised.
        per_seed: further per-model numbers kept as one value per seed (e.g. wall times), where present.
        sources: where the runs came from, kept in the summary.

    Returns:
        ``{"seeds", "sources", "config", "models"}``. Per model: ``parameters`` (the same in every run), the
        ``per_seed`` lists and ``buckets``: one row per bucket with ``bucket``, ``n`` and, per metric, the
        per-seed values (in ``seeds`` order) and their ``_mean``, ``_std``, ``_min`` and ``_max`` (:func:`spread`).

    Raises:
        ValueError: fewer than two runs, a seed repeats, or the runs differ in a shared config key, in their
        models, parameter counts or buckets.
    """
    if len(runs) < 2:
        raise ValueError(f"a spread needs at least two runs, got {len(runs)}")
    seeds = [r["config"]["seed"] for r in runs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds repeat: {seeds}")
    first = runs[0]
    for r in runs[1:]:
        for k in shared_config:
            if r["config"].get(k) != first["config"].get(k):
                raise ValueError(f"runs differ in {k!r}: {first['config'].get(k)!r} vs {r['config'].get(k)!r}")
        if list(r["models"]) != list(first["models"]):
            raise ValueError(f"runs trained different models: {list(first['models'])} vs {list(r['models'])}")
    models = {}
    for name, m0 in first["models"].items():
        per_run = [r["models"][name] for r in runs]
        if len({m["parameters"] for m in per_run}) != 1:
            raise ValueError(f"{name}: parameter counts differ between runs")
        rows = []
        for i, b0 in enumerate(m0[buckets_key]):
            bs = [m[buckets_key][i] for m in per_run]
            if any((b["bucket"], b["n"]) != (b0["bucket"], b0["n"]) for b in bs):
                raise ValueError(f"{name}: bucket {i} differs between runs")
            row: dict = {"bucket": b0["bucket"], "n": b0["n"]}
            for metric in metrics:
                values = [b[metric] for b in bs]
                row[metric] = values
                row.update({f"{metric}_{k}": v for k, v in spread(values).items()})
            rows.append(row)
        models[name] = {"parameters": m0["parameters"]}
        models[name].update({k: [m[k] for m in per_run] for k in per_seed if k in m0})
        models[name]["buckets"] = rows
    config = {k: first["config"][k] for k in shared_config} | {
        "devices": [r["config"]["device"] for r in runs],
        "torch": [r["config"]["torch"] for r in runs],
    }
    return {"seeds": seeds, "sources": sources or [], "config": config, "models": models}


def add_experiment_arguments(
    ap: argparse.ArgumentParser, *, models: str, run_file: str, seeds_file: str, seeds_dir: str, threads: int = 0
) -> None:
    """The options of a seeded experiment script that trains several models and reports their spread over seeds.

    ``--device``, ``--seed``, ``--out``, ``--models`` (default ``models``), ``--threads`` (default ``threads``),
    ``--no-progress``, ``--no-checkpoints`` and ``--summarize``. ``run_file``: the results file one run writes;
    ``seeds_file``: the summary ``--summarize`` writes into ``--out``; ``seeds_dir``: where the book keeps the
    further seeds (named in the help).
    """
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    ap.add_argument("--seed", type=int, default=0, help="seed for model initialisation and batch order")
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--models", default=models)
    ap.add_argument(
        "--threads",
        type=int,
        default=threads,
        help="torch CPU threads (0: torch's default; 1 is fastest on a machine shared with other jobs)",
    )
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument(
        "--no-checkpoints",
        action="store_true",
        help=f"keep only the json/csv/log (the further seeds of the book's spread: {seeds_dir})",
    )
    ap.add_argument(
        "--summarize",
        nargs="+",
        metavar="RUN_JSON",
        help=f"train nothing: write --out/{seeds_file}, the spread over these runs' {run_file}",
    )


def write_summary(
    paths: Sequence[str], out: Path, seeds_file: str, summarize: Callable[[list[dict], list[str]], dict]
) -> Path:
    """Read the runs at ``paths``, summarise them with ``summarize(runs, sources)`` and write ``out/seeds_file``."""
    summary = summarize([json.loads(Path(p).read_text()) for p in paths], list(paths))
    path = out / seeds_file
    path.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    print(f"seeds {summary['seeds']}: {path}")
    return path


def output_dir_unless_summarizing(
    args: argparse.Namespace, seeds_file: str, summarize: Callable[[list[dict], list[str]], dict]
) -> Path | None:
    """Create ``args.out``; with ``--summarize``, write the summary there (:func:`write_summary`) and return None
    (nothing is to be trained), else return the folder for the run's files."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        write_summary(args.summarize, out, seeds_file, summarize)
        return None
    return out
