"""Every example and benchmark script answers ``--help`` in plain text, with its defaults.

The descriptions come from the scripts' docstrings, written for the documentation site, so the
check is that no reST markup reaches the terminal, that the description is a whole sentence
(not a first line cut mid-sentence), and that options with values show their defaults.
"""

import glob
import os
import re
import subprocess
import sys

import pytest

from numpyro_autospec.script_help import script_description

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_is_plain_text_with_defaults(script):
    completed = subprocess.run(
        [sys.executable, script, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        check=False,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    text = completed.stdout
    assert not RAW_MARKUP.search(text), f"{script}: reST markup in --help:\n{text}"
    description = " ".join(text.split("\n\n")[1].split())
    assert description.endswith((".", ")")), f"{script}: description cut short: {description!r}"
    options_with_values = re.findall(r"^\s+(--[\w-]+) [A-Z_{]", text, flags=re.MULTILINE)
    assert options_with_values, f"{script}: no options with values"
    assert text.count("(default:") >= len(options_with_values), f"{script}: defaults missing"


def test_description_strips_markup_and_a_wrong_one_is_caught():
    doc = "Rounds of :func:`~numpyro_autospec.engine.run` on ``n`` sites.\n\nMore."
    assert script_description(doc) == "Rounds of run on n sites."
    assert RAW_MARKUP.search(doc.split("\n\n")[0])  # what the plain first paragraph would show
