"""Run the docstring examples of every denoiser module."""

import doctest
import importlib
import importlib.util

import pytest

MODULE_NAMES = [
    "numpyro_autospec.denoisers.base",
    "numpyro_autospec.denoisers.validation",
    "numpyro_autospec.denoisers.point_cloud",
    "numpyro_autospec.denoisers.gaussian_mixture",
    pytest.param(
        "numpyro_autospec.denoisers.digits",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed"
        ),
    ),
]


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_docstring_examples_run(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module_name} has no docstring examples"
    assert result.failed == 0
