"""Tuning study: which knobs make autospeculation at least as fast as ASSD on every target?

Round and query counts are properties of the algorithm, not of its execution, so the study
runs the exact NumPy prototypes of :mod:`prototypes` (same algorithm, same round accounting as
``numpyro_autospec.reference``; their law is checked by ``prototypes.py --check`` and their
round counts agree with the engine's when the engine's pool is large enough -- see
``--engine-check`` and ``docs/benchmarks.md``).  That makes a sweep over hundreds of
(target, n, config) cells affordable on two CPU cores.

Stages (``--stage``):

``knobs``    the engine's existing knobs: ``autospec`` block_size in multiples of sqrt(n)
             (and ``None``: the paper as written), leaf_size, growth, lookahead; ``assd`` and
             ``block`` (block verification) windows.
``designs``  proposed root strategies (:class:`prototypes.Hybrid`): block verification of
             windows with the paper's recursion on the rest of a partially kept window
             (``frac``), adaptive windows (``adapt``).
``scaling``  the recommended configs and the peers for n up to 16384 (log-log slopes).

Each stage appends to ``benchmarks/results/tune_<stage>.csv`` (cells already there are
skipped, so a stage can be resumed) and ``--report`` prints the markdown summary tables.

Examples::

    python benchmarks/tune.py --stage knobs --sizes 1024 4096 --draws 40 --workers 2
    python benchmarks/tune.py --stage knobs --report
    python benchmarks/tune.py --engine-check --sizes 1024 --draws 20
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from multiprocessing import Pool

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import prototypes  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: benchmark targets (prototypes.make_oracle names) and their labels
TARGETS = {
    "cw:0.5": "CW beta=0.5",
    "cw:1.0": "CW beta=1",
    "cw:1.5": "CW beta=1.5",
    "ising:1.0": "Ising J=1",
    "ising:0.2": "Ising J=0.2",
    "hopfield:16,2.0": "Hopfield R=16 beta=2",
}

WINDOWS = ("16", "64", "256", "1024")

#: round-3 candidates for the recommended root strategy
CANDIDATES = [
    "hybrid:k=2s,adapt=8,k_min=1s,floor=0.25s,fb=0.5s",
    "hybrid:k=4s,adapt=8,k_min=1s,floor=0.25s,fb=0.5s",
    "hybrid:k=4s,adapt=16,k_min=1s,floor=0.25s,fb=0.5s",
    "hybrid:k=2s,frac=0,adapt=8,k_min=1s",
]


def stage_configs(stage: str) -> list[str]:
    if stage == "knobs":
        configs = [f"assd:k={k}" for k in WINDOWS] + [f"block:k={k}" for k in WINDOWS]
        configs += [f"autospec:block={b}" for b in ("none", "0.5s", "1s", "2s", "4s", "8s")]
        configs += [f"autospec:block=2s,leaf={leaf}" for leaf in (2, 4, 8)]
        configs += [f"autospec:block=none,leaf={leaf}" for leaf in (4, 16)]
        configs += [f"autospec:block=2s,growth={g}" for g in (0.5, 3)]
        configs += ["autospec:block=none,growth=3", "autospec:block=2s,lookahead=0"]
        return configs
    if stage == "designs":
        # round 1: window-relative fallback threshold (frac), fixed or adaptive windows
        configs = []
        for k in ("1s", "4s", "16s"):
            for frac in (1.0, 0.5, 0.25, 0.125):
                configs.append(f"hybrid:k={k},frac={frac}")
        for frac in (0.5, 0.25, 0.125):
            configs.append(f"hybrid:k=2s,frac={frac},adapt=2,k_min=1s")
            configs.append(f"hybrid:k=2s,frac={frac},adapt=4,k_min=1s")
        configs += ["hybrid:k=2s,frac=0.25,adapt=4,k_min=1s,leaf=4"]
        # round 2: absolute floor ~ sqrt(n) and a fallback block ~ sqrt(n) (worst case kept)
        for floor in ("0.125s", "0.25s", "0.5s"):
            for fallback in ("0.5s", "1s"):
                for adapt in (2, 4):
                    configs.append(
                        f"hybrid:k=2s,adapt={adapt},k_min=1s,floor={floor},fb={fallback}"
                    )
        configs += [f"hybrid:k=2s,frac=0,adapt={a},k_min=1s" for a in (2, 4, 8)]
        configs += ["hybrid:k=2s,frac=0,adapt=4,k_min=0.5s"]
        # round 3: larger windows (they cost queries, not rounds), correction lookahead
        configs += CANDIDATES + [c + ",prequery=1" for c in CANDIDATES]
        configs += ["assd:k=256,prequery=1", "block:k=256,prequery=1"]
        configs += ["autospec_aimd:block=1s,b_min=0.5s", "autospec_aimd:block=2s,b_min=1s"]
        return configs
    if stage == "scaling":
        return (
            [f"assd:k={k}" for k in WINDOWS]
            + [f"block:k={k}" for k in WINDOWS]
            + ["autospec:block=none", "autospec:block=2s"]
            + ["hybrid:k=2s,frac=0.25,adapt=4,k_min=1s"]
        )
    raise ValueError(stage)


def parse_config(config: str) -> tuple[str, dict]:
    method, _, rest = config.partition(":")
    knobs = dict(item.split("=") for item in rest.split(",") if item)
    return method, knobs


FIELDS = [
    "target", "n", "config", "draws", "mean_rounds", "se_rounds", "p90_rounds", "max_rounds",
    "mean_queries", "queries_per_nlog2n", "seconds_per_draw",
]


def measure_cell(task):
    target, n, config, draws, seed = task
    method, knobs = parse_config(config)
    if "lookahead" in knobs:
        knobs["lookahead"] = bool(int(knobs["lookahead"]))
    oracle = _oracle(target, n)
    sampler = prototypes.make_sampler(oracle, method, **knobs)
    start = time.perf_counter()
    rounds, queries = prototypes.measure(sampler, draws, seed)
    elapsed = (time.perf_counter() - start) / draws
    return {
        "target": target, "n": n, "config": config, "draws": draws,
        "mean_rounds": round(rounds.mean(), 2),
        "se_rounds": round(rounds.std(ddof=1) / math.sqrt(draws), 2),
        "p90_rounds": round(float(np.percentile(rounds, 90)), 1),
        "max_rounds": int(rounds.max()),
        "mean_queries": round(queries.mean(), 1),
        "queries_per_nlog2n": round(queries.mean() / (n * math.log2(n)), 3),
        "seconds_per_draw": round(elapsed, 3),
    }


_ORACLES: dict = {}


def _oracle(target, n):
    key = (target, n)
    if key not in _ORACLES:
        _ORACLES.clear()  # one big Curie-Weiss table at a time
        _ORACLES[key] = prototypes.make_oracle(target, n)
    return _ORACLES[key]


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def run_stage(stage, targets, sizes, draws, workers, seed, configs=None):
    path = os.path.join(RESULTS, f"tune_{stage}.csv")
    os.makedirs(RESULTS, exist_ok=True)
    done = {(r["target"], int(r["n"]), r["config"]) for r in read_rows(path)}
    configs = configs or stage_configs(stage)
    # cells grouped by (target, n) so that each worker builds an oracle once per group
    tasks = [
        (t, n, c, draws, seed)
        for n in sizes
        for t in targets
        for c in configs
        if (t, n, c) not in done
    ]
    new_file = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new_file:
            writer.writeheader()
        with Pool(workers) as pool:
            for row in pool.imap_unordered(measure_cell, tasks, chunksize=1):
                writer.writerow(row)
                f.flush()
                print(f"{row['target']:>16} {row['n']:>6} {row['config']:<44} "
                      f"rounds {row['mean_rounds']:>8} p90 {row['p90_rounds']:>7} "
                      f"q/nlogn {row['queries_per_nlog2n']:>6} [{row['seconds_per_draw']}s]",
                      flush=True)


def report(stage, sizes=None):
    """Markdown: per (target, n) the best config of each family and the full ranking."""
    rows = read_rows(os.path.join(RESULTS, f"tune_{stage}.csv"))
    if sizes:
        rows = [r for r in rows if int(r["n"]) in sizes]
    cells = sorted({(r["target"], int(r["n"])) for r in rows}, key=lambda c: (c[1], c[0]))
    lines = []
    for target, n in cells:
        group = [r for r in rows if r["target"] == target and int(r["n"]) == n]
        group.sort(key=lambda r: float(r["mean_rounds"]))
        lines.append(f"\n#### {TARGETS.get(target, target)}, n = {n}\n")
        lines.append("| config | mean rounds (se) | p90 | queries / (n log2 n) |")
        lines.append("|---|---|---|---|")
        for r in group:
            lines.append(f"| `{r['config']}` | {r['mean_rounds']} ({r['se_rounds']}) | "
                         f"{r['p90_rounds']} | {r['queries_per_nlog2n']} |")
    return "\n".join(lines)


def fallback_stats(targets, sizes, draws, configs):
    """How often the proposed root falls back to the paper's recursion."""
    lines = ["| target | n | config | windows / draw | fallbacks / draw | mean rounds |",
             "|---|---|---|---|---|---|"]
    for n in sizes:
        for target in targets:
            for config in configs:
                method, knobs = parse_config(config)
                sampler = prototypes.make_sampler(_oracle(target, n), method, **knobs)
                rounds, _ = prototypes.measure(sampler, draws, 0)
                lines.append(f"| {TARGETS.get(target, target)} | {n} | `{config}` | "
                             f"{sampler.windows_run / draws:.1f} | "
                             f"{sampler.fallbacks_run / draws:.2f} | {rounds.mean():.2f} |")
                print(lines[-1], flush=True)
    return "\n".join(lines)


def engine_check(targets, sizes, draws, configs):
    """Re-measure configs with the engine (ample pool) to confirm the prototypes' counts."""
    import rounds as engine_bench

    for n in sizes:
        for target in targets:
            for config in configs:
                method, knobs = parse_config(config)
                row = engine_bench.measure_engine(target, n, config, draws, seed=0)
                print(f"{target:>16} {n:>6} {config:<40} engine rounds {row['mean_rounds']} "
                      f"p90 {row['p90_rounds']} queries {row['mean_queries']}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="knobs", choices=["knobs", "designs", "scaling"])
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--sizes", nargs="*", type=int, default=[1024, 4096])
    parser.add_argument("--configs", nargs="*", default=None, help="override the stage's grid")
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", action="store_true", help="print the markdown tables")
    parser.add_argument("--engine-check", action="store_true")
    parser.add_argument("--fallback-stats", action="store_true",
                        help="count the proposed root's fallbacks to the recursion")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.stage, args.sizes))
    elif args.fallback_stats:
        fallback_stats(args.targets, args.sizes, args.draws, args.configs or CANDIDATES[1:2])
    elif args.engine_check:
        engine_check(args.targets, args.sizes, args.draws, args.configs or [])
    else:
        run_stage(args.stage, args.targets, args.sizes, args.draws, args.workers, args.seed,
                  args.configs)


if __name__ == "__main__":
    main()
