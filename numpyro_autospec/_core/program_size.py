"""The size of a compiled program: the kernels XLA launches, its conditionals and its loops.

Counted in the optimized HLO text (``jax.jit(f).lower(...).compile().as_text()``): every
instruction of every computation that executes (entry, loop bodies and conditions, branches,
called computations), outside fusion bodies and reducers, except those in :data:`FREE`.
"""

from __future__ import annotations

import collections
import re
from typing import NamedTuple

__all__ = ["ProgramSize", "program_size"]

#: instructions that launch no kernel of their own
FREE = frozenset(
    "parameter constant tuple get-tuple-element bitcast copy broadcast reshape transpose slice"
    " iota after-all opt-barrier".split()
)


class ProgramSize(NamedTuple):
    """``ops``: launched instructions; ``conditionals`` and ``loops``: how many of them are
    ``conditional`` and ``while``; ``kinds``: the count of each instruction."""

    ops: int
    conditionals: int
    loops: int
    kinds: dict


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    computations: dict[str, list[str]] = {}
    current, entry = None, ""
    for line in text.splitlines():
        header = re.match(r"^(ENTRY )?%?(\S+) .*\{\s*$", line)
        if header and not line.startswith(" "):
            current = header.group(2)
            computations[current] = []
            if header.group(1):
                entry = current
        elif line.startswith("}"):
            current = None
        elif current and line.strip().startswith(("%", "ROOT")):
            computations[current].append(line)
    return computations, entry


def _operation(line: str) -> str | None:
    rest = line.split(" = ", 1)[1] if " = " in line else line
    found = re.search(r"^\S+(?:\s*\{[^}]*\})?\s+([a-z][a-z0-9-]*)\(", rest.strip())
    if found is None:
        found = re.search(r"[\]})] ([a-z][a-z0-9-]*)\(", rest)
    return found.group(1) if found else None


def program_size(hlo_text: str) -> ProgramSize:
    """The :class:`ProgramSize` of an optimized HLO module's text.

    >>> import jax, jax.numpy as jnp
    >>> def loop(x):
    ...     body = lambda c: (c[0] + 1, jnp.sin(c[1]))
    ...     return jax.lax.while_loop(lambda c: c[0] < 3, body, (0, x))
    >>> size = program_size(jax.jit(loop).lower(jnp.ones(4)).compile().as_text())
    >>> size.loops, size.conditionals, size.ops >= 2
    (1, 0, True)
    """
    computations, entry = _computations(hlo_text)
    kinds: collections.Counter = collections.Counter()
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for line in computations.get(name, ()):
            operation = _operation(line)
            if operation is None:
                continue
            if operation == "while":
                visit(re.search(r"body=%?([^,\s]+)", line).group(1))
                visit(re.search(r"condition=%?([^,\s]+)", line).group(1))
            elif operation == "conditional":
                listed = re.search(r"branch_computations=\{([^}]*)\}", line)
                branches = (
                    [branch.strip().lstrip("%") for branch in listed.group(1).split(",")]
                    if listed
                    else re.findall(r"(?:true|false)_computation=%?([^,\s]+)", line)
                )
                for branch in branches:
                    visit(branch)
            elif operation == "call":
                visit(re.search(r"to_apply=%?([^,\s]+)", line).group(1))
                continue
            if operation not in FREE:
                kinds[operation] += 1

    visit(entry)
    return ProgramSize(
        sum(kinds.values()), kinds.get("conditional", 0), kinds.get("while", 0), dict(kinds)
    )
