r"""The example and benchmark scripts' command line and figures.

The scripts in ``examples/`` and ``benchmarks/`` take their description from their module
docstring, which is written for the documentation site: reST roles (``:class:`~a.B```),
inline literals (````x````) and math (``:math:`\sqrt n```) read badly in a terminal.
:func:`script_description` gives the docstring's first paragraph as plain text, and
:func:`script_parser` an :class:`argparse.ArgumentParser` with that description whose help
shows every option's default.  :func:`add_common_options` and its siblings add the options
most scripts share; :func:`save_figure` writes a figure (Matplotlib's non-interactive ``Agg``
backend: the scripts write their figures to files).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # the scripts write their figures to files

if TYPE_CHECKING:  # only an annotation: the benchmarks import this module before they plot
    from matplotlib.figure import Figure

__all__ = [
    "DefaultsHelpFormatter",
    "add_chain_options",
    "add_common_options",
    "add_digits_mlp_options",
    "checkpoint_options",
    "save_figure",
    "script_description",
    "script_parser",
]

_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}([^*\s][^*]*?)\*{1,2}(?![\w*])")


def script_description(docstring: str | None) -> str:
    r"""The first paragraph of ``docstring`` as one line of plain text: reST roles become
    their target's last name (or the math inside), inline literals and emphasis lose their
    markup.

    :param docstring: a script's module docstring (``__doc__``; ``None`` gives ``""``).

    Example
    -------
    >>> script_description('''Exact draws of :class:`~numpyro_autospec.AnyOrderAR` in
    ... :math:`O(\\sqrt n)` rounds, ``n`` sites, *fast*.
    ...
    ... More text.''')
    'Exact draws of AnyOrderAR in O(\\sqrt n) rounds, n sites, fast.'
    """
    if not docstring:
        return ""
    paragraph = docstring.strip().split("\n\n")[0]
    text = " ".join(line.strip() for line in paragraph.splitlines())
    text = _ROLE.sub(lambda match: match.group(1).split(".")[-1], text)
    text = _LITERAL.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """:class:`argparse.ArgumentDefaultsHelpFormatter` without a default for plain switches:
    ``--no-progress-bar`` (``store_false``) would read "quiet run (default: True)", as if a
    quiet run were the default.  Options with values and ``--flag/--no-flag`` pairs
    (:class:`argparse.BooleanOptionalAction`) keep theirs.

    Example
    -------
    >>> parser = argparse.ArgumentParser(formatter_class=DefaultsHelpFormatter)
    >>> _ = parser.add_argument("--no-bar", dest="bar", action="store_false", help="quiet")
    >>> _ = parser.add_argument("--draws", type=int, default=8, help="draws")
    >>> text = parser.format_help()
    >>> "quiet (default" in text, "draws (default: 8)" in text
    (False, True)
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        switch = action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction)
        return action.help if switch else super()._get_help_string(action)


def script_parser(docstring: str | None, **kwargs) -> argparse.ArgumentParser:
    """An :class:`argparse.ArgumentParser` described by :func:`script_description` of
    ``docstring`` whose help shows each option's default
    (:class:`DefaultsHelpFormatter`); ``kwargs`` go to the parser.

    Example
    -------
    >>> parser = script_parser("Draw ``n`` samples.")
    >>> _ = parser.add_argument("--num-samples", type=int, default=8, help="draws")
    >>> "draws (default: 8)" in parser.format_help(), parser.description
    (True, 'Draw n samples.')
    """
    kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
    return argparse.ArgumentParser(description=script_description(docstring), **kwargs)


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

    :param parser: the script's parser (:func:`script_parser`).
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
    fig: Figure, out: str, filename: str, *, dpi: int = 120, started: float | None = None
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
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, filename)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    total = "" if started is None else f" ({time.perf_counter() - started:.0f} s in all)"
    print(f"figure saved to {path}{total}")
    return path
