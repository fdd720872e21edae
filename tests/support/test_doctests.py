"""The docstring examples of the scripts' support package (``examples/support/``) run: the
package's own modules are covered by ``tests/test_api_reference.py``, these live beside the
examples that use them."""

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("equinox")  # the training recipes need the `learned` extra
support = importlib.import_module("support")
MODULES = sorted(f"support.{info.name}" for info in pkgutil.iter_modules(support.__path__))


def test_every_module_is_found():
    assert {"support.scripts", "support.training", "support.checkpoints"} <= set(MODULES)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{module_name}: {result.failed} docstring examples failed"
