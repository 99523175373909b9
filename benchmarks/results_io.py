"""Write a benchmark's rows as a CSV whose first line says where, when and how they were measured."""

from __future__ import annotations

import csv
import datetime
import os
import pathlib
import platform

import torch


def write_results(out: pathlib.Path, rows: list[dict], device: str, how: str) -> None:
    """Write ``rows`` to ``out`` after a ``# measured <date> on <machine>, torch <v>, <n> threads; <how>`` line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
        if device == "cpu"
        else torch.cuda.get_device_name()
    )
    with open(out, "w", newline="") as f:
        f.write(
            f"# measured {datetime.date.today()} on {machine}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; {how}\n"
        )
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("wrote", out)
