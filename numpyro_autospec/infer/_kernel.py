r"""``AutospecKernel``: exact independent draws of a NumPyro model, oracle sites by autospeculation.

A model qualifies when every latent site can be drawn from its *prior*: no latent site has an
observed descendant (observations inside an oracle site, i.e. infilling with
``AnyOrderAR(observed=..., observed_mask=...)``, are part of that site's law and fine).  Each
MCMC iteration then returns one exact, independent joint draw:

* oracle sites (:class:`~numpyro_autospec.infer.OracleDistribution`:
  :class:`~numpyro_autospec.infer.AnyOrderAR`,
  :class:`~numpyro_autospec.infer.StochasticLocalization`) are
  drawn with the round scheduler :func:`numpyro_autospec.engine.run`, i.e. recursive
  speculative rejection sampling (Anari et al., *Parallel Sampling via Autospeculation*,
  arXiv:2511.07869, 2025):
  :math:`\tilde O(\sqrt n)` rounds of oracle calls instead of :math:`n`;
* every other latent site is forward-sampled, in model order, with the values drawn so far
  (so oracle parameters may depend on earlier latent sites);
* deterministic sites are returned with the draw.

An oracle site may sit in plates, have a ``sample_shape``, or be wrapped by ``.expand``,
``.mask`` or ``.to_event``: its independent draws share one engine pool.  ``obs_mask`` over its
plates observes whole draws.  :func:`inspect_model` refuses, naming the site, a latent site
with an observed descendant, an enumerated site, an oracle distribution in any other wrapper,
and an ``obs_mask`` over the entries of one draw (pin entries with ``AnyOrderAR(...,
observed=..., observed_mask=...)`` instead).

Because the draws are exact and independent, R-hat is 1 and the effective sample size is the
number of draws, up to Monte Carlo noise.  The cost of each draw is collected in the state:
``rounds`` (oracle calls one after another: the latency) and ``queries`` (oracle evaluations:
the work), summed over the model's oracle sites.

The layout follows NumPyro's ``infer/hmc.py``: a functional core, one concept per module
(:mod:`~numpyro_autospec.infer._drawing`: one joint draw, :func:`draw_model`;
:mod:`~numpyro_autospec.infer._steps`: :func:`autospec_step` and
:func:`pooled_autospec_step` over :class:`AutospecState`;
:mod:`~numpyro_autospec.infer._inspection`: :func:`inspect_model`), and this thin
:class:`~numpyro.infer.mcmc.MCMCKernel` shell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from numpyro_autospec._core.failures import Failure, FailureReports, carrying_failures
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity
from numpyro_autospec.infer._drawing import draw_model
from numpyro_autospec.infer._inspection import (
    ModelInspection,
    UnsupportedModelError,
    inspect_model,
)
from numpyro_autospec.infer._progress import announce_compilation
from numpyro_autospec.infer._steps import (
    AutospecState,
    autospec_step,
    pooled_autospec_step,
    skip_warmup,
)
from numpyro_autospec.infer._tuning import Tuning, measure_model, tune

__all__ = [
    "AutospecKernel",
    "AutospecState",
    "ModelInspection",
    "UnsupportedModelError",
    "autospec_step",
    "draw_model",
    "inspect_model",
    "pooled_autospec_step",
]


def inspection_key(model_args: tuple, model_kwargs: dict):
    """A hashable key of model arguments (arrays by identity), or ``None`` if some argument
    is neither hashable nor an array."""

    def hashable(value):
        return ("array", id(value)) if isinstance(value, (np.ndarray, jax.Array)) else value

    key = jax.tree.map(hashable, (model_args, tuple(sorted(model_kwargs.items()))))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class AutospecKernel(MCMCKernel):
    r"""Exact independent draws of a NumPyro model whose oracle sites run on the
    autospeculation engine.

    See the module docstring for the models it accepts; :meth:`init` refuses the others with
    an :class:`UnsupportedModelError` that names the site.

    **Warmup tunes the speculation.**  The draws are exact from the first iteration; the
    ``num_warmup`` warmup draws are spent in :meth:`init` choosing the engine's knobs (initial
    window, window growth, fallback threshold, recursion block size): a few exact candidate
    configurations each draw their share, the one with the fewest rounds per draw is kept
    (:mod:`~numpyro_autospec.infer._tuning`, the measurement in :attr:`tuning`) and frozen
    for sampling.  The warmup iterations of NumPyro's loop then only count (``rounds`` and
    ``queries`` 0).  ``num_warmup=0`` keeps ``config``.

    **Errors** of the oracles found inside the compiled program (NaN, ``+inf``, unnormalized
    rows) are raised by ``MCMC.run`` as :class:`~numpyro_autospec.errors.OracleError` naming
    the site and the oracle function, with or without progress bar: the state carries the
    failure (:class:`~numpyro_autospec._core.failures.Failure`) out of NumPyro's compiled loop.

    **Chains.**  ``chain_method="sequential"`` and ``"parallel"`` run one scheduler per chain;
    ``"vectorized"`` draws every chain's draws of an oracle site in one shared engine pool
    (:func:`pooled_autospec_step`), or, when an oracle site's distribution depends on a latent
    site (so it differs between chains), vmaps the per-chain step.

    :param model: a NumPyro model with oracle sites
        (:class:`~numpyro_autospec.infer.AnyOrderAR`,
        :class:`~numpyro_autospec.infer.StochasticLocalization`).
    :param method: ``"autospec"`` (recursive speculative rejection sampling),
        ``"sequential"`` (one oracle call per step, ``N`` rounds: the baseline),
        ``"assd"`` or ``"block"`` (self-speculative decoding peers).  Default:
        ``config.method``, which defaults to ``"autospec"``.
    :param config: :class:`~numpyro_autospec.config.SamplerConfig`, the engine's knobs (none
        of them changes the law).
    :param capacity: :class:`~numpyro_autospec.engine.Capacity` of the scheduler.
    :param validate: probe every oracle against its contract at ``init``.

    Collected fields: ``z`` (the draw) and, by default, ``rounds`` and ``queries`` (they also
    show up in ``arviz.from_numpyro(mcmc).sample_stats``).  The progress bar shows the last
    draw's rounds and oracle evaluations beside its number of sampled steps, which is what the
    sequential sampler spends on both (``"7 rounds, 9 evaluations, 32 steps"``).

    >>> import jax, numpyro
    >>> from numpyro.infer import MCMC
    >>> from numpyro_autospec.infer._distributions import AnyOrderAR
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     numpyro.sample("x", AnyOrderAR(CurieWeissOracle(8, beta=1.0), 8, 2))
    >>> mcmc = MCMC(AutospecKernel(model, method="sequential"), num_warmup=0, num_samples=3,
    ...             progress_bar=False)
    >>> mcmc.run(jax.random.PRNGKey(0))
    >>> mcmc.get_samples()["x"].shape, mcmc.get_extra_fields()["rounds"].tolist()
    ((3, 8), [8, 8, 8])
    """

    sample_field = "z"

    def __init__(
        self,
        model: Callable,
        *,
        method: str | None = None,
        config: SamplerConfig | None = None,
        capacity: Capacity | None = None,
        validate: bool = True,
    ):
        if not callable(model):
            raise TypeError(f"model must be callable, got {type(model).__name__}")
        config = config or SamplerConfig()
        if method is not None:  # checked with the rest of the config
            config = config._replace(method=method)
        self._model = model
        self._config = config.validate()
        self._capacity = capacity
        self._validate = validate
        self._inspection: tuple[Any, ModelInspection, tuple] | None = None
        self._sample_fn = None
        self._num_steps = 0
        # the static half of the states' Failure: one object per kernel, so that every state
        # (initial, after a step, after a restart) has the same pytree structure
        self._failure_reports = FailureReports()
        #: the warmup's measurement (:class:`~.tuning.Tuning`), ``None`` when warmup did not
        #: tune (see :meth:`adapt`)
        self.tuning: Tuning | None = None

    # -- MCMCKernel interface ------------------------------------------------------------
    @property
    def model(self) -> Callable:
        return self._model

    @property
    def config(self) -> SamplerConfig:
        return self._config

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z", "rounds", "queries")

    def get_diagnostics_str(self, state: AutospecState) -> str:
        """``"R rounds, Q evaluations, S steps"`` for the last draw (the sequential sampler
        takes ``S`` of both), or ``"warmup (no draws)"`` during warmup."""
        rounds, queries = int(state.rounds), int(state.queries)
        if queries == 0:
            return "warmup (no draws)" if self._num_steps else "no oracle site"
        return f"{rounds} rounds, {queries} evaluations, {self._num_steps} steps"

    def postprocess_fn(self, model_args, model_kwargs):
        """Identity: draws are already in the support, deterministic sites included."""
        return identity

    def inspect(self, model_args=(), model_kwargs=None) -> ModelInspection:
        """:func:`inspect_model` of this kernel's model, cached per arguments: equal hashable
        arguments, the same array objects (as NumPyro's ``MCMC`` keys its own caches), so a
        second ``MCMC.run`` neither inspects nor probes the oracles again (a probe is a
        compilation)."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        key = inspection_key(model_args, model_kwargs)
        cached = self._inspection
        if cached is not None and key is not None and cached[0] == key:
            return cached[1]
        inspection = inspect_model(self._model, model_args, model_kwargs, validate=self._validate)
        # the arguments are held with the key, so the ids of arrays in the key stay theirs
        self._inspection = (key, inspection, (model_args, model_kwargs))
        return inspection

    def adapt(self, rng_key, num_warmup: int, model_args, model_kwargs) -> SamplerConfig:
        """Tune the engine's knobs from the warmup draws (:mod:`~.tuning`), before sampling.

        Called by :meth:`init`.  With ``num_warmup`` draws and a concrete key (one key, or the
        first of a batch for ``chain_method="vectorized"``), the warmup draws are split
        between the candidate configurations of :func:`~.tuning.candidate_configs` and the
        one with the fewest rounds per draw is kept (:func:`~.tuning.tune`; the measurement
        is in :attr:`tuning`); otherwise (no warmup, ``chain_method="parallel"``, whose keys
        are traced, or traced model arguments) :attr:`config` is kept.  Every
        :class:`~numpyro_autospec.config.SamplerConfig` is exact, so tuning never changes the
        law, only rounds and queries; the chosen configuration is fixed for every sampling
        iteration.
        """
        self.tuning = None
        key = rng_key if is_prng_key(rng_key) else rng_key[0]
        traced = any(
            isinstance(leaf, jax.core.Tracer)
            for leaf in jax.tree.leaves((key, model_args, model_kwargs))
        )
        if num_warmup <= 0 or traced:
            return self._config
        inspection = self.inspect(model_args, model_kwargs)
        if not inspection.num_steps:
            return self._config
        measure = functools.partial(
            measure_model, self._model, model_args, model_kwargs, inspection, self._capacity
        )
        self.tuning = tune(measure, self._config, inspection.num_steps, key, int(num_warmup))
        return self.tuning.config

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
        """Inspect the model (refusing what cannot be drawn exactly) and return the initial
        state; ``init_params`` is ignored (draws do not depend on the previous state).  A batch
        of keys (``chain_method="vectorized"``) gives a batch of states."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        inspection = self.inspect(model_args, model_kwargs)
        self._num_steps = inspection.num_steps
        config = self.adapt(rng_key, num_warmup, model_args, model_kwargs).validate()
        capacity = self._capacity
        num_warmup = int(num_warmup)

        sample_one = carrying_failures(
            lambda state, model_args, model_kwargs: autospec_step(
                state, self._model, model_args, model_kwargs, config=config, capacity=capacity
            )
        )
        sample_pooled = carrying_failures(
            lambda states, model_args, model_kwargs: pooled_autospec_step(
                states, self._model, model_args, model_kwargs, config=config, capacity=capacity
            )
        )

        reports = self._failure_reports

        def init_one(key):
            zero = jnp.zeros((), jnp.int32)
            failure = Failure.none(reports)
            return AutospecState(zero, dict(inspection.z_like), zero, zero, key, failure)

        if is_prng_key(rng_key):
            self._sample_fn = skip_warmup(sample_one, num_warmup)
            return init_one(rng_key)
        if any(inspection.oracle_parents.values()):
            self._sample_fn = skip_warmup(
                jax.vmap(sample_one, in_axes=(0, None, None)), num_warmup, batched=True
            )
        else:
            self._sample_fn = skip_warmup(sample_pooled, num_warmup, batched=True)
        return jax.vmap(init_one)(rng_key)

    def sample(self, state: AutospecState, model_args, model_kwargs) -> AutospecState:
        """A fresh exact joint draw (independent of ``state.z``)."""
        if self._sample_fn is None:
            raise RuntimeError("AutospecKernel.init must be called before sample")
        if isinstance(state.i, jax.core.Tracer):  # traced: a compilation follows
            announce_compilation("the autospeculation sampler")
        return self._sample_fn(state, model_args, model_kwargs)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_sample_fn"] = None
        state["_inspection"] = None
        return state
