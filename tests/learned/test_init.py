"""Equinox and Optax are optional: the core package never imports them, and
``numpyro_autospec.learned`` without them raises an ImportError naming the ``learned`` extra.

Run in a fresh interpreter: this process has already imported both."""

import os
import subprocess
import sys

import pytest

from tests.fresh_process import user_environment

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
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    message = completed.stdout
    assert "numpyro-autospec[learned]" in message and "equinox and optax" in message


def test_public_names():
    learned = pytest.importorskip("numpyro_autospec.learned")
    assert sorted(learned.__all__) == [
        "DenoiserConfig",
        "LearnedDenoiser",
        "LearnedOracle",
        "MaskedMLP",
        "TransformerConfig",
        "TransformerOracle",
        "VOCABULARY_SIZE",
        "any_order_loss",
        "bits_per_character",
        "decode",
        "encode",
        "fit",
        "kv_cached_sequential_run",
        "load_code_corpus",
        "load_or_train",
        "load_or_train_denoiser",
        "order_averaged_nll",
        "random_order_law",
        "random_windows",
        "train_denoiser",
        "train_transformer",
    ]
    for name in learned.__all__:
        assert getattr(learned, name).__doc__, name
