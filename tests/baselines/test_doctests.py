"""Run the docstring examples of every baselines module."""

import doctest
import importlib

import pytest

MODULE_NAMES = ["numpyro_autospec.baselines.maskgit", "numpyro_autospec.baselines.picard"]


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module_name} has no docstring examples"
    assert result.failed == 0
