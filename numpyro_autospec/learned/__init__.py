"""Learned oracles and denoisers: the shells that make a trained network something to sample.

Exact oracles (:mod:`numpyro_autospec.oracles`) are for testing and teaching; a *learned*
oracle is a network trained on data to answer every query
``log_marginals(x, mask) -> [n, q]``.  Its conditionals come from no single joint law, so the
sampler draws exactly from the law of sequential any-order sampling with the same order,
:math:`\\prod_k p(x_{\\sigma(k)} \\mid x_{\\sigma(<k)})` (docs/algorithm.md section 2a;
Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869).

* :class:`MaskedMLP` -- a BERT/MADE-style any-order network (an ``equinox.Module``);
* :class:`LearnedOracle` -- the shell that makes a network an
  :class:`~numpyro_autospec.oracles.AnyOrderOracle` (``AnyOrderAR``, ``AutospecKernel``, the
  engine);
* :class:`TransformerOracle` -- an order-aware two-stream transformer (sigma-GPT / XLNet style),
  an oracle of the *block form*: one forward pass gives the conditionals of every site of an
  ordered block given its prefix (``scores_blocks = True``, ``depends_on_order = True``);
  :func:`kv_cached_sequential_run` is its sequential sampler with cached keys and values (the
  baseline at its best);
* :func:`random_order_law` enumerates the law the samplers draw from on small spaces
  (docs/learned.md, docs/bring_your_own_network.md);
* :class:`LearnedDenoiser` -- a time-conditioned MLP denoiser for stochastic localization
  (the oracle of :class:`~numpyro_autospec.StochasticLocalization`).

Training is not part of the library: the examples' recipes (``examples/support/``: the
any-order objective, the transformer's and the denoiser's training loops, checkpoints, a text
corpus) are one way to get weights; any network with the right signature samples the same.

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
