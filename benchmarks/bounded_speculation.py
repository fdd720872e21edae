"""What bounded speculation buys a diffusion draw: the same keys, hence the same draws and
rounds, with the engine's speculation phases bounded (as shipped) and unbounded (every
speculation, acceptance test and residual test a pass over the whole path).

A process that declares ``bounded_speculation`` (docs/engine.md, "Processes with large
states") has its short blocks speculated, decided and finished on a window of ``W`` steps
(``Plan.speculation_lengths``); the unbounded run patches ``speculation_lengths`` to ``()``
in its own process only, which is what the engine does for a process that does not declare
the fast path.  Each (case, mode) runs in a fresh process: compile seconds, then ``--repeats``
keys (``PRNGKey(1..repeats)``), each timed twice and the faster kept.  The rounds of the two
modes must agree key for key (the script stops otherwise): the bound changes costs, never
draws.

    .venv/bin/python benchmarks/bounded_speculation.py
    .venv/bin/python benchmarks/bounded_speculation.py --cases digits-1024 --repeats 4

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from csv_tables import write_csv

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("unbounded", "bounded")


def measure(case: str, mode: str, repeats: int) -> dict:
    """One case in one mode, in this process."""
    import jax

    from numpyro_autospec.engine import run

    plan_module = sys.modules["numpyro_autospec.engine.plan"]
    if mode == "unbounded":
        plan_module.speculation_lengths = lambda process, recursion_block: ()
    sys.path.insert(0, HERE)
    from seconds import make_process

    process = make_process(case)
    lengths = plan_module.speculation_lengths(process, int(process.num_steps))
    start = time.perf_counter()
    compiled = jax.jit(lambda key: run(process, key[None])).lower(jax.random.PRNGKey(0)).compile()
    compile_seconds = time.perf_counter() - start
    seconds, rounds = [], []
    for seed in range(1, repeats + 1):
        key, best = jax.random.PRNGKey(seed), float("inf")
        for _ in range(2):
            start = time.perf_counter()
            samples = jax.block_until_ready(compiled(key))
            best = min(best, time.perf_counter() - start)
        seconds.append(best)
        rounds.append(int(samples.rounds[0]))
    return {
        "case": case,
        "mode": mode,
        "repeats": repeats,
        "compile_s": compile_seconds,
        "s_per_draw": float(np.mean(seconds)),
        "ms_per_round": 1000 * float(np.sum(seconds) / np.sum(rounds)),
        "mean_rounds": float(np.mean(rounds)),
        "rounds": " ".join(map(str, rounds)),
        "speculation_lengths": " ".join(map(str, lengths)),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| case | mean rounds | compile s (unbounded / bounded) | s per draw (unbounded / bounded) "
        "| ms per round (unbounded / bounded) | per round |",
        "|" + "---|" * 6,
    ]
    by_case = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["mode"]] = row
    for case, modes in by_case.items():
        u, b = modes["unbounded"], modes["bounded"]
        lines.append(
            f"| {case} | {b['mean_rounds']:.1f} | {u['compile_s']:.2f} / {b['compile_s']:.2f} "
            f"| {u['s_per_draw']:.4f} / {b['s_per_draw']:.4f} "
            f"| {u['ms_per_round']:.2f} / {b['ms_per_round']:.2f} "
            f"| {u['ms_per_round'] / b['ms_per_round']:.2f}x |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(row["case"] for row in rows))
    figure, axis = plt.subplots(figsize=(1.6 * len(cases) + 2, 3.6), layout="constrained")
    width = 0.38
    for offset, mode in zip((-width / 2, width / 2), MODES, strict=True):
        values = [
            next(r["ms_per_round"] for r in rows if r["case"] == case and r["mode"] == mode)
            for case in cases
        ]
        axis.bar(np.arange(len(cases)) + offset, values, width, label=mode)
    axis.set_xticks(np.arange(len(cases)), cases)
    axis.set_ylabel("ms per round (same draws)")
    axis.set_title("Diffusion: speculation phases bounded to a block's window, or not")
    axis.legend()
    figure.savefig(path, dpi=120)


def main(args: argparse.Namespace) -> None:
    if args.one:
        case, mode = args.one
        print(json.dumps(measure(case, mode, args.repeats)))
        return
    rows = []
    for case in args.cases:
        for mode in MODES:
            result = subprocess.run(
                [sys.executable, __file__, "--one", case, mode, "--repeats", str(args.repeats)],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
            print(f"{case} {mode}: {rows[-1]['ms_per_round']:.2f} ms per round", flush=True)
        if rows[-1]["rounds"] != rows[-2]["rounds"]:
            raise SystemExit(f"{case}: the rounds differ between modes, the draws must not")
    print(table(rows))
    csv_path = write_csv(os.path.join(args.out, f"bounded_speculation{args.label}.csv"), rows)
    plot(rows, os.path.join(args.out, f"bounded_speculation{args.label}.png"))
    print(f"wrote {csv_path} and its plot")


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument(
        "--cases",
        nargs="+",
        default=["digits-64", "digits-256", "digits-1024", "mixture-256", "mixture-1024"],
        help="diffusion cases in seconds.py's notation (family-size[-suffix])",
    )
    parser.add_argument("--repeats", type=int, default=12, help="keys timed per case and mode")
    parser.add_argument("--label", default="", help="suffix of the output files")
    parser.add_argument(
        "--out", default=os.path.join(HERE, "results"), help="directory of the CSV and plot"
    )
    parser.add_argument("--one", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    main(parser.parse_args())
