r"""Character-level text data from a corpus every Python ships: the standard library's source.

The corpus is the ``*.py`` files under ``sysconfig.get_paths()["stdlib"]`` (no download), read
as text and encoded one character per site with a fixed vocabulary of :data:`VOCABULARY_SIZE`
symbols: printable ASCII (space to ``~``), newline and tab, and an *unknown* symbol for every
other character (carriage returns are dropped).  The split into training and held-out text is
**by file** and deterministic: a file is held out when the CRC-32 of its path relative to the
standard library directory falls in the held-out fraction, so no held-out line was seen in
training and the split is the same on every machine with the same Python.

Sequences for a sequence model of :math:`n` sites are windows of :math:`n` consecutive
characters of a split (files joined by a newline).  They are the training data and the
held-out data of :class:`~numpyro_autospec.learned.TransformerOracle` in
``examples/code_infilling.py`` (docs/learned.md; Anari et al., *Parallel Sampling via
Autospeculation*, arXiv:2511.07869).
"""

from __future__ import annotations

import os
import sysconfig
import zlib
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from numpyro_autospec.errors import ConfigError, InputError

__all__ = [
    "SYMBOLS",
    "UNKNOWN",
    "VOCABULARY_SIZE",
    "CodeCorpus",
    "decode",
    "encode",
    "load_code_corpus",
    "random_windows",
    "split_by_file",
    "stdlib_source_files",
]

#: the known symbols, in code order: printable ASCII (32..126), then newline and tab
SYMBOLS: str = "".join(chr(c) for c in range(32, 127)) + "\n\t"
#: the code of every character outside :data:`SYMBOLS`
UNKNOWN: int = len(SYMBOLS)
#: :math:`q`: the known symbols and the unknown symbol
VOCABULARY_SIZE: int = len(SYMBOLS) + 1
_UNKNOWN_SHOWN = "\N{REPLACEMENT CHARACTER}"

_CODE_OF_ASCII = np.full(128, UNKNOWN, dtype=np.int32)
for _code, _symbol in enumerate(SYMBOLS):
    _CODE_OF_ASCII[ord(_symbol)] = _code


def encode(text: str) -> np.ndarray:
    """``int32[len]`` codes of ``text`` (carriage returns dropped, unknown characters mapped to
    :data:`UNKNOWN`).

    >>> encode("a\\tb\\r\\n").tolist(), encode("\N{GREEK SMALL LETTER PI}").tolist()
    ([65, 96, 66, 95], [97])
    """
    points = np.frombuffer(text.replace("\r", "").encode("utf-32-le"), dtype=np.uint32)
    known = points < len(_CODE_OF_ASCII)
    return np.where(known, _CODE_OF_ASCII[np.where(known, points, 0)], UNKNOWN).astype(np.int32)


def decode(codes: Iterable[int]) -> str:
    """The text of ``codes``; :data:`UNKNOWN` is shown as U+FFFD.

    >>> decode(encode("def f(x):\\n\\treturn x"))
    'def f(x):\\n\\treturn x'
    """
    return "".join(SYMBOLS[c] if 0 <= c < UNKNOWN else _UNKNOWN_SHOWN for c in np.asarray(codes))


def stdlib_source_files(stdlib: str | None = None) -> list[str]:
    """The ``*.py`` files of the standard library (``site-packages`` excluded), as paths
    relative to ``stdlib`` (default ``sysconfig.get_paths()["stdlib"]``), sorted."""
    root = stdlib or sysconfig.get_paths()["stdlib"]
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            d for d in subdirectories if d not in {"site-packages", "dist-packages", "__pycache__"}
        )
        relative = os.path.relpath(directory, root)
        for name in files:
            if name.endswith(".py"):
                found.append(os.path.normpath(os.path.join(relative, name)))
    return sorted(found)


def _file_hash(path: str) -> float:
    """The CRC-32 of a relative path (``/`` separators) as a number in ``[0, 1)``."""
    return zlib.crc32(path.replace(os.sep, "/").encode("utf-8")) / 2**32


def split_by_file(files: Iterable[str], held_out_fraction: float = 0.1) -> tuple[list, list]:
    """``(train, held_out)``: a file is held out when ``crc32(path) / 2**32 <
    held_out_fraction`` (deterministic, independent of the other files; paths use ``/``).

    >>> train, held_out = split_by_file([f"m{i}.py" for i in range(1000)], 0.1)
    >>> len(train) + len(held_out), 60 < len(held_out) < 140, set(train) & set(held_out)
    (1000, True, set())
    """
    if not 0 <= held_out_fraction <= 1:
        raise ConfigError(f"held_out_fraction must be in [0, 1], got {held_out_fraction}")
    train, held_out = [], []
    for path in files:
        (held_out if _file_hash(path) < held_out_fraction else train).append(path)
    return train, held_out


def _read_concatenated(root: str, files: list[str], max_characters: int) -> np.ndarray:
    """The codes of ``files`` joined by newlines, at most ``max_characters`` (whole files,
    in the given order, the last one cut)."""
    parts, total = [], 0
    for path in files:
        if total >= max_characters:
            break
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as handle:
                codes = encode(handle.read() + "\n")
        except OSError:
            continue
        parts.append(codes[: max_characters - total])
        total += len(parts[-1])
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


class CodeCorpus(NamedTuple):
    """The encoded standard library, split by file.

    Attributes:
        train: ``int32`` codes of the training files, joined by newlines.
        held_out: ``int32`` codes of the held-out files.
        train_files, held_out_files: the files of each split (relative paths).
    """

    train: np.ndarray
    held_out: np.ndarray
    train_files: list[str]
    held_out_files: list[str]


def load_code_corpus(
    held_out_fraction: float = 0.1,
    max_characters: int = 4_000_000,
    stdlib: str | None = None,
) -> CodeCorpus:
    """The standard library's source split by file (:func:`split_by_file`), each split read
    up to ``max_characters`` (a cap keeps loading fast: whole files in the order of their
    hash, a deterministic shuffle, so a capped split still samples the whole library).

    Example
    -------
    >>> corpus = load_code_corpus(max_characters=20_000)
    >>> len(corpus.train) <= 20_000, len(set(corpus.train_files) & set(corpus.held_out_files))
    (True, 0)
    """
    root = stdlib or sysconfig.get_paths()["stdlib"]
    train_files, held_out_files = split_by_file(stdlib_source_files(root), held_out_fraction)
    if not train_files or not held_out_files:
        raise InputError(f"no source files to split under {root!r}")
    train_files.sort(key=_file_hash)
    held_out_files.sort(key=_file_hash)
    return CodeCorpus(
        _read_concatenated(root, train_files, max_characters),
        _read_concatenated(root, held_out_files, max_characters),
        train_files,
        held_out_files,
    )


def random_windows(
    codes: np.ndarray, length: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``int32[count, length]``: windows of ``length`` consecutive codes at uniformly random
    starts.

    >>> random_windows(np.arange(10), 3, 2, np.random.default_rng(0)).shape
    (2, 3)
    """
    codes = np.asarray(codes, np.int32)
    if len(codes) < length:
        raise InputError(f"a text of {len(codes)} characters has no window of {length}")
    starts = rng.integers(0, len(codes) - length + 1, size=count)
    return codes[starts[:, None] + np.arange(length)[None, :]]
