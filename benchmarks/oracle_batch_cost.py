"""Seconds per set-form oracle evaluation at growing batch sizes against a sequential step: how
much cheaper an evaluation is when a round asks for many at once, and so the most that
autospeculation can gain in seconds on this machine for an oracle scored one evaluation per
row (a set-form oracle such as a masked network).

A sequential draw of ``n`` steps makes ``n`` oracle calls of one row each (``sequential_run``'s
rows-only step, a one-row ``log_conditionals``); an autospeculation draw makes ``E`` oracle
evaluations in ``R`` rounds, about ``E / R`` per round, batched (``benchmarks/draw_cost.py``
counts ``E`` and ``R`` per draw).  With no engine overhead at all, a draw's oracle time is then
about ``E * t(E / R) / (E / R)`` against ``n * t_step``, so the speed-up in seconds is at most

    n * t_step / (E * t(B) / B),   B = E / R,

where ``t(B)`` is the time of one call of ``B`` set-form evaluations (``jax.vmap`` of
``log_marginals`` over ``B`` masks) and ``t_step`` that of the sequential chain's one-row call.
On a CPU a batched evaluation of a network is compute-bound, so ``t(B) / B`` stops falling once
the batch fills the cores' vector units; on an accelerator it keeps falling until the device is
busy.  This script measures ``t_step`` and ``t(B)`` for the oracle of each ``seconds.py`` case it
is given (any-order cases: the oracle's own code, no engine), each inside one compiled loop (a
call's dispatch from Python is not counted) and the median of ``--repeats`` loops after a
first, compiling one.  For an oracle with a block form (Curie-Weiss, the Potts-like oracle) the
engine scores a block in one call, so the bound is not theirs: their rows show what a set-form
evaluation (all ``n`` rows) costs against a one-row call.

    .venv/bin/python benchmarks/oracle_batch_cost.py                   # mlp-256
    .venv/bin/python benchmarks/oracle_batch_cost.py --cases mlp-256 cw-1024 --batches 1 16 64

Writes ``results/oracle_batch_cost{_label}.{csv,png}``.  Seconds are machine- and
load-dependent: compare the ratios of one run (docs/benchmarks.md, "Configurations in one run").
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp
from chain_passes import milliseconds
from csv_tables import write_csv
from seconds import CASES, make_process

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
ANY_ORDER_CASES = tuple(
    case for case in CASES if case.split("-")[0] in ("cw", "potts", "ising", "mlp")
)
HEADER = "| case | batch | ms per call | us per evaluation | evaluation / sequential step |"


def measure(case: str, batches: list[int], repeats: int, calls: int) -> list[dict]:
    """``t_step`` and ``t(B)`` of one case's oracle, as rows of the table.

    Both are timed inside one compiled loop, so that a call's dispatch from Python (tens of
    microseconds on a CPU, as much as a cheap oracle's row) is not counted.  ``t_step``: a
    ``fori_loop`` over the ``n`` steps of one order, each a one-row ``log_conditionals`` call
    with its own prefix that then sets its site (the oracle work of a sequential draw; each
    call's input differs from the last, so XLA cannot hoist work out of the loop), divided by
    ``n``.  ``t(B)``: a loop of ``calls`` batched calls, each on its own ``B`` random masks
    (drawn before the loop) and its own state, divided by ``calls``.  Every answer is summed
    into the loop's carry, so no call is dropped as dead code."""
    process = make_process(case)
    oracle, n = process.oracle, process.num_positions
    key_x, key_order, key_masks = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.randint(key_x, (n,), 0, process.num_categories)
    order = jax.random.permutation(key_order, n)
    ranks = jnp.argsort(order)

    def sequential_oracle_work(x):
        def step(k, carry):
            x, total = carry
            row = oracle.log_conditionals(x, ranks, order[k][None], jnp.full(1, k))[0]
            # the chain's step sets its site, so the next call's input changes (no call can be
            # hoisted out of the loop); the most likely value stands in for the random draw
            x = x.at[order[k]].set(jnp.argmax(row).astype(x.dtype))
            return x, total + jnp.sum(jnp.where(jnp.isfinite(row), row, 0.0))

        return jax.lax.fori_loop(0, n, step, (x, jnp.zeros(())))[1]

    t_step = milliseconds(jax.jit(sequential_oracle_work), (x,), repeats)[0] / 1e3 / n
    rows = [dict(case=case, batch=0, seconds_per_call=t_step, seconds_per_evaluation=t_step)]
    for batch in batches:

        def batched_calls(masks):
            def call(r, total):
                shifted = jnp.roll(x, r)  # each call on its own state as well as its own masks
                answers = jax.vmap(lambda mask: oracle.log_marginals(shifted, mask))(masks[r])
                return total + jnp.sum(jnp.where(jnp.isfinite(answers), answers, 0.0))

            return jax.lax.fori_loop(0, calls, call, jnp.zeros(()))

        masks = jax.random.bernoulli(jax.random.fold_in(key_masks, batch), 0.5, (calls, batch, n))
        seconds = milliseconds(jax.jit(batched_calls), (masks,), repeats)[0] / 1e3 / calls
        rows.append(
            dict(
                case=case,
                batch=batch,
                seconds_per_call=seconds,
                seconds_per_evaluation=seconds / batch,
            )
        )
    for row in rows:
        row["evaluation_to_step"] = row["seconds_per_evaluation"] / t_step
        label = "step" if row["batch"] == 0 else str(row["batch"])
        print(
            f"| {case} | {label} | {row['seconds_per_call'] * 1e3:.3f} | "
            f"{row['seconds_per_evaluation'] * 1e6:.1f} | {row['evaluation_to_step']:.3f} |",
            flush=True,
        )
    return rows


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for case in dict.fromkeys(row["case"] for row in rows):
        batched = [row for row in rows if row["case"] == case and row["batch"] > 0]
        line = ax.plot(
            [row["batch"] for row in batched],
            [row["evaluation_to_step"] for row in batched],
            marker="o",
            label=case,
        )[0]
        ax.axhline(1.0, color=line.get_color(), linewidth=0.5, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("evaluations per call (batch B)")
    ax.set_ylabel("seconds per evaluation / seconds per sequential step")
    ax.set_title(f"Set-form evaluations batched, {jax.devices()[0].device_kind}", fontsize=11)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args: argparse.Namespace) -> list[dict]:
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    print(HEADER)
    print("|" + "---|" * 5)
    rows = [
        row for case in args.cases for row in measure(case, args.batches, args.repeats, args.calls)
    ]
    stem = os.path.join(args.out, "oracle_batch_cost" + (f"_{args.label}" if args.label else ""))
    write_csv(stem + ".csv", rows)
    plot(rows, stem + ".png")
    print(f"wrote {stem}.csv and {stem}.png")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument(
        "--cases", nargs="+", choices=ANY_ORDER_CASES, default=["mlp-256"], help="oracles"
    )
    parser.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[1, 2, 4, 8, 16, 32, 64, 128, 256],
        help="evaluations per call",
    )
    parser.add_argument("--repeats", type=int, default=7, help="timed loops per measurement")
    parser.add_argument("--calls", type=int, default=16, help="batched calls per timed loop")
    parser.add_argument("--label", default="", help="suffix of the output files")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="CSV and plot")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
