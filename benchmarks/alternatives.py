"""The alternatives side by side: autospeculation beside MaskGIT decoding, NumPyro's Gibbs
samplers and Picard iteration, on the same oracles, each counting rounds and queries the same way.

Every method reports **rounds** (sequential oracle calls: parallel time) and **queries** (oracle
evaluations: work) per draw, a **bias** against an exact answer, and arviz's **ESS** of a
sufficient statistic with seconds measured in this run (compiled calls, compilation excluded).

Sections (``--sections``):

``small``      any-order, enumerable (Curie-Weiss beta = 1 and the Ising chain J = 1, n = 10):
               bias = total variation of the joint law over all 2^10 configurations
               (plug-in estimate; the exact sampler's row is the estimate's floor).
``anyorder``   any-order, large (Curie-Weiss beta = 1 and Ising chain J = 1 at ``--sizes``):
               bias = total variation of the law of the sufficient statistic (Curie-Weiss: the
               number of up spins, exact law in closed form; Ising chain: the number of aligned
               bonds, exactly Binomial(n - 1, e^J / (e^J + e^-J))), in 20 bins of equal exact
               mass, with the chi-square p-value; ESS of that statistic.
``diffusion``  stochastic localization of 8 Gaussians in 16 dimensions on ``default_times(N)``:
               bias against the exact Euler chain (the sequential sampler): total variation of
               the law of the component each output lands on, and for Picard iteration, which
               shares the chain's noise, the mean coupled distance ``E|picard - euler|``.

Methods and their cost conventions:

* ``autospec``: the engine (``numpyro_autospec.engine.run``, default config), exact; rounds and
  queries as the engine counts them, per draw;
* ``sequential``: one step per round (``numpyro_autospec.engine._sequential``), exact;
* ``maskgit``: ``baselines.maskgit_run`` with the cosine schedule of R rounds,
  confidence order (``maskgit-random``: random order); R rounds, R queries; biased;
* ``gibbs`` / ``hmcgibbs``: NumPyro's ``DiscreteGibbs`` (exact single-site conditionals) and
  ``DiscreteHMCGibbs(NUTS, modified=True)`` on a model with ``numpyro.factor`` of the
  unnormalized log density; one draw = one sweep over the n sites in random order, **counted as
  n rounds** (each site's update depends on the previous one) and n * q queries (the model's
  density at each value of the site); ESS per round = ESS / (sweeps * n);
* ``picard``: ``baselines.picard_run`` (window ``--window``, tolerances
  ``--tolerances``); rounds = iterations + 1, queries = denoiser evaluations.

Writes ``alternatives.{txt,csv}`` and ``alternatives_{rounds,bias,ess}.png`` to ``--out-dir``.

Examples::

    python benchmarks/alternatives.py                 # n = 256, 1024; N = 256 (minutes)
    python benchmarks/alternatives.py --large         # adds n = 4096 and N = 1024
    python benchmarks/alternatives.py --quick         # a smoke run: few draws, small sizes
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import arviz
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from baselines import cosine_schedule, maskgit_run, picard_run
from cases import RESULTS, make_diffusion
from csv_tables import (
    append_csv,
    git_commit,
    markdown_table,
    pyplot,
    read_csv,
    save_figure,
    write_csv,
)
from diffusion_rounds import engine_capacity
from numpyro.infer import MCMC, NUTS, DiscreteGibbs, DiscreteHMCGibbs
from rounds import project_oracle
from scipy import stats

from numpyro_autospec.engine import run
from numpyro_autospec.engine._sequential import sequential_run
from numpyro_autospec.processes import AnyOrderProcess

from support.scripts import script_parser

FIELDS = [
    "section", "target", "size", "method", "setting", "draws", "mean_rounds", "mean_queries",
    "bias_metric", "bias", "bias_p_value", "ess", "seconds", "ess_per_second",
    "ess_per_round", "commit",
]  # fmt: skip
NUM_BINS = 20


# ------------------------------------------------------------------------------ targets
BETA, COUPLING = 1.0, 1.0
#: the targets' oracles, as benchmarks/rounds.py names them
ORACLES = {"curie-weiss": f"cw:{BETA}", "ising-chain": f"ising:{COUPLING}"}


def statistic(target: str, values: np.ndarray) -> np.ndarray:
    """Curie-Weiss: up spins; Ising chain: aligned bonds."""
    values = np.asarray(values)
    if target == "curie-weiss":
        return values.sum(axis=-1)
    return (values[..., 1:] == values[..., :-1]).sum(axis=-1)


def statistic_law(target: str, oracle) -> np.ndarray:
    """Exact law of :func:`statistic`, float64."""
    if target == "curie-weiss":
        return np.exp(oracle.magnetization_log_probs())
    n = oracle.num_positions
    aligned = np.exp(COUPLING) / (np.exp(COUPLING) + np.exp(-COUPLING))
    return stats.binom.pmf(np.arange(n), n - 1, aligned)


def binned_bias(law: np.ndarray, samples: np.ndarray) -> tuple[float, float]:
    """(TV, chi-square p) of the statistic's law in ``NUM_BINS`` bins of equal exact mass."""
    cumulative = np.cumsum(law)
    bins = np.minimum((NUM_BINS * (cumulative - law / 2)).astype(int), NUM_BINS - 1)
    expected = np.bincount(bins, weights=law, minlength=NUM_BINS)
    observed = np.bincount(bins[np.asarray(samples, int)], minlength=NUM_BINS).astype(float)
    expected, observed = expected[expected > 0], observed[expected > 0]
    total_variation = 0.5 * np.abs(observed / observed.sum() - expected).sum()
    p_value = stats.chisquare(observed, expected * observed.sum()).pvalue
    return float(total_variation), float(p_value)


def ess(values: np.ndarray) -> float:
    """arviz's bulk ESS of one chain of a scalar statistic."""
    return float(arviz.ess(np.asarray(values, float)[None, :]))


def timed(function, *args):
    """``(result, seconds)`` of a call of ``function`` (jitted, compilation excluded; a
    ``jax.stages.Compiled`` program as it is)."""
    if not isinstance(function, jax.stages.Compiled):
        function = jax.jit(function).lower(*args).compile()
    start = time.perf_counter()
    result = jax.block_until_ready(function(*args))
    return result, time.perf_counter() - start


def row(cell: dict, rounds, queries, bias: tuple, effective: float, seconds: float) -> dict:
    """A CSV row: ``cell`` (section, target, size, method, setting, draws), the mean costs, the
    ``bias`` (metric, value, p-value), the ESS, the seconds and the ESS per second and round."""
    return cell | {
        "mean_rounds": float(np.mean(rounds)),
        "mean_queries": float(np.mean(queries)),
        "bias_metric": bias[0],
        "bias": bias[1],
        "bias_p_value": bias[2],
        "ess": effective,
        "seconds": seconds,
        "ess_per_second": effective / seconds if seconds else float("nan"),
        "ess_per_round": effective / float(np.sum(rounds)),
    }


# ------------------------------------------------------------------------------ any-order
def gibbs_model(target: str, oracle):
    """Uniform Bernoulli prior and ``numpyro.factor`` of the unnormalized log density."""
    n = oracle.num_positions

    def model():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([n]))
        spins = 2.0 * x - 1.0
        if target == "curie-weiss":
            magnetization = jnp.sum(spins)
            energy = oracle.beta / (2 * n) * magnetization**2 + oracle.h * magnetization
        else:
            energy = spins @ oracle.fields + (spins[:-1] * spins[1:]) @ oracle.couplings
        numpyro.factor("energy", energy)

    return model


def measure_gibbs(target, oracle, kind, sweeps, seed):
    model = gibbs_model(target, oracle)
    kernel = (
        DiscreteGibbs(model) if kind == "gibbs" else DiscreteHMCGibbs(NUTS(model), modified=True)
    )
    mcmc = MCMC(kernel, num_warmup=sweeps // 5, num_samples=sweeps, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed))  # compiles, burns in
    mcmc.post_warmup_state = mcmc.last_state
    start = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key)  # the timed chain: compiled, no warmup
    values = np.asarray(jax.block_until_ready(mcmc.get_samples()["x"]))
    return values, time.perf_counter() - start


def anyorder_rows(section, target, n, args, report):
    oracle = project_oracle(ORACLES[target], n)
    process = AnyOrderProcess(oracle, n, 2)
    keys = jax.random.split(jax.random.PRNGKey(args.seed + n), args.draws)
    rows = []
    if section == "small":
        configurations = np.array(list(itertools.product((0, 1), repeat=n)), np.int32)
        exact = np.exp(np.asarray(oracle.log_prob(configurations), np.float64))
        exact = exact / exact.sum()
        codes_of = lambda values: np.asarray(values) @ (2 ** np.arange(n - 1, -1, -1))  # noqa: E731

        def bias_of(values):
            observed = np.bincount(codes_of(values), minlength=exact.size) / len(values)
            expected = exact * len(values)
            keep = expected >= 5  # Cochran's rule: the sparse cells pooled into one
            observed_cells, expected_cells = observed[keep] * len(values), expected[keep]
            if expected[~keep].sum() > 0:
                observed_cells = np.append(observed_cells, observed[~keep].sum() * len(values))
                expected_cells = np.append(expected_cells, expected[~keep].sum())
            p = stats.chisquare(observed_cells, expected_cells).pvalue
            return "TV joint", 0.5 * float(np.abs(observed - exact).sum()), float(p)
    else:
        law = statistic_law(target, oracle)

        def bias_of(values):
            return ("TV statistic", *binned_bias(law, statistic(target, values)))

    def add(method, setting, values, rounds, queries, seconds):
        cell = dict(section=section, target=target, size=n, method=method, setting=setting)
        cell["draws"], effective = len(values), ess(statistic(target, values))
        rows.append(row(cell, rounds, queries, bias_of(values), effective, seconds))
        report(rows[-1])

    def add_samples(method, setting, samples, seconds):
        add(method, setting, np.asarray(samples.value), samples.rounds, samples.queries, seconds)

    samples, seconds = timed(lambda k: run(process, k), keys)
    add_samples("autospec", "default", samples, seconds)
    if section == "small":
        samples, seconds = timed(lambda k: sequential_run(process, k), keys)
        add_samples("sequential", "", samples, seconds)
    for num_rounds in args.maskgit_rounds if section != "small" else args.small_rounds:
        if num_rounds > n:
            continue
        schedule = cosine_schedule(n, num_rounds)
        for order in ("confidence", "random"):
            method = "maskgit" if order == "confidence" else "maskgit-random"
            draw = lambda k, s=schedule, o=order: maskgit_run(process, k, s, o)
            samples, seconds = timed(draw, keys)
            add_samples(method, f"R={num_rounds}", samples, seconds)
    if section != "small" and n <= args.gibbs_max_size:
        for kind in ("gibbs", "hmcgibbs"):
            values, seconds = measure_gibbs(target, oracle, kind, args.sweeps, args.seed)
            rounds = np.full(len(values), n)
            add(kind, f"{len(values)} sweeps", values, rounds, 2 * rounds, seconds)
    return rows


# ------------------------------------------------------------------------------ diffusion
def diffusion_rows(num_steps, args, report):
    process = make_diffusion("mixture", num_steps)
    means = np.asarray(process.denoiser.means)
    counts_of = lambda values: np.bincount(  # draws per nearest component
        np.argmin(((np.asarray(values)[:, None, :] - means[None]) ** 2).sum(-1), axis=1),
        minlength=len(means),
    )
    keys, reference_keys = (
        jax.random.split(jax.random.PRNGKey(args.seed + c * num_steps), args.diffusion_draws)
        for c in (1, 7)
    )
    euler_draws = jax.jit(lambda k: sequential_run(process, k)).lower(keys).compile()
    euler, euler_seconds = timed(euler_draws, keys)
    # the law's reference: other keys, same program
    reference_labels = counts_of(euler_draws(reference_keys).value)

    def law_bias(values):
        counts = counts_of(values)
        reference = reference_labels / reference_labels.sum()
        total_variation = 0.5 * np.abs(counts / counts.sum() - reference).sum()
        table = np.stack([counts, reference_labels])
        table = table[:, table.sum(0) > 0]
        return float(total_variation), float(stats.chi2_contingency(table).pvalue)

    rows = []

    def add(method, setting, samples, seconds, coupled=None):
        values = np.asarray(samples.value)
        cell = dict(section="diffusion", target="mixture-8x16", size=num_steps, method=method)
        cell |= {"setting": setting, "draws": len(values)}
        bias = ("TV labels", *law_bias(values))
        rows.append(row(cell, samples.rounds, samples.queries, bias, ess(values[:, 0]), seconds))
        if coupled is not None:
            rows[-1]["bias_metric"] = f"TV labels; E|d|={coupled:.2e}"
        report(rows[-1])

    add("sequential", "Euler chain", euler, euler_seconds)
    capacity = engine_capacity(process, 1 << 30)
    auto_keys = keys[: args.autospec_diffusion_draws]
    compiled = jax.jit(lambda k: run(process, k, None, capacity)).lower(auto_keys[:1]).compile()
    start = time.perf_counter()  # one draw per call: its rounds are its own
    parts = [jax.block_until_ready(compiled(auto_keys[i : i + 1])) for i in range(len(auto_keys))]
    seconds = time.perf_counter() - start
    merged = jax.tree.map(lambda *leaves: jnp.concatenate(leaves), *parts)
    add("autospec", "default", merged, seconds)
    picard = jax.jit(lambda k, tol: picard_run(process, k, args.window, tol))
    picard = picard.lower(keys, jnp.float32(0.0)).compile()  # one program, tolerance traced
    for tolerance in args.tolerances:
        samples, seconds = timed(picard, keys, jnp.float32(tolerance))
        coupled = float(np.mean(np.linalg.norm(np.asarray(samples.value - euler.value), axis=-1)))
        add("picard", f"p={args.window}, tol={tolerance:g}", samples, seconds, coupled)
    return rows


# ------------------------------------------------------------------------------ report
#: the table's header line and a row's cells (its rows are printed as they are measured)
HEADER = (
    "section | target | size | method | setting | draws | rounds | queries | bias metric "
    "| bias | p | ESS | ESS/s | ESS/round"
)
CELLS = (
    "{section} | {target} | {size} | {method} | {setting} | {draws} | {mean_rounds:.1f} "
    "| {mean_queries:.1f} | {bias_metric} | {bias:.3f} | {bias_p_value:.2g} | {ess:.0f} "
    "| {ess_per_second:.3g} | {ess_per_round:.3g}"
)


def format_row(entry: dict) -> str:
    return markdown_table(HEADER, [entry], CELLS).splitlines()[-1]


def plot(rows: list[dict], out_dir: str) -> list[str]:
    plt = pyplot()
    paths = []

    def save(figure, name):
        paths.append(save_figure(figure, os.path.join(out_dir, name)))

    def style(axis, **labels):
        axis.set(xscale="log", **labels)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)

    colors = dict(autospec="C0", sequential="k", maskgit="C3", gibbs="C2", hmcgibbs="C4")
    colors |= {"maskgit-random": "C1", "picard": "C5"}

    # rounds against n: rounds per exact draw, or per effective sample for the MCMC chains
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels = [("anyorder", "curie-weiss"), ("anyorder", "ising-chain"), ("diffusion", None)]
    for axis, (section, target) in zip(axes, panels, strict=True):
        cells = [r for r in rows if r["section"] == section and target in (None, r["target"])]
        sizes = sorted({r["size"] for r in cells})
        if not sizes:
            axis.set_visible(False)
            continue
        if section == "anyorder":
            axis.plot(sizes, sizes, ":", color="k", label="sequential (n)")
        for method in ("autospec", "gibbs", "hmcgibbs", "sequential", "picard"):
            chain = method in ("gibbs", "hmcgibbs")
            mine = [r for r in cells if r["method"] == method]
            for setting in sorted({r["setting"] for r in mine}) if method == "picard" else [None]:
                at = [r for r in mine if setting in (None, r["setting"])]
                if not at:
                    continue
                per = [r["draws"] / max(r["ess"], 1e-9) if chain else 1 for r in at]
                pts = sorted(
                    (r["size"], r["mean_rounds"] * f) for r, f in zip(at, per, strict=True)
                )
                xs, ys = zip(*pts, strict=True)
                label = method + (" (per ESS)" if chain else "")
                label += f" {setting}" if method == "picard" else ""
                alpha = 1.0 if method != "picard" else 0.5
                axis.plot(xs, ys, "o-", color=colors[method], label=label, alpha=alpha)
        title = f"{section}: {target or 'mixture-8x16'}"
        labels = dict(xlabel="n (sites) / N (steps)", ylabel="rounds per draw", title=title)
        style(axis, yscale="log", **labels)
    save(figure, "alternatives_rounds.png")

    # bias against rounds: MaskGIT on the enumerable targets and the large ones
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, section in zip(axes, ("small", "anyorder"), strict=True):
        cells = [r for r in rows if r["section"] == section]
        for target, marker in (("curie-weiss", "o"), ("ising-chain", "s")):
            sizes = sorted({r["size"] for r in cells if r["target"] == target})
            size = sizes[-1] if sizes else None
            here = [r for r in cells if r["target"] == target and r["size"] == size]
            for method in ("maskgit", "maskgit-random", "autospec", "sequential"):
                points = [(r["mean_rounds"], r["bias"]) for r in here if r["method"] == method]
                if points:
                    xs, ys = zip(*sorted(points), strict=True)
                    label = f"{method}, {target} n={size}"
                    axis.plot(xs, ys, marker + "-", color=colors[method], label=label)
        small = section == "small"
        ylabel = "TV (joint)" if small else "TV (statistic, 20 bins)"
        title = "enumerable targets" if small else "large targets"
        style(axis, xlabel="rounds per draw", ylabel=ylabel, title=title)
    save(figure, "alternatives_bias.png")

    # ESS per second
    cells = [r for r in rows if r["section"] in ("anyorder", "diffusion")]
    groups = sorted({(r["section"], r["target"], r["size"]) for r in cells})
    methods = ["autospec", "sequential", "gibbs", "hmcgibbs", "maskgit", "picard"]
    figure, axis = plt.subplots(figsize=(max(8, 1.6 * len(groups)), 4.2))
    width = 0.8 / len(methods)
    for index, method in enumerate(methods):
        best = {}  # the best setting's ESS per second in each group
        for r in (r for r in cells if r["method"] == method):
            group = (r["section"], r["target"], r["size"])
            best[group] = max(best.get(group, r["ess_per_second"]), r["ess_per_second"])
        heights = [best.get(group, 0.0) for group in groups]
        label = method + (" (best setting, biased)" if method in ("maskgit", "picard") else "")
        position = np.arange(len(groups)) + index * width
        axis.bar(position, heights, width, color=colors[method], label=label)
    axis.set_xticks(np.arange(len(groups)) + 0.4 - width / 2)
    axis.set_xticklabels([f"{t}\n{s}" for _, t, s in groups], fontsize=8)
    axis.set(yscale="log", ylabel="ESS per second (this machine)")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save(figure, "alternatives_ess.png")
    return paths


def main(args: argparse.Namespace) -> list[dict]:
    if args.quick:
        args.sizes, args.steps, args.draws, args.diffusion_draws = [64], [64], 200, 64
        args.autospec_diffusion_draws, args.sweeps, args.small_draws = 4, 100, 2000
        args.maskgit_rounds = [8]
    elif args.large:
        args.sizes, args.steps = sorted({*args.sizes, 4096}), sorted({*args.steps, 1024})
    commit, rows = git_commit(), []
    os.makedirs(args.out_dir, exist_ok=True)
    if args.merge:
        return write(merge(args.merge), args)
    print(markdown_table(HEADER), flush=True)

    partial = write_csv(os.path.join(args.out_dir, args.name + ".partial.csv"), [], FIELDS)

    def report(entry):
        """Print a measured row and append it to the partial CSV at once."""
        entry["commit"] = commit
        print(format_row(entry), flush=True)
        append_csv(partial, entry, FIELDS)

    if "small" in args.sections:
        small = argparse.Namespace(**{**vars(args), "draws": args.small_draws})
        for target in args.small_targets:
            rows += anyorder_rows("small", target, 10, small, report)
    if "anyorder" in args.sections:
        for target, n in itertools.product(args.targets, args.sizes):
            if target == "ising-chain" and n > args.ising_max_size:
                continue
            rows += anyorder_rows("anyorder", target, n, args, report)
    if "diffusion" in args.sections:
        for num_steps in args.steps:
            rows += diffusion_rows(num_steps, args, report)
    return write(rows, args)


def merge(paths: list[str]) -> list[dict]:
    """The rows of earlier runs' CSVs (numbers parsed back), in the order given."""
    text = ("section", "target", "method", "setting", "bias_metric", "commit")
    rows = [entry for path in paths for entry in read_csv(path)]
    for entry in rows:
        entry |= {field: float(entry[field]) for field in FIELDS if field not in text}
        entry["size"], entry["draws"] = int(entry["size"]), int(entry["draws"])
    return rows


def write(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    """The CSV, the table and the plots."""
    stem = os.path.join(args.out_dir, args.name)
    write_csv(stem + ".csv", rows, FIELDS)
    command = "python benchmarks/alternatives.py " + " ".join(sys.argv[1:])
    with open(stem + ".txt", "w") as handle:
        commits = ", ".join(sorted({entry["commit"] for entry in rows}))
        table = markdown_table(HEADER, rows, CELLS)
        handle.write(f"# {command.strip()} (commit {commits})\n\n{table}\n")
    if not args.no_plot:
        for path in plot(rows, args.out_dir):
            print("wrote", path)
    print("wrote", stem + ".csv", stem + ".txt")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    option = parser.add_argument
    sections, targets = ["small", "anyorder", "diffusion"], ["curie-weiss", "ising-chain"]
    which = "which parts of the comparison to run"
    option("--sections", nargs="+", default=sections, choices=sections, help=which)
    option("--sizes", type=int, nargs="+", default=[256, 1024], help="any-order sizes n")
    option("--targets", nargs="+", default=targets, choices=targets, help="large any-order targets")
    option("--steps", type=int, nargs="+", default=[256], help="diffusion steps N")
    option("--large", action="store_true", help="add n = 4096 and N = 1024")
    option("--quick", action="store_true", help="smoke run: tiny sizes and draws")
    option("--draws", type=int, default=400, help="draws per any-order cell")
    option("--small-draws", type=int, default=20000, help="draws per enumerable cell (n = 10)")
    rounds = "MaskGIT rounds R on the"
    option("--maskgit-rounds", type=int, nargs="+", default=[8, 64], help=f"{rounds} large targets")
    small = f"{rounds} enumerable targets (n = 10)"
    option("--small-rounds", type=int, nargs="+", default=[1, 2, 5, 10], help=small)
    small = "enumerable targets"
    option("--small-targets", nargs="+", default=targets, choices=targets, help=small)
    option("--sweeps", type=int, default=400, help="Gibbs sweeps after burn-in")
    option("--gibbs-max-size", type=int, default=4096, help="largest n for NumPyro's Gibbs chains")
    ising = "largest Ising chain (its autospec queries are O(n) scans)"
    option("--ising-max-size", type=int, default=1024, help=ising)
    draws = "draws of the Euler chain and Picard per diffusion cell"
    option("--diffusion-draws", type=int, default=256, help=draws)
    draws = "autospeculation draws per diffusion cell"
    option("--autospec-diffusion-draws", type=int, default=16, help=draws)
    option("--window", type=int, default=64, help="Picard window p")
    tolerances = [0.3, 0.1, 0.01, 0.0]
    option("--tolerances", type=float, nargs="+", default=tolerances, help="Picard tolerances")
    option("--seed", type=int, default=0, help="PRNG seed")
    option("--out-dir", default=RESULTS, help="directory of the table, CSV and plots")
    option("--name", default="alternatives", help="file stem")
    option("--no-plot", action="store_true")
    merge = "measure nothing: merge these CSVs (runs of separate sections) into one table and "
    merge += "one set of plots"
    option("--merge", nargs="+", metavar="CSV", help=merge)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
