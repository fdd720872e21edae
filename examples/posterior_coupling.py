"""Posterior inference of a Curie-Weiss coupling: ``AutospecGibbs`` against ``DiscreteHMCGibbs``.

Spins :math:`x \\in \\{0, 1\\}^n` follow a Curie-Weiss law :math:`\\mu_\\beta(x) \\propto
\\exp(\\beta M^2 / 2n)` whose coupling :math:`\\beta \\sim \\mathrm{Uniform}(0, 2)` is unknown.
Two data sets, one panel each:

1. **partly observed spins**: the first half of the spins is observed; the free half is a latent
   ``AnyOrderAR(..., observed=..., observed_mask=...)`` site;
2. **noisy observations**: in addition, every free spin is seen through a channel that flips it
   with probability ``--flip``.

:class:`~numpyro_autospec.infer.AutospecGibbs` alternates NUTS on :math:`\\beta` (scoring the
spins by their joint :math:`\\mu_\\beta(x)`, observed entries included) with one exact
autospeculation draw of the free spins (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869), accepted with the likelihood ratio of the noisy data.  NumPyro's
``DiscreteHMCGibbs`` samples the same posterior with the free spins as a plate of Bernoulli
sites plus a ``numpyro.factor`` holding :math:`\\log \\mu_\\beta(x)`, one spin at a time.

The script prints, for both samplers and data sets, the posterior mean of :math:`\\beta`, the
ESS of :math:`\\beta` and of the magnetization (ArviZ) and ESS per second of sampling
(compilation excluded), and the rounds of oracle calls per block update of ``AutospecGibbs``
against ``n`` (engine draws of the free spins at the posterior mean of :math:`\\beta`; the
sequential sampler needs ``n / 2``).  It saves a figure.

Run::

    python examples/posterior_coupling.py            # n = 64, a few minutes on 2 CPU cores
    python examples/posterior_coupling.py --num-positions 256 --num-samples 2000
"""

from __future__ import annotations

import time

import arviz as az
import jax
import jax.monitoring
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs

from numpyro_autospec import AnyOrderAR, engine
from numpyro_autospec.infer import AutospecGibbs
from numpyro_autospec.oracles import CurieWeissOracle

from support.scripts import add_common_options, save_figure, script_parser

BETA_MAX = 2.0
_COMPILE_SECONDS: list[float] = []


def _record_compilation(event: str, seconds: float, **kwargs) -> None:
    if event.startswith("/jax/core/compile/"):
        _COMPILE_SECONDS.append(seconds)


jax.monitoring.register_event_duration_secs_listener(_record_compilation)


def observation(n: int, seed: int):
    """Observed half (drawn from the model at beta = 1.2) and noisy data of the free half."""
    rng = np.random.default_rng(seed)
    oracle = CurieWeissOracle(n, beta=1.2)
    law = np.exp(oracle.magnetization_log_probs())
    ups = rng.choice(n + 1, p=law / law.sum())
    spins = rng.permutation(np.arange(n) < ups).astype(np.int32)
    mask = np.arange(n) < n // 2
    return spins, mask


def autospec_model(n: int, mask: np.ndarray):
    def model(observed, y, flip):
        beta = numpyro.sample("beta", dist.Uniform(0.0, BETA_MAX))
        oracle = CurieWeissOracle(n, beta=beta)
        x = numpyro.sample("x", AnyOrderAR(oracle, n, 2, observed=observed, observed_mask=mask))
        free = x[~mask]
        probs = jnp.where(free == 1, 1 - flip, flip)
        numpyro.sample("y", dist.Bernoulli(probs=probs).to_event(1), obs=y)
        numpyro.deterministic("magnetization", 2 * x.sum() - n)

    return model


def discrete_model(n: int, mask: np.ndarray):
    free_sites = np.flatnonzero(~mask)

    def model(observed, y, flip):
        beta = numpyro.sample("beta", dist.Uniform(0.0, BETA_MAX))
        with numpyro.plate("free_spins", free_sites.size):
            free = numpyro.sample("free", dist.Bernoulli(0.5))
        x = jnp.asarray(observed).at[free_sites].set(free.astype(jnp.int32))
        # the Curie-Weiss joint of all spins (the Bernoulli(1/2) base is a constant)
        numpyro.factor("curie_weiss", CurieWeissOracle(n, beta=beta).log_prob(x))
        probs = jnp.where(free == 1, 1 - flip, flip)
        numpyro.sample("y", dist.Bernoulli(probs=probs).to_event(1), obs=y)
        numpyro.deterministic("magnetization", 2 * x.sum() - n)

    return model


def make_mcmc(kernel, args) -> MCMC:
    return MCMC(
        kernel,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        chain_method="sequential",
        progress_bar=False,
        jit_model_args=True,
    )


def run(mcmc: MCMC, data, seed: int) -> dict:
    _COMPILE_SECONDS.clear()
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), *data)
    seconds = max(time.perf_counter() - start - sum(_COMPILE_SECONDS), 1e-3)
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    beta = np.asarray(samples["beta"])
    magnetization = np.asarray(samples["magnetization"], float)
    return {
        "beta": beta,
        "seconds": seconds,
        "ess beta": float(az.ess(beta)),
        "ess magnetization": float(az.ess(magnetization)),
        "rounds": np.asarray(extra["rounds"]) if "rounds" in extra else None,
        "accept": float(np.mean(extra["accept_prob"])) if "accept_prob" in extra else None,
    }


def rounds_against_n(sizes, beta: float, args) -> dict[int, float]:
    """Mean rounds of one block update at each ``n``: ``--num-proposals`` engine draws of the
    free half of ``n`` spins in one pool, ``--num-draws`` updates (pools) in one program."""
    rounds = {}
    for n in sizes:
        spins, mask = observation(n, args.seed)
        site = AnyOrderAR(CurieWeissOracle(n, beta=beta), n, 2, observed=spins, observed_mask=mask)
        process = site.make_process("x")
        keys = jax.random.split(jax.random.PRNGKey(args.seed), args.num_draws * args.num_proposals)
        keys = keys.reshape(args.num_draws, args.num_proposals, -1)

        def update_rounds(pool, process=process):
            return engine.run(process, pool).rounds.max()

        pools = jax.jit(jax.vmap(update_rounds))(keys)
        rounds[n] = float(np.mean(pools))
    return rounds


def table(results: dict) -> str:
    lines = [
        f"{'data':<10}{'sampler':<18}{'beta mean':>10}{'ESS beta':>10}{'ESS M':>8}"
        f"{'seconds':>9}{'ESS/s beta':>12}{'ESS/s M':>9}{'accept':>8}"
    ]
    for (data, sampler), r in results.items():
        accept = "" if r["accept"] is None else f"{r['accept']:.2f}"
        lines.append(
            f"{data:<10}{sampler:<18}{r['beta'].mean():>10.3f}{r['ess beta']:>10.0f}"
            f"{r['ess magnetization']:>8.0f}{r['seconds']:>9.2f}"
            f"{r['ess beta'] / r['seconds']:>12.0f}{r['ess magnetization'] / r['seconds']:>9.0f}"
            f"{accept:>8}"
        )
    return "\n".join(lines)


def main(args) -> dict:
    n = args.num_positions
    spins, mask = observation(n, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    free = spins[~mask]
    y = np.where(rng.random(free.size) < args.flip, 1 - free, free).astype(np.int32)
    datasets = {"observed": (spins, y, 0.5), "noisy": (spins, y, args.flip)}  # 0.5: y is noise
    # one kernel per sampler for both data sets: the data are traced model arguments
    # (jit_model_args), so each sampler compiles once
    kernels = {
        "AutospecGibbs": AutospecGibbs(
            NUTS(autospec_model(n, mask)), gibbs_sites=["x"], num_proposals=args.num_proposals
        ),
        "DiscreteHMCGibbs": DiscreteHMCGibbs(NUTS(discrete_model(n, mask)), modified=True),
    }
    results = {}
    for sampler, kernel in kernels.items():
        mcmc = make_mcmc(kernel, args)
        for index, (label, data) in enumerate(datasets.items()):
            results[label, sampler] = run(mcmc, data, args.seed + index)
    print(table(results))
    beta_hat = float(results["noisy", "AutospecGibbs"]["beta"].mean())
    # at n itself: the rounds of the noisy chains' block updates (each of num_proposals draws)
    rounds = rounds_against_n(sorted(set(args.sizes) - {n}), beta_hat, args)
    rounds[n] = float(np.mean(results["noisy", "AutospecGibbs"]["rounds"]))
    rounds = dict(sorted(rounds.items()))
    print(
        f"\nrounds per block update ({args.num_proposals} draws of the free half of n spins, "
        f"beta = {beta_hat:.2f}):"
    )
    for size, value in rounds.items():
        print(f"  n = {size:<6} {value:6.1f} rounds (sequential: {size - size // 2})")

    figure, axes = plt.subplots(1, 3, figsize=(14, 4))
    for axis, label in zip(axes[:2], datasets, strict=True):
        for sampler, color in (("AutospecGibbs", "C0"), ("DiscreteHMCGibbs", "C1")):
            r = results[label, sampler]
            axis.hist(
                r["beta"].reshape(-1),
                bins=40,
                range=(0, BETA_MAX),
                density=True,
                histtype="step",
                color=color,
                lw=1.5,
                label=f"{sampler} (ESS/s {r['ess beta'] / r['seconds']:.0f})",
            )
        title = (
            "half the spins observed"
            if label == "observed"
            else f"+ noisy free spins (flip {args.flip})"
        )
        axis.set(title=title, xlabel="coupling beta", ylabel="posterior density")
        axis.legend(fontsize=8)
    sizes_array = np.array(list(rounds))
    axes[2].plot(sizes_array, list(rounds.values()), "o-", label="AutospecGibbs block update")
    axes[2].plot(sizes_array, sizes_array - sizes_array // 2, "k--", label="sequential (n/2)")
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel="n",
        ylabel="rounds per block update",
        title="rounds of oracle calls",
    )
    axes[2].set_xticks(sizes_array, [str(size) for size in sizes_array])
    axes[2].minorticks_off()
    axes[2].legend(fontsize=8)
    figure.tight_layout()
    path = save_figure(figure, args.out, "posterior_coupling.png", dpi=110)
    return {"figure": path, "results": results, "rounds": rounds}


def parse_args(argv=None):
    parser = script_parser(__doc__)
    parser.add_argument("--num-positions", type=int, default=64, help="spins n")
    parser.add_argument("--num-samples", type=int, default=500, help="draws per chain")
    parser.add_argument("--num-warmup", type=int, default=100, help="warmup draws per chain")
    parser.add_argument(
        "--num-proposals",
        type=int,
        default=4,
        help="AutospecGibbs: engine draws per block update (multiple-try Metropolis)",
    )
    parser.add_argument("--num-chains", type=int, default=2, help="chains (one after another)")
    parser.add_argument(
        "--flip", type=float, default=0.2, help="flip probability of the noisy data"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="*", default=[32, 256], help="other n for the rounds panel"
    )
    parser.add_argument(
        "--num-draws", type=int, default=16, help="block updates per n, rounds panel"
    )
    add_common_options(parser, seed_help="random seed", out_default="results", quiet_help=None)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
