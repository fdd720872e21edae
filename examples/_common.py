"""The example scripts' shared boilerplate: their usual command-line options and saving a figure.

Not an example itself: the scripts import it (``from _common import ...``, their own folder is
on ``sys.path`` when run as ``python examples/name.py``), so that what every script does the
same way is written once and each script keeps only its own sampling and plotting code.
Importing it selects Matplotlib's non-interactive ``Agg`` backend: the scripts write their
figures to files.
"""

from __future__ import annotations

import argparse
import os
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

__all__ = ["add_common_options", "save_figure"]


def add_common_options(
    parser: argparse.ArgumentParser,
    *,
    seed_help: str = "PRNG seed",
    checkpoints: bool = False,
    out_default: str = "figures",
    quiet_help: str | None = "quiet run",
) -> None:
    """Adds the options most scripts share, after the script's own: ``--seed`` (default 0),
    with ``checkpoints`` ``--cache-dir`` and ``--retrain`` (a trained network's cache),
    ``--out`` (the figure's directory) and, unless ``quiet_help`` is ``None``,
    ``--no-progress-bar`` (``args.progress_bar``).

    :param parser: the script's parser (:func:`~numpyro_autospec._core.script_help.script_parser`).
    :param seed_help: what the seed seeds.
    :param checkpoints: whether the script caches a trained network.
    :param out_default: the default of ``--out``.
    :param quiet_help: what ``--no-progress-bar`` turns off; ``None``: no such option.
    """
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    if checkpoints:
        parser.add_argument(
            "--cache-dir",
            default=None,
            help="checkpoint cache (None: $NUMPYRO_AUTOSPEC_CACHE or ~/.cache/numpyro_autospec)",
        )
        parser.add_argument("--retrain", action="store_true", help="ignore a cached checkpoint")
    parser.add_argument("--out", default=out_default, help="directory for the figure")
    if quiet_help is not None:
        parser.add_argument(
            "--no-progress-bar", dest="progress_bar", action="store_false", help=quiet_help
        )


def save_figure(
    fig: plt.Figure, out: str, filename: str, *, dpi: int = 120, started: float | None = None
) -> str:
    """Saves ``fig`` as ``out/filename`` (creating ``out``), closes it, prints
    ``figure saved to <path>`` and returns the path.

    :param fig: the finished figure (laid out already).
    :param out: the directory (``args.out``).
    :param filename: the file's name, e.g. ``"quickstart.png"``.
    :param dpi: the resolution.
    :param started: a :func:`time.perf_counter` reading: the line then ends with the seconds
        since, `` (N s in all)``.
    """
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, filename)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    total = "" if started is None else f" ({time.perf_counter() - started:.0f} s in all)"
    print(f"figure saved to {path}{total}")
    return path
