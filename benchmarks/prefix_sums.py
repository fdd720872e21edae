"""Milliseconds of the engine's cumulative sums: ``jnp.cumsum`` against
:func:`numpyro_autospec.prefix_sums.prefix_sum` (a parallel prefix scan on the CPU) at the
shapes the samplers use them.

Each row is one call site, batched as a round batches it (``jax.vmap`` over ``--lanes``
lanes), timed as the median of ``--repeats`` calls of one compiled function after a first,
compiling call (``chain_passes.milliseconds``):

* ``curie-weiss``: the block form's spin sums along the order, ``int32[n]``;
* ``hopfield``: the block form's pattern overlaps along the order, ``float32[n, R]``;
* ``diffusion``: a speculation's path increments, ``float32[N, d]`` (the digits denoiser has
  ``d = 64``, the mixture ``d = 2``);
* ``verification``: block verification's log-ratio sums over a window, ``float32[w]``;
* ``potts``: the Potts-like benchmark oracle's one-hot counts, ``float32[n, q]``.

The two sums agree to float32 rounding (the largest difference is printed).

    .venv/bin/python benchmarks/prefix_sums.py
    .venv/bin/python benchmarks/prefix_sums.py --lanes 1 16 --repeats 50

Writes ``results/prefix_sums{_label}.{csv,png}``.  Seconds are machine- and load-dependent:
compare the ratios of one run (docs/benchmarks.md, "Prefix sums on the CPU, and the
Curie-Weiss chain's step").
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from chain_passes import milliseconds
from csv_tables import write_csv

from numpyro_autospec.prefix_sums import prefix_sum
from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
#: (call site, shape, dtype)
SHAPES = (
    ("curie-weiss", (1024,), jnp.int32),
    ("curie-weiss", (4096,), jnp.int32),
    ("curie-weiss", (16384,), jnp.int32),
    ("hopfield", (4096, 16), jnp.float32),
    ("diffusion", (1024, 64), jnp.float32),
    ("diffusion", (4096, 64), jnp.float32),
    ("diffusion", (4096, 2), jnp.float32),
    ("verification", (1024,), jnp.float32),
    ("potts", (1024, 512), jnp.float32),
)
HEADER = "| call site | shape | lanes | jnp.cumsum ms | prefix_sum ms | ratio | max difference |"


def measure(site: str, shape: tuple[int, ...], dtype, lanes: int, repeats: int) -> dict:
    """Both sums of one call site's shape over ``lanes`` lanes, as a row of the table."""
    key = jax.random.PRNGKey(len(shape) * 7919 + shape[0] + lanes)
    if jnp.issubdtype(dtype, jnp.integer):
        values = 2 * jax.random.bernoulli(key, 0.5, (lanes, *shape)).astype(dtype) - 1
    else:
        values = jax.random.normal(key, (lanes, *shape), dtype)
    library = jax.jit(jax.vmap(lambda v: jnp.cumsum(v, axis=0)))
    scan = jax.jit(jax.vmap(lambda v: prefix_sum(v, axis=0)))
    library_ms, library_rows = milliseconds(library, (values,), repeats)
    scan_ms, scan_rows = milliseconds(scan, (values,), repeats)
    row = dict(
        site=site,
        shape="x".join(map(str, shape)),
        lanes=lanes,
        cumsum_ms=library_ms,
        prefix_sum_ms=scan_ms,
        ratio=library_ms / scan_ms,
        max_difference=float(np.max(np.abs(library_rows - scan_rows))),
    )
    print(
        f"| {site} | {row['shape']} | {lanes} | {library_ms:.3f} | {scan_ms:.3f} | "
        f"{row['ratio']:.2f}x | {row['max_difference']:.2g} |",
        flush=True,
    )
    return row


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    lanes = sorted({row["lanes"] for row in rows})
    labels = list(dict.fromkeys(f"{row['site']}\n{row['shape']}" for row in rows))
    width = 0.8 / len(lanes)
    for position, count in enumerate(lanes):
        ratios = [row["ratio"] for row in rows if row["lanes"] == count]
        offsets = np.arange(len(labels)) + (position - (len(lanes) - 1) / 2) * width
        ax.bar(offsets, ratios, width, label=f"{count} lanes")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(labels)), labels, fontsize=7)
    ax.set_ylabel("jnp.cumsum ms / prefix_sum ms")
    ax.set_title(f"Cumulative sums at the engine's shapes, {jax.devices()[0].device_kind}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8], help="batch sizes")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per median")
    parser.add_argument("--label", default="", help="suffix of the output files")
    arguments = parser.parse_args()
    print(HEADER)
    print("|---" * 7 + "|")
    rows = [
        measure(site, shape, dtype, lanes, arguments.repeats)
        for lanes in arguments.lanes
        for site, shape, dtype in SHAPES
    ]
    suffix = f"_{arguments.label}" if arguments.label else ""
    stem = os.path.join(HERE, "results", f"prefix_sums{suffix}")
    print(write_csv(stem + ".csv", rows))
    plot(rows, stem + ".png")
    print(stem + ".png")


if __name__ == "__main__":
    main()
