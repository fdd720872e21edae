"""Learned diffusion: train a denoiser on the 8x8 digits, then draw digits exactly from it.

The data are the 1797 scikit-learn 8x8 digit images scaled to :math:`[0, 1]^{64}`.  A small
time-conditioned MLP, :class:`numpyro_autospec.learned.LearnedDenoiser`, learns the denoiser
:math:`f(t, y) = \\mathbb{E}[Y \\mid tY + W_t = y]` of stochastic localization by denoising
regression (:func:`support.denoiser_training.train_denoiser`, Adam, times drawn on the law of
the sampler's grid), trained once and cached under ``--cache-dir``.  It is then the oracle of a
:class:`numpyro_autospec.StochasticLocalization` site, exactly as the exact point-cloud denoiser
of the same images (:func:`numpyro_autospec.denoisers.digits_point_cloud`) is.

``AutospecKernel`` samples the Euler-Maruyama chain of either denoiser *exactly* by
autospeculation (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869;
docs/algorithm.md section 2b): a stretch of the path is speculated from one denoiser call with
the drift frozen, scored in one round and corrected by recursive speculative rejection
sampling, so a draw needs fewer rounds of denoiser calls than the :math:`N + 1` of the chain.
For the learned denoiser the law is that of the network's own chain (a learned model has no
other law to be exact about): ``tests/learned/test_denoiser.py`` checks it by a two-sample test.

The script

1. trains (or loads) the network and prints the training time and loss;
2. for the learned and the exact denoiser, draws ``--num-samples`` digits by autospeculation
   and as many with the sequential chain on the grid of ``--num-steps`` steps, with the engine
   that ``MCMC(AutospecKernel(model))`` runs (:func:`numpyro_autospec.engine.run`, one task
   pool), and prints rounds and queries per draw and seconds per draw (each sampler runs twice
   with new keys: the first call compiles, the second is timed);
3. saves a figure: the four sets of digits and the mean rounds per draw of each sampler.

Run::

    python examples/learned_diffusion.py                  # about a minute on 2 CPU cores
    python examples/learned_diffusion.py --num-steps 512 --train-steps 8000
"""

from __future__ import annotations

import argparse
import time

import jax
import matplotlib.pyplot as plt
import numpy as np

from numpyro_autospec import StochasticLocalization
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.denoisers import digits_point_cloud
from numpyro_autospec.engine import run, sequential_run
from numpyro_autospec.processes import default_times

from support.denoiser_training import DenoiserConfig, load_or_train_denoiser
from support.scripts import (
    add_common_options,
    add_digits_mlp_options,
    checkpoint_options,
    save_figure,
    script_parser,
)

DIM = 64
LABELS = ("learned", "exact point cloud")


def draw(process, method: str, args: argparse.Namespace, seed: int) -> dict:
    """``args.num_samples`` draws with ``method`` in one compiled call: a first call compiles,
    a second with new keys is timed; the draws, rounds and queries are the second call's.
    Autospeculation runs the engine (one task pool), as ``MCMC(AutospecKernel(model))`` does
    one draw per iteration (examples/diffusion_digits.py); ``"sequential"`` the compiled Euler
    chain (:func:`~numpyro_autospec.engine.sequential_run`)."""
    if method == "sequential":  # the Euler chain itself: a scan, the same draws as run(...)
        sampler = jax.jit(lambda keys: sequential_run(process, keys))
    else:
        config = SamplerConfig(method=method, block_size=args.block_size)
        sampler = jax.jit(lambda keys: run(process, keys, config))
    begin = time.perf_counter()
    jax.block_until_ready(sampler(jax.random.split(jax.random.PRNGKey(seed), args.num_samples)))
    first = time.perf_counter() - begin
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), args.num_samples)
    begin = time.perf_counter()
    samples = jax.block_until_ready(sampler(keys))
    seconds = time.perf_counter() - begin
    return {
        "draws": np.asarray(samples.value),
        "rounds": float(np.mean(samples.rounds)),
        "queries": float(np.mean(samples.queries)),
        "seconds_per_draw": seconds / args.num_samples,
        "first_run_seconds": first,
    }


def plot(results: dict, metadata: dict, args: argparse.Namespace) -> plt.Figure:
    """Rows of digits for each (denoiser, sampler), mean rounds per draw, and the loss curve."""
    columns = args.num_samples
    fig = plt.figure(figsize=(0.75 * columns + 7.5, 4.6))
    grid = fig.add_gridspec(len(results), columns + 9)
    for row, (name, result) in enumerate(results.items()):
        for column, image in enumerate(result["draws"][:columns]):
            ax = fig.add_subplot(grid[row, column])
            ax.imshow(np.clip(image, 0, 1).reshape(8, 8), cmap="gray_r", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if column == 0:
                ax.set_ylabel(name.replace(", ", "\n"), fontsize=7)
    ax = fig.add_subplot(grid[:, columns + 1 : columns + 5])
    for offset, method in enumerate(("autospec", "sequential")):
        rounds = [results[f"{label}, {method}"]["rounds"] for label in LABELS]
        ax.bar(np.arange(2) + 0.4 * offset - 0.2, rounds, width=0.4, label=method)
    ax.axhline(args.num_steps + 1, color="k", linestyle="--", linewidth=0.8)
    ax.set_xticks(range(2), ["learned", "exact"])
    ax.set_ylabel(f"mean rounds per draw (N + 1 = {args.num_steps + 1})")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(grid[:, columns + 6 :])
    curve = np.asarray(metadata["loss_curve"])
    ax.plot(np.linspace(0, args.train_steps, curve.size), curve)
    ax.set_xlabel("Adam step")
    ax.set_ylabel("denoising loss")
    ax.set_title("training", fontsize=9)
    fig.suptitle(
        f"learned vs exact denoiser, stochastic localization on N = {args.num_steps} steps",
        fontsize=10,
    )
    fig.subplots_adjust(left=0.04, right=0.98, bottom=0.12, top=0.88, wspace=0.3)
    return fig


def main(args: argparse.Namespace) -> dict:
    exact = digits_point_cloud()
    data = np.asarray(exact.points, np.float32)
    config = DenoiserConfig(DIM, args.hidden_size, args.depth, args.num_frequencies)
    learned, metadata, directory = load_or_train_denoiser(
        "learned-diffusion-digits",
        config,
        data,
        args.train_steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        progress_bar=args.progress_bar,
        **checkpoint_options(args),
    )
    source = "loaded from " if metadata["loaded_from_cache"] else "saved to "
    print(
        f"network ({config.depth} x {config.hidden_size} units) {source}{directory}: trained "
        f"{args.train_steps} steps in {metadata['seconds']:.1f} s, loss "
        f"{metadata['first_loss']:.3f} at the first step, {metadata['final_loss']:.3f} over "
        f"the last 100"
    )
    times = default_times(args.num_steps)
    results = {}
    for label, denoiser in zip(LABELS, (learned, exact), strict=True):
        site = StochasticLocalization(denoiser, dim=DIM, times=times)
        site.validate_oracle("digit")  # what AutospecKernel checks at init
        process = site.make_process("digit")
        for method in ("autospec", "sequential"):
            result = draw(process, method, args, args.seed + 10 * len(results))
            results[f"{label}, {method}"] = result
            print(
                f"{label:<17} {method:<10}: {result['rounds']:6.1f} rounds, "
                f"{result['queries']:7.1f} queries, {result['seconds_per_draw'] * 1e3:7.1f} ms "
                f"per draw (first run, compiling: {result['first_run_seconds']:.1f} s)",
                flush=True,
            )
    path = save_figure(plot(results, metadata, args), args.out, "learned_diffusion.png")
    return {"results": results, "metadata": metadata, "figure": path}


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--num-steps", type=int, default=128, help="grid steps N of the chain")
    parser.add_argument("--num-samples", type=int, default=12, help="draws per sampler")
    parser.add_argument("--train-steps", type=int, default=4000, help="Adam steps")
    add_digits_mlp_options(parser, depth=3, learning_rate_help="peak Adam step size")
    parser.add_argument("--num-frequencies", type=int, default=8, help="time features / 2")
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="root recursion block (None: the whole path, the paper as written)",
    )
    add_common_options(
        parser,
        seed_help="seed of training and sampling",
        checkpoints=True,
        quiet_help="quiet training",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
