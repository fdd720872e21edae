"""Run a piece of Python in a fresh interpreter and read back its results as JSON.

Used by the tests that must see the code as a reader or a shell runs it (the documentation's
code blocks, the scripts' ``--help``): not inside a test worker that other tests have already
configured, yet with JAX imported once for many items instead of once per item.

Nothing here is a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_fresh(
    runner: str,
    payload: Any,
    results_path: os.PathLike,
    cwd: str,
    env: dict[str, str],
    timeout: float | None = None,
) -> tuple[subprocess.CompletedProcess, Any | None]:
    """Run ``runner`` with ``python -c`` in ``cwd``: it reads ``[payload, results_path]`` as
    JSON from its standard input and writes its results as JSON to ``results_path``.  Returns
    the completed process and the results, or ``None`` for the results when the process failed
    or wrote none."""
    completed = subprocess.run(
        [sys.executable, "-c", runner],
        input=json.dumps([payload, str(results_path)]),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
        timeout=timeout,
    )
    if completed.returncode != 0 or not os.path.exists(results_path):
        return completed, None
    with open(results_path) as file:
        return completed, json.load(file)
