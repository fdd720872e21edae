"""Throughput against the number of devices a round's oracle batch is split over
(``Capacity(mesh=...)``, docs/scaling.md).

Each device count runs in its own subprocess with ``--xla_force_host_platform_device_count``
set to it (on a machine with accelerators: ``--platform gpu``, the first ``D`` devices), draws
``--draws`` exact samples of a random masked MLP oracle (``targets.RandomMLPOracle``, whose
batched evaluation dominates a round) in one jitted ``engine.run``, and reports draws per
second, oracle evaluations (``queries``) per second and conditionals (rows) per second, from
the fastest of ``--repeats`` calls after the compiling one (on a shared machine the fastest
call is the one least disturbed by other work; the median is reported too).  The row
``none`` is the same run without a mesh.  Every row must give the same draws, rounds and
queries (a digest of them is compared; the script stops if one differs).

    .venv/bin/python benchmarks/sharding.py                       # table + CSV + plot
    .venv/bin/python benchmarks/sharding.py --devices 1 2 4 8 --num-positions 256

On a CPU, forced host devices are threads of one process sharing the same cores: the figure
shows that the partitioned program runs (and what its collectives cost), not a speed-up, which
needs devices with their own compute.  Seconds are machine- and load-dependent: compare the
ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import jax
import numpy as np
from cases import RESULTS, child_result
from csv_tables import markdown_table, pyplot, save_figure, write_csv
from targets import RandomMLPOracle

from numpyro_autospec.engine import Capacity, run
from numpyro_autospec.processes import AnyOrderProcess

from support.scripts import script_parser


def measure(args: argparse.Namespace, devices: int | None) -> dict:
    """One device count (``None``: no mesh), in this process."""
    n = args.num_positions
    process = AnyOrderProcess(RandomMLPOracle(n, 2, hidden=args.hidden), n, 2)
    mesh = None
    if devices is not None:
        mesh = jax.make_mesh((devices,), ("batch",), devices=jax.devices()[:devices])
    capacity = Capacity(mesh=mesh)
    sampler = jax.jit(lambda key: run(process, jax.random.split(key, args.draws), None, capacity))
    start = time.perf_counter()
    samples = jax.block_until_ready(sampler(jax.random.PRNGKey(0)))
    first = time.perf_counter() - start
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        samples = jax.block_until_ready(sampler(jax.random.PRNGKey(0)))
        seconds.append(time.perf_counter() - start)
    per_call = float(np.min(seconds))
    digest = hashlib.sha256()
    for leaf in (samples.value, samples.rounds, samples.queries, samples.conditionals):
        digest.update(np.asarray(leaf).tobytes())
    return {
        "devices": "none" if devices is None else devices,
        "platform": jax.devices()[0].platform,
        "draws": args.draws,
        "compile_s": round(first - per_call, 2),
        "seconds": per_call,
        "median_seconds": float(np.median(seconds)),
        "draws_per_s": args.draws / per_call,
        "evaluations_per_s": float(np.sum(samples.queries)) / per_call,
        "conditionals_per_s": float(np.sum(samples.conditionals)) / per_call,
        "rounds": float(np.mean(samples.rounds)),
        "queries": float(np.mean(samples.queries)),
        "digest": digest.hexdigest()[:16],
    }


def table(rows: list[dict]) -> str:
    header = (
        "devices | s per call (fastest / median) | draws/s | oracle evaluations/s "
        "| conditionals/s | mean rounds | mean queries | compile s | draws digest"
    )
    cells = (
        "{devices} | {seconds:.3f} / {median_seconds:.3f} | {draws_per_s:.1f} "
        "| {evaluations_per_s:.0f} | {conditionals_per_s:.0f} | {rounds:.1f} | {queries:.1f} "
        "| {compile_s:.1f} | {digest}"
    )
    return markdown_table(header, rows, cells)


def plot(rows: list[dict], path: str, title: str) -> None:
    plt = pyplot()
    sharded = [r for r in rows if r["devices"] != "none"]
    baseline = [r for r in rows if r["devices"] == "none"]
    counts = [int(r["devices"]) for r in sharded]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4))
    for ax, field, label in (
        (axes[0], "draws_per_s", "exact draws per second"),
        (axes[1], "evaluations_per_s", "oracle evaluations per second"),
    ):
        ax.plot(counts, [r[field] for r in sharded], "o-", label="batch split over the mesh")
        if baseline:
            ax.axhline(baseline[0][field], color="gray", ls="--", label="no mesh")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set(xlabel="devices in the mesh", ylabel=label, ylim=(0, None))
        ax.legend()
    fig.suptitle(title)
    save_figure(fig, path)


def main(args: argparse.Namespace) -> None:
    if args.child is not None:
        devices = None if args.child == "none" else int(args.child)
        print(json.dumps(measure(args, devices)))
        return
    rows = []
    for devices in ["none"] + [str(d) for d in args.devices]:
        count = 1 if devices == "none" else int(devices)
        environment = dict(os.environ)
        if args.platform == "cpu":
            environment["JAX_PLATFORMS"] = "cpu"
            environment["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
        command = [sys.executable, __file__, "--child", devices]
        for name in ("draws", "repeats", "num_positions", "hidden"):
            command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        found = child_result(command, f"devices {devices}", environment)
        if found is None:
            continue
        rows.append(found)
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    if not rows:
        return
    print()
    print(table(rows))
    digests = {r["digest"] for r in rows}
    if len(digests) != 1:
        raise SystemExit(f"the draws differ between device counts: {digests}")
    print("same draws, rounds and queries for every device count")
    stem = os.path.join(args.out, f"sharding_{rows[0]['platform']}")
    write_csv(stem + ".csv", rows)
    title = (
        f"Random MLP oracle, n = {args.num_positions}, hidden {args.hidden}, "
        f"{args.draws} draws per call ({rows[0]['platform']})"
    )
    plot(rows, stem + ".png", title)


if __name__ == "__main__":
    parser = script_parser(__doc__)
    option = parser.add_argument
    devices = "device counts, each in its own process"
    option("--devices", nargs="+", type=int, default=[1, 2, 4], help=devices)
    platform = "cpu: forced host devices; otherwise the first D devices"
    option("--platform", default="cpu", choices=["cpu", "gpu", "tpu"], help=platform)
    option("--draws", type=int, default=16, help="draws per call (one pool)")
    option("--repeats", type=int, default=15, help="timed calls after the first")
    option("--num-positions", type=int, default=128, help="n, sites of the oracle")
    option("--hidden", type=int, default=1024, help="hidden units of the MLP")
    option("--out", default=RESULTS, help="CSV and plot")
    option("--child", default=None, help=argparse.SUPPRESS)
    main(parser.parse_args())
