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
whole path), ``Cs`` (for example ``2s``) recursion blocks of ``round(C sqrt(N))`` steps left to
right, an integer a fixed block size.  ``--growth`` sets the residual batch growth
:math:`\\rho` (batch ``r`` runs :math:`\\lceil (1+\\rho)^r \\rceil` trials),
``--speculation-variances`` the speculated drift: frozen (the paper), the linear response of
a Gaussian of variance :math:`s^2` (the mixture's components have :math:`s^2 = 0.01`) or of
the denoiser's posterior covariance (its help).  Every setting
is exact; they trade rounds against queries.

Each draw runs alone in its compiled call (``--draws-per-call 1``, the default), so that its
rounds are its own and not those of the draws sharing its pool; the query batch is capped by
``--memory-budget`` (docs/engine.md).

Examples::

    python benchmarks/diffusion_rounds.py --sizes 64 256 1024 --draws 20
    python benchmarks/diffusion_rounds.py --targets mixture --sizes 256 1024 \\
        --block-sizes none 1s 2s 4s --growth 1 3 --draws 20
    python benchmarks/diffusion_rounds.py --targets mixture --sizes 1024 4096 \\
        --speculation-variances none 0.01 --growth 1 3 --draws 20
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import jax
import numpy as np
from cases import RESULTS, make_diffusion
from csv_tables import append_csv, git_commit, pyplot, save_figure, write_csv
from rounds import loglog_slope

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.engine._plan import plan
from numpyro_autospec.processes import DiffusionProcess

from support.scripts import script_parser

TARGETS = ("digits", "mixture")
FIELDS = [
    "target", "dim", "n", "speculation", "block", "growth", "num_slots", "draws",
    "mean_rounds", "se_rounds", "median_rounds", "p90_rounds", "max_rounds", "mean_queries",
    "queries_per_n",
    "sequential_rounds", "speedup",
    "seconds_per_draw", "compile_seconds", "commit",
]  # fmt: skip


# --------------------------------------------------------------------------- settings
def resolve_block(spec: str, n: int) -> int | None:
    """``none`` -> None (whole path), ``Cs`` -> round(C sqrt(n)), an integer -> itself."""
    spec = spec.strip().lower()
    if spec == "none":
        return None
    if spec.endswith("s"):
        return max(1, min(n, round(float(spec[:-1]) * math.sqrt(n))))
    return max(1, min(n, int(spec)))


def sampler_config(block: str, growth: float, n: int) -> SamplerConfig:
    """The paper's recursion (explicitly, whatever the package default) with this root block
    and residual growth."""
    return SamplerConfig(method="autospec", block_size=resolve_block(block, n), growth=growth)


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
    target, n, block, growth, draws, *, seed=0, draws_per_call=1, memory_budget=1 << 30,
    num_slots=None, speculation="none",
) -> dict:  # fmt: skip
    """The CSV row (without its commit) of ``draws`` engine draws in calls of ``draws_per_call``
    (one compilation)."""
    process = make_diffusion(target, n, speculation)
    config = sampler_config(block, growth, n)
    capacity = engine_capacity(process, memory_budget, num_slots)
    calls = math.ceil(draws / draws_per_call)
    keys = jax.random.split(jax.random.PRNGKey(seed + n), calls * draws_per_call)
    keys = keys.reshape(calls, draws_per_call, -1)
    start = time.perf_counter()
    compiled = jax.jit(lambda k: run(process, k, config, capacity)).lower(keys[0]).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    samples = [jax.block_until_ready(compiled(call_keys)) for call_keys in keys]
    seconds = (time.perf_counter() - start) / (calls * draws_per_call)
    # the pool size the engine ran with (resolved, not requested)
    slots = plan(process, config, capacity, draws_per_call, keys[0, 0]).num_slots - draws_per_call
    rounds = np.concatenate([s.rounds for s in samples])[:draws].astype(float)
    queries = np.concatenate([s.queries for s in samples])[:draws].astype(float)
    sequential = n + 1  # N Euler-Maruyama steps and the final query f(t_N, y_N)
    se = rounds.std(ddof=1) / math.sqrt(rounds.size) if rounds.size > 1 else float("nan")
    return {
        "target": target,
        "dim": process.dim,
        "n": n,
        "speculation": speculation,
        "block": block,
        "growth": growth,
        "num_slots": slots,
        "draws": rounds.size,
        "mean_rounds": round(rounds.mean(), 2),
        "se_rounds": round(se, 2),
        "median_rounds": round(float(np.median(rounds)), 1),
        "p90_rounds": round(float(np.percentile(rounds, 90)), 1),
        "max_rounds": int(rounds.max()),
        "mean_queries": round(queries.mean(), 1),
        "queries_per_n": round(queries.mean() / n, 2),
        "sequential_rounds": sequential,
        "speedup": round(sequential / rounds.mean(), 2),
        "seconds_per_draw": round(seconds, 3),
        "compile_seconds": round(compile_seconds, 1),
    }


def setting(row: dict) -> str:
    return (
        f"s2={row['speculation']},block={row['block']},growth={float(row['growth']):g},"
        f"slots={row['num_slots']}"
    )


def table(rows: list[dict]) -> str:
    """Fixed-width table of the rows, then the slope of mean rounds per target and setting."""
    header = (
        f"{'target':<8}{'N':>6} {'setting':<48}{'rounds':>8}{'+-':>6}{'median':>7}{'p90':>7}"
        f"{'max':>6}{'queries':>9}{'q/N':>6}{'seq':>6}{'speed-up':>9}{'s/draw':>8}"
    )
    lines = [header]
    for row in rows:
        lines.append(
            f"{row['target']:<8}{row['n']:>6} {setting(row):<48}{row['mean_rounds']:>8.1f}"
            f"{row['se_rounds']:>6.1f}{row['median_rounds']:>7.0f}{row['p90_rounds']:>7.0f}"
            f"{row['max_rounds']:>6}{row['mean_queries']:>9.0f}{row['queries_per_n']:>6.1f}"
            f"{row['sequential_rounds']:>6}{row['speedup']:>8.1f}x{row['seconds_per_draw']:>8.2f}"
        )
    lines += ["", "log-log slope of mean rounds over N (sequential: 1.0; the paper: ~0.5):"]
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
    plt = pyplot()
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
            yerr = [np.zeros_like(means), np.maximum(p90 - means, 0)]
            label = f"autospec {name} (slope {loglog_slope(ns, means):.2f})"
            ax.errorbar(ns, means, yerr=yerr, marker="o", capsize=3, label=label)
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", xlabel="grid steps N", ylabel="rounds per draw (mean; bar to p90)")
        ax.set_title(f"stochastic localization: {target}")
        ax.legend(fontsize=8)
    save_figure(fig, path)


def main(args: argparse.Namespace) -> list[dict]:
    os.makedirs(args.out_dir, exist_ok=True)
    csv_path = os.path.join(args.out_dir, f"{args.name}.csv")
    commit = git_commit()
    rows = []
    write_csv(csv_path, [], FIELDS)
    options = ("seed", "draws_per_call", "memory_budget", "num_slots")
    common = {name: getattr(args, name) for name in options}
    grid = ("targets", "sizes", "block_sizes", "growth", "speculation_variances")
    for target, n, block, growth, spec in itertools.product(*map(vars(args).get, grid)):
        row = measure(target, n, block, growth, args.draws, speculation=spec, **common)
        rows.append(row | {"commit": commit})
        append_csv(csv_path, rows[-1], FIELDS)
        print(table(rows[-1:]).splitlines()[1], flush=True)
    print("\n" + table(rows))
    print(f"\nCSV saved to {csv_path}")
    if not args.no_plot:
        png = os.path.join(args.out_dir, f"{args.name}.png")
        plot(rows, png)
        print(f"figure saved to {png}")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    option = parser.add_argument
    option("--targets", nargs="+", default=list(TARGETS), choices=TARGETS, help="denoisers")
    sizes = [64, 256, 1024, 4096]
    option("--sizes", type=int, nargs="+", default=sizes, help="time-grid sizes N")
    option("--draws", type=int, default=20, help="draws per cell")
    blocks = "root block sizes: none (whole path), Cs (C sqrt(N)) or integers"
    option("--block-sizes", nargs="+", default=["none"], help=blocks)
    option("--growth", type=float, nargs="+", default=[1.0], help="rho values")
    variances = (
        "none (the drift frozen over a block, the paper), s^2 of the linear-response "
        "speculation (DiffusionProcess speculation_variance), posterior (the posterior "
        "covariance's response, read from the denoiser's Jacobian) or posterior:R (its "
        "rank-R estimate, posterior_rank=R)"
    )
    option("--speculation-variances", nargs="+", default=["none"], help=variances)
    option("--draws-per-call", type=int, default=1, help="draws sharing one engine pool")
    option("--memory-budget", type=int, default=1 << 30, help="bytes")
    slots = "pool size (None: the engine's, at least 512 for these roots)"
    option("--num-slots", type=int, default=None, help=slots)
    option("--seed", type=int, default=0, help="PRNG seed")
    option("--out-dir", default=RESULTS, help="directory of the CSV and plot")
    option("--name", default="diffusion_rounds", help="CSV/PNG file stem")
    option("--no-plot", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
