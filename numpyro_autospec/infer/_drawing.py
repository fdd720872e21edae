r"""Drawing a NumPyro model once: oracle sites by the engine, other latent sites forward.

A :class:`DrawOracleSites` messenger, placed outside ``handlers.seed``, sets the value of every
latent oracle site (:class:`~numpyro_autospec.infer.OracleDistribution`, also
behind a plate, ``.expand``, ``.mask`` or ``.to_event``) with one engine run over the site's
independent draws; every other latent site is forward-sampled by NumPyro with the values drawn
so far, so oracle parameters may depend on earlier latent sites.  :func:`draw_model` is the
pure function of one exact joint draw (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869; docs/algorithm.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array
from numpyro import handlers
from numpyro.distributions import ExpandedDistribution, Independent, MaskedDistribution
from numpyro.primitives import Messenger

from numpyro_autospec._core.parameters import staged_constants
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity
from numpyro_autospec.engine import run as engine_run
from numpyro_autospec.engine._sequential import sequential_run
from numpyro_autospec.infer._distributions import OracleDistribution

__all__ = [
    "TRANSPARENT",
    "Draw",
    "DrawOracleSites",
    "Placeholders",
    "draw_from_trace",
    "draw_model",
    "draw_shape",
    "draw_sites",
    "hidden_oracle",
    "oracle_base",
    "run_with",
    "site_keys",
    "strong",
]


class Draw(NamedTuple):
    """One exact joint draw of a model and its cost."""

    z: dict
    rounds: Array
    queries: Array


TRANSPARENT = (ExpandedDistribution, MaskedDistribution, Independent)


def oracle_base(fn) -> OracleDistribution | None:
    """The oracle distribution behind ``fn``: ``fn`` itself, or ``fn`` expanded (a plate,
    ``.expand``), masked (``.mask``) or with batch dimensions made event dimensions
    (``.to_event``, :class:`~numpyro.distributions.Independent`).  These wrappers only arrange
    independent draws of the oracle distribution; any other wrapper is refused by
    :func:`inspect_model`."""
    while isinstance(fn, TRANSPARENT):
        fn = fn.base_dist
    return fn if isinstance(fn, OracleDistribution) else None


def hidden_oracle(fn) -> tuple[str, OracleDistribution] | None:
    """``(wrapper, oracle distribution)`` when an oracle distribution sits inside a wrapper
    that :func:`oracle_base` does not see through (e.g. a ``TransformedDistribution``)."""
    wrapper = None
    while fn is not None:
        if isinstance(fn, OracleDistribution):
            return (wrapper, fn) if wrapper is not None else None
        if not isinstance(fn, TRANSPARENT) and wrapper is None:
            wrapper = type(fn).__name__
        fn = getattr(fn, "base_dist", None)
    return None


def draw_shape(msg, base: OracleDistribution) -> tuple[int, ...]:
    """Shape of the independent draws of ``base`` at a site: sample shape + batch shape, plus
    the batch dimensions that ``.to_event`` turned into event dimensions."""
    full = (
        tuple(msg["kwargs"].get("sample_shape", ()))
        + tuple(msg["fn"].batch_shape)
        + tuple(msg["fn"].event_shape)
    )
    return full[: len(full) - len(base.event_shape)]


def strong(value):
    """``value`` as a strongly typed array (loop carries must keep one type)."""
    value = jnp.asarray(value)
    return jax.lax.convert_element_type(value, value.dtype)


class DrawOracleSites(Messenger):
    """Set the value of each latent oracle site with ``draw_site(name, dist, key, shape)``.

    Placed *outside* ``handlers.seed`` so that the site's key is already in
    ``msg["kwargs"]["rng_key"]``; ``shape`` (:func:`draw_shape`) is the shape of the
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
        base = oracle_base(msg["fn"])
        if base is None:
            return
        key = msg["kwargs"].get("rng_key")
        if key is None:
            raise RuntimeError(f"site {msg['name']!r}: no PRNG key (the model must be seeded)")
        value, rounds, queries = self.draw_site(msg["name"], base, key, draw_shape(msg, base))
        msg["value"] = value
        self.costs.append((rounds, queries))


def draw_sites(
    config: SamplerConfig, process, keys: Array, capacity: Capacity | None
) -> tuple[Array, Array, Array]:
    """``(values, rounds, queries)`` of ``len(keys)`` draws of ``process`` in one pool."""
    if config.method == "sequential":
        samples = sequential_run(process, keys)
    else:
        samples = engine_run(process, keys, config, capacity)
    return samples


def site_keys(key: Array, num_draws: int) -> Array:
    """One key per draw of a site: the site's key itself for a single draw."""
    return key[None] if num_draws == 1 else jax.random.split(key, num_draws)


def engine_draw_site(config: SamplerConfig, capacity: Capacity | None) -> Callable:
    def draw_site(name: str, base: OracleDistribution, key: Array, shape: tuple[int, ...]):
        process = base.make_process(name)
        samples = draw_sites(config, process, site_keys(key, math.prod(shape)), capacity)
        value = jnp.reshape(samples.value, shape + base.event_shape)
        return value, jnp.max(samples.rounds), jnp.sum(samples.queries)

    return draw_site


class Placeholders:
    """A ``draw_site`` that returns zeros of the right shape and dtype (no sampling) and
    records, per oracle site, its key, its distribution, its draw shape and its steps."""

    def __init__(self):
        self.sites: dict[str, tuple[Array, OracleDistribution, tuple[int, ...]]] = {}
        self.num_steps = 0

    def __call__(self, name, base, key, shape):
        process = base.make_process(name)  # checks the site (errors name it)
        with staged_constants():
            like = jax.eval_shape(functools.partial(output_like, process), key)
        self.sites[name] = (key, base, shape)
        self.num_steps += int(process.num_steps) * math.prod(shape)
        zero = jnp.zeros((), jnp.int32)
        return jnp.zeros(shape + like.shape, like.dtype), zero, zero


def output_like(process, key: Array) -> Array:
    """A draw's output from the initial state (the shape and dtype of every draw): the
    process's ``init``, its final query if it has one, and ``output``; traced under
    ``eval_shape``, it traces the oracle at most once (not a whole sequential run)."""
    x = process.init(key)
    final = process.query(x, process.num_steps, 1) if process.final_query else None
    return process.output(x, final)


def run_with(model, draw_site, rng_key, model_args, model_kwargs, check=None):
    drawer = DrawOracleSites(handlers.seed(model, rng_key), draw_site=draw_site, check=check)
    trace = handlers.trace(drawer).get_trace(*model_args, **model_kwargs)
    return trace, drawer.costs


def draw_from_trace(trace) -> dict:
    return {
        name: strong(site["value"])
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
    >>> from numpyro_autospec.infer._distributions import AnyOrderAR
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     x = numpyro.sample("x", AnyOrderAR(CurieWeissOracle(16, 1.0), 16, 2))
    ...     numpyro.deterministic("m", x.sum())
    >>> draw = draw_model(model, jax.random.PRNGKey(0), config=SamplerConfig(method="sequential"))
    >>> sorted(draw.z), draw.z["x"].shape, int(draw.rounds)
    (['m', 'x'], (16,), 16)
    """
    config = (config or SamplerConfig()).validate()
    trace, costs = run_with(
        model, engine_draw_site(config, capacity), rng_key, model_args, model_kwargs or {}
    )
    rounds = sum((c[0] for c in costs), jnp.zeros((), jnp.int32))
    queries = sum((c[1] for c in costs), jnp.zeros((), jnp.int32))
    return Draw(draw_from_trace(trace), strong(rounds), strong(queries))
