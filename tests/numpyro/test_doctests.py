"""Run the docstring examples of the NumPyro integration and the sequential sampler."""

import doctest
import importlib

import pytest

MODULE_NAMES = [
    "numpyro_autospec.sequential",
    "numpyro_autospec.numpyro.distributions",
    "numpyro_autospec.numpyro.kernel",
]


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_docstring_examples_run(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module_name} has no docstring examples"
    assert result.failed == 0
