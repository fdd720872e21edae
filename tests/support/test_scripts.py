"""Every example and benchmark script answers ``--help`` in plain text, with its defaults.

The descriptions come from the scripts' docstrings, written for the documentation site, so the
check is that no reST markup reaches the terminal, that the description is a whole sentence
(not a first line cut mid-sentence), and that options with values show their defaults.
"""

import glob
import os
import re

import pytest

from tests.fresh_process import run_fresh, user_environment

from support.scripts import script_description

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, "examples", "*.py"))
    + glob.glob(os.path.join(ROOT, "benchmarks", "*.py"))
    if "__main__" in open(path).read()
)
RAW_MARKUP = re.compile(r"``|:(class|func|mod|meth|attr|data|math):`")


def test_every_runnable_script_is_checked():
    assert "examples/quickstart.py" in SCRIPTS and "benchmarks/seconds.py" in SCRIPTS
    assert "benchmarks/targets.py" not in SCRIPTS  # a module of targets, not a script


_RUNNER = """
import contextlib, io, json, os, runpy, sys
scripts, results_path = json.loads(sys.stdin.read())
results = {}
for script in scripts:
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv, sys.path[0] = [script, "--help"], os.path.dirname(os.path.abspath(script))
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit:
            code = exit.code or 0
        except BaseException as error:
            code = 1
            stderr.write(repr(error))
    results[script] = [code, stdout.getvalue(), stderr.getvalue()]
with open(results_path, "w") as file:
    json.dump(results, file)
"""


@pytest.fixture(scope="module")
def helps(tmp_path_factory) -> dict[str, list]:
    """``script -> [exit code, stdout, stderr]`` of ``script --help``, every script run in turn
    as ``__main__`` in one fresh Python process (as ``python script --help`` runs it, its own
    folder first on ``sys.path``), so JAX and the scripts' imports load once for all of them."""
    results_path = tmp_path_factory.mktemp("help") / "helps.json"
    completed, helps = run_fresh(
        _RUNNER, SCRIPTS, results_path, ROOT, user_environment(JAX_PLATFORMS="cpu"), timeout=600
    )
    assert helps is not None, completed.stderr[-3000:]
    return helps


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_is_plain_text_with_defaults(script, helps):
    code, text, stderr = helps[script]
    assert code == 0, stderr[-2000:]
    assert not RAW_MARKUP.search(text), f"{script}: reST markup in --help:\n{text}"
    description = " ".join(text.split("\n\n")[1].split())
    assert description.endswith((".", ")")), f"{script}: description cut short: {description!r}"
    options_with_values = re.findall(r"^\s+(--[\w-]+) [A-Z_{]", text, flags=re.MULTILINE)
    assert options_with_values, f"{script}: no options with values"
    assert text.count("(default:") >= len(options_with_values), f"{script}: defaults missing"
    # a plain switch (``--no-progress-bar``) is off unless given: "(default: True)" misleads
    switch_defaults = re.findall(
        r"^\s+(--[\w-]+)  .*\(default: (?:True|False)\)", text, re.MULTILINE
    )
    assert not switch_defaults, f"{script}: switches with a default: {switch_defaults}"


def test_description_strips_markup_and_a_wrong_one_is_caught():
    doc = "Rounds of :func:`~numpyro_autospec.engine.run` on ``n`` sites.\n\nMore."
    assert script_description(doc) == "Rounds of run on n sites."
    assert RAW_MARKUP.search(doc.split("\n\n")[0])  # what the plain first paragraph would show
