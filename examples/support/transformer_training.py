r"""Training and evaluating a :class:`~numpyro_autospec.learned.TransformerOracle`.

For an order :math:`\sigma` the sequential negative log-likelihood of :math:`x \in [q]^n` is
:math:`l_\sigma(x) = -\sum_k \log p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)})`; the any-order
autoregressive objective is its average over uniformly random orders, per character,

.. math:: L(x) = \tfrac{1}{n}\,\mathbb{E}_\sigma\, l_\sigma(x) \;\ge\;
    -\tfrac{1}{n} \log \mathbb{E}_\sigma\, e^{-l_\sigma(x)},

an upper bound (Jensen) on the negative log-likelihood of the law the sampler draws from with a
random order (docs/learned.md; docs/algorithm.md, section 2a; Anari et al., *Parallel Sampling
via Autospeculation*, arXiv:2511.07869).  Two unbiased one-pass estimates, one random order per
sequence:

* ``objective="autoregressive"`` (sigma-GPT): all :math:`n` terms of :math:`l_\sigma(x) / n`,
  row :math:`k` asking for site :math:`\sigma(k)` given the prefix of length :math:`k`;
* ``objective="prefix"`` (any-order ARM, Uria et al. 2014; Hoogeboom et al. 2022): a prefix
  length :math:`k \sim \mathrm{Uniform}\{0..n-1\}` and every site after it given the prefix,
  :math:`\frac{1}{n-k} \sum_{r_i \ge k} -\log p_\theta(x_i \mid x_{\sigma(<k)})` -- exactly the
  speculation rows of a block starting at :math:`k`.

Both ask queries of one kind (a site given an ordered prefix not containing it), so both train
the same function; the first has lower variance (all prefix lengths in one pass).
"""

from __future__ import annotations

import math
import time
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from numpyro_autospec.errors import ConfigError
from numpyro_autospec.learned._transformer import TransformerOracle, inverse_permutation

__all__ = [
    "autoregressive_loss",
    "bits_per_character",
    "prefix_loss",
    "train_transformer",
]

Objective = Literal["autoregressive", "prefix"]


def autoregressive_loss(model: TransformerOracle, x: Array, order: Array) -> Array:
    r""":math:`l_\sigma(x) / n` in nats per site: the mean of :math:`-\log p_\theta(x_{\sigma(k)}
    \mid x_{\sigma(<k)})` over :math:`k`, one forward pass.

    Example: an untrained network is close to uniform, :math:`\log 3 \approx 1.1` nats.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.learned import TransformerOracle
    >>> model = TransformerOracle(6, 3, model_size=16, num_layers=1, num_heads=2,
    ...                           key=jax.random.PRNGKey(0))
    >>> loss = autoregressive_loss(model, jnp.array([0, 1, 2, 0, 1, 2]), jnp.arange(6))
    >>> loss.shape, bool(0.5 < loss < 2.0)
    ((), True)
    """
    return -jnp.mean(model.sequence_log_probs(x, order))


def prefix_loss(model: TransformerOracle, x: Array, order: Array, prefix_length: Array) -> Array:
    r""":math:`\frac{1}{n-k} \sum_{r_i \ge k} -\log p_\theta(x_i \mid x_{\sigma(<k)})` with
    :math:`k` = ``prefix_length``; its mean over :math:`k \sim \mathrm{Uniform}\{0..n-1\}` and
    :math:`\sigma` is :math:`L(x)`, one forward pass.

    Example: with an empty prefix every site is scored given nothing.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.learned import TransformerOracle
    >>> model = TransformerOracle(6, 3, model_size=16, num_layers=1, num_heads=2,
    ...                           key=jax.random.PRNGKey(0))
    >>> loss = prefix_loss(model, jnp.array([0, 1, 2, 0, 1, 2]), jnp.arange(6), 0)
    >>> loss.shape, bool(0.5 < loss < 2.0)
    ((), True)
    """
    n = model.num_positions
    x = jnp.asarray(x, jnp.int32)
    ranks = inverse_permutation(order)
    rows = model.log_conditionals(x, ranks, jnp.arange(n), jnp.full(n, prefix_length))
    scored = ranks >= prefix_length
    nll = -rows[jnp.arange(n), x]
    return jnp.sum(jnp.where(scored, nll, 0.0)) / (n - prefix_length)


def _batch_loss(model: TransformerOracle, key: Array, batch: Array, objective: Objective) -> Array:
    """Mean objective over a batch, one random order (and prefix length) per sequence."""
    n = model.num_positions
    order_keys = jax.random.split(key, batch.shape[0] + 1)
    orders = jax.vmap(lambda k: jax.random.permutation(k, n))(order_keys[1:])
    if objective == "autoregressive":
        losses = jax.vmap(autoregressive_loss, in_axes=(None, 0, 0))(model, batch, orders)
    else:
        lengths = jax.random.randint(order_keys[0], (batch.shape[0],), 0, n)
        losses = jax.vmap(prefix_loss, in_axes=(None, 0, 0, 0))(model, batch, orders, lengths)
    return jnp.mean(losses)


def _sample_batch(data: np.ndarray, length: int, size: int, rng: np.random.Generator):
    """Rows of a 2-D array of sequences, or random windows of a 1-D text."""
    if data.ndim == 2:
        return data[rng.integers(0, data.shape[0], size=size)]
    starts = rng.integers(0, data.shape[0] - length + 1, size=size)
    return data[starts[:, None] + np.arange(length)[None, :]]


def train_transformer(
    key: Array,
    model: TransformerOracle,
    data: np.ndarray,
    num_steps: int,
    *,
    batch_size: int = 32,
    learning_rate: float = 2e-3,
    warmup_steps: int | None = None,
    objective: Objective = "autoregressive",
    progress_bar: bool = True,
) -> tuple[TransformerOracle, np.ndarray]:
    r"""``(trained model, losses)``: ``num_steps`` AdamW steps (gradient clipping at norm 1,
    linear warm-up then cosine decay to a tenth of ``learning_rate``) on the objective.

    :param key: PRNG key (orders, prefix lengths and batches derive from it: seeded).
    :param data: ``int[N, n]`` sequences (rows drawn uniformly), or a 1-D text ``int[T]``
        from which windows of ``n`` consecutive codes are cut at random.
    :param objective: ``"autoregressive"`` or ``"prefix"`` (module docstring).
    :param progress_bar: show a ``tqdm`` bar with the running loss.
    :returns: the model and the per-step batch objective, ``float[num_steps]`` nats per site.

    >>> import jax, numpy as np
    >>> model = TransformerOracle(4, 2, model_size=16, num_layers=1, num_heads=2,
    ...                           key=jax.random.PRNGKey(0))
    >>> data = np.tile([[0, 1, 0, 1]], (8, 1))
    >>> model, losses = train_transformer(jax.random.PRNGKey(1), model, data, 60,
    ...                                   batch_size=8, learning_rate=1e-2, progress_bar=False)
    >>> bool(losses[-10:].mean() < 0.5 * losses[:10].mean())
    True
    """
    from tqdm.auto import tqdm

    data = np.asarray(data, np.int32)
    if data.ndim not in (1, 2) or (data.ndim == 2 and data.shape[1] != model.num_positions):
        raise ConfigError(
            f"data must be int[N, {model.num_positions}] sequences or a 1-D text, got {data.shape}"
        )
    if objective not in ("autoregressive", "prefix"):
        raise ConfigError(f"objective must be 'autoregressive' or 'prefix', not {objective!r}")
    warmup = max(1, min(num_steps // 10, 200) if warmup_steps is None else warmup_steps)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, warmup, max(num_steps, warmup + 1), learning_rate / 10
    )
    optimizer = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01)
    )
    state = optimizer.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, state, key, batch):
        loss, grads = eqx.filter_value_and_grad(_batch_loss)(model, key, batch, objective)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state, loss

    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    losses = np.zeros(num_steps)
    bar = tqdm(range(num_steps), disable=not progress_bar, desc="training", unit="step")
    for index in bar:
        key, step_key = jax.random.split(key)
        batch = jnp.asarray(_sample_batch(data, model.num_positions, batch_size, rng))
        model, state, loss = step(model, state, step_key, batch)
        losses[index] = float(loss)
        if index % 10 == 9:
            bar.set_postfix(
                bits_per_site=f"{losses[max(0, index - 49) : index + 1].mean() / math.log(2):.3f}"
            )
    return model, losses


def bits_per_character(
    model: TransformerOracle,
    sequences: np.ndarray,
    *,
    order: Literal["random", "left_to_right"] = "random",
    key: Array | None = None,
    batch_size: int = 64,
) -> float:
    r"""Mean of :math:`-\log_2 p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)})` over the sites of
    ``sequences`` (``int[N, n]``): :math:`\mathbb{E}\, l_\sigma(x) / (n \log 2)`, with one
    uniformly random order per sequence (``order="random"``, an upper bound on the bits per
    character of the random-order law) or :math:`\sigma = (0, 1, \dots, n-1)`.

    Example: an untrained network is close to uniform, :math:`\log_2 3 \approx 1.58` bits.

    >>> import jax, numpy as np
    >>> from numpyro_autospec.learned import TransformerOracle
    >>> model = TransformerOracle(6, 3, model_size=16, num_layers=1, num_heads=2,
    ...                           key=jax.random.PRNGKey(0))
    >>> sequences = np.random.default_rng(0).integers(0, 3, size=(8, 6))
    >>> bool(1.0 < bits_per_character(model, sequences) < 2.5)
    True
    """
    sequences = np.asarray(sequences, np.int32)
    n = model.num_positions
    key = jax.random.PRNGKey(0) if key is None else key
    if order == "random":
        keys = jax.random.split(key, len(sequences))
        orders = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, n))(keys))
    elif order == "left_to_right":
        orders = np.tile(np.arange(n, dtype=np.int32), (len(sequences), 1))
    else:
        raise ConfigError(f"order must be 'random' or 'left_to_right', not {order!r}")
    losses = eqx.filter_jit(jax.vmap(autoregressive_loss, in_axes=(None, 0, 0)))
    total = 0.0
    for start in range(0, len(sequences), batch_size):
        chunk = slice(start, start + batch_size)
        total += float(jnp.sum(losses(model, sequences[chunk], orders[chunk])))
    return total / (len(sequences) * math.log(2))


def timed(function, *args, **kwargs):
    """``(result, seconds)`` of one call."""
    begin = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - begin
