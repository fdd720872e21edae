"""The benchmark scripts' results as CSV files, Markdown tables and figures: one CSV writer for
every script that saves a whole table at once, the appender of the scripts that stream rows as
they measure them (``rounds.py``, ``alternatives.py``'s partial file, ``diffusion_rounds.py``)
and the reader, the Markdown table the scripts print, the commit their rows are stamped with,
and Matplotlib's non-interactive pyplot with the figures' saver.

Imported by bare name (``from csv_tables import write_csv``): a script run as
``python benchmarks/NAME.py`` has this folder first on ``sys.path``.
"""

from __future__ import annotations

import csv
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "append_csv",
    "git_commit",
    "markdown_row",
    "markdown_table",
    "pyplot",
    "read_csv",
    "save_figure",
    "write_csv",
]

#: the benchmarks' folder, where git is asked about the checkout
HERE = os.path.dirname(os.path.abspath(__file__))


def write_csv(
    path: str, rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None
) -> str:
    """Write ``rows`` (mappings) to ``path``, overwritten, under the header ``columns`` (default:
    the first row's keys; a row missing a column leaves it empty, one with a column not in it is
    an error), creating its folder; returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(columns or rows[0]), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def append_csv(path: str, row: Mapping[str, object], columns: Sequence[str]) -> None:
    """Append ``row`` to the CSV file ``path`` at once (a header line first where the file is
    new or empty), so that a stopped run keeps the rows it measured."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(columns), restval="")
        if new:
            writer.writeheader()
        writer.writerow(row)


def read_csv(path: str) -> list[dict[str, str]]:
    """The rows of the CSV file ``path`` as written (strings), ``[]`` where there is none."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def markdown_row(cells: Iterable[object]) -> str:
    """One line of a Markdown table: ``| a | b |`` (each cell as ``str`` gives it)."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def markdown_table(header: str, rows: Iterable = (), template: str | None = None) -> str:
    """A Markdown table: the header line (``header``: the column names separated by ``" | "``),
    the separator line and a line per row (none: for a script that prints its rows as they
    come); ``rows`` are lists of cells, or mappings filled into ``template``, the cells as one
    format string separated by ``" | "`` (``"{case} | {rounds:.1f}"``)."""
    columns = header.split(" | ")
    lines = [markdown_row(columns), "|" + "---|" * len(columns)]
    if template is not None:
        rows = ([template.format_map(row)] for row in rows)
    lines += [markdown_row(row) for row in rows]
    return "\n".join(lines)


def git_commit(dirty_of: str | None = None) -> str:
    """The checkout's short ``HEAD`` hash, ``"unknown"`` where git does not answer, with
    ``+dirty`` where git reports uncommitted changes under ``dirty_of`` (a path relative to
    ``benchmarks/``; default: not asked)."""

    def git(*words: str, check: bool = True) -> str:
        done = subprocess.run(
            ["git", *words], cwd=HERE, capture_output=True, text=True, check=check, timeout=60
        )
        return done.stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        if dirty_of is not None and git("status", "--porcelain", "--", dirty_of, check=False):
            commit += "+dirty"
        return commit or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive ``Agg`` backend (the scripts write files),
    imported when a script draws its plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path: str, dpi: int = 120) -> str:
    """Lay ``figure`` out, save it as ``path``, close it and return ``path``."""
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    pyplot().close(figure)
    return path
