r"""Drawing a NumPyro model once: each oracle site by one engine run over its independent draws
(Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869), other latent sites
forward-sampled."""

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
    """The oracle distribution behind ``fn``: ``fn`` itself, or ``fn`` in :data:`TRANSPARENT`
    wrappers (a plate, ``.expand``, ``.mask``, ``.to_event``), else ``None``."""
    while isinstance(fn, TRANSPARENT):
        fn = fn.base_dist
    return fn if isinstance(fn, OracleDistribution) else None


def hidden_oracle(fn) -> tuple[str, OracleDistribution] | None:
    """``(wrapper, oracle distribution)`` for an oracle distribution inside a wrapper that
    :func:`oracle_base` does not see through."""
    wrapper = None
    while fn is not None:
        if isinstance(fn, OracleDistribution):
            return (wrapper, fn) if wrapper is not None else None
        if not isinstance(fn, TRANSPARENT) and wrapper is None:
            wrapper = type(fn).__name__
        fn = getattr(fn, "base_dist", None)
    return None


def draw_shape(msg, base: OracleDistribution) -> tuple[int, ...]:
    """Shape of the independent draws of ``base`` at a site (sample, batch and ``.to_event``
    dimensions)."""
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
    """Set each latent oracle site with ``draw_site(name, dist, key, shape)``; placed outside
    ``handlers.seed`` (the key is in the message).  ``check(msg)`` sees every sample site first.
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
        return sequential_run(process, keys)
    return engine_run(process, keys, config, capacity)


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
    """A ``draw_site`` returning zeros (no sampling) that records each oracle site's key,
    distribution, draw shape and steps."""

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
    """A draw's output from the initial state (for its shape and dtype under ``eval_shape``)."""
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
    """One exact joint draw of ``model`` (pure JAX): oracle sites by the engine, every other
    latent site forward-sampled.  The model is *not* checked here: see :func:`inspect_model`.

    :param model: a NumPyro model, called with ``model_args`` and ``model_kwargs``.
    :param config: the engine's :class:`~numpyro_autospec.config.SamplerConfig`; ``capacity``
        its :class:`~numpyro_autospec.engine.Capacity`.
    :returns: a :class:`Draw`: ``z`` (latent and deterministic sites), ``rounds``, ``queries``.

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
