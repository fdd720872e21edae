r"""``AutospecKernel``: exact independent draws of a NumPyro model, oracle sites by autospeculation.

A model qualifies when every latent site can be drawn from its *prior*: no latent site has an
observed descendant (observations inside an oracle site, i.e. infilling with
``AnyOrderAR(observed=..., observed_mask=...)``, are part of that site's law and fine).  Each
MCMC iteration then returns one exact, independent joint draw:

* oracle sites (:class:`~numpyro_autospec.numpyro.distributions.OracleDistribution`:
  :class:`~numpyro_autospec.numpyro.distributions.AnyOrderAR`,
  :class:`~numpyro_autospec.numpyro.distributions.StochasticLocalization`) are drawn with the
  round scheduler :func:`numpyro_autospec.engine.run`, i.e. recursive speculative rejection
  sampling (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869, 2025):
  :math:`\tilde O(\sqrt n)` rounds of oracle calls instead of :math:`n`;
* every other latent site is forward-sampled, in model order, with the values drawn so far
  (so oracle parameters may depend on earlier latent sites);
* deterministic sites are returned with the draw.

Because the draws are exact and independent, R-hat is 1 and the effective sample size is the
number of draws, up to Monte Carlo noise.  The cost of each draw is collected in the state:
``rounds`` (oracle calls one after another: the latency) and ``queries`` (oracle evaluations:
the work), summed over the model's oracle sites.

The layout follows NumPyro's ``infer/hmc.py``: a functional core (:func:`draw_model`,
:func:`autospec_step` over :class:`AutospecState`) and a thin
:class:`~numpyro.infer.mcmc.MCMCKernel` shell.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from numpyro import handlers
from numpyro.distributions import ExpandedDistribution, MaskedDistribution
from numpyro.infer.mcmc import MCMCKernel
from numpyro.ops.provenance import eval_provenance
from numpyro.primitives import Messenger
from numpyro.util import identity, is_prng_key

from numpyro_autospec.config import METHODS, SamplerConfig
from numpyro_autospec.engine import Capacity
from numpyro_autospec.engine import run as engine_run
from numpyro_autospec.numpyro.distributions import AnyOrderAR, OracleDistribution
from numpyro_autospec.oracles.validation import check_values_in_support
from numpyro_autospec.sequential import sequential_run

__all__ = [
    "AutospecKernel",
    "AutospecState",
    "ModelInspection",
    "UnsupportedModelError",
    "autospec_step",
    "draw_model",
    "inspect_model",
]

_ALTERNATIVES = (
    "use NUTS/HMC for continuous latent sites, DiscreteHMCGibbs or MixedHMC for discrete "
    "ones, or HMCGibbs to combine kernels"
)


class UnsupportedModelError(ValueError):
    """The model has a site that ``AutospecKernel`` cannot draw exactly; the message names it
    and says what to use instead."""


class AutospecState(NamedTuple):
    """State of :class:`AutospecKernel` (one exact draw per iteration).

    :ivar i: iteration counter.
    :ivar z: the current draw: ``{site: value}`` for every latent and deterministic site.
    :ivar rounds: int32, rounds of oracle calls of the current draw (summed over oracle sites;
        for a site drawn several times in a plate, the largest of its draws, which share the
        scheduler's rounds).
    :ivar queries: int32, oracle evaluations of the current draw.
    :ivar rng_key: PRNG key of the next draw.
    """

    i: Array
    z: dict
    rounds: Array
    queries: Array
    rng_key: Array


class Draw(NamedTuple):
    """One exact joint draw of a model and its cost."""

    z: dict
    rounds: Array
    queries: Array


class ModelInspection(NamedTuple):
    """What :func:`inspect_model` found.

    :ivar oracle_sites: latent sites drawn with the engine.
    :ivar latent_sites: other latent sites (forward-sampled).
    :ivar observed_sites: observed sites (none of them depends on a latent site).
    :ivar deterministic_sites: deterministic sites.
    :ivar oracle_parents: for each oracle site, the latent sites its parameters depend on.
    :ivar z_like: a zero value of the draw, ``{site: array}`` (for the initial state).
    """

    oracle_sites: tuple[str, ...]
    latent_sites: tuple[str, ...]
    observed_sites: tuple[str, ...]
    deterministic_sites: tuple[str, ...]
    oracle_parents: dict
    z_like: dict


def _oracle_base(fn) -> OracleDistribution | None:
    """The oracle distribution behind ``fn`` (possibly expanded by a plate or masked)."""
    while isinstance(fn, ExpandedDistribution | MaskedDistribution):
        fn = fn.base_dist
    return fn if isinstance(fn, OracleDistribution) else None


def _strong(value):
    """``value`` as a strongly typed array (loop carries must keep one type)."""
    value = jnp.asarray(value)
    return jax.lax.convert_element_type(value, value.dtype)


class _DrawOracleSites(Messenger):
    """Set the value of each latent oracle site with ``draw_site(name, dist, key, shape)``.

    Placed *outside* ``handlers.seed`` so that the site's key is already in
    ``msg["kwargs"]["rng_key"]``; the plate's expansion (``shape`` = sample shape + batch
    shape) gives the number of independent draws.
    """

    def __init__(self, fn=None, *, draw_site: Callable):
        self.draw_site = draw_site
        self.costs: list[tuple[Array, Array]] = []
        super().__init__(fn)

    def process_message(self, msg) -> None:
        if msg["type"] != "sample" or msg["is_observed"] or msg["value"] is not None:
            return
        base = _oracle_base(msg["fn"])
        if base is None:
            return
        key = msg["kwargs"].get("rng_key")
        if key is None:
            raise RuntimeError(f"site {msg['name']!r}: no PRNG key (the model must be seeded)")
        shape = tuple(msg["kwargs"].get("sample_shape", ())) + tuple(msg["fn"].batch_shape)
        value, rounds, queries = self.draw_site(msg["name"], base, key, shape)
        msg["value"] = value
        self.costs.append((rounds, queries))


def _engine_draw_site(config: SamplerConfig, capacity: Capacity | None) -> Callable:
    def draw_site(name: str, base: OracleDistribution, key: Array, shape: tuple[int, ...]):
        process = base.make_process(name)
        num_draws = math.prod(shape)
        keys = key[None] if num_draws == 1 else jax.random.split(key, num_draws)
        if config.method == "sequential":
            samples = sequential_run(process, keys)
        else:
            samples = engine_run(process, keys, config, capacity)
        value = jnp.reshape(samples.value, shape + base.event_shape)
        return value, jnp.max(samples.rounds), jnp.sum(samples.queries)

    return draw_site


def _placeholder_draw_site(name, base, key, shape):
    process = base.make_process(name)  # checks the site (errors name it)
    like = jax.eval_shape(lambda k: sequential_run(process, k[None]).value[0], key)
    like = jax.ShapeDtypeStruct(shape + like.shape, like.dtype)
    zero = jnp.zeros((), jnp.int32)
    return jnp.zeros(like.shape, like.dtype), zero, zero


def _run_with(model, draw_site, rng_key, model_args, model_kwargs):
    drawer = _DrawOracleSites(handlers.seed(model, rng_key), draw_site=draw_site)
    trace = handlers.trace(drawer).get_trace(*model_args, **model_kwargs)
    return trace, drawer.costs


def _draw_from_trace(trace) -> dict:
    return {
        name: _strong(site["value"])
        for name, site in trace.items()
        if (site["type"] == "sample" and not site["is_observed"]) or site["type"] == "deterministic"
    }


def draw_model(
    model: Callable,
    rng_key: Array,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    *,
    config: SamplerConfig | None = None,
    capacity: Capacity | None = None,
) -> Draw:
    """One exact joint draw of ``model``'s latent and deterministic sites (pure JAX).

    Oracle sites are drawn with the engine (or the sequential sampler for
    ``config.method == "sequential"``); the site's key is the one ``handlers.seed`` gives it,
    and a single draw uses it as is (so it equals ``engine.run(process, key[None])``).  Every
    other latent site is forward-sampled.  The model is *not* checked here: see
    :func:`inspect_model`.

    >>> import jax, numpyro
    >>> from numpyro_autospec.numpyro.distributions import AnyOrderAR
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     x = numpyro.sample("x", AnyOrderAR(CurieWeissOracle(16, 1.0), 16, 2))
    ...     numpyro.deterministic("m", x.sum())
    >>> draw = draw_model(model, jax.random.PRNGKey(0), config=SamplerConfig(method="sequential"))
    >>> sorted(draw.z), draw.z["x"].shape, int(draw.rounds)
    (['m', 'x'], (16,), 16)
    """
    config = (config or SamplerConfig()).validate()
    trace, costs = _run_with(
        model, _engine_draw_site(config, capacity), rng_key, model_args, model_kwargs or {}
    )
    rounds = sum((c[0] for c in costs), jnp.zeros((), jnp.int32))
    queries = sum((c[1] for c in costs), jnp.zeros((), jnp.int32))
    return Draw(_draw_from_trace(trace), _strong(rounds), _strong(queries))


def autospec_step(
    state: AutospecState,
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    *,
    config: SamplerConfig,
    capacity: Capacity | None = None,
) -> AutospecState:
    """One iteration: a fresh exact joint draw, independent of ``state.z``."""
    rng_key, key_draw = jax.random.split(state.rng_key)
    draw = draw_model(model, key_draw, model_args, model_kwargs, config=config, capacity=capacity)
    return AutospecState(state.i + 1, draw.z, draw.rounds, draw.queries, rng_key)


# ------------------------------------------------------------------------------- inspection
def _refuse(message: str):
    raise UnsupportedModelError(f"AutospecKernel cannot sample this model exactly: {message}")


def _check_site(name: str, site: dict, validate: bool) -> None:
    enumerate_mode = (site.get("infer") or {}).get("enumerate")
    if enumerate_mode is not None:
        _refuse(
            f"site {name!r} is marked for enumeration (infer={{'enumerate': "
            f"{enumerate_mode!r}}}). AutospecKernel draws every latent site; it does not sum "
            "sites out. Remove the annotation to draw the site by forward sampling (allowed "
            "when it has no observed descendant), or, to marginalize it, use NUTS/HMC, whose "
            "potential enumerates such sites (numpyro.contrib.funsor)"
        )
    base = _oracle_base(site["fn"])
    if base is None:
        return
    if site["is_observed"]:
        if isinstance(base, AnyOrderAR) and not isinstance(site["value"], jax.core.Tracer):
            check_values_in_support(np.asarray(site["value"]), base.num_categories, name=name)
        return
    base.make_process(name)  # names the site for observed values outside the support
    if validate:
        base.validate_oracle(name)


def _dependencies(model, model_args, model_kwargs, latent_values: dict) -> dict:
    """For each observed site and each oracle site, the latent sites it depends on
    (provenance tracking through the model's jaxpr, as ``numpyro.infer.inspect``)."""

    def probes(**values):
        with (
            handlers.trace() as trace,
            handlers.seed(rng_seed=0),
            handlers.substitute(data=values),
        ):
            model(*model_args, **model_kwargs)
        out = {}
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            base = _oracle_base(site["fn"])
            if base is not None:
                out[name] = base.dependency_probe()
            elif site["is_observed"]:
                out[name] = site["fn"].log_prob(site["value"])
        return out

    provenance = eval_provenance(probes, **latent_values)
    return {name: set(sources) - {name} for name, sources in provenance.items()}


def inspect_model(
    model: Callable, model_args: tuple = (), model_kwargs: dict | None = None, *, validate=True
) -> ModelInspection:
    """Check that ``model`` can be drawn exactly and list its sites.

    Runs the model once eagerly (oracle sites replaced by placeholders, so no sampling cost),
    validates oracle sites (``validate=True``: probes each oracle or denoiser against its
    contract), and tracks which latent sites each observed site depends on.

    :raises UnsupportedModelError: naming the site, for a latent site with an observed
        descendant or an enumerated site.
    :raises ValueError: naming the site, for observed values outside an oracle site's support.
    """
    model_kwargs = model_kwargs or {}
    with jax.ensure_compile_time_eval():
        trace, _ = _run_with(
            model, _placeholder_draw_site, jax.random.PRNGKey(0), model_args, model_kwargs
        )
        oracle_sites, latent_sites, observed_sites, deterministic = [], [], [], []
        for name, site in trace.items():
            if site["type"] == "deterministic":
                deterministic.append(name)
            if site["type"] != "sample":
                continue
            _check_site(name, site, validate)
            if site["is_observed"]:
                observed_sites.append(name)
            elif _oracle_base(site["fn"]) is not None:
                oracle_sites.append(name)
            else:
                latent_sites.append(name)
        latent_values = {name: trace[name]["value"] for name in oracle_sites + latent_sites}
        order = {name: i for i, name in enumerate(trace)}
        dependencies = {}
        if observed_sites or oracle_sites:
            try:
                dependencies = _dependencies(model, model_args, model_kwargs, latent_values)
            except UnsupportedModelError:
                raise
            except Exception as error:
                if observed_sites:
                    raise UnsupportedModelError(
                        "AutospecKernel could not trace the model to check that no observed "
                        f"site depends on a latent site ({type(error).__name__}: {error}); "
                        f"it can only sample models without such dependencies. "
                        f"Otherwise {_ALTERNATIVES}"
                    ) from error
    for observed in observed_sites:
        parents = sorted(dependencies.get(observed, set()) & set(latent_values), key=order.get)
        if not parents:
            continue
        parent = parents[0]
        if parent in oracle_sites:
            _refuse(
                f"the observed site {observed!r} depends on the oracle site {parent!r}, so "
                f"{parent!r} would have to be drawn from its posterior given {observed!r}, "
                "which its oracle does not describe. To condition on known entries of "
                f"{parent!r}, pin them with AnyOrderAR(..., observed=values, "
                "observed_mask=mask) (exact infilling); otherwise " + _ALTERNATIVES
            )
        _refuse(
            f"the observed site {observed!r} depends on the latent site {parent!r}, so "
            f"{parent!r} would have to be drawn from its posterior, not its prior "
            "(AutospecKernel draws oracle sites with the engine and forward-samples every "
            f"other latent site); {_ALTERNATIVES}"
        )
    z_like = {name: jnp.zeros_like(value) for name, value in _draw_from_trace(trace).items()}
    parents = {
        name: tuple(sorted(dependencies.get(name, set()) & set(latent_values), key=order.get))
        for name in oracle_sites
    }
    return ModelInspection(
        tuple(oracle_sites),
        tuple(latent_sites),
        tuple(observed_sites),
        tuple(deterministic),
        parents,
        z_like,
    )


# ---------------------------------------------------------------------------- kernel shell
class AutospecKernel(MCMCKernel):
    r"""Exact independent draws of a NumPyro model whose oracle sites run on the
    autospeculation engine.

    See the module docstring for the models it accepts.  Every iteration (warmup included)
    is a fresh exact joint draw: warmup changes nothing but time, so use ``num_warmup=0``.

    :param model: a NumPyro model with oracle sites
        (:class:`~numpyro_autospec.numpyro.distributions.AnyOrderAR`,
        :class:`~numpyro_autospec.numpyro.distributions.StochasticLocalization`).
    :param method: ``"autospec"`` (recursive speculative rejection sampling),
        ``"sequential"`` (one oracle call per step, ``N`` rounds: the baseline),
        ``"assd"`` or ``"block"`` (self-speculative decoding peers).  Default:
        ``config.method``, which defaults to ``"autospec"``.
    :param config: :class:`~numpyro_autospec.config.SamplerConfig`, the engine's knobs (none
        of them changes the law).
    :param capacity: :class:`~numpyro_autospec.engine.Capacity` of the scheduler.
    :param validate: probe every oracle against its contract at ``init``.

    Collected fields: ``z`` (the draw) and, by default, ``rounds`` and ``queries`` (they also
    show up in ``arviz.from_numpyro(mcmc).sample_stats``).

    >>> import jax, numpyro
    >>> from numpyro.infer import MCMC
    >>> from numpyro_autospec.numpyro.distributions import AnyOrderAR
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
        if method is not None:
            if method not in METHODS:
                raise ValueError(f"method must be one of {METHODS}, got {method!r}")
            config = config._replace(method=method)
        self._model = model
        self._config = config.validate()
        self._capacity = capacity
        self._validate = validate
        self._inspection: tuple[Any, ModelInspection] | None = None
        self._sample_fn = None

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
        return f"{int(state.rounds)} rounds, {int(state.queries)} queries"

    def postprocess_fn(self, model_args, model_kwargs):
        """Identity: draws are already in the support, deterministic sites included."""
        return identity

    def inspect(self, model_args=(), model_kwargs=None) -> ModelInspection:
        """:func:`inspect_model` of this kernel's model (cached per arguments)."""
        key = (model_args, model_kwargs)
        cached = self._inspection
        if cached is not None and cached[0][0] is model_args and cached[0][1] is model_kwargs:
            return cached[1]
        inspection = inspect_model(self._model, model_args, model_kwargs, validate=self._validate)
        self._inspection = (key, inspection)
        return inspection

    def adapt(self, rng_key, num_warmup: int, model_args, model_kwargs) -> SamplerConfig:
        """Hook to tune the engine's knobs (``block_size``, ``growth``, ...) before sampling.

        Called by :meth:`init`; the default keeps :attr:`config`.  Any returned
        :class:`~numpyro_autospec.config.SamplerConfig` is exact, so tuning never changes the
        law, only rounds and queries.  ``rng_key`` may be traced (``chain_method="parallel"``).
        """
        return self._config

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
        """Inspect the model (refusing what cannot be drawn exactly) and return the initial
        state; ``init_params`` is ignored (draws do not depend on the previous state).  A batch
        of keys (``chain_method="vectorized"``) gives a batch of states."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        inspection = self.inspect(model_args, model_kwargs)
        config = self.adapt(rng_key, num_warmup, model_args, model_kwargs).validate()
        capacity = self._capacity

        def sample_one(state, model_args, model_kwargs):
            return autospec_step(
                state, self._model, model_args, model_kwargs, config=config, capacity=capacity
            )

        def init_one(key):
            zero = jnp.zeros((), jnp.int32)
            return AutospecState(zero, dict(inspection.z_like), zero, zero, key)

        if is_prng_key(rng_key):
            self._sample_fn = sample_one
            return init_one(rng_key)
        self._sample_fn = jax.vmap(sample_one, in_axes=(0, None, None))
        return jax.vmap(init_one)(rng_key)

    def sample(self, state: AutospecState, model_args, model_kwargs) -> AutospecState:
        """A fresh exact joint draw (independent of ``state.z``)."""
        if self._sample_fn is None:
            raise RuntimeError("AutospecKernel.init must be called before sample")
        return self._sample_fn(state, model_args, model_kwargs)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_sample_fn"] = None
        state["_inspection"] = None
        return state
