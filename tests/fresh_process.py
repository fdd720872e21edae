"""Run a piece of Python in a fresh interpreter and read back its results as JSON.

Used by the tests that must see the code as a reader or a shell runs it (the documentation's
code blocks, the scripts' ``--help``): not inside a test worker that other tests have already
configured, yet with JAX imported once for many items instead of once per item; and
(:func:`run_python`) by those that need an interpreter of their own (several host devices, a
module not yet imported, a user's XLA settings).

Nothing here is a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

#: settings of tests/conftest.py that a reader's shell does not have
SUITE_ONLY = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
)
#: the suite's choice of XLA:CPU emitters (set by tests/conftest.py, stripped for a user's shell)
SUITE_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def user_environment(**overrides: str) -> dict[str, str]:
    """The environment of a user's shell: this process's, without the suite's persistent
    compilation cache (:data:`SUITE_ONLY`) and without its choice of XLA:CPU emitters (both
    set by tests/conftest.py), with ``overrides``."""
    environment = {name: value for name, value in os.environ.items() if name not in SUITE_ONLY}
    flags = environment.get("XLA_FLAGS", "").replace(SUITE_EMITTERS, "")
    environment["XLA_FLAGS"] = " ".join(flags.split())
    environment.update(overrides)
    return environment


def _python(
    code: str, cwd: str, env: dict[str, str], timeout: float, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd``, ``stdin`` on its standard input, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
        timeout=timeout,
    )


def run_python(code: str, cwd: str, env: dict[str, str], timeout: float) -> str:
    """Run ``code`` with ``python -c`` in ``cwd`` and return its standard output; fail the
    test with the last 3000 characters of its standard error unless it exits with 0."""
    completed = _python(code, cwd, env, timeout)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def run_fresh(
    runner: str,
    payload: Any,
    results_path: os.PathLike,
    cwd: str,
    env: dict[str, str],
    timeout: float,
) -> tuple[subprocess.CompletedProcess, Any | None]:
    """Run ``runner`` with ``python -c`` in ``cwd``: it reads ``[payload, results_path]`` as
    JSON from its standard input and writes its results as JSON to ``results_path``.  Returns
    the completed process and the results, or ``None`` for the results when the process failed
    or wrote none."""
    completed = _python(runner, cwd, env, timeout, stdin=json.dumps([payload, str(results_path)]))
    if completed.returncode != 0 or not os.path.exists(results_path):
        return completed, None
    with open(results_path) as file:
        return completed, json.load(file)
