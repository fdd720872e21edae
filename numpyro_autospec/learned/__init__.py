"""Learned any-order oracles: a masked network, its oracle shell and the any-order objective.

Exact oracles (:mod:`numpyro_autospec.oracles`) are for testing and teaching; a *learned*
oracle is a network trained on data to answer every query
``log_marginals(x, mask) -> [n, q]``.  Its conditionals come from no single joint law, so the
sampler draws exactly from the law of sequential any-order sampling with the same order,
:math:`\\prod_k p(x_{\\sigma(k)} \\mid x_{\\sigma(<k)})` (ALGORITHM.md section 2a; Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869).

* :class:`MaskedMLP` -- a BERT/MADE-style any-order network (an ``equinox.Module``);
* :class:`LearnedOracle` -- the shell that makes a network an
  :class:`~numpyro_autospec.oracles.AnyOrderOracle` (``AnyOrderAR``, ``AutospecKernel``, the
  engine);
* :func:`fit`, :func:`any_order_loss` -- the any-order autoregressive objective (Uria et al.
  2014; Hoogeboom et al. 2022) optimised with ``optax.adam``.

Equinox and Optax are optional dependencies: ``pip install "numpyro-autospec[learned]"``.
Importing :mod:`numpyro_autospec` or :mod:`numpyro_autospec.oracles` never imports them.
"""

try:
    import equinox  # noqa: F401
    import optax  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "numpyro_autospec.learned needs the optional dependencies equinox and optax "
        f"({error}); install the `learned` extra: pip install 'numpyro-autospec[learned]'"
    ) from error

from numpyro_autospec.learned.network import MaskedMLP, masked_inputs
from numpyro_autospec.learned.oracle import LearnedOracle, learned_log_marginals
from numpyro_autospec.learned.training import (
    any_order_loss,
    check_training_data,
    fit,
    order_averaged_nll,
)

__all__ = [
    "LearnedOracle",
    "MaskedMLP",
    "any_order_loss",
    "check_training_data",
    "fit",
    "learned_log_marginals",
    "masked_inputs",
    "order_averaged_nll",
]
