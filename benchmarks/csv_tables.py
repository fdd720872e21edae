"""The benchmark scripts' results as CSV files: one writer for every script that saves a whole
table at once (the scripts that stream rows as they measure them, ``rounds.py``,
``alternatives.py``'s partial file and ``diffusion_rounds.py``, append with ``csv`` directly).

Imported by bare name (``from csv_tables import write_csv``): a script run as
``python benchmarks/NAME.py`` has this folder first on ``sys.path``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

__all__ = ["write_csv"]


def write_csv(
    path: str, rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None
) -> str:
    """Write ``rows`` to ``path`` with a header line, creating its folder.

    :param path: the CSV file, overwritten.
    :param rows: one mapping per line.
    :param columns: the header, in order (default: the first row's keys); a row missing a
        column leaves it empty, a row with a column not in it is an error (``csv.DictWriter``).
    :returns: ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(columns or rows[0]), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path
