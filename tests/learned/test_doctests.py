"""Run the docstring examples of every module of ``numpyro_autospec.learned``."""

import doctest
import importlib

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

MODULE_NAMES = [
    "numpyro_autospec.learned.network",
    "numpyro_autospec.learned.oracle",
    "numpyro_autospec.learned.training",
    "numpyro_autospec.learned.attention",
    "numpyro_autospec.learned.transformer",
    "numpyro_autospec.learned.transformer_training",
    "numpyro_autospec.learned.text",
    "numpyro_autospec.learned.order_law",
    "numpyro_autospec.learned.kv_cache",
]


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module_name} has no docstring examples"
    assert result.failed == 0
