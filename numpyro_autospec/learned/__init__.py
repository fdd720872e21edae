"""Learned any-order oracles: a masked network, its oracle shell and the any-order objective.

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
* :func:`fit`, :func:`any_order_loss` -- the any-order autoregressive objective (Uria et al.
  2014; Hoogeboom et al. 2022) optimised with ``optax.adam``;
* :class:`TransformerOracle` -- an order-aware two-stream transformer (sigma-GPT / XLNet style),
  an oracle of the *block form*: one forward pass gives the conditionals of every site of an
  ordered block given its prefix (``scores_blocks = True``, ``depends_on_order = True``);
  :func:`train_transformer`, :func:`bits_per_character` train and evaluate it,
  :func:`load_or_train` caches it (``equinox`` serialisation),
  :func:`kv_cached_sequential_run` is its sequential sampler with cached keys and values (the
  baseline at its best), :mod:`.text` is character-level
  data from the standard library's source, :func:`random_order_law` enumerates the law the
  samplers draw from on small spaces (docs/learned.md, docs/bring_your_own_network.md).
* :class:`LearnedDenoiser` -- a time-conditioned MLP denoiser for stochastic localization
  (the oracle of :class:`~numpyro_autospec.StochasticLocalization`), trained by denoising
  regression with :func:`train_denoiser`, cached by :func:`load_or_train_denoiser`.

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

from numpyro_autospec.learned._checkpoints import TransformerConfig, load_or_train
from numpyro_autospec.learned._denoiser import DenoiserConfig, LearnedDenoiser
from numpyro_autospec.learned._denoiser_training import load_or_train_denoiser, train_denoiser
from numpyro_autospec.learned._kv_cache import kv_cached_sequential_run
from numpyro_autospec.learned._network import MaskedMLP
from numpyro_autospec.learned._oracle import LearnedOracle
from numpyro_autospec.learned._order_law import random_order_law
from numpyro_autospec.learned._text import (
    VOCABULARY_SIZE,
    decode,
    encode,
    load_code_corpus,
    random_windows,
)
from numpyro_autospec.learned._training import any_order_loss, fit, order_averaged_nll
from numpyro_autospec.learned._transformer import TransformerOracle
from numpyro_autospec.learned._transformer_training import bits_per_character, train_transformer

__all__ = [
    "VOCABULARY_SIZE",
    "order_averaged_nll",
    "random_windows",
    "DenoiserConfig",
    "LearnedDenoiser",
    "LearnedOracle",
    "MaskedMLP",
    "TransformerConfig",
    "TransformerOracle",
    "any_order_loss",
    "bits_per_character",
    "decode",
    "encode",
    "fit",
    "kv_cached_sequential_run",
    "load_code_corpus",
    "load_or_train",
    "load_or_train_denoiser",
    "random_order_law",
    "train_denoiser",
    "train_transformer",
]
