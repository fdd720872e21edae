"""Learned oracles and denoisers: the shells that make a trained network something to sample.

A *learned* oracle is a network trained to answer every query ``log_marginals(x, mask) ->
[n, q]``.  Its conditionals come from no single joint law, so the samplers draw exactly from
the law of sequential any-order sampling along the same order,
:math:`\\prod_k p(x_{\\sigma(k)} \\mid x_{\\sigma(<k)})` (Anari et al., *Parallel Sampling via
Autospeculation*, arXiv:2511.07869, section 2a of docs/algorithm.md).

* :class:`MaskedMLP` -- a BERT/MADE-style any-order network (an ``equinox.Module``);
* :class:`LearnedOracle` -- the shell that makes a network an
  :class:`~numpyro_autospec.oracles.AnyOrderOracle`;
* :class:`TransformerOracle` -- an order-aware two-stream transformer, an oracle of the *block
  form*; :func:`kv_cached_sequential_run` is its sequential sampler with cached keys and values;
* :func:`random_order_law` enumerates the law the samplers draw from on small spaces;
* :class:`LearnedDenoiser` -- a time-conditioned MLP denoiser for stochastic localization.

Training is not part of the library (``examples/support/`` has recipes).  Equinox and Optax are
optional: ``pip install "numpyro-autospec[learned]"``.
"""

try:
    import equinox  # noqa: F401
    import optax  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "numpyro_autospec.learned needs the optional dependencies equinox and optax "
        f"({error}); install the `learned` extra: pip install 'numpyro-autospec[learned]'"
    ) from error

from numpyro_autospec.learned._denoiser import LearnedDenoiser
from numpyro_autospec.learned._kv_cache import kv_cached_sequential_run
from numpyro_autospec.learned._network import MaskedMLP
from numpyro_autospec.learned._oracle import LearnedOracle
from numpyro_autospec.learned._order_law import random_order_law
from numpyro_autospec.learned._transformer import TransformerOracle

__all__ = [
    "LearnedDenoiser",
    "LearnedOracle",
    "MaskedMLP",
    "TransformerOracle",
    "kv_cached_sequential_run",
    "random_order_law",
]
