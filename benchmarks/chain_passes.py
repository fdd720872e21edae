"""Milliseconds of the Ising chain's set form, forward-backward in log space against linear
space, for a batch of queries as a speculation round asks them.

The engine's speculation round calls the oracle's ``log_marginals`` on every lane of its
bucket (:func:`numpyro_autospec.engine.rounds.speculation_round`); for the Ising chain that is
a forward-backward pass of ``n - 1`` sequential steps per lane.  This script times the two
passes of :mod:`numpyro_autospec.oracles.chain_messages` (``log_space_marginals``, the rows
the oracle gave before, and ``linear_space_marginals``, what it uses within
``LINEAR_SPACE_BOUND``), and the oracle's own ``ising_chain_log_marginals``, each
``jax.vmap``-ed over ``--lanes`` queries
(random pinned values on random masks) and jitted, on the homogeneous chain with coupling
``--coupling``; it checks that the rows agree.  Prints a table, writes
``results/chain_passes.{csv,png}``.

    .venv/bin/python benchmarks/chain_passes.py                      # n = 1024, lanes 1 2 10
    .venv/bin/python benchmarks/chain_passes.py --n 4096 --lanes 1 16

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from csv_tables import write_csv

from numpyro_autospec.oracles.chain_messages import linear_space_marginals, log_space_marginals
from numpyro_autospec.oracles.ising_chain import IsingChainOracle, ising_chain_log_marginals
from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))


PASSES = {
    "log space": log_space_marginals,
    "linear space": linear_space_marginals,
    "oracle": ising_chain_log_marginals,
}


def milliseconds(function, arguments, repeats: int) -> tuple[float, np.ndarray]:
    """Median milliseconds of ``repeats`` calls (after a first, compiling one), and the rows."""
    rows = jax.block_until_ready(function(*arguments))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function(*arguments))
        seconds.append(time.perf_counter() - start)
    return 1e3 * float(np.median(seconds)), np.asarray(rows, np.float64)


def measure(n: int, lanes: int, coupling: float, repeats: int) -> dict:
    oracle = IsingChainOracle.uniform(n, coupling=coupling)
    rng = np.random.default_rng(lanes)
    xs = jnp.asarray(rng.integers(0, 2, size=(lanes, n)), jnp.int32)
    masks = jnp.asarray(rng.random((lanes, n)) < 0.3)
    row = {"n": n, "lanes": lanes, "coupling": coupling}
    results = {}
    for name, function in PASSES.items():
        batched = jax.jit(jax.vmap(function, in_axes=(None, None, 0, 0)))
        row[f"{name} ms"], results[name] = milliseconds(
            batched, (oracle.couplings, oracle.fields, xs, masks), repeats
        )
    finite = np.isfinite(results["log space"])
    agree = all(
        np.array_equal(np.isfinite(rows), finite)
        and np.allclose(rows[finite], results["log space"][finite], atol=2e-5)
        for rows in results.values()
    )
    row["rows agree"] = agree
    row["speed-up"] = row["log space ms"] / row["linear space ms"]
    return row


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    position = np.arange(len(rows))
    for offset, name in ((-0.2, "log space"), (0.2, "linear space")):
        ax.bar(position + offset, [r[f"{name} ms"] for r in rows], 0.4, label=name)
    ax.set_xticks(position, [f"n = {r['n']}\n{r['lanes']} lanes" for r in rows])
    ax.set_ylabel("ms per batched call (median)")
    ax.set_title("Ising chain set form: forward-backward, log against linear space")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(args: argparse.Namespace) -> list[dict]:
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}, coupling {args.coupling}")
    print("| n | lanes | log space ms | linear space ms | oracle ms | speed-up | rows agree |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for lanes in args.lanes:
        row = measure(args.n, lanes, args.coupling, args.repeats)
        rows.append(row)
        print(
            f"| {row['n']} | {lanes} | {row['log space ms']:.3f} | {row['linear space ms']:.3f} "
            f"| {row['oracle ms']:.3f} | {row['speed-up']:.2f}x | {row['rows agree']} |"
        )
    stem = os.path.join(args.out, "chain_passes")
    write_csv(stem + ".csv", rows)
    plot(rows, stem + ".png")
    print(f"saved {stem}.csv and {stem}.png")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--n", type=int, default=1024, help="sites of the chain")
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 10], help="batch sizes")
    parser.add_argument("--coupling", type=float, default=0.2, help="the chain's coupling J")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per measurement")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="CSV and plot")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
