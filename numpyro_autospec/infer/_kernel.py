r"""``AutospecKernel``: exact independent draws of a NumPyro model, oracle sites by autospeculation.

A model qualifies when every latent site can be drawn from its *prior* (no latent site has an
observed descendant).  Each MCMC iteration returns one exact, independent joint draw: oracle
sites (also in plates, ``.expand``, ``.mask`` or ``.to_event``) by recursive speculative
rejection sampling (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869,
2025) in :math:`\tilde O(\sqrt n)` rounds instead of :math:`n`, other latent sites forward.
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
from numpyro_autospec.infer._inspection import ModelInspection, UnsupportedModelError, inspect_model
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
    """A hashable key of model arguments (arrays by identity), or ``None``."""

    def hashable(value):
        return ("array", id(value)) if isinstance(value, (np.ndarray, jax.Array)) else value

    key = jax.tree.map(hashable, (model_args, tuple(sorted(model_kwargs.items()))))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class AutospecKernel(MCMCKernel):
    r"""Exact independent draws of a NumPyro model, its oracle sites by autospeculation.

    See the module docstring for the models it accepts; :meth:`init` refuses the others with
    an :class:`UnsupportedModelError` naming the site.  The draws are exact from the first
    iteration: the ``num_warmup`` draws only choose the fastest of a few exact configurations
    of the engine's knobs (:attr:`tuning`).  Oracle errors found inside the compiled program
    are raised by ``MCMC.run`` as :class:`~numpyro_autospec.errors.OracleError` naming the site.

    :param model: a NumPyro model with oracle sites (``AnyOrderAR``, ``StochasticLocalization``).
    :param method: ``"autospec"`` (default), ``"sequential"`` (one oracle call per step: the
        baseline), ``"assd"`` or ``"block"`` (self-speculative decoding peers).
    :param config: :class:`~numpyro_autospec.config.SamplerConfig` (no knob changes the law);
        ``capacity`` the scheduler's :class:`~numpyro_autospec.engine.Capacity`.
    :param validate: probe every oracle against its contract at ``init``.

    Collected fields: ``z`` and, by default, ``rounds`` (latency) and ``queries`` (work).

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
        self._failure_reports = FailureReports()
        #: the warmup's measurement (``Tuning``), ``None`` when warmup did not tune
        self.tuning: Tuning | None = None

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
        """``"R rounds, Q evaluations, S steps"`` for the last draw, or ``"warmup (no draws)"``."""
        rounds, queries = int(state.rounds), int(state.queries)
        if queries == 0:
            return "warmup (no draws)" if self._num_steps else "no oracle site"
        return f"{rounds} rounds, {queries} evaluations, {self._num_steps} steps"

    def postprocess_fn(self, model_args, model_kwargs):
        """Identity: draws are already in the support, deterministic sites included."""
        return identity

    def inspect(self, model_args=(), model_kwargs=None) -> ModelInspection:
        """:func:`inspect_model` of the model, cached per arguments (arrays by identity)."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        key = inspection_key(model_args, model_kwargs)
        cached = self._inspection
        if cached is not None and key is not None and cached[0] == key:
            return cached[1]
        inspection = inspect_model(self._model, model_args, model_kwargs, validate=self._validate)
        # hold the arguments, so the ids in the key stay theirs
        self._inspection = (key, inspection, (model_args, model_kwargs))
        return inspection

    def adapt(self, rng_key, num_warmup: int, model_args, model_kwargs) -> SamplerConfig:
        """The configuration tuned by the warmup draws (none, or traced: :attr:`config`)."""
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
        """Inspect the model and return the initial state (a batch for a batch of keys)."""
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
