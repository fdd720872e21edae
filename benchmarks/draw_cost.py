"""The distribution of one draw's cost: rounds, oracle evaluations and conditionals per draw
over many draws of one ``benchmarks/seconds.py`` case, on the engine (``engine.run``).

A residual loop needs about ``1 / TV`` trials, where ``TV`` is the total variation between the
block's speculation and its target (docs/algorithm.md, section 3): the expected work of a block
stays ``O(m log m)``, because a speculation is rejected only with probability ``TV``, but a rare
rejection of a block with a small ``TV`` costs hundreds of trials, each an exact draw of the
block.  Seconds per draw is therefore heavy-tailed, and its mean (the expected cost, what
``seconds.py`` reports first) can sit far above its median.  This script measures that tail
with the counters the engine returns (no timing, so it may run on a busy machine): mean with
its standard error, median, 90th and 99th percentiles, maximum, and the share of the total
carried by the costliest 5% of draws, for each configuration of ``--configs``.

    .venv/bin/python benchmarks/draw_cost.py --case cw-4096 --draws 1024
    .venv/bin/python benchmarks/draw_cost.py --case cw-4096 --configs autospec: autospec:leaf=2

Every configuration draws from the same keys (``split(PRNGKey(seed + call), draws_per_call)``
for each call); every configuration is exact, so they differ in cost only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np
from csv_tables import write_csv

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rounds import sampler_config  # noqa: E402  (benchmarks/ on the path first)
from seconds import CASES, make_process, per_draw  # noqa: E402

FIELDS = ("rounds", "queries", "conditionals")


def draw_costs(process, config: SamplerConfig, draws: int, per_call: int, seed: int) -> dict:
    """Rounds, queries and conditionals of each of ``draws`` draws, ``per_call`` draws per
    ``engine.run`` call, and the seconds the calls took."""
    from numpyro_autospec.engine import run

    sample = jax.jit(lambda key: run(process, jax.random.split(key, per_call), config))
    start = time.perf_counter()
    outputs = [
        jax.block_until_ready(sample(jax.random.PRNGKey(seed + call)))
        for call in range(max(1, draws // per_call))
    ]
    costs = {field: per_draw(outputs, field).astype(float) for field in FIELDS}
    costs["seconds"] = time.perf_counter() - start
    return costs


def summary(values: np.ndarray) -> dict:
    """Mean, its standard error, quantiles, maximum and the top 5%'s share of the total."""
    top = np.sort(values)[-max(1, len(values) // 20) :]
    return {
        "mean": float(values.mean()),
        "standard_error": float(values.std(ddof=1) / np.sqrt(len(values))),
        "median": float(np.median(values)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
        "top5_share": float(top.sum() / values.sum()),
    }


def plot(results: dict, case: str, path: str) -> None:
    """Survival function of the conditionals per draw, one curve per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, costs in results.items():
        values = np.sort(costs["conditionals"])
        survival = 1.0 - np.arange(len(values)) / len(values)
        ax.step(values, survival, where="post", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("conditionals computed in one draw")
    ax.set_ylabel("fraction of draws costing at least this")
    ax.set_title(f"The cost of one draw, {case} ({len(values)} draws per configuration)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(args: argparse.Namespace) -> None:
    process = make_process(args.case)
    results, rows = {}, []
    for text in args.configs:
        config = sampler_config(text, process.num_steps)
        costs = draw_costs(process, config, args.draws, args.draws_per_call, args.seed)
        results[text] = costs
        print(f"{args.case}, {text}: {len(costs['rounds'])} draws in {costs['seconds']:.1f} s")
        for field in FIELDS:
            row = {"case": args.case, "config": text, "field": field, **summary(costs[field])}
            rows.append(row)
    print()
    print("| config | per draw | mean ± se | median | p90 | p99 | max | top 5% share |")
    print("|" + "---|" * 8)
    for r in rows:
        print(
            f"| {r['config']} | {r['field']} | {r['mean']:.1f} ± {r['standard_error']:.1f} "
            f"| {r['median']:.0f} | {r['p90']:.0f} | {r['p99']:.0f} | {r['max']:.0f} "
            f"| {r['top5_share']:.2f} |"
        )
    write_csv(os.path.join(args.out, f"draw_cost_{args.case}.csv"), rows)
    plot(results, args.case, os.path.join(args.out, f"draw_cost_{args.case}.png"))


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument("--case", default="cw-4096", choices=CASES, help="a seconds.py case")
    parser.add_argument(
        "--configs",
        nargs="+",
        default=["autospec:"],
        help="engine configs in benchmarks/rounds.py's notation: 'autospec:' (the default), "
        "'autospec:leaf=2', 'paper:block=8s,growth=3'",
    )
    parser.add_argument("--draws", type=int, default=1024, help="draws per configuration")
    parser.add_argument("--draws-per-call", type=int, default=16, help="draws sharing a pool")
    parser.add_argument("--seed", type=int, default=1000, help="seed of the first call's key")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="CSV and plot")
    main(parser.parse_args())
