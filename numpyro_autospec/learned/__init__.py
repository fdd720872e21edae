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

from numpyro_autospec.learned.checkpoints import (
    TransformerConfig,
    cache_directory,
    load_checkpoint,
    load_or_train,
    save_checkpoint,
)
from numpyro_autospec.learned.denoiser import DenoiserConfig, LearnedDenoiser, data_statistics
from numpyro_autospec.learned.denoiser_training import (
    denoising_loss,
    load_or_train_denoiser,
    train_denoiser,
    training_times,
)
from numpyro_autospec.learned.kv_cache import (
    TransformerCache,
    kv_cached_sequential_run,
)
from numpyro_autospec.learned.network import MaskedMLP, masked_inputs
from numpyro_autospec.learned.oracle import LearnedOracle, learned_log_marginals
from numpyro_autospec.learned.order_law import fixed_order_law, random_order_law
from numpyro_autospec.learned.text import (
    VOCABULARY_SIZE,
    decode,
    encode,
    load_code_corpus,
    random_windows,
    split_by_file,
)
from numpyro_autospec.learned.training import (
    any_order_loss,
    check_training_data,
    fit,
    order_averaged_nll,
)
from numpyro_autospec.learned.transformer import TransformerOracle, inverse_permutation
from numpyro_autospec.learned.transformer_training import (
    autoregressive_loss,
    bits_per_character,
    prefix_loss,
    train_transformer,
)

__all__ = [
    "VOCABULARY_SIZE",
    "DenoiserConfig",
    "LearnedDenoiser",
    "data_statistics",
    "denoising_loss",
    "load_or_train_denoiser",
    "train_denoiser",
    "training_times",
    "LearnedOracle",
    "MaskedMLP",
    "TransformerConfig",
    "TransformerCache",
    "TransformerOracle",
    "any_order_loss",
    "autoregressive_loss",
    "bits_per_character",
    "cache_directory",
    "check_training_data",
    "decode",
    "encode",
    "fit",
    "fixed_order_law",
    "inverse_permutation",
    "kv_cached_sequential_run",
    "learned_log_marginals",
    "load_checkpoint",
    "load_code_corpus",
    "load_or_train",
    "masked_inputs",
    "order_averaged_nll",
    "prefix_loss",
    "random_order_law",
    "random_windows",
    "save_checkpoint",
    "split_by_file",
    "train_transformer",
]
