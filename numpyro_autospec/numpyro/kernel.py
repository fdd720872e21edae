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
from numpyro.distributions import ExpandedDistribution, Independent, MaskedDistribution
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
    "pooled_autospec_step",
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
    :ivar num_steps: steps of one joint draw, summed over the oracle sites and their draws
        (``N`` per draw of an ``AnyOrderAR`` site: its free entries).
    """

    oracle_sites: tuple[str, ...]
    latent_sites: tuple[str, ...]
    observed_sites: tuple[str, ...]
    deterministic_sites: tuple[str, ...]
    oracle_parents: dict
    z_like: dict
    num_steps: int = 0


_TRANSPARENT = (ExpandedDistribution, MaskedDistribution, Independent)


def _oracle_base(fn) -> OracleDistribution | None:
    """The oracle distribution behind ``fn``: ``fn`` itself, or ``fn`` expanded (a plate,
    ``.expand``), masked (``.mask``) or with batch dimensions made event dimensions
    (``.to_event``, :class:`~numpyro.distributions.Independent`).  These wrappers only arrange
    independent draws of the oracle distribution; any other wrapper is refused by
    :func:`inspect_model`."""
    while isinstance(fn, _TRANSPARENT):
        fn = fn.base_dist
    return fn if isinstance(fn, OracleDistribution) else None


def _hidden_oracle(fn) -> tuple[str, OracleDistribution] | None:
    """``(wrapper, oracle distribution)`` when an oracle distribution sits inside a wrapper
    that :func:`_oracle_base` does not see through (e.g. a ``TransformedDistribution``)."""
    wrapper = None
    while fn is not None:
        if isinstance(fn, OracleDistribution):
            return (wrapper, fn) if wrapper is not None else None
        if not isinstance(fn, _TRANSPARENT) and wrapper is None:
            wrapper = type(fn).__name__
        fn = getattr(fn, "base_dist", None)
    return None


def _draw_shape(msg, base: OracleDistribution) -> tuple[int, ...]:
    """Shape of the independent draws of ``base`` at a site: sample shape + batch shape, plus
    the batch dimensions that ``.to_event`` turned into event dimensions."""
    full = (
        tuple(msg["kwargs"].get("sample_shape", ()))
        + tuple(msg["fn"].batch_shape)
        + tuple(msg["fn"].event_shape)
    )
    return full[: len(full) - len(base.event_shape)]


def _strong(value):
    """``value`` as a strongly typed array (loop carries must keep one type)."""
    value = jnp.asarray(value)
    return jax.lax.convert_element_type(value, value.dtype)


class _DrawOracleSites(Messenger):
    """Set the value of each latent oracle site with ``draw_site(name, dist, key, shape)``.

    Placed *outside* ``handlers.seed`` so that the site's key is already in
    ``msg["kwargs"]["rng_key"]``; ``shape`` (:func:`_draw_shape`) is the shape of the
    independent draws of the site.  ``check(msg)``, if given, sees every sample site first
    (inspection: refusals are raised before the rest of the model runs).
    """

    def __init__(self, fn=None, *, draw_site: Callable, check: Callable | None = None):
        self.draw_site = draw_site
        self.check = check
        self.costs: list[tuple[Array, Array]] = []
        super().__init__(fn)

    def process_message(self, msg) -> None:
        if msg["type"] != "sample":
            return
        if self.check is not None:
            self.check(msg)
        if msg["is_observed"] or msg["value"] is not None:
            return
        base = _oracle_base(msg["fn"])
        if base is None:
            return
        key = msg["kwargs"].get("rng_key")
        if key is None:
            raise RuntimeError(f"site {msg['name']!r}: no PRNG key (the model must be seeded)")
        value, rounds, queries = self.draw_site(msg["name"], base, key, _draw_shape(msg, base))
        msg["value"] = value
        self.costs.append((rounds, queries))


def _draw_sites(
    config: SamplerConfig, process, keys: Array, capacity: Capacity | None
) -> tuple[Array, Array, Array]:
    """``(values, rounds, queries)`` of ``len(keys)`` draws of ``process`` in one pool."""
    if config.method == "sequential":
        samples = sequential_run(process, keys)
    else:
        samples = engine_run(process, keys, config, capacity)
    return samples


def _site_keys(key: Array, num_draws: int) -> Array:
    """One key per draw of a site: the site's key itself for a single draw."""
    return key[None] if num_draws == 1 else jax.random.split(key, num_draws)


def _engine_draw_site(config: SamplerConfig, capacity: Capacity | None) -> Callable:
    def draw_site(name: str, base: OracleDistribution, key: Array, shape: tuple[int, ...]):
        process = base.make_process(name)
        samples = _draw_sites(config, process, _site_keys(key, math.prod(shape)), capacity)
        value = jnp.reshape(samples.value, shape + base.event_shape)
        return value, jnp.max(samples.rounds), jnp.sum(samples.queries)

    return draw_site


class _Placeholders:
    """A ``draw_site`` that returns zeros of the right shape and dtype (no sampling) and
    records, per oracle site, its key, its distribution, its draw shape and its steps."""

    def __init__(self):
        self.sites: dict[str, tuple[Array, OracleDistribution, tuple[int, ...]]] = {}
        self.num_steps = 0

    def __call__(self, name, base, key, shape):
        process = base.make_process(name)  # checks the site (errors name it)
        like = jax.eval_shape(lambda k: sequential_run(process, k[None]).value[0], key)
        self.sites[name] = (key, base, shape)
        self.num_steps += int(process.num_steps) * math.prod(shape)
        zero = jnp.zeros((), jnp.int32)
        return jnp.zeros(shape + like.shape, like.dtype), zero, zero


def _run_with(model, draw_site, rng_key, model_args, model_kwargs, check=None):
    drawer = _DrawOracleSites(handlers.seed(model, rng_key), draw_site=draw_site, check=check)
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


def pooled_autospec_step(
    states: AutospecState,
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    *,
    config: SamplerConfig,
    capacity: Capacity | None = None,
) -> AutospecState:
    """One iteration of a batch of chains (``chain_method="vectorized"``), every chain's draws
    of an oracle site sharing one engine pool.

    Each chain's draw equals :func:`autospec_step`'s for its key (same site keys, and the
    engine's draws do not depend on the pool they share).  The difference is how they run:
    one scheduler over ``chains x draws`` instead of one scheduler per chain vmapped, whose
    lanes would all wait for the slowest chain's control flow at every step.  It needs the
    oracle sites to be the same in every chain: no oracle site's distribution may depend on
    a latent site (``ModelInspection.oracle_parents`` all empty; :class:`AutospecKernel`
    vmaps :func:`autospec_step` otherwise).

    Three passes: the model is traced per chain (vmapped) with placeholders to learn each
    oracle site's key; each site is drawn for all chains in one :func:`numpyro_autospec.engine.run`;
    the model is traced again per chain with those values in place, forward-sampling the
    other latent sites with the same keys as :func:`autospec_step`.
    """
    split = jax.vmap(jax.random.split)(states.rng_key)
    rng_keys, draw_keys = split[:, 0], split[:, 1]
    num_chains = draw_keys.shape[0]

    def site_keys(key):
        placeholders = _Placeholders()
        _run_with(model, placeholders, key, model_args, model_kwargs)
        return {name: site[0] for name, site in placeholders.sites.items()}

    keys_by_site = jax.vmap(site_keys)(draw_keys)
    sites = _Placeholders()  # the oracle sites' distributions (the same in every chain)
    _run_with(model, sites, draw_keys[0], model_args, model_kwargs)
    values = {}
    rounds = jnp.zeros(num_chains, jnp.int32)
    queries = jnp.zeros(num_chains, jnp.int32)
    for name, (_, base, shape) in sites.sites.items():
        num_draws = math.prod(shape)
        keys = jax.vmap(lambda key, d=num_draws: _site_keys(key, d))(keys_by_site[name])
        keys = jnp.reshape(keys, (num_chains * num_draws,) + keys.shape[2:])
        samples = _draw_sites(config, base.make_process(name), keys, capacity)
        values[name] = jnp.reshape(samples.value, (num_chains,) + shape + base.event_shape)
        rounds = rounds + jnp.max(jnp.reshape(samples.rounds, (num_chains, num_draws)), 1)
        queries = queries + jnp.sum(jnp.reshape(samples.queries, (num_chains, num_draws)), 1)

    def finish(key, values):
        zero = jnp.zeros((), jnp.int32)
        trace, _ = _run_with(
            model, lambda name, *_: (values[name], zero, zero), key, model_args, model_kwargs
        )
        return _draw_from_trace(trace)

    z = jax.vmap(finish)(draw_keys, values)
    return AutospecState(states.i + 1, z, _strong(rounds), _strong(queries), rng_keys)


def _skip_warmup(step: Callable, num_warmup: int, batched: bool = False) -> Callable:
    """``step`` after ``num_warmup`` iterations; before, a no-op that only counts (no draw,
    no oracle call, the key untouched), so the draws after warmup are those of
    ``num_warmup=0``."""
    if num_warmup <= 0:
        return step

    def skip(state):
        zero = jnp.zeros_like(state.rounds)
        return state._replace(i=state.i + 1, rounds=zero, queries=zero)

    def maybe_step(state, model_args, model_kwargs):
        in_warmup = (state.i[0] if batched else state.i) < num_warmup
        return jax.lax.cond(
            in_warmup, skip, lambda state: step(state, model_args, model_kwargs), state
        )

    return maybe_step


# ------------------------------------------------------------------------------- inspection
def _refuse(message: str):
    raise UnsupportedModelError(f"AutospecKernel cannot sample this model exactly: {message}")


def _masks(fn) -> list:
    """The array masks of the ``MaskedDistribution`` wrappers of ``fn``."""
    masks = []
    while isinstance(fn, _TRANSPARENT):
        if isinstance(fn, MaskedDistribution) and not isinstance(fn._mask, bool):
            masks.append(fn._mask)
        fn = fn.base_dist
    return masks


def _plate_shape(site) -> tuple[int, ...]:
    """The batch shape the site's plates give."""
    frames = [f for f in site.get("cond_indep_stack", ()) if f.dim is not None]
    shape = [1] * max((-f.dim for f in frames), default=0)
    for frame in frames:
        shape[frame.dim] = frame.size
    return tuple(shape)


def _event_mask_message(name: str, base: OracleDistribution, mask_shape, draw_shape) -> str:
    user_site = name
    for suffix in ("_observed", "_unobserved"):
        if name.endswith(suffix):
            user_site = name[: -len(suffix)]
    pin = (
        "To observe some entries of one draw, pin them with AnyOrderAR(..., observed=values, "
        "observed_mask=mask) (exact infilling)"
        if isinstance(base, AnyOrderAR)
        else f"{type(base).__name__} has no partial observations"
    )
    return (
        f"site {name!r} (from numpyro.sample({user_site!r}, ..., obs_mask=...)) has an "
        f"obs_mask of shape {tuple(mask_shape)}, but obs_mask selects whole draws of the "
        f"site, here of shape {tuple(draw_shape)} (its plates), not entries of one "
        f"{type(base).__name__} draw. {pin}; obs_mask over a plate of draws marks whole "
        "draws as observed"
    )


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
    hidden = _hidden_oracle(site["fn"])
    if hidden is not None:
        wrapper, inner = hidden
        _refuse(
            f"site {name!r} wraps {type(inner).__name__} in {wrapper}. AutospecKernel draws "
            "oracle distributions that are sampled as they are (also expanded by a plate, "
            "masked or made an event with .to_event()), and does not see through other "
            f"wrappers. Sample the {type(inner).__name__} site itself and apply the "
            "transformation with numpyro.deterministic"
        )
    base = _oracle_base(site["fn"])
    if base is None:
        return
    draw_shape = _draw_shape(site, base)
    masks = _masks(site["fn"])
    if site["is_observed"] and name.endswith("_observed"):
        plates = _plate_shape(site)
        for mask in masks:
            try:
                fits = np.broadcast_shapes(jnp.shape(mask), plates) == plates
            except ValueError:
                fits = False
            if not fits:
                _refuse(_event_mask_message(name, base, jnp.shape(mask), plates))
    if site["is_observed"]:
        if isinstance(base, AnyOrderAR) and not isinstance(site["value"], jax.core.Tracer):
            values = np.broadcast_to(np.asarray(site["value"]), draw_shape + base.event_shape)
            for mask in masks:  # entries of masked-out draws may hold anything
                if not isinstance(mask, jax.core.Tracer):
                    keep = np.broadcast_to(np.asarray(mask, bool), draw_shape)
                    values = np.where(keep[..., None], values, 0)
            check_values_in_support(values, base.num_categories, name=name)
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
        descendant, an enumerated site, an oracle distribution inside a wrapper other than
        a plate, ``.expand``, ``.mask`` or ``.to_event`` (e.g. a transformed distribution), or
        an ``obs_mask`` over the entries of one oracle draw instead of over its plates.
    :raises ValueError: naming the site, for observed values outside an oracle site's support.
    """
    model_kwargs = model_kwargs or {}
    with jax.ensure_compile_time_eval():
        placeholders = _Placeholders()
        trace, _ = _run_with(
            model,
            placeholders,
            jax.random.PRNGKey(0),
            model_args,
            model_kwargs,
            check=lambda msg: _check_site(msg["name"], msg, validate),
        )
        oracle_sites, latent_sites, observed_sites, deterministic = [], [], [], []
        for name, site in trace.items():
            if site["type"] == "deterministic":
                deterministic.append(name)
            if site["type"] != "sample":
                continue
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
        placeholders.num_steps,
    )


# ---------------------------------------------------------------------------- kernel shell
class AutospecKernel(MCMCKernel):
    r"""Exact independent draws of a NumPyro model whose oracle sites run on the
    autospeculation engine.

    See the module docstring for the models it accepts; :meth:`init` refuses the others with
    an :class:`UnsupportedModelError` that names the site.

    **Warmup** is accepted and is a no-op: the draws are exact from the first iteration, so
    warmup iterations draw nothing and call no oracle (they only count, with ``rounds`` and
    ``queries`` 0), and the draws after ``num_warmup`` iterations are exactly those of
    ``num_warmup=0``.  The engine's knobs are set by ``config``; :meth:`adapt` is the hook to
    tune them (never the law) and keeps ``config`` by default.

    **Chains.**  ``chain_method="sequential"`` and ``"parallel"`` run one scheduler per chain;
    ``"vectorized"`` draws every chain's draws of an oracle site in one shared engine pool
    (:func:`pooled_autospec_step`), or, when an oracle site's distribution depends on a latent
    site (so it differs between chains), vmaps the per-chain step.

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
    show up in ``arviz.from_numpyro(mcmc).sample_stats``).  The progress bar shows the rounds,
    queries and *acceptance* of the last draw: the share of its oracle queries that went into
    steps it kept, ``num_steps / queries`` (1 for the sequential sampler; lower when
    speculated blocks are scored and rejected).

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
        self._num_steps = 0

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
        """``"R rounds, Q queries, acceptance A"`` for the last draw (``A = num_steps / Q``),
        or ``"warmup (no draws)"`` during warmup."""
        rounds, queries = int(state.rounds), int(state.queries)
        if queries == 0:
            return "warmup (no draws)" if self._num_steps else "no oracle site"
        return f"{rounds} rounds, {queries} queries, acceptance {self._num_steps / queries:.2f}"

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

        Called by :meth:`init`; the default keeps :attr:`config` (the default root already
        adapts its window to the draw in progress, see :mod:`numpyro_autospec.config`).  Any
        returned :class:`~numpyro_autospec.config.SamplerConfig` is exact, so tuning never
        changes the law, only rounds and queries.  ``rng_key`` may be traced
        (``chain_method="parallel"``) or a batch of keys (``"vectorized"``).
        """
        return self._config

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

        def sample_one(state, model_args, model_kwargs):
            return autospec_step(
                state, self._model, model_args, model_kwargs, config=config, capacity=capacity
            )

        def sample_pooled(states, model_args, model_kwargs):
            return pooled_autospec_step(
                states, self._model, model_args, model_kwargs, config=config, capacity=capacity
            )

        def init_one(key):
            zero = jnp.zeros((), jnp.int32)
            return AutospecState(zero, dict(inspection.z_like), zero, zero, key)

        if is_prng_key(rng_key):
            self._sample_fn = _skip_warmup(sample_one, num_warmup)
            return init_one(rng_key)
        if any(inspection.oracle_parents.values()):
            self._sample_fn = _skip_warmup(
                jax.vmap(sample_one, in_axes=(0, None, None)), num_warmup, batched=True
            )
        else:
            self._sample_fn = _skip_warmup(sample_pooled, num_warmup, batched=True)
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
