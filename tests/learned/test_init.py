"""Equinox and Optax are optional: the core package never imports them, and
``numpyro_autospec.learned`` without them raises an ImportError naming the ``learned`` extra
(checked in a fresh interpreter: this process has already imported both).  With them, its
public names are those pinned here (``PUBLIC_NAMES``), each with a docstring."""

import os

import pytest

from tests.fresh_process import run_python, user_environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import sys

import numpyro_autospec
import numpyro_autospec.engine
import numpyro_autospec.infer
import numpyro_autospec.oracles
import numpyro_autospec.processes

imported = sorted({"equinox", "optax"} & set(sys.modules))
assert not imported, f"the core package imported {imported}"

sys.modules["optax"] = None  # as if optax were not installed
try:
    import numpyro_autospec.learned
except ImportError as error:
    print(error)
else:
    raise AssertionError("numpyro_autospec.learned imported without optax")
"""


def test_core_does_not_import_the_optional_dependencies():
    environment = user_environment(JAX_PLATFORMS="cpu")
    message = run_python(SCRIPT, cwd=ROOT, env=environment, timeout=120)
    assert "numpyro-autospec[learned]" in message and "equinox and optax" in message


#: the public names of ``numpyro_autospec.learned``, pinned in sorted order: a name added to or
#: dropped from its ``__all__`` is added or dropped here too, on purpose
PUBLIC_NAMES = """
    LearnedDenoiser LearnedOracle MaskedMLP TransformerOracle kv_cached_sequential_run
    random_order_law
""".split()


def test_public_names():
    learned = pytest.importorskip("numpyro_autospec.learned")
    assert sorted(learned.__all__) == PUBLIC_NAMES
    for name in learned.__all__:
        assert getattr(learned, name).__doc__, name
