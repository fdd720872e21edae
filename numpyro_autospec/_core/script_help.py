r"""Plain-text ``--help`` for the example and benchmark scripts.

The scripts in ``examples/`` and ``benchmarks/`` take their description from their module
docstring, which is written for the documentation site: reST roles (``:class:`~a.B```),
inline literals (````x````) and math (``:math:`\sqrt n```) read badly in a terminal.
:func:`script_description` gives the docstring's first paragraph as plain text, and
:func:`script_parser` an :class:`argparse.ArgumentParser` with that description whose help
shows every option's default.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["DefaultsHelpFormatter", "script_description", "script_parser"]

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
