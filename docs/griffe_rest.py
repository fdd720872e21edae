"""A Griffe extension that renders the reST markup of the package's docstrings as Markdown.

The docstrings of ``numpyro_autospec`` are written for Sphinx-style readers: numpy sections or
reST field lists (``:param x:``, parsed by mkdocstrings' ``auto`` style), inline roles
(``:class:`X```, ``:math:`x```), ``.. math::`` and ``.. code-block::`` directives, and doctest
blocks outside an ``Examples`` section.  mkdocstrings renders docstrings as Markdown, so this
extension rewrites, before the docstrings are parsed:

* ``:math:`x``` into ``\\(x\\)`` and ``.. math::`` blocks into ``\\[ ... \\]`` (MathJax via
  ``pymdownx.arithmatex``);
* ``:class:`~a.b.C```, ``:func:``, ``:meth:``, ``:mod:``, ``:data:``, ``:attr:``, ``:exc:``,
  ``:obj:`` into inline code (``C`` for a ``~`` target, the full target otherwise);
* ``.. code-block:: lang`` blocks into fenced code blocks;
* doctest blocks (``>>>`` lines and their output) outside a numpy ``Example(s)`` section into
  fenced ``pycon`` blocks (the numpy parser already renders those inside such a section);
* paragraphs at the margin after a reST field list (``:param x:`` ... then an example) before
  the list: in reST such a paragraph ends the list, but Griffe's sphinx parser reads every line
  up to the next field as part of the last field (the example would land in its table cell).

It never changes the source files; loaded from ``mkdocs.yml`` (``extensions:`` of the python
handler).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_XREF_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`([^`]+)`")
_DIRECTIVE = re.compile(
    r"^(?P<indent>[ \t]*)\.\. (?P<name>math|code-block|code)::[ \t]*(?P<arg>.*)$"
)
_NUMPY_EXAMPLES = re.compile(r"^[ \t]*Examples?[ \t]*$")
_NUMPY_UNDERLINE = re.compile(r"^[ \t]*-{3,}[ \t]*$")
_NUMPY_HEADER = re.compile(r"^[ \t]*[A-Z][A-Za-z ]+[ \t]*$")
# the fields Griffe's sphinx parser reads (a line at the margin starting one starts a field)
_FIELD = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword|type|raises?|except|exception|var|ivar|cvar"
    r"|vartype|returns?|rtype|yields?)\b"
)


def _xref(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _paragraphs_after_fields(lines: list[str]) -> list[str]:
    """Move the paragraphs that follow a field list at the margin (after a blank line) to just
    before the first field, in order; field bodies (indented lines) stay with their fields.

    A docstring with fields ends with a newline: Griffe's ``auto`` style detects the sphinx
    style by a field line followed by a newline, which a docstring's only field, when last,
    lacks."""
    first = next((i for i, line in enumerate(lines) if _FIELD.match(line)), None)
    if first is None:
        return lines
    fields: list[str] = []
    moved: list[str] = []
    in_fields = True
    for index in range(first, len(lines)):
        line = lines[index]
        previous = lines[index - 1]
        if _FIELD.match(line):
            in_fields = True
        elif line.strip() and line == line.lstrip() and not previous.strip():
            in_fields = False
        (fields if in_fields else moved).append(line)
    if not moved:
        return [*lines, ""]
    while fields and not fields[-1].strip():
        fields.pop()
    while moved and not moved[-1].strip():
        moved.pop()
    before = lines[:first]
    if before and before[-1].strip():
        before = [*before, ""]
    return before + moved + [""] + fields + [""]


def _directives(lines: list[str]) -> list[str]:
    """``.. math::`` and ``.. code-block::`` with their indented bodies, as Markdown blocks."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, name, arg = match.group("indent"), match.group("name"), match.group("arg").strip()
        body: list[str] = []
        if name == "math" and arg:
            body.append(arg)
        i += 1
        while i < len(lines) and (not lines[i].strip() or _indent_of(lines[i]) > len(indent)):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        first = 1 if name == "math" and arg else 0  # a math argument is the first line
        strip = min((_indent_of(b) for b in body[first:] if b.strip()), default=0)
        body = body[:first] + [b[strip:] for b in body[first:]]
        if out and out[-1].strip():
            out.append("")
        if name == "math":
            out += [indent + "\\[", *(indent + b for b in body), indent + "\\]"]
        else:
            out += [indent + "```" + (arg or "text"), *(indent + b for b in body), indent + "```"]
        out.append("")
    return out


def _doctests(lines: list[str]) -> list[str]:
    """Fence doctest blocks that are not in a numpy ``Example(s)`` section."""
    out: list[str] = []
    in_examples = False
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if _NUMPY_UNDERLINE.match(nxt) and _NUMPY_HEADER.match(line):
            in_examples = bool(_NUMPY_EXAMPLES.match(line))
        if in_fence or in_examples or not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: _indent_of(line)]
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += [indent + "```pycon", *(indent + b for b in block), indent + "```"]
    return out


def rest_to_markdown(text: str) -> str:
    """The docstring ``text`` with its reST markup rewritten as Markdown (see the module)."""
    lines = _doctests(_directives(_paragraphs_after_fields(text.splitlines())))
    converted = []
    in_fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence:
            line = _XREF_ROLE.sub(_xref, _MATH_ROLE.sub(r"\\(\1\\)", line))
        converted.append(line)
    return "\n".join(converted)


class RestToMarkdown(Extension):
    """Rewrite every docstring's reST markup as Markdown once the object tree is built."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
