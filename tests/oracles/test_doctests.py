"""Run the docstring examples of every oracle module."""

import doctest
import importlib

import pytest

MODULE_NAMES = [
    "numpyro_autospec.oracles.base",
    "numpyro_autospec.oracles.validation",
    "numpyro_autospec.oracles.table",
    "numpyro_autospec.oracles.curie_weiss",
    "numpyro_autospec.oracles.ising_chain",
    "numpyro_autospec.oracles.perturbed",
    "numpyro_autospec.oracles.hopfield",
]


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module_name} has no docstring examples"
    assert result.failed == 0
