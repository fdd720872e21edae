r"""Which models ``AutospecKernel`` can draw exactly (every latent site from its *prior*), and
the sites it finds in them; dependencies are tracked by provenance through the jaxpr."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions import MaskedDistribution
from numpyro.ops.provenance import eval_provenance

from numpyro_autospec._core.parameters import staged_constants
from numpyro_autospec.errors import UnsupportedModelError, first_line
from numpyro_autospec.infer._distributions import AnyOrderAR, OracleDistribution
from numpyro_autospec.infer._drawing import (
    TRANSPARENT,
    Placeholders,
    draw_from_trace,
    draw_shape,
    hidden_oracle,
    oracle_base,
    run_with,
)
from numpyro_autospec.oracles._validation import check_values_in_support

__all__ = ["ModelInspection", "UnsupportedModelError", "inspect_model"]


_ALTERNATIVES = (
    "for posterior inference use AutospecGibbs (exact engine draws as a Gibbs block within "
    "NUTS/HMC), or NUTS/HMC, DiscreteHMCGibbs or MixedHMC"
)


class ModelInspection(NamedTuple):
    """What :func:`inspect_model` found.

    :ivar oracle_sites: latent sites drawn with the engine.
    :ivar latent_sites: other latent sites (forward-sampled).
    :ivar observed_sites: observed sites (none of them depends on a latent site).
    :ivar deterministic_sites: deterministic sites.
    :ivar oracle_parents: for each oracle site, the latent sites its parameters depend on.
    :ivar z_like: a zero value of the draw, ``{site: array}``.
    :ivar num_steps: steps of one joint draw, summed over the oracle sites and their draws.

    >>> import numpyro, numpyro.distributions as dist
    >>> from numpyro_autospec.infer import AnyOrderAR
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     beta = numpyro.sample("beta", dist.Uniform(0.2, 1.0))
    ...     with numpyro.plate("chains", 3):
    ...         numpyro.sample("spins", AnyOrderAR(CurieWeissOracle(4, beta=beta), 4, 2))
    >>> inspection = inspect_model(model)
    >>> inspection.oracle_sites, inspection.latent_sites, inspection.oracle_parents
    (('spins',), ('beta',), {'spins': ('beta',)})
    >>> inspection.num_steps, inspection.z_like["spins"].shape
    (12, (3, 4))
    """

    oracle_sites: tuple[str, ...]
    latent_sites: tuple[str, ...]
    observed_sites: tuple[str, ...]
    deterministic_sites: tuple[str, ...]
    oracle_parents: dict
    z_like: dict
    num_steps: int = 0


def _refuse(message: str):
    raise UnsupportedModelError(message)


def _masks(fn) -> list:
    """The array masks of the ``MaskedDistribution`` wrappers of ``fn``."""
    masks = []
    while isinstance(fn, TRANSPARENT):
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
        "pin entries with AnyOrderAR(..., observed=values, observed_mask=mask)"
        if isinstance(base, AnyOrderAR)
        else f"{type(base).__name__} has no partial observations"
    )
    return (
        f"site {name!r} (from numpyro.sample({user_site!r}, ..., obs_mask=...)): obs_mask of "
        f"shape {tuple(mask_shape)} must select whole draws (plate shape {tuple(draw_shape)}), "
        f"not entries of one draw; {pin}"
    )


def _check_site(name: str, site: dict, validate: bool) -> None:
    enumerate_mode = (site.get("infer") or {}).get("enumerate")
    if enumerate_mode is not None:
        _refuse(
            f"site {name!r} is marked for enumeration (infer={{'enumerate': {enumerate_mode!r}}}"
            "): AutospecKernel draws every latent site and sums none out (remove the "
            "annotation, or use NUTS/HMC to enumerate it)"
        )
    hidden = hidden_oracle(site["fn"])
    if hidden is not None:
        wrapper, inner = hidden
        _refuse(
            f"site {name!r} wraps {type(inner).__name__} in {wrapper}, which AutospecKernel "
            "does not see through (only plates, .expand, .mask and .to_event); sample the "
            f"{type(inner).__name__} site and transform it with numpyro.deterministic"
        )
    base = oracle_base(site["fn"])
    if base is None:
        return
    draws_shape = draw_shape(site, base)
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
            values = np.broadcast_to(np.asarray(site["value"]), draws_shape + base.event_shape)
            for mask in masks:  # entries of masked-out draws may hold anything
                if not isinstance(mask, jax.core.Tracer):
                    keep = np.broadcast_to(np.asarray(mask, bool), draws_shape)
                    values = np.where(keep[..., None], values, 0)
            check_values_in_support(values, base.num_categories, name=name)
        return
    base.make_process(name)  # names the site for observed values outside the support
    if validate:
        base.validate_oracle(name)


def _dependencies(model, model_args, model_kwargs, latent_values: dict) -> dict:
    """For each observed and oracle site, the latent sites it depends on (provenance)."""

    def probes(**values):
        with handlers.trace() as trace, handlers.seed(rng_seed=0), handlers.substitute(data=values):
            model(*model_args, **model_kwargs)
        out = {}
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            base = oracle_base(site["fn"])
            if base is not None:
                out[name] = base.dependency_probe()
            elif site["is_observed"]:
                out[name] = site["fn"].log_prob(site["value"])
        return out

    with staged_constants():
        provenance = eval_provenance(probes, **latent_values)
    return {name: set(sources) - {name} for name, sources in provenance.items()}


def inspect_model(
    model: Callable, model_args: tuple = (), model_kwargs: dict | None = None, *, validate=True
) -> ModelInspection:
    """Check that ``model`` can be drawn exactly and list its sites.

    Runs the model once eagerly with placeholders for the oracle sites (no sampling cost),
    probing each oracle against its contract if ``validate``.

    :param model: a NumPyro model, called with ``model_args`` and ``model_kwargs``.
    :returns: a :class:`ModelInspection`.
    :raises UnsupportedModelError: naming the site, for a latent site with an observed
        descendant, an enumerated site, an oracle distribution in a wrapper other than a plate,
        ``.expand``, ``.mask`` or ``.to_event``, or an ``obs_mask`` over entries of one draw.
    :raises InputError: naming the site, for observed values outside an oracle site's support.

    >>> import numpy as np, numpyro
    >>> from numpyro_autospec.infer import AnyOrderAR
    >>> from numpyro_autospec.oracles import TableOracle
    >>> d = AnyOrderAR(TableOracle(np.log([[0.4, 0.1], [0.2, 0.3]])), 2, 2)
    >>> inspect_model(lambda: numpyro.sample("x", d)).oracle_sites
    ('x',)
    >>> inspect_model(lambda: numpyro.sample("x", d, obs=np.array([0, 2])))
    Traceback (most recent call last):
    ...
    numpyro_autospec.errors.InputError: site 'x': value 2 at index 1 ... [0, 2)
    """
    model_kwargs = model_kwargs or {}
    with jax.ensure_compile_time_eval():
        placeholders = Placeholders()
        trace, _ = run_with(
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
            elif oracle_base(site["fn"]) is not None:
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
                        f"site depends on a latent site: {type(error).__name__}: "
                        f"{first_line(error)}"
                    ) from error
                # untraceable: every oracle site may depend on every latent site
                dependencies = {name: set(latent_values) - {name} for name in oracle_sites}
    for observed in observed_sites:
        parents = sorted(dependencies.get(observed, set()) & set(latent_values), key=order.get)
        if not parents:
            continue
        parent = parents[0]
        if parent in oracle_sites:
            _refuse(
                f"observed site {observed!r} depends on the oracle site {parent!r}, which would "
                "have to be drawn from its posterior; pin known entries with AnyOrderAR(..., "
                f"observed=values, observed_mask=mask), or {_ALTERNATIVES}"
            )
        _refuse(
            f"observed site {observed!r} depends on the latent site {parent!r}, which would have "
            f"to be drawn from its posterior, not its prior; {_ALTERNATIVES}"
        )
    z_like = {name: jnp.zeros_like(value) for name, value in draw_from_trace(trace).items()}
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
