"""Rounds and queries of autospeculation vs sequential sampling and ASSD, as n grows.

For every target and size ``n`` this script draws exact samples with each method and reports,
per cell: mean and 90th-percentile **rounds** (batched oracle calls: parallel time), mean
**queries** (oracle evaluations), mean **conditionals** (rows the oracle computed: the work,
whatever the oracle's form) and their ratio to n log2 n, wall time per draw and compile time;
then the log-log slope of mean rounds over n = 1024..16384 and a log-log plot.  The targets of
one oracle family (Curie-Weiss at three temperatures, the Ising chain at two couplings) draw
with one compiled program per size and configuration (:func:`compiled_engine`).

Methods: ``sequential`` (n rounds and n queries exactly; not run), ``assd`` (token verification)
and ``block`` (block verification) with the windows of ``--windows`` (the table keeps the
best window per cell and the CSV keeps them all), ``autospec:`` (the default
:class:`~numpyro_autospec.config.SamplerConfig`: block-verified adaptive windows with recursion
blocks as fallback) and ``paper:`` (the paper's recursion as written, ``root_windows=False``;
``--paper``) and ``--tuned``; more engine configs with ``--extra``.

Every cell runs :func:`numpyro_autospec.engine.run` under ``jax.jit`` (``--draws-per-call``
draws share one task pool of ``--slots-per-draw`` slots per draw).

``--overhead`` measures the engine's per-round scheduler overhead instead, on the first of
``--targets``, by oracle doubling (see :func:`measure_overhead`).

Examples (the sweep of docs/benchmarks.md, "Rounds against n", runs one size at a time with
its own windows; cells already in the CSV are skipped)::

    python benchmarks/rounds.py --sizes 1024 --windows 64 256 1024 --no-paper --draws 12
    python benchmarks/rounds.py --overhead --targets cw:1.0 --sizes 1024 4096 --draws 4
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import jax
import numpy as np
from cases import RESULTS
from csv_tables import (
    append_csv,
    git_commit,
    markdown_row,
    markdown_table,
    pyplot,
    read_csv,
    save_figure,
    write_csv,
)

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.oracles import (
    AnyOrderOracle,
    CurieWeissOracle,
    HopfieldOracle,
    IsingChainOracle,
)
from numpyro_autospec.processes import AnyOrderProcess

from support.scripts import script_parser

#: the rows' commit stamps get ``+dirty`` when the package has uncommitted changes
PACKAGE = "../numpyro_autospec"

TARGETS = {
    "cw:0.5": "CW beta=0.5",
    "cw:1.0": "CW beta=1",
    "cw:1.5": "CW beta=1.5",
    "ising:1.0": "Ising J=1",
    "ising:0.2": "Ising J=0.2",
    "hopfield:16,2.0": "Hopfield R=16 beta=2",
}

#: the engine's default SamplerConfig, and the best setting of its existing knobs (README)
DEFAULT = "autospec:"
PAPER = "paper:"
TUNED = "paper:block=8s,growth=3"

FIELDS = [
    "backend", "target", "n", "method", "config", "draws", "mean_rounds", "se_rounds",
    "p90_rounds", "mean_queries", "queries_per_nlog2n", "mean_conditionals",
    "conditionals_per_nlog2n", "seconds_per_draw", "compile_seconds", "commit",
]  # fmt: skip


def parse_config(config: str) -> tuple[str, dict]:
    method, _, rest = config.partition(":")
    return method, dict(item.split("=") for item in rest.split(",") if item)


def resolve_size(value, n):
    if value is None or str(value).lower() == "none":
        return None
    value = str(value)
    if value.endswith("s"):
        return max(1, int(round(float(value[:-1]) * math.sqrt(n))))
    return int(float(value))


def project_oracle(target: str, n: int):
    """The project's JAX oracle for a target name."""
    kind, _, param = target.partition(":")
    if kind == "cw":
        return CurieWeissOracle(n, beta=float(param))
    if kind == "ising":
        return IsingChainOracle.uniform(n, coupling=float(param))
    if kind == "hopfield":
        patterns, beta = param.split(",")
        return HopfieldOracle.random(jax.random.PRNGKey(0), n, int(patterns), float(beta))
    raise ValueError(f"unknown target {target!r}")


def sampler_config(config: str, n: int):
    """Engine config for a name: ``autospec:`` is the default root (block-verified windows with
    recursion fallback), ``paper:`` / ``paper:block=8s`` the paper's root (``root_windows=False``),
    ``assd:k=256`` / ``block:k=1024`` the peers; knobs ``window``, ``floor``, ``fallback``,
    ``min_window``, ``max_window``, ``window_growth``, ``growth``."""
    method, knobs = parse_config(config)
    size = knobs.get("k", knobs.get("block"))
    sized = ("window", "floor", "fallback", "min_window", "max_window")
    extra = {name: resolve_size(knobs[name], n) for name in sized if name in knobs}
    if method == "paper":
        method, extra["root_windows"] = "autospec", False
    if "window_growth" in knobs:
        extra["window_growth"] = int(knobs["window_growth"])
    return SamplerConfig(
        method=method,
        block_size=resolve_size(size, n),
        growth=float(knobs["growth"]) if "growth" in knobs else None,  # None: per process
        **extra,
    )


def engine_capacity(draws_per_call: int, slots_per_draw: int, memory_budget: int):
    slots = None if slots_per_draw <= 0 else slots_per_draw * draws_per_call
    return Capacity(num_slots=slots, memory_budget=memory_budget)


#: the programs of :func:`compiled_engine`, the oracle an argument (its parameters are data)
_PROGRAMS: dict = {}


def compiled_engine(oracle, n, config, capacity, keys):
    """``engine.run`` on ``AnyOrderProcess(oracle, n, 2)`` compiled for ``keys``' shape, once
    per oracle structure (its pytree definition and its leaves' shapes and dtypes, what
    ``jax.jit`` keys its own cache on), ``n``, config and capacity; returns
    ``(program, compile_seconds)`` with ``program(oracle, keys)`` (``compile_seconds`` is 0 for
    a program compiled before)."""
    draw = lambda oracle, keys: run(AnyOrderProcess(oracle, n, 2), keys, config, capacity)
    start = time.perf_counter()
    if any(leaf is oracle for leaf in jax.tree.leaves(oracle)):
        # not a pytree (the overhead's DoubledOracle): a program of its own, closing over it
        compiled = jax.jit(lambda keys: draw(oracle, keys)).lower(keys).compile()
        return (lambda _oracle, keys: compiled(keys)), time.perf_counter() - start
    structure = (jax.tree.structure(oracle), tuple(map(jax.typeof, jax.tree.leaves(oracle))))
    key = (structure, n, config, capacity, keys.shape)
    if key in _PROGRAMS:
        return _PROGRAMS[key], 0.0
    _PROGRAMS[key] = jax.jit(draw).lower(oracle, keys).compile()
    return _PROGRAMS[key], time.perf_counter() - start


def measure_engine(
    target, n, config, draws, seed=0, pool=(4, 128, 1 << 30), oracle=None, keep=False
):
    """Draws with :func:`numpyro_autospec.engine.run` under ``jit``, ``pool`` the arguments of
    :func:`engine_capacity`; compile time measured on ``lower().compile()``
    (:func:`compiled_engine`: 0 where a target of the same family compiled the program);
    ``keep``: the row keeps the draws' rounds and queries and the CPU seconds too."""
    oracle, draws_per_call = oracle or project_oracle(target, n), pool[0]
    calls = math.ceil(draws / draws_per_call)
    keys = jax.random.split(jax.random.PRNGKey(seed), calls * draws_per_call)
    keys = keys.reshape(calls, draws_per_call, -1)
    cfg, capacity = sampler_config(config, n), engine_capacity(*pool)
    compiled, compile_seconds = compiled_engine(oracle, n, cfg, capacity, keys[0])
    rounds, queries, conditionals = [], [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    for call in range(calls):
        samples = jax.block_until_ready(compiled(oracle, keys[call]))
        rounds += list(np.asarray(samples.rounds))
        queries += list(np.asarray(samples.queries))
        conditionals += list(np.asarray(samples.conditionals))
    seconds = (time.perf_counter() - start) / (calls * draws_per_call)
    cpu_seconds = time.process_time() - cpu_start
    per_draw = np.asarray(rounds, float)
    mean_queries, mean_conditionals = (
        np.mean(queries, dtype=float),
        np.mean(conditionals, dtype=float),
    )
    se = per_draw.std(ddof=1) / math.sqrt(len(rounds)) if len(rounds) > 1 else 0.0
    nlog2n = n * math.log2(n)
    row = {
        "backend": "engine",
        "target": target,
        "n": n,
        "method": parse_config(config)[0],
        "config": config,
        "draws": len(rounds),
        "mean_rounds": round(per_draw.mean(), 2),
        "se_rounds": round(se, 2),
        "p90_rounds": round(float(np.percentile(per_draw, 90)), 1),
        "mean_queries": round(mean_queries, 1),
        "queries_per_nlog2n": round(mean_queries / nlog2n, 3),
        "mean_conditionals": round(mean_conditionals, 1),
        "conditionals_per_nlog2n": round(mean_conditionals / nlog2n, 3),
        "seconds_per_draw": round(seconds, 3),
        "compile_seconds": round(compile_seconds, 1),
        "commit": "",
    }
    if keep:
        row["_rounds"], row["_queries"], row["_cpu_seconds"] = rounds, queries, cpu_seconds
    return row


class DoubledOracle(AnyOrderOracle):
    """Evaluates the wrapped oracle twice (the second copy behind
    ``jax.lax.optimization_barrier``, so XLA cannot merge them) and returns their exact
    average, i.e. the same rows at twice the oracle cost: same trajectory, same rounds.  Both
    forms are doubled and the wrapped oracle's declared fast paths are kept, so the engine
    takes the same query paths."""

    def __init__(self, oracle):
        self.oracle = oracle
        self.num_categories = oracle.num_categories
        self.num_positions = oracle.num_positions
        self.scores_blocks = oracle.scores_blocks
        self.depends_on_order = oracle.depends_on_order

    def log_marginals(self, x, mask):
        first = self.oracle.log_marginals(x, mask)
        x2, mask2 = jax.lax.optimization_barrier((x, mask))
        return (first + self.oracle.log_marginals(x2, mask2)) * 0.5

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        first = self.oracle.log_conditionals(x, ranks, sites, prefix_lengths)
        again = jax.lax.optimization_barrier((x, ranks, sites, prefix_lengths))
        return (first + self.oracle.log_conditionals(*again)) * 0.5


def measure_overhead(target, n, config, draws, pool=(1, 128, 1 << 30)):
    """Per-round scheduler overhead by *oracle doubling*.

    The same engine program is run on the same keys twice: with the target's oracle (wall time
    ``T1``) and with :class:`DoubledOracle` (``T2``: every oracle batch costs twice as much, the
    rows, the trajectory, the rounds ``R`` and the queries are identical -- checked).  Hence
    ``oracle time = T2 - T1`` and ``scheduler overhead = T1 - (T2 - T1) = 2 T1 - T2``, per round
    ``(2 T1 - T2) / R``.  Both are measured inside the compiled program, with the engine's real
    (padded) batch shapes.  The same split is reported in the process's CPU time (columns
    ``cpu_*``: all threads), which other processes' load on the machine disturbs less than
    wall time.
    """
    oracle = project_oracle(target, n)
    one, two = (
        measure_engine(target, n, config, draws, 0, pool, o, keep=True)
        for o in (oracle, DoubledOracle(oracle))
    )
    same = one["_rounds"] == two["_rounds"] and one["_queries"] == two["_queries"]
    rounds = float(np.sum(one["_rounds"]))
    t1 = one["seconds_per_draw"] * one["draws"]
    t2 = two["seconds_per_draw"] * two["draws"]
    c1, c2 = one["_cpu_seconds"], two["_cpu_seconds"]
    return {
        "target": target,
        "n": n,
        "config": config,
        "draws": draws,
        "draws_per_call": pool[0],
        "mean_rounds": one["mean_rounds"],
        "mean_queries": one["mean_queries"],
        "same_trajectory": same,
        "ms_per_round": round(1e3 * t1 / rounds, 2),
        "oracle_ms_per_round": round(1e3 * (t2 - t1) / rounds, 2),
        "overhead_ms_per_round": round(1e3 * (2 * t1 - t2) / rounds, 2),
        "oracle_us_per_query": round(1e6 * (t2 - t1) / float(np.sum(one["_queries"])), 2),
        "cpu_ms_per_round": round(1e3 * c1 / rounds, 2),
        "cpu_oracle_ms_per_round": round(1e3 * (c2 - c1) / rounds, 2),
        "cpu_overhead_ms_per_round": round(1e3 * (2 * c1 - c2) / rounds, 2),
        "compile_seconds": one["compile_seconds"],
        "commit": git_commit(dirty_of=PACKAGE),
    }


def loglog_slope(sizes, values, low=0, high=math.inf):
    """Least-squares slope of ``log(values)`` against ``log(sizes)`` over the sizes in
    ``[low, high]`` (0.5 for :math:`\\sqrt n`, 1 for sequential; NaN: fewer than two points)."""
    sizes, values = np.asarray(sizes, float), np.asarray(values, float)
    keep = (sizes >= low) & (sizes <= high) & (values > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(sizes[keep]), np.log(values[keep]), 1)[0])


#: the configurations the tables name (:func:`family`)
NAMED = {
    DEFAULT: "autospec (default)",
    "autospec": "autospec (default)",
    PAPER: "paper as written",
    TUNED: "paper, 8 sqrt(n) blocks, rho=3",
}
#: the families of :func:`family` other than ``--extra`` configurations, in table order
FAMILIES = ["assd (best k)", "block (best k)", *dict.fromkeys(NAMED.values())]


def family(row):
    """Group rows by what the table shows: the best window of assd/block, each autospec."""
    if row["method"] in ("assd", "block") and "prequery" not in row["config"]:
        return f"{row['method']} (best k)"
    return NAMED.get(row["config"], row["config"])


def best_rows(rows):
    """Per (target, n, family): the row with the fewest mean rounds."""
    best = {}
    for row in rows:
        key = (row["target"], int(row["n"]), family(row))
        if key not in best or float(row["mean_rounds"]) < float(best[key]["mean_rounds"]):
            best[key] = row
    return best


def table(rows) -> str:
    best = best_rows(rows)
    families = sorted({k[2] for k in best}, key=_family_order)
    header = (
        "target | n | method | config | mean rounds | p90 | queries | conditionals | "
        "c/(n log2 n) | s/draw | compile s"
    )
    lines = [markdown_table(header)]
    cells = sorted({(k[0], k[1]) for k in best}, key=lambda c: (c[1], _target_order(c[0])))
    for target, n in cells:
        name = TARGETS.get(target, target)
        lines.append(
            f"| {name} | {n} | sequential | | {n} | {n} | {n} | {n} | {1 / math.log2(n):.3f} | | |"
        )
        for row in filter(None, (best.get((target, n, fam)) for fam in families)):
            cells = [name, n, family(row), f"`{row['config']}`"]
            cells += [f"{row['mean_rounds']} ± {row['se_rounds']}", row["p90_rounds"]]
            cells += [f"{float(row['mean_queries']):.0f}", row.get("mean_conditionals", "")]
            cells += [row.get("conditionals_per_nlog2n", ""), row["seconds_per_draw"]]
            lines.append(markdown_row(cells + [row["compile_seconds"]]))
    return "\n".join(lines)


def compact_table(rows, n) -> str:
    """One line per target at size ``n``: mean rounds (p90) and conditionals (queries in rows
    written before that column) / (n log2 n) of each family (best window for assd/block)."""
    best = best_rows([r for r in rows if int(r["n"]) == n])
    fams = sorted({k[2] for k in best}, key=_family_order)
    body = []
    for target in sorted({k[0] for k in best}, key=_target_order):
        cells = [TARGETS.get(target, target), f"{n} ({n}) / {1 / math.log2(n):.2f}"]
        for fam in fams:
            row = best.get((target, n, fam))
            if row is None:
                cells.append("")
                continue
            k = parse_config(row["config"])[1].get("k", "")
            tag = f" k={k}" if fam.endswith("(best k)") else ""
            work = row.get("conditionals_per_nlog2n") or row["queries_per_nlog2n"]
            cells.append(
                f"{float(row['mean_rounds']):.1f} ({float(row['p90_rounds']):.0f}) "
                f"/ {float(work):.2f}{tag}"
            )
        body.append(cells)
    return markdown_table(" | ".join([f"target (n = {n})", "sequential", *fams]), body)


def slopes(rows) -> str:
    best = best_rows(rows)
    body = []
    for target in sorted({k[0] for k in best}, key=_target_order):
        for fam in sorted({k[2] for k in best if k[0] == target}, key=_family_order):
            pts = sorted(
                (k[1], float(v["mean_rounds"]))
                for k, v in best.items()
                if k[0] == target and k[2] == fam
            )
            s = loglog_slope([p[0] for p in pts], [p[1] for p in pts], 1024, 16384)
            if not math.isnan(s):
                body.append([TARGETS.get(target, target), fam, f"{s:.2f}"])
    return markdown_table("target | method | slope of mean rounds, n = 1024..16384", body)


def _family_order(name):
    return (FAMILIES.index(name) if name in FAMILIES else len(FAMILIES), name)


def _target_order(target):
    keys = list(TARGETS)
    return keys.index(target) if target in keys else len(keys)


def plot(rows, path):
    plt = pyplot()
    best = best_rows(rows)
    targets = sorted({k[0] for k in best}, key=_target_order)
    # a curve per named family (the peers, the default, the paper's root) measured at two
    # sizes or more; the --extra configurations stay in the tables
    fams = sorted(
        {k[2] for k in best if k[2] in FAMILIES and len({j[1] for j in best if j[2] == k[2]}) >= 2},
        key=_family_order,
    )
    fig, axes = plt.subplots(2, len(targets), figsize=(3.6 * len(targets), 6.4), squeeze=False)
    for col, target in enumerate(targets):
        sizes = sorted({k[1] for k in best if k[0] == target})
        top, bottom = axes[0, col], axes[1, col]  # rounds, conditionals
        top.plot(sizes, sizes, "k:", label="sequential")
        bottom.plot(sizes, [3 * s * math.log2(s) for s in sizes], "k:", label="3 n log2 n")
        for i, fam in enumerate(fams):
            pts = sorted((k[1], v) for k, v in best.items() if k[0] == target and k[2] == fam)
            if not pts:
                continue
            xs, at, c = [p[0] for p in pts], [p[1] for p in pts], f"C{i}"
            top.plot(xs, [float(r["mean_rounds"]) for r in at], "-o", color=c, ms=3, label=fam)
            top.plot(xs, [float(r["p90_rounds"]) for r in at], "--", color=c, lw=0.8)
            work = [float(r.get("mean_conditionals") or r["mean_queries"]) for r in at]
            bottom.plot(xs, work, "-o", color=c, ms=3, label=fam)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set(yscale="log", xlabel="n")
            ax.grid(True, which="both", lw=0.3)
        top.set_title(TARGETS.get(target, target), fontsize=9)
    axes[0, 0].set_ylabel("rounds (mean -, p90 --)")
    axes[1, 0].set_ylabel("conditionals computed (mean)")
    axes[0, 0].legend(fontsize=6)
    save_figure(fig, path, dpi=130)


def main(args):
    os.makedirs(RESULTS, exist_ok=True)
    if args.overhead:
        path = args.csv or os.path.join(RESULTS, "overhead.csv")
        out = []
        for n, config in itertools.product(args.sizes, args.overhead_configs):
            out.append(measure_overhead(args.targets[0], n, config, args.draws))
            print(out[-1], flush=True)
        # earlier rows are kept; columns added since they were written are left empty
        rows = read_csv(path) + out
        fields = list(out[0]) + [k for k in (rows[0] if rows else {}) if k not in out[0]]
        write_csv(path, rows, fields)
        return out

    path = args.csv or os.path.join(RESULTS, "rounds_sweep.csv")
    figure = args.figure or os.path.splitext(path)[0] + ".png"
    if args.report:
        rows = [
            r for r in read_csv(path) if int(r["n"]) in args.sizes and r["target"] in args.targets
        ]
        for n in args.sizes:
            print(compact_table(rows, n) + "\n")
        print(slopes(rows))
        plot(rows, figure)
        print(f"\nfigure: {figure}")
        return rows
    existing = read_csv(path)
    if existing and list(existing[0]) != FIELDS:  # written before columns were added
        write_csv(path, existing, FIELDS)
    done = {(r["target"], int(r["n"]), r["config"]) for r in existing}
    configs = [f"{method}:k={k}" for method in ("assd", "block") for k in args.windows]
    configs += [DEFAULT] + ([PAPER, args.tuned] if args.paper else []) + args.extra
    commit = git_commit(dirty_of=PACKAGE)
    pool = (args.draws_per_call, args.slots_per_draw, args.memory_budget)
    for n, target, config in itertools.product(args.sizes, args.targets, configs):
        if (target, n, config) in done and not args.force:
            continue
        method, knobs = parse_config(config)
        if method in ("assd", "block") and resolve_size(knobs["k"], n) > n:
            continue  # the same as k = n
        row = measure_engine(target, n, config, args.draws, args.seed, pool) | {"commit": commit}
        append_csv(path, row, FIELDS)
        print(
            f"{row['target']:>16} {row['n']:>6} {row['config']:<44} [{row['backend']}] rounds "
            f"{row['mean_rounds']:>8} p90 {row['p90_rounds']:>7} queries {row['mean_queries']:>10} "
            f"{row['seconds_per_draw']:>7}s/draw compile {row['compile_seconds']}s",
            flush=True,
        )
    every_size = [r for r in read_csv(path) if r["target"] in args.targets]
    rows = [r for r in every_size if int(r["n"]) in args.sizes]
    print(table(rows) + "\n")
    print(slopes(every_size))
    plot(every_size, figure)  # every size in the CSV: a run of one size redraws the whole plot
    print(f"\nCSV: {path}\nfigure: {figure}")
    return rows


def parse_args(argv=None):
    parser = script_parser(__doc__)
    option = parser.add_argument
    option("--targets", nargs="*", default=list(TARGETS), help="any-order targets")
    option("--sizes", nargs="*", type=int, default=[64, 256, 1024, 4096, 16384], help="sizes n")
    windows = "assd/block windows k (a suffix s means k * sqrt(n))"
    option("--windows", nargs="*", default=["16", "64", "256"], help=windows)
    option(
        "--tuned", default=TUNED, help="the paper's recursion with tuned knobs (run with --paper)"
    )
    paper = "also run the paper's recursion as written (slow at large n)"
    option("--paper", action=argparse.BooleanOptionalAction, default=True, help=paper)
    extra = "more engine configs, e.g. autospec:window=2s,floor=0"
    option("--extra", nargs="*", default=[], help=extra)
    option("--draws", type=int, default=20, help="draws per cell")
    option("--seed", type=int, default=0, help="PRNG seed")
    option("--draws-per-call", type=int, default=4, help="draws sharing one engine pool")
    slots = "pool slots per draw of a call (<= 0: the engine's default)"
    option("--slots-per-draw", type=int, default=128, help=slots)
    option("--memory-budget", type=int, default=1 << 30, help="engine memory budget in bytes")
    path = "CSV path (None: benchmarks/results/rounds_sweep.csv, or overhead.csv with --overhead)"
    option("--csv", default=None, help=path)
    option("--figure", default=None, help="plot path (None: next to the CSV)")
    option("--force", action="store_true", help="re-measure cells in the CSV")
    report = "print compact tables and slopes and draw the plot from the CSV, measure nothing"
    option("--report", action="store_true", help=report)
    option("--overhead", action="store_true")
    configs = ["assd:k=256", "autospec:"]
    option("--overhead-configs", nargs="*", default=configs, help="configs measured by --overhead")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
