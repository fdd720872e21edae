"""Rounds per draw with the default configuration and with the configuration warmup tunes.

For every target this script runs the warmup tuning that ships with
:class:`~numpyro_autospec.numpyro.AutospecKernel` (:func:`numpyro_autospec.numpyro.tuning.tune`:
the warmup draws split between :func:`~numpyro_autospec.numpyro.tuning.candidate_configs`, the
fewest mean rounds per draw kept when it beats the default by more than two standard errors),
then draws *fresh* exact samples (keys never used in warmup) with the default and with the
tuned configuration on :func:`numpyro_autospec.engine.run` and reports mean rounds per draw
(standard error), mean queries, and the ratio tuned / default.  One compiled program per
candidate configuration and target: the fresh draws reuse the programs of the warmup.

Targets: the any-order targets of ``benchmarks/rounds.py`` (Curie-Weiss, Ising chain,
Hopfield), the Potts-like oracle of ``benchmarks/targets.py``, and ``product`` (independent
sites with distinct biases: a target on which the default first window is too small).

Example::

    python benchmarks/warmup_tuning.py --size 256 --warmup 256 --draws 128
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
from csv_tables import write_csv

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
RESULTS = os.path.join(HERE, "results")

TARGETS = (
    "product",
    "cw:0.5",
    "cw:1.0",
    "cw:1.5",
    "ising:1.0",
    "ising:0.2",
    "hopfield:16,2.0",
    "potts:16",
)


def make_oracle(target: str, n: int):
    """The oracle of a target name (``benchmarks/rounds.py``'s names, plus ``product`` and
    ``potts:q``)."""
    import jax.numpy as jnp
    from rounds import project_oracle
    from targets import PottsCountOracle

    kind, _, param = target.partition(":")
    if kind == "product":
        p = np.linspace(0.15, 0.85, n)
        rows = jnp.log(jnp.asarray(np.stack([1 - p, p], axis=1), jnp.float32))

        def product_oracle(x, mask):
            return rows

        return product_oracle, 2
    if kind == "potts":
        q = int(param)
        return PottsCountOracle(n, q), q
    return project_oracle(target, n), 2


def measure_target(target: str, n: int, num_warmup: int, num_draws: int, seed: int):
    """Tune on ``target`` and measure default and tuned rounds on fresh draws."""
    import jax

    from numpyro_autospec.config import SamplerConfig
    from numpyro_autospec.engine import run
    from numpyro_autospec.numpyro.tuning import tune
    from numpyro_autospec.processes import AnyOrderProcess

    oracle, q = make_oracle(target, n)
    process = AnyOrderProcess(oracle, n, q, name="x")
    programs = {}

    def program(config):
        if config not in programs:
            programs[config] = jax.jit(lambda keys: run(process, keys, config))
        return programs[config]

    def measure(config, keys):
        samples = program(config)(keys)
        return np.asarray(samples.rounds), np.asarray(samples.queries)

    start = time.perf_counter()
    tuning = tune(measure, SamplerConfig(), n, jax.random.PRNGKey(seed), num_warmup)
    tune_seconds = time.perf_counter() - start
    per_candidate = len(tuning.candidates[0].rounds)
    fresh = jax.random.split(jax.random.PRNGKey(seed + 1), num_draws)
    rows = []
    for label, config in (("default", SamplerConfig()), ("tuned", tuning.config)):
        rounds, queries = [], []
        for batch in range(0, num_draws, per_candidate):  # the warmup's program: same shapes
            keys = fresh[batch : batch + per_candidate]
            if len(keys) < per_candidate:
                break
            r, qs = measure(config, keys)
            rounds.append(r)
            queries.append(qs)
        rounds, queries = np.concatenate(rounds), np.concatenate(queries)
        rows.append(
            {
                "target": target,
                "n": n,
                "config": label,
                "chosen": tuning.chosen,
                "warmup_per_candidate": per_candidate,
                "draws": len(rounds),
                "mean_rounds": round(float(rounds.mean()), 3),
                "se_rounds": round(float(rounds.std(ddof=1) / math.sqrt(len(rounds))), 3),
                "mean_queries": round(float(queries.mean()), 1),
                "tune_seconds": round(tune_seconds, 1),
            }
        )
    return rows, tuning


def table(rows) -> str:
    lines = [
        "| target | n | chosen | default rounds (se) | tuned rounds (se) | tuned / default "
        "| default queries | tuned queries |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by_target = {}
    for row in rows:
        by_target.setdefault((row["target"], int(row["n"])), {})[row["config"]] = row
    for (target, n), pair in by_target.items():
        default, tuned = pair["default"], pair["tuned"]
        ratio = float(tuned["mean_rounds"]) / float(default["mean_rounds"])
        lines.append(
            f"| {target} | {n} | {tuned['chosen']} | {default['mean_rounds']} "
            f"({default['se_rounds']}) | {tuned['mean_rounds']} ({tuned['se_rounds']}) | "
            f"{ratio:.2f} | {default['mean_queries']} | {tuned['mean_queries']} |"
        )
    return "\n".join(lines)


def plot(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = list(dict.fromkeys(row["target"] for row in rows))
    values = {
        (row["target"], row["config"]): (float(row["mean_rounds"]), float(row["se_rounds"]))
        for row in rows
    }
    chosen = {row["target"]: row["chosen"] for row in rows}
    positions = np.arange(len(targets))
    figure, axis = plt.subplots(figsize=(max(6, 1.3 * len(targets)), 4))
    for offset, label in ((-0.2, "default"), (0.2, "tuned")):
        means = [values[(t, label)][0] for t in targets]
        errors = [values[(t, label)][1] for t in targets]
        axis.bar(positions + offset, means, 0.4, yerr=errors, label=label, capsize=3)
    axis.set_xticks(positions, [f"{t}\n({chosen[t]})" for t in targets], fontsize=8)
    axis.set_ylabel("mean rounds per draw (fresh draws)")
    n = rows[0]["n"]
    axis.set_title(f"Warmup tuning: rounds per draw, default vs tuned (n = {n})")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(args) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    csv_path = os.path.join(RESULTS, f"{args.output}.csv")
    rows = []
    for target in args.targets:
        target_rows, tuning = measure_target(target, args.size, args.warmup, args.draws, args.seed)
        rows.extend(target_rows)
        print(f"{target} (n = {args.size}): warmup candidates\n{tuning.table()}", flush=True)
        print(table(target_rows).splitlines()[-1], flush=True)
        write_csv(csv_path, rows)  # after every target: a long run keeps what it measured
    print(table(rows))
    plot(rows, os.path.join(RESULTS, f"{args.output}.png"))
    print(f"wrote {csv_path} and {args.output}.png")


def parse_args(argv=None):
    parser = script_parser(__doc__)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), help="target names")
    parser.add_argument("--size", type=int, default=256, help="number of sites n")
    parser.add_argument(
        "--warmup", type=int, default=256, help="warmup draws, split between the candidates"
    )
    parser.add_argument("--draws", type=int, default=128, help="fresh draws per configuration")
    parser.add_argument("--seed", type=int, default=0, help="seed of the warmup keys")
    parser.add_argument("--output", default="warmup_tuning", help="results/<output>.csv|png")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
