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

__all__ = [
    "add_chain_options",
    "add_common_options",
    "add_digits_mlp_options",
    "checkpoint_options",
    "save_figure",
]


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


def add_chain_options(parser: argparse.ArgumentParser, num_samples: int) -> None:
    """Adds ``--num-samples`` (default ``num_samples``) draws per chain and ``--num-chains``
    (default 2), the chains of one ``MCMC`` run, vectorized over one shared pool."""
    parser.add_argument("--num-samples", type=int, default=num_samples, help="draws per chain")
    parser.add_argument(
        "--num-chains", type=int, default=2, help="chains (vectorized: one shared pool)"
    )


def add_digits_mlp_options(
    parser: argparse.ArgumentParser, *, depth: int, learning_rate_help: str
) -> None:
    """Adds the options of an MLP trained on the 8x8 digit images by Adam: ``--hidden-size``
    (default 256), ``--depth`` (default ``depth``), ``--batch-size`` (default 128) and
    ``--learning-rate`` (default 1e-3, described by ``learning_rate_help``)."""
    parser.add_argument("--hidden-size", type=int, default=256, help="units per hidden layer")
    parser.add_argument("--depth", type=int, default=depth, help="hidden layers")
    parser.add_argument("--batch-size", type=int, default=128, help="images per Adam step")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help=learning_rate_help)


def checkpoint_options(args: argparse.Namespace) -> dict:
    """The keywords ``seed``, ``cache`` and ``retrain`` of a trained network's cache
    (``load_or_train``, ``load_or_train_denoiser``) from the options that
    :func:`add_common_options` adds with ``checkpoints=True``."""
    return {"seed": args.seed, "cache": args.cache_dir, "retrain": args.retrain}


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
