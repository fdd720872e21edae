"""Seconds per exact draw: autospeculation (``engine.run``, default config) against sequential
sampling (``sequential_run``) with the same oracle, both jitted, measured in one run.

Each case runs in its own subprocess (its peak RSS is that case's alone) and reports:
seconds per draw for one draw per call (mean, median and slowest over ``--repeats`` keys: an
autospeculation draw's cost is heavy-tailed, a rare draw whose residual loops run long can
cost hundreds of typical ones, so the mean is the expected cost and the median the typical
one), draws per second when ``--draws`` draws share one call (the engine's pool; the
sequential sampler vmaps), rounds, oracle evaluations (``queries``) and conditionals per
draw of the timed one-draw calls, and peak RSS.  Sequential sampling uses its best
path: one single-step query per step, rows only (``query(x, k, 1)``; the block form with one
row where the oracle scores blocks).

    .venv/bin/python benchmarks/seconds.py                      # every case, table + CSV + plot
    .venv/bin/python benchmarks/seconds.py --cases cw-4096 mlp-256
    .venv/bin/python benchmarks/seconds.py --memory --cases cw-16384 potts-1024-q512
    .venv/bin/python benchmarks/seconds.py --cases cw-4096 --configs autospec: autospec:floor=4

``--configs`` times several engine configurations (``benchmarks/rounds.py``'s notation) against
one sequential measurement per case, in the same process: one row per case and configuration;
the knob ``lanes=k`` runs the engine with ``Capacity(max_transitions=k)`` (slots advanced per
pass of the transitions).

``--memory`` measures instead the memory of *one* autospeculation draw (``engine.run`` on one
key, default config), each case in a fresh process that does nothing else: peak RSS after
building the process (the baseline: Python, JAX, the oracle), after compiling, and after the
draw, with the scratch memory XLA planned for the program (``memory_analysis``).  The timing
runs above report a larger peak: both samplers, and a pool of ``--draws`` draws.

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import jax
import numpy as np
from cases import RESULTS, child_result, make_process
from csv_tables import markdown_table, pyplot, save_figure, write_csv
from rounds import parse_config, sampler_config

from numpyro_autospec.engine import Capacity, run, sequential_run

from support.scripts import script_parser

CASES = (
    "cw-1024", "cw-4096", "cw-16384", "potts-1024-q512", "ising-1024", "mlp-256",
    "digits-1024", "digits-4096", "mixture-1024", "mixture-4096",
    "mixture-1024-s0.01", "mixture-4096-s0.01", "digits-1024-posterior", "digits-4096-posterior",
    "mixture-1024-posterior", "mixture-4096-posterior",
)  # fmt: skip


def timed(function, repeats: int) -> tuple[float, np.ndarray, list]:
    """(seconds of the first call, compile included; seconds of each later call; their
    outputs).  The later calls use ``repeats`` keys (``PRNGKey(1..repeats)``; a draw's cost
    varies with its key), each timed twice and its faster call kept: the draw is the same both
    times, so the slower one measures only the machine's load."""
    start = time.perf_counter()
    jax.block_until_ready(function(jax.random.PRNGKey(0)))
    first = time.perf_counter() - start
    seconds, outputs = [], []
    for seed in range(1, repeats + 1):
        calls = []
        for _ in range(2):
            start = time.perf_counter()
            out = jax.block_until_ready(function(jax.random.PRNGKey(seed)))
            calls.append(time.perf_counter() - start)
        seconds.append(min(calls))
        outputs.append(out)
    return first, np.asarray(seconds), outputs


def per_draw(outputs: list, field: str) -> np.ndarray:
    """``field`` (``rounds``, ``queries``, ``conditionals``) of every draw of ``outputs``, the
    samples of one or more calls; a sampler that does not count conditionals computes one
    per query."""
    if field == "conditionals" and outputs[0].conditionals is None:
        field = "queries"
    return np.concatenate([np.ravel(np.asarray(getattr(out, field))) for out in outputs])


def standard_error(values) -> float:
    """Standard error of the mean of ``values`` (0 for a single value): 16 keys give the mean
    of a heavy-tailed cost to about a quarter of its spread, so the table prints it too."""
    values = np.asarray(values, float)
    return float(np.std(values, ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def measure_sampler(sampler, draws: int, repeats: int, name: str) -> dict:
    """The ``name_*`` columns of one sampler ``sampler(keys) -> Samples``: seconds per draw
    (mean, median and slowest over the ``repeats`` one-draw calls, whose draws the rounds and
    queries columns also describe) and draws per second for calls of ``draws`` draws."""
    one = jax.jit(lambda key: sampler(key[None]))
    many = jax.jit(lambda key: sampler(jax.random.split(key, draws)))
    first, seconds, outputs = timed(one, repeats)
    _, seconds_many, _ = timed(many, max(1, repeats // 2))
    rounds, queries = per_draw(outputs, "rounds"), per_draw(outputs, "queries")
    conditionals = per_draw(outputs, "conditionals")
    return {
        f"{name}_compile_s": round(first - float(np.median(seconds)), 2),
        f"{name}_s_per_draw": float(np.mean(seconds)),
        f"{name}_s_se": standard_error(seconds),
        f"{name}_s_median": float(np.median(seconds)),
        f"{name}_s_max": float(np.max(seconds)),
        f"{name}_draws_per_s": draws / float(np.mean(seconds_many)),
        f"{name}_rounds": float(np.mean(rounds)),
        f"{name}_rounds_se": standard_error(rounds),
        f"{name}_rounds_max": int(np.max(rounds)),
        f"{name}_queries": float(np.mean(queries)),
        f"{name}_conditionals": float(np.mean(conditionals)),
        f"{name}_conditionals_max": int(np.max(conditionals)),
    }


def measure(case: str, draws: int, repeats: int, configs: list[str]) -> list[dict]:
    """One case, in this process: the sequential sampler once, then ``engine.run`` under each
    of ``configs``; one row per configuration, each with the same sequential columns."""
    process = make_process(case)
    # a chain never speculates: with the posterior covariance's speculation it would still
    # compute the denoiser's Jacobian at every step, so it runs the frozen drift's process
    # (the same chain, the same law; its best path)
    chain = make_process(case.removesuffix("-posterior"))
    sequential = measure_sampler(lambda k: sequential_run(chain, k), draws, repeats, "sequential")
    rows = []
    for config in configs:
        engine_config = sampler_config(config, process.num_steps)
        # the knob ``lanes=k``: Capacity(max_transitions=k), slots advanced per pass
        lanes = parse_config(config)[1].get("lanes")
        capacity = Capacity(max_transitions=None if lanes is None else int(lanes))
        row = {"case": case, "config": config, "draws": draws, "repeats": repeats} | sequential
        draw = lambda keys, c=engine_config, b=capacity: run(process, keys, c, b)
        row |= measure_sampler(draw, draws, repeats, "autospec")
        row["peak_rss_mb"] = peak_mb()
        row["speedup_one"] = row["sequential_s_per_draw"] / row["autospec_s_per_draw"]
        row["speedup_median"] = row["sequential_s_median"] / row["autospec_s_median"]
        row["speedup_many"] = row["autospec_draws_per_s"] / row["sequential_draws_per_s"]
        rows.append(row)
    return rows


def peak_mb() -> float:
    """This process's peak RSS in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_memory(case: str) -> dict:
    """Peak RSS of one autospeculation draw of ``case``, in this (fresh) process."""
    process = make_process(case)
    baseline = peak_mb()
    compiled = jax.jit(lambda key: run(process, key[None])).lower(jax.random.PRNGKey(0)).compile()
    after_compile = peak_mb()
    samples = jax.block_until_ready(compiled(jax.random.PRNGKey(0)))
    analysis = compiled.memory_analysis()
    scratch = float("nan") if analysis is None else analysis.temp_size_in_bytes / 2**20
    return {
        "case": case,
        "baseline_rss_mb": baseline,
        "compiled_rss_mb": after_compile,
        "peak_rss_mb": peak_mb(),
        "xla_temp_mb": scratch,
        "rounds": int(samples.rounds[0]),
    }


def memory_table(rows: list[dict]) -> str:
    header = "case | baseline RSS MB | after compile MB | peak RSS, one draw MB | XLA scratch MB"
    header += " | rounds"
    cells = (
        "{case} | {baseline_rss_mb:.0f} | {compiled_rss_mb:.0f} | {peak_rss_mb:.0f} "
        "| {xla_temp_mb:.0f} | {rounds}"
    )
    return markdown_table(header, rows, cells)


def table(rows: list[dict]) -> str:
    header = (
        "case | config | sequential s/draw | autospec s/draw (mean ± se / median / slowest) "
        "| speed-up (mean / median draw) | speed-up, {d} draws "
        "| rounds (seq / auto mean ± se / max) "
        "| queries (seq / auto) | conditionals auto (mean / max) | peak RSS MB"
    ).format(d=rows[0]["draws"] if rows else "")
    cells = (
        "{case} | {config} | {sequential_s_per_draw:.4f} | {autospec_s_per_draw:.4f} "
        "± {autospec_s_se:.4f} / {autospec_s_median:.4f} / {autospec_s_max:.4f} "
        "| {speedup_one:.2f}x / {speedup_median:.2f}x | {speedup_many:.2f}x "
        "| {sequential_rounds:.0f} / {autospec_rounds:.1f} ± {autospec_rounds_se:.1f} "
        "/ {autospec_rounds_max} | {sequential_queries:.0f} / {autospec_queries:.1f} "
        "| {autospec_conditionals:.0f} / {autospec_conditionals_max} | {peak_rss_mb:.0f}"
    )
    return markdown_table(header, rows, cells)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    several = len({r["config"] for r in rows}) > 1
    cases = [r["case"] + (f" {r['config']}" if several else "") for r in rows]
    position = np.arange(len(rows))
    width = 0.27
    bars = (
        ("speedup_one", "one draw per call, mean seconds"),
        ("speedup_median", "one draw per call, median draw"),
        ("speedup_many", "many draws per call"),
    )
    for offset, (column, label) in zip((-width, 0.0, width), bars, strict=True):
        ax.bar(position + offset, [r[column] for r in rows], width, label=label)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(position, cases, rotation=30, ha="right")
    ax.set(ylabel="sequential seconds / autospec seconds", yscale="log")
    ticks = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}x")
    ax.yaxis.set_major_formatter(ticks)
    ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2.0, 3.0, 5.0)))
    ax.yaxis.set_minor_formatter(ticks)
    ax.set_title("Autospeculation against sequential sampling, same oracle (CPU)")
    ax.legend()
    save_figure(fig, path)


def main(args: argparse.Namespace) -> None:
    if args.child:
        memory = lambda: [measure_memory(args.child)]
        timing = lambda: measure(args.child, args.draws, args.repeats, args.configs)
        print(json.dumps(memory() if args.memory else timing()))
        return
    format_table = memory_table if args.memory else table
    rows = []
    for case in args.cases:
        command = [sys.executable, __file__, "--child", case]
        command += ["--draws", str(args.draws), "--repeats", str(args.repeats)]
        command += ["--memory"] if args.memory else ["--configs", *args.configs]
        found = child_result(command, case)
        if found is None:
            continue
        rows += found
        for line in format_table(found).splitlines()[2:]:
            print(line, flush=True)
    if rows:
        print("\n" + format_table(rows))
        write_csv(os.path.join(args.out, "memory.csv" if args.memory else "seconds.csv"), rows)
        if not args.memory:
            plot(rows, os.path.join(args.out, "seconds.png"))


if __name__ == "__main__":
    parser = script_parser(__doc__)
    option = parser.add_argument
    cases = "cases, each run in its own process"
    option("--cases", nargs="+", default=list(CASES), choices=CASES, help=cases)
    configs = (
        "engine configs in benchmarks/rounds.py's notation ('autospec:' is the default, "
        "'autospec:window_growth=2,floor=4' changes two knobs, 'autospec:lanes=4' advances "
        "four slots per pass), each timed against the same sequential run"
    )
    option("--configs", nargs="+", default=["autospec:"], help=configs)
    option("--draws", type=int, default=8, help="draws per call (many-draw rate)")
    repeats = (
        "keys timed after the first call (each twice, the faster kept); seconds per "
        "draw is their mean (calls of --draws draws: half as many keys)"
    )
    option("--repeats", type=int, default=16, help=repeats)
    memory = "measure the peak RSS of one autospeculation draw per case instead (memory.csv)"
    option("--memory", action="store_true", help=memory)
    option("--out", default=RESULTS, help="CSV and plot")
    option("--child", default=None, help=argparse.SUPPRESS)
    main(parser.parse_args())
