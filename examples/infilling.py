"""Infilling: exact conditional draws of an Ising chain with pinned sites.

``AnyOrderAR(oracle, n, q, observed=values, observed_mask=mask)`` is the law of the whole
vector given the observed entries.  The engine pins those sites first in the order and samples
the others by autospeculation (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869), so the draws follow :math:`\\mu(x_{\\text{free}} \\mid x_{\\text{obs}})`
exactly.  (NumPyro's ``obs_mask`` masks batch dimensions; a joint site needs its own way.)

The target is a ferromagnetic Ising chain (:class:`numpyro_autospec.oracles.IsingChainOracle`)
with the left end pinned up and the right end pinned down, so every completion holds a domain
wall.  Two exact laws are shown against the draws:

* the conditional probability that each site is up (forward-backward, i.e. the oracle itself
  with the pinned sites as its mask);
* the law of the number of domain walls, by enumerating every completion of the free sites.

Run::

    python examples/infilling.py                    # about 15 s on 2 CPU cores
"""

from __future__ import annotations

import argparse
import itertools

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import numpyro
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.oracles import IsingChainOracle

from support.scripts import add_chain_options, add_common_options, save_figure, script_parser


def pinned_sites(n: int, num_pinned: int) -> tuple[np.ndarray, np.ndarray]:
    """Left ``num_pinned`` sites up (1), right ``num_pinned`` sites down (0)."""
    mask = np.zeros(n, bool)
    mask[:num_pinned] = mask[n - num_pinned :] = True
    values = np.zeros(n, np.int32)
    values[:num_pinned] = 1
    return values, mask


def exact_laws(oracle: IsingChainOracle, values: np.ndarray, mask: np.ndarray):
    """``P(x_i = 1 | pins)`` for every site, and the law of the number of domain walls
    (enumeration of the ``2^free`` completions; keep ``free <= 20``)."""
    n = oracle.num_positions
    up = np.exp(np.asarray(oracle(jnp.asarray(values), jnp.asarray(mask)), np.float64))[:, 1]
    free = np.flatnonzero(~mask)
    completions = np.array(list(itertools.product([0, 1], repeat=free.size)), np.int32)
    configurations = np.tile(values, (completions.shape[0], 1))
    configurations[:, free] = completions
    log_p = np.asarray(oracle.log_prob(jnp.asarray(configurations)), np.float64)
    p = np.exp(log_p - np.logaddexp.reduce(log_p))
    walls = np.sum(configurations[:, 1:] != configurations[:, :-1], axis=1)
    wall_law = np.bincount(walls, weights=p, minlength=n)
    return up, wall_law


def make_model(oracle: IsingChainOracle, values: np.ndarray, mask: np.ndarray):
    n = oracle.num_positions

    def model():
        x = numpyro.sample(
            "x", AnyOrderAR(oracle, n, 2, observed=jnp.asarray(values), observed_mask=mask)
        )
        numpyro.deterministic("walls", jnp.sum(x[1:] != x[:-1]))

    return model


def main(args: argparse.Namespace) -> dict:
    n = args.num_positions
    oracle = IsingChainOracle.uniform(n, coupling=args.coupling)
    values, mask = pinned_sites(n, args.num_pinned)
    mcmc = MCMC(
        AutospecKernel(make_model(oracle, values, mask)),
        num_warmup=0,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        chain_method="sequential",
        progress_bar=args.progress_bar,
    )
    mcmc.run(jax.random.PRNGKey(args.seed), extra_fields=("rounds", "queries"))
    samples = mcmc.get_samples()
    x, walls = np.asarray(samples["x"]), np.asarray(samples["walls"])
    assert (x[:, mask] == values[mask]).all(), "observed entries must stay in place"

    exact_up, wall_law = exact_laws(oracle, values, mask)
    sampled_up = x.mean(axis=0)
    stderr = np.sqrt(np.maximum(exact_up * (1 - exact_up), 1e-12) / x.shape[0])
    print(f"{x.shape[0]} draws, sites {np.flatnonzero(mask).tolist()} pinned")
    print(f"{'site':>4} {'pinned':>7} {'exact P(up)':>12} {'sampled':>8} {'z':>6}")
    for i in range(n):
        z = 0.0 if mask[i] else (sampled_up[i] - exact_up[i]) / stderr[i]
        pinned = str(values[i]) if mask[i] else ""
        print(f"{i:>4} {pinned:>7} {exact_up[i]:>12.3f} {sampled_up[i]:>8.3f} {z:>6.2f}")
    counts = np.bincount(walls, minlength=n) / walls.size
    print(f"\n{'walls':>5} {'exact':>7} {'sampled':>8}")
    for k in np.flatnonzero((wall_law > 1e-3) | (counts > 0)):
        print(f"{k:>5} {wall_law[k]:>7.3f} {counts[k]:>8.3f}")
    rounds = np.asarray(mcmc.get_extra_fields()["rounds"])
    print(f"\nrounds per draw: mean {rounds.mean():.1f} (sequential: {int((~mask).sum())})")

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    sites = np.arange(n)
    left.plot(sites, exact_up, "k-", label="exact P(x_i = 1 | pins)")
    free = ~mask
    left.errorbar(
        sites[free], sampled_up[free], yerr=2 * stderr[free], fmt="o", ms=4, label="draws (2 s.e.)"
    )
    left.plot(sites[mask], values[mask], "s", color="C3", label="pinned")
    left.set_xlabel("site i")
    left.set_ylabel("P(up)")
    left.set_title(f"Ising chain, n = {n}, J = {args.coupling}")
    left.legend(fontsize=8)
    shown = np.arange(int(max(np.flatnonzero(wall_law > 1e-4).max(), walls.max())) + 1)
    right.bar(shown, counts[shown], alpha=0.5, label="draws")
    right.step(shown, wall_law[shown], where="mid", color="k", label="exact")
    right.set_xlabel("number of domain walls")
    right.set_ylabel("probability")
    right.legend()
    fig.tight_layout()
    path = save_figure(fig, args.out, "infilling.png")
    return {"x": x, "exact_up": exact_up, "wall_law": wall_law, "figure": path}


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--num-positions", type=int, default=18, help="n")
    parser.add_argument("--num-pinned", type=int, default=3, help="pinned sites at each end")
    parser.add_argument("--coupling", type=float, default=0.8, help="J")
    add_chain_options(parser, num_samples=400)
    add_common_options(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
