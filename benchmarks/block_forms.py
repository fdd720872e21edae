"""Oracle evaluations and rounds per draw with the exact oracles' one-call block forms, against
the block form derived from their set form (one ``log_marginals`` evaluation per row).

For each target and size the engine (``engine.run``, default config and capacity) draws with
the oracle as shipped (``block``: it declares ``scores_blocks`` and scores a speculated block
with one ``log_conditionals`` call) and with the same oracle behind a set-form-only wrapper
(``derived``), on the same keys.  Both forms answer the same conditionals, so the draws and
rounds agree key for key up to float rounding; what changes is the number of oracle
evaluations (``queries``).  ASSD's guarantee for its sampler is at most ``n`` evaluations per
draw; the table reports the largest ``queries / n`` over the draws.

    .venv/bin/python benchmarks/block_forms.py                           # table, CSV, plot
    .venv/bin/python benchmarks/block_forms.py --targets ising:0.2 --sizes 256 1024 --draws 8

Targets: ``cw:BETA`` (Curie-Weiss), ``ising:J`` (uniform chain, no field),
``hopfield:R,BETA`` (R random patterns, seed 0).  Seconds are reported for information only
(machine- and load-dependent; compare ratios of one run, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import jax
import numpy as np
from csv_tables import write_csv
from rounds import project_oracle

from numpyro_autospec.engine import run
from numpyro_autospec.oracles import AnyOrderOracle
from numpyro_autospec.processes import AnyOrderProcess
from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
FORMS = ("block", "derived")


class SetFormOnly(AnyOrderOracle):
    """The wrapped oracle's set form only: the engine derives its block form (one
    ``log_marginals`` evaluation per row), the path these oracles took before their block
    forms."""

    def __init__(self, oracle: AnyOrderOracle) -> None:
        self.oracle = oracle
        self.num_positions, self.num_categories = oracle.num_positions, oracle.num_categories

    def log_marginals(self, x, mask):
        return self.oracle.log_marginals(x, mask)


def measure(target: str, n: int, form: str, draws: int, draws_per_call: int, seed: int) -> dict:
    """Rounds, queries and conditionals of ``draws`` engine draws (``draws_per_call`` per jitted
    call), their keys fixed by ``seed`` (the same for both forms)."""
    oracle = project_oracle(target, n)
    if form == "derived":
        oracle = SetFormOnly(oracle)
    process = AnyOrderProcess(oracle, n, 2)
    calls = math.ceil(draws / draws_per_call)
    keys = jax.random.split(jax.random.PRNGKey(seed), calls * draws_per_call)
    keys = keys.reshape(calls, draws_per_call, -1)
    sample = jax.jit(lambda k: run(process, k))
    start = time.perf_counter()
    jax.block_until_ready(sample(keys[0]))
    first_seconds = time.perf_counter() - start
    rounds, queries, conditionals, values = [], [], [], []
    start = time.perf_counter()
    for call in range(calls):
        samples = jax.block_until_ready(sample(keys[call]))
        rounds += list(np.asarray(samples.rounds))
        queries += list(np.asarray(samples.queries))
        conditionals += list(np.asarray(samples.conditionals))
        values.append(np.asarray(samples.value))
    seconds = (time.perf_counter() - start) / (calls * draws_per_call)
    rounds, queries = np.asarray(rounds, float), np.asarray(queries, float)
    return {
        "target": target,
        "n": n,
        "form": form,
        "draws": len(rounds),
        "mean_rounds": round(rounds.mean(), 2),
        "se_rounds": round(rounds.std(ddof=1) / math.sqrt(len(rounds)), 2) if draws > 1 else 0,
        "mean_queries": round(queries.mean(), 1),
        "max_queries_per_n": round(queries.max() / n, 3),
        "mean_conditionals": round(float(np.mean(conditionals)), 1),
        "seconds_per_draw": round(seconds, 3),
        "first_call_seconds": round(first_seconds, 1),
        "_values": np.concatenate(values),
        "_rounds": rounds,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| target | n | form | rounds (mean ± se) | queries / draw | max queries / n | "
        "conditionals / draw | s / draw |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['target']} | {row['n']} | {row['form']} | {row['mean_rounds']} ± "
            f"{row['se_rounds']} | {row['mean_queries']} | {row['max_queries_per_n']} | "
            f"{row['mean_conditionals']} | {row['seconds_per_draw']} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = sorted({row["target"] for row in rows})
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for target in targets:
        for form, style in zip(FORMS, ("-o", "--s"), strict=True):
            points = sorted(
                (int(r["n"]), r) for r in rows if r["target"] == target and r["form"] == form
            )
            if not points:
                continue
            sizes = [n for n, _ in points]
            axes[0].plot(
                sizes,
                [float(r["mean_queries"]) / n for n, r in points],
                style,
                label=f"{target} {form}",
            )
            axes[1].plot(sizes, [float(r["mean_rounds"]) for _, r in points], style)
    axes[0].axhline(1.0, color="grey", lw=0.8, ls=":")
    axes[0].set_ylabel("oracle evaluations per draw / n")
    axes[1].set_ylabel("rounds per draw (mean)")
    for axis in axes:
        axis.set_xscale("log", base=2)
        axis.set_xlabel("n")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    figure.suptitle("One-call block forms against the derived block form (engine, default config)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(args: argparse.Namespace) -> None:
    rows = []
    for target in args.targets:
        for n in args.sizes:
            measured = {
                form: measure(target, n, form, args.draws, args.draws_per_call, args.seed)
                for form in FORMS
            }
            block, derived = measured["block"], measured["derived"]
            same = np.array_equal(block["_values"], derived["_values"]) and np.array_equal(
                block["_rounds"], derived["_rounds"]
            )
            for form in FORMS:
                row = {key: value for key, value in measured[form].items() if key[0] != "_"}
                row["same_draws_and_rounds"] = bool(same)
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    write_csv(args.csv, rows)
    plot(rows, os.path.splitext(args.csv)[0] + ".png")


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument(
        "--targets",
        nargs="+",
        default=["cw:1.0", "hopfield:16,2.0", "ising:0.2"],
        help="targets: cw:BETA, ising:J, hopfield:R,BETA",
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[256, 1024, 4096], help="sizes n")
    parser.add_argument("--draws", type=int, default=8, help="draws per cell (same keys per form)")
    parser.add_argument("--draws-per-call", type=int, default=4, help="draws sharing one pool")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed of the keys")
    parser.add_argument(
        "--csv",
        default=os.path.join(HERE, "results", "block_forms.csv"),
        help="CSV path (the plot is saved next to it as .png)",
    )
    main(parser.parse_args())
