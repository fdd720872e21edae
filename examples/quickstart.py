"""Quick start: exact parallel sampling of a Curie-Weiss model with ``AutospecKernel``.

The Curie-Weiss model on :math:`\\{0, 1\\}^n` (spins :math:`s_i = 2x_i - 1`,
:math:`\\mu(x) \\propto \\exp(\\beta M^2 / 2n)`, :math:`M = \\sum_i s_i`) has exact any-order
conditionals in :math:`O(n)` (:class:`numpyro_autospec.oracles.CurieWeissOracle`).  Wrapped in
:class:`numpyro_autospec.AnyOrderAR`, it is an ordinary NumPyro site; ``AutospecKernel`` draws
it by autospeculation (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869): exact independent draws in :math:`\\tilde O(\\sqrt n)` rounds of oracle
calls, where sequential sampling needs :math:`n`.

The script

1. draws with ``MCMC(AutospecKernel(model))`` and prints the ArviZ summary (R-hat about 1, ESS
   about the number of draws: the draws are exact and independent);
2. compares the law of the magnetization with the exact one
   (:meth:`~numpyro_autospec.oracles.CurieWeissOracle.magnetization_log_probs`);
3. prints rounds and queries per draw next to the sequential sampler's (``method="sequential"``,
   :math:`n` rounds);
4. saves a figure (magnetization histogram against the exact law, rounds per draw).

Run::

    python examples/quickstart.py                  # n = 256, about 20 s on 2 CPU cores
    python examples/quickstart.py --num-positions 1024 --num-samples 100
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import jax
import matplotlib.pyplot as plt
import numpy as np
import numpyro
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.oracles import CurieWeissOracle

from support.scripts import add_chain_options, add_common_options, save_figure, script_parser


def make_model(oracle: CurieWeissOracle):
    n = oracle.num_positions

    def model():
        x = numpyro.sample("x", AnyOrderAR(oracle))
        numpyro.deterministic("magnetization", 2 * x.sum() - n)

    return model


def run_kernel(model, method: str, args, seed: int) -> MCMC:
    mcmc = MCMC(
        AutospecKernel(model, method=method),
        num_warmup=0,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        chain_method="vectorized" if method == "sequential" else "sequential",
        progress_bar=args.progress_bar,
    )
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("rounds", "queries"))
    return mcmc


def cost_table(costs: dict[str, tuple[np.ndarray, np.ndarray]], n: int) -> str:
    lines = [
        f"{'method':<12}{'rounds mean':>12}{'rounds p90':>12}{'queries mean':>14}{'speed-up':>10}",
    ]
    for method, (rounds, queries) in costs.items():
        lines.append(
            f"{method:<12}{rounds.mean():>12.1f}{np.percentile(rounds, 90):>12.0f}"
            f"{queries.mean():>14.0f}{n / rounds.mean():>9.1f}x"
        )
    return "\n".join(lines)


def plot(ups: np.ndarray, law: np.ndarray, rounds: np.ndarray, n: int, beta: float) -> plt.Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    k = np.arange(n + 1)
    magnetization = 2 * k - n
    num_bins = int(np.clip(2 * np.sqrt(ups.size), 8, 40))
    width = -(-(n + 1) // num_bins)  # group counts of up spins into bins of `width`
    edges = np.arange(0, n + 1 + width, width)
    counts, _ = np.histogram(ups, bins=edges - 0.5)
    exact = np.add.reduceat(law, edges[:-1])[: counts.size]
    centers = 2 * (edges[:-1] + (width - 1) / 2) - n
    left.bar(centers, counts / counts.sum(), width=2 * width, alpha=0.5, label="AutospecKernel")
    left.step(centers, exact, where="mid", color="k", label="exact law")
    left.set_xlabel("magnetization M")
    left.set_ylabel("probability")
    left.set_xlim(magnetization[0], magnetization[-1])
    left.set_title(f"Curie-Weiss, n = {n}, beta = {beta}")
    left.legend()
    bins = np.geomspace(1, max(rounds.max(), n) + 1, 30)
    right.hist(rounds, bins=bins, color="C1")
    right.axvline(n, color="k", linestyle="--", label=f"sequential: {n}")
    right.set_xlabel("rounds per draw")
    right.set_ylabel("draws")
    right.set_xscale("log")
    right.legend()
    fig.tight_layout()
    return fig


def main(args: argparse.Namespace) -> dict:
    n = args.num_positions
    oracle = CurieWeissOracle(n, beta=args.beta)
    model = make_model(oracle)

    start = time.perf_counter()
    mcmc = run_kernel(model, "autospec", args, args.seed)
    elapsed = time.perf_counter() - start
    idata = az.from_numpyro(mcmc)
    print(az.summary(idata, var_names=["magnetization"], kind="diagnostics"))
    print(az.summary(idata, var_names=["magnetization"], kind="stats"))

    extra = mcmc.get_extra_fields()
    ups = (np.asarray(mcmc.get_samples()["magnetization"]) + n) // 2
    law = np.exp(oracle.magnetization_log_probs())
    costs = {"autospec": (np.asarray(extra["rounds"]), np.asarray(extra["queries"]))}
    if not args.skip_sequential:
        sequential = run_kernel(model, "sequential", args, args.seed + 1)
        seq_extra = sequential.get_extra_fields()
        costs["sequential"] = (np.asarray(seq_extra["rounds"]), np.asarray(seq_extra["queries"]))
    print(f"\n{ups.size} exact draws in {elapsed:.1f} s (compilation included)")
    print(cost_table(costs, n))
    mean_exact = float(np.sum(law * (2 * np.arange(n + 1) - n) ** 2))
    squares = (2 * ups - n) ** 2.0
    # the draws are exact and independent: the standard error of their mean is std / sqrt(N)
    error = float(np.std(squares, ddof=1) / np.sqrt(squares.size))
    z = (float(np.mean(squares)) - mean_exact) / error
    print(
        f"E[M^2]: sampled {np.mean(squares):.1f} +- {error:.1f} (one standard error), "
        f"exact {mean_exact:.1f}: {abs(z):.1f} standard errors apart "
        f"(E[M^2]/n^1.5 = {mean_exact / n**1.5:.3f})"
    )

    fig = plot(ups, law, costs["autospec"][0], n, args.beta)
    path = save_figure(fig, args.out, "quickstart.png")
    return {"ups": ups, "law": law, "costs": costs, "figure": path}


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--num-positions", type=int, default=256, help="n")
    parser.add_argument("--beta", type=float, default=1.0, help="inverse temperature (1: critical)")
    add_chain_options(parser, num_samples=60)
    parser.add_argument("--skip-sequential", action="store_true", help="no sequential run")
    add_common_options(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
