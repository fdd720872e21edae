"""Rounds and queries of autospeculation on diffusion (stochastic localization) as the grid refines.

For every target and number of steps ``N`` this script draws exact samples of the
Euler-Maruyama chain of stochastic localization (docs/algorithm.md section 2b) with the engine
(:func:`numpyro_autospec.engine.run` under ``jax.jit``) and reports, per cell, mean and
90th-percentile **rounds** (batched oracle calls: parallel time) and mean **queries** (denoiser
evaluations: work), against the sequential chain's ``N + 1`` rounds and queries (``N`` steps
and the final denoising ``f(t_N, y_N)``).  Then the log-log slope of mean rounds over ``N``
and a log-log plot.  The paper's claim is :math:`\\tilde O(\\sqrt N)` rounds (Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869, 2025).

Targets (``--targets``):

``digits``   the 1797 scikit-learn 8x8 digits scaled to [0, 1]^64, an exact point-cloud
             denoiser (:func:`~numpyro_autospec.denoisers.digits_point_cloud`).
``mixture``  8 isotropic Gaussians (standard deviation 0.1) in 16 dimensions, means uniform
             in [0, 1]^16 (seed 0), an exact
             :class:`~numpyro_autospec.denoisers.GaussianMixtureDenoiser`.

Both run on :func:`~numpyro_autospec.processes.default_times` (``t_max = 1000``).

Root block size (``--block-sizes``): ``none`` is the paper as written (one recursion on the
whole path); ``Cs`` (for example ``2s``) processes the path left to right in recursion blocks
of ``round(C sqrt(N))`` steps; an integer is a fixed block size.  ``--growth`` sets the
residual batch growth :math:`\\rho` (batch ``r`` runs :math:`\\lceil (1+\\rho)^r \\rceil`
trials); ``--leaf-sizes`` the blocks sampled step by step.  ``--speculation-variances``:
``none`` freezes the drift over a speculated block (the paper), a number :math:`s^2` uses the
linear-response speculation of ``DiffusionProcess(speculation_variance=s^2)`` (exact for a
Gaussian of variance :math:`s^2`; the mixture's components have :math:`s^2 = 0.01`), and
``posterior`` the response of the posterior covariance read from the denoiser's Jacobian at
each block's start (``speculation_variance="posterior"``), ``posterior:R`` that of its
rank-``R`` estimate (``posterior_rank=R``).  Every setting is exact; they trade rounds against
queries.

Each draw runs alone in its compiled call (``--draws-per-call 1``, the default), so that its
rounds are its own and not those of the draws sharing its pool; the query batch is capped by
``--memory-budget`` (queries index the pool's paths directly through the process's batched
``query_batch``/``score_batch``, see docs/engine.md).

Examples::

    python benchmarks/diffusion_rounds.py --sizes 64 256 1024 --draws 20
    python benchmarks/diffusion_rounds.py --targets mixture --sizes 256 1024 \\
        --block-sizes none 1s 2s 4s --growth 1 3 --draws 20
    python benchmarks/diffusion_rounds.py --targets mixture --sizes 1024 4096 \\
        --speculation-variances none 0.01 --growth 1 3 --draws 20
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import os
import time
from typing import NamedTuple

import jax
import numpy as np
from cases import make_denoiser
from csv_tables import git_commit

from numpyro_autospec._core.script_help import script_parser
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.engine._plan import plan
from numpyro_autospec.processes import DiffusionProcess, default_times
from numpyro_autospec.processes._diffusion import POSTERIOR

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
TARGETS = ("digits", "mixture")
FIELDS = [
    "target", "dim", "n", "speculation", "block", "growth", "leaf", "num_slots", "draws",
    "mean_rounds", "se_rounds", "median_rounds", "p90_rounds", "max_rounds", "mean_queries",
    "queries_per_n",
    "sequential_rounds", "speedup",
    "seconds_per_draw", "compile_seconds", "commit",
]  # fmt: skip


class Cell(NamedTuple):
    """One measured cell: a target, a grid size and a sampler setting."""

    target: str
    dim: int
    n: int
    speculation: str
    block: str
    growth: float
    leaf: int
    num_slots: int  # the pool size the engine ran with (resolved, not requested)
    rounds: np.ndarray
    queries: np.ndarray
    seconds_per_draw: float
    compile_seconds: float


# --------------------------------------------------------------------------- targets
def make_process(target: str, n: int, speculation: str = "none") -> DiffusionProcess:
    """Stochastic localization of ``target`` on ``default_times(n)`` (t_max = 1000); the
    speculation freezes the drift (``speculation = "none"``) or follows the linear response of
    a Gaussian of that variance (a number, ``DiffusionProcess(speculation_variance=...)``) or
    of the denoiser's posterior covariance (``"posterior"``, or ``"posterior:R"`` for its
    rank-``R`` estimate)."""
    denoiser, dim = make_denoiser(target)
    spec, _, rank = speculation.strip().lower().partition(":")
    variance = None if spec == "none" else spec if spec == POSTERIOR else float(spec)
    return DiffusionProcess(
        denoiser,
        dim,
        default_times(n),
        name=target,
        speculation_variance=variance,
        posterior_rank=int(rank) if rank else None,
    )


# --------------------------------------------------------------------------- settings
def resolve_block(spec: str, n: int) -> int | None:
    """``none`` -> None (whole path), ``Cs`` -> round(C sqrt(n)), an integer -> itself."""
    spec = spec.strip().lower()
    if spec == "none":
        return None
    if spec.endswith("s"):
        return max(1, min(n, round(float(spec[:-1]) * math.sqrt(n))))
    return max(1, min(n, int(spec)))


def sampler_config(block: str, growth: float, n: int, leaf: int = 1) -> SamplerConfig:
    """The paper's recursion (explicitly, whatever the package default) with this root block,
    residual growth and leaf size."""
    return SamplerConfig(
        method="autospec", block_size=resolve_block(block, n), growth=growth, leaf_size=leaf
    )


def engine_capacity(
    process: DiffusionProcess, memory_budget: int, num_slots: int | None = None
) -> Capacity:
    """Cap the query batch so that the gathered paths fit in ``memory_budget`` bytes, but
    allow at least two whole-path scorings per round; ``num_slots`` (``None``: the engine's
    default) is the pool size, which bounds how many residual trials run at once."""
    path_bytes = (process.num_steps + 1) * process.dim * 4
    affordable = memory_budget // (2 * path_bytes)
    max_queries = int(max(min(affordable, 1 << 16), 2 * (process.num_steps + 1)))
    return Capacity(num_slots=num_slots, max_queries=max_queries, memory_budget=memory_budget)


# --------------------------------------------------------------------------- measuring
def measure(
    target: str,
    n: int,
    block: str,
    growth: float,
    draws: int,
    *,
    seed: int = 0,
    draws_per_call: int = 1,
    memory_budget: int = 1 << 30,
    num_slots: int | None = None,
    leaf: int = 1,
    speculation: str = "none",
) -> Cell:
    """``draws`` engine draws in calls of ``draws_per_call`` (one compilation)."""
    process = make_process(target, n, speculation)
    config = sampler_config(block, growth, n, leaf)
    capacity = engine_capacity(process, memory_budget, num_slots)
    calls = math.ceil(draws / draws_per_call)
    keys = jax.random.split(jax.random.PRNGKey(seed + n), calls * draws_per_call)
    keys = keys.reshape(calls, draws_per_call, -1)
    fn = jax.jit(lambda k: run(process, k, config, capacity))
    start = time.perf_counter()
    compiled = fn.lower(keys[0]).compile()
    compile_seconds = time.perf_counter() - start
    rounds, queries = [], []
    start = time.perf_counter()
    for call in range(calls):
        samples = jax.block_until_ready(compiled(keys[call]))
        rounds.append(np.asarray(samples.rounds))
        queries.append(np.asarray(samples.queries))
    seconds = (time.perf_counter() - start) / (calls * draws_per_call)
    return Cell(
        target,
        process.dim,
        n,
        speculation,
        block,
        growth,
        leaf,
        plan(process, config, capacity, draws_per_call, keys[0, 0]).num_slots - draws_per_call,
        np.concatenate(rounds)[:draws],
        np.concatenate(queries)[:draws],
        seconds,
        compile_seconds,
    )


def summarize(cell: Cell, commit: str) -> dict:
    """The CSV row of a cell."""
    rounds, queries = cell.rounds.astype(float), cell.queries.astype(float)
    sequential = cell.n + 1  # N Euler-Maruyama steps and the final query f(t_N, y_N)
    return {
        "target": cell.target,
        "dim": cell.dim,
        "n": cell.n,
        "speculation": cell.speculation,
        "block": cell.block,
        "growth": cell.growth,
        "leaf": cell.leaf,
        "num_slots": cell.num_slots,
        "draws": rounds.size,
        "mean_rounds": round(rounds.mean(), 2),
        "se_rounds": round(rounds.std(ddof=1) / math.sqrt(rounds.size), 2)
        if rounds.size > 1
        else float("nan"),
        "median_rounds": round(float(np.median(rounds)), 1),
        "p90_rounds": round(float(np.percentile(rounds, 90)), 1),
        "max_rounds": int(rounds.max()),
        "mean_queries": round(queries.mean(), 1),
        "queries_per_n": round(queries.mean() / cell.n, 2),
        "sequential_rounds": sequential,
        "speedup": round(sequential / rounds.mean(), 2),
        "seconds_per_draw": round(cell.seconds_per_draw, 3),
        "compile_seconds": round(cell.compile_seconds, 1),
        "commit": commit,
    }


def loglog_slope(sizes, values) -> float:
    """Least-squares slope of ``log(values)`` against ``log(sizes)``
    (0.5 for :math:`\\sqrt N`, 1 for sequential)."""
    sizes, values = np.asarray(sizes, float), np.asarray(values, float)
    if sizes.size < 2:
        return float("nan")
    return float(np.polyfit(np.log(sizes), np.log(values), 1)[0])


def setting(row: dict) -> str:
    return (
        f"s2={row['speculation']},block={row['block']},growth={float(row['growth']):g},"
        f"leaf={row['leaf']},slots={row['num_slots']}"
    )


def table(rows: list[dict]) -> str:
    """Fixed-width table of the rows, then the slope of mean rounds per target and setting."""
    header = (
        f"{'target':<8}{'N':>6} {'setting':<48}{'rounds':>8}{'+-':>6}{'median':>7}{'p90':>7}"
        f"{'max':>6}"
        f"{'queries':>9}{'q/N':>6}{'seq':>6}{'speed-up':>9}{'s/draw':>8}"
    )
    lines = [header]
    for row in rows:
        lines.append(
            f"{row['target']:<8}{row['n']:>6} {setting(row):<48}{row['mean_rounds']:>8.1f}"
            f"{row['se_rounds']:>6.1f}{row['median_rounds']:>7.0f}{row['p90_rounds']:>7.0f}"
            f"{row['max_rounds']:>6}"
            f"{row['mean_queries']:>9.0f}{row['queries_per_n']:>6.1f}"
            f"{row['sequential_rounds']:>6}{row['speedup']:>8.1f}x{row['seconds_per_draw']:>8.2f}"
        )
    lines.append("")
    lines.append("log-log slope of mean rounds over N (sequential: 1.0; the paper: ~0.5):")
    for (target, name), group in _groups(rows).items():
        sizes = [r["n"] for r in group]
        slope = loglog_slope(sizes, [r["mean_rounds"] for r in group])
        q_slope = loglog_slope(sizes, [r["mean_queries"] for r in group])
        lines.append(
            f"  {target:<8} {name:<48} N = {min(sizes)}..{max(sizes)}: rounds {slope:.2f}, "
            f"queries {q_slope:.2f}"
        )
    return "\n".join(lines)


def _groups(rows: list[dict]) -> dict:
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["target"], setting(row)), []).append(row)
    return {key: sorted(group, key=lambda r: r["n"]) for key, group in groups.items()}


def plot(rows: list[dict], path: str) -> None:
    """Log-log plot of mean rounds (with p90 as error bars) against N, sequential dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = sorted({row["target"] for row in rows})
    fig, axes = plt.subplots(1, len(targets), figsize=(5.5 * len(targets), 4.2), squeeze=False)
    for ax, target in zip(axes[0], targets, strict=True):
        sizes = sorted({row["n"] for row in rows if row["target"] == target})
        ax.plot(sizes, [n + 1 for n in sizes], "k--", label="sequential (N + 1)")
        for (group_target, name), group in _groups(rows).items():
            if group_target != target:
                continue
            ns = [r["n"] for r in group]
            means = np.array([r["mean_rounds"] for r in group])
            p90 = np.array([r["p90_rounds"] for r in group])
            slope = loglog_slope(ns, means)
            ax.errorbar(
                ns,
                means,
                yerr=[np.zeros_like(means), np.maximum(p90 - means, 0)],
                marker="o",
                capsize=3,
                label=f"autospec {name} (slope {slope:.2f})",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("grid steps N")
        ax.set_ylabel("rounds per draw (mean; bar to p90)")
        ax.set_title(f"stochastic localization: {target}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args: argparse.Namespace) -> list[dict]:
    os.makedirs(args.out_dir, exist_ok=True)
    csv_path = os.path.join(args.out_dir, f"{args.name}.csv")
    commit = git_commit()
    rows = []
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for target in args.targets:
            for n in args.sizes:
                for block in args.block_sizes:
                    for growth, leaf, speculation in itertools.product(
                        args.growth, args.leaf_sizes, args.speculation_variances
                    ):
                        cell = measure(
                            target,
                            n,
                            block,
                            growth,
                            args.draws,
                            seed=args.seed,
                            draws_per_call=args.draws_per_call,
                            memory_budget=args.memory_budget,
                            num_slots=args.num_slots,
                            leaf=leaf,
                            speculation=speculation,
                        )
                        row = summarize(cell, commit)
                        rows.append(row)
                        writer.writerow(row)
                        f.flush()
                        print(table([row]).splitlines()[1], flush=True)
    print()
    print(table(rows))
    print(f"\nCSV saved to {csv_path}")
    if not args.no_plot:
        png = os.path.join(args.out_dir, f"{args.name}.png")
        plot(rows, png)
        print(f"figure saved to {png}")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument(
        "--targets", nargs="+", default=list(TARGETS), choices=TARGETS, help="denoisers"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096], help="time-grid sizes N"
    )
    parser.add_argument("--draws", type=int, default=20, help="draws per cell")
    parser.add_argument(
        "--block-sizes",
        nargs="+",
        default=["none"],
        help="root block sizes: none (whole path), Cs (C sqrt(N)) or integers",
    )
    parser.add_argument("--growth", type=float, nargs="+", default=[1.0], help="rho values")
    parser.add_argument(
        "--leaf-sizes",
        type=int,
        nargs="+",
        default=[1],
        help="leaf sizes: blocks of at most this many steps are sampled step by step",
    )
    parser.add_argument(
        "--speculation-variances",
        nargs="+",
        default=["none"],
        help="none (the drift frozen over a block, the paper), s^2 of the linear-response "
        "speculation (DiffusionProcess speculation_variance), posterior (the posterior "
        "covariance's response, read from the denoiser's Jacobian) or posterior:R (its "
        "rank-R estimate, posterior_rank=R)",
    )
    parser.add_argument(
        "--draws-per-call", type=int, default=1, help="draws sharing one engine pool"
    )
    parser.add_argument("--memory-budget", type=int, default=1 << 30, help="bytes")
    parser.add_argument(
        "--num-slots",
        type=int,
        default=None,
        help="pool size (None: the engine's, at least 512 for these roots)",
    )
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    parser.add_argument("--out-dir", default=RESULTS, help="directory of the CSV and plot")
    parser.add_argument("--name", default="diffusion_rounds", help="CSV/PNG file stem")
    parser.add_argument("--no-plot", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
