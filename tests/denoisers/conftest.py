"""Strict JAX settings for the denoiser tests, whatever the environment sets."""

from collections.abc import Iterator

import jax
import pytest


@pytest.fixture(autouse=True)
def strict_rank_promotion() -> Iterator[None]:
    """Make implicit rank promotion an error, as in the project's CI."""
    with jax.numpy_rank_promotion("raise"):
        yield
