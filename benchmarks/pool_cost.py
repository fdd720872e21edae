"""Seconds per draw against the number of draws that share one pool, on the engine
(``engine.run``): the same keys drawn in calls of 1, 4, 16, ... draws (and, optionally, in
pools of a given number of slots), one compiled program per configuration.

A draw depends on its key alone, so every configuration returns the same draws and
conditionals (checked); the rounds may differ (a pool's capacity can delay a draw's work,
never change it), and so do the seconds.  On an accelerator the lanes of a
batch run in parallel and a shared pool raises throughput; on a CPU every lane of every batch
is work, so what a pool adds per draw (lanes of the smallest bucket run whether a draw needs
them or not, scoring calls sized for the round's longest window, larger pool states moved
every micro-step) shows up in the seconds.

    .venv/bin/python benchmarks/pool_cost.py --case cw-4096 --draws 64 --draws-per-call 1 4 16
    .venv/bin/python benchmarks/pool_cost.py --case cw-4096 --draws 32 --draws-per-call 1 \\
        --num-slots 0 56 224

``first call s`` is the first call of each configuration (compilation included); the seconds
per draw are those of the remaining calls, which draw every key once more after it.
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
from seconds import CASES, make_process  # noqa: E402


def pool_cost(
    process, config: SamplerConfig, keys: np.ndarray, per_call: int, num_slots: int
) -> dict:
    """Draw ``keys`` in calls of ``per_call`` keys with ``num_slots`` slots (0: the default
    pool); the first call's seconds, then the seconds per draw of all calls once compiled."""
    from numpyro_autospec.engine import Capacity, run

    capacity = Capacity() if num_slots == 0 else Capacity(num_slots=num_slots)
    sample = jax.jit(lambda k: run(process, k, config, capacity))
    start = time.perf_counter()
    jax.block_until_ready(sample(keys[:per_call]))
    first = time.perf_counter() - start
    start = time.perf_counter()
    outputs = [
        jax.block_until_ready(sample(keys[i : i + per_call])) for i in range(0, len(keys), per_call)
    ]
    seconds = time.perf_counter() - start
    fields = {
        name: np.concatenate([np.asarray(getattr(out, name)) for out in outputs])
        for name in ("value", "rounds", "conditionals")
    }
    return {"first_call_seconds": first, "seconds_per_draw": seconds / len(keys), **fields}


def main(args: argparse.Namespace) -> None:
    process = make_process(args.case)
    config = sampler_config(args.config, process.num_steps)
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(args.seed), args.draws))
    rows, reference = [], None
    for per_call in args.draws_per_call:
        if args.draws % per_call:
            raise SystemExit(f"--draws {args.draws} is not a multiple of {per_call}")
        for num_slots in args.num_slots:
            result = pool_cost(process, config, keys, per_call, num_slots)
            counts = {name: result[name] for name in ("value", "conditionals")}
            if reference is None:
                reference = counts
            same = all(np.array_equal(counts[name], reference[name]) for name in counts)
            row = {
                "case": args.case,
                "config": args.config,
                "draws": args.draws,
                "draws_per_call": per_call,
                "num_slots": num_slots or "default",
                "first_call_seconds": round(result["first_call_seconds"], 2),
                "ms_per_draw": round(1e3 * result["seconds_per_draw"], 2),
                "mean_rounds": float(result["rounds"].mean()),
                "max_rounds": int(result["rounds"].max()),
                "mean_conditionals": float(result["conditionals"].mean()),
                "same_draws": same,
            }
            rows.append(row)
            print(row, flush=True)
    print()
    print(
        "| draws per call | slots | first call s | ms per draw | rounds mean / max "
        "| conditionals mean | same draws |"
    )
    print("|" + "---|" * 7)
    for r in rows:
        print(
            f"| {r['draws_per_call']} | {r['num_slots']} | {r['first_call_seconds']:.1f} "
            f"| {r['ms_per_draw']:.1f} | {r['mean_rounds']:.2f} / {r['max_rounds']} "
            f"| {r['mean_conditionals']:.0f} | {r['same_draws']} |"
        )
    suffix = "" if args.config == "autospec:" else "_" + args.config.strip(":").replace(":", "_")
    path = write_csv(os.path.join(args.out, f"pool_cost_{args.case}{suffix}.csv"), rows)
    print(f"saved {path}")


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument("--case", default="cw-4096", choices=CASES, help="a seconds.py case")
    parser.add_argument(
        "--config",
        default="autospec:",
        help="engine config in benchmarks/rounds.py's notation: 'autospec:' (the default), "
        "'paper:' (recursion blocks only, no root windows)",
    )
    parser.add_argument("--draws", type=int, default=64, help="draws per configuration")
    parser.add_argument(
        "--draws-per-call", type=int, nargs="+", default=[1, 4, 16], help="draws sharing a pool"
    )
    parser.add_argument(
        "--num-slots", type=int, nargs="+", default=[0], help="pool slots (0: the default)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the keys")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="CSV folder")
    main(parser.parse_args())
