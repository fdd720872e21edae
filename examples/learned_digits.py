"""Learned oracle: train an any-order network on binarized 8x8 digits, then draw digits exactly.

The data are the 1797 scikit-learn 8x8 digit images (shipped with scikit-learn, no download),
binarized at ``--threshold`` (pixel intensity 0..16): configurations in :math:`\\{0, 1\\}^{64}`.
A :class:`numpyro_autospec.learned.MaskedMLP` (one-hot pinned pixels and the mask in, 64 x 2
log-probabilities out) is trained with the any-order objective

.. math:: \\hat L(x) = \\frac{n}{n - k} \\sum_{i \\notin S} -\\log p_\\theta(x_i \\mid x_S),
    \\qquad k \\sim \\mathrm{Uniform}\\{0..n-1\\},\\ S \\text{ a random } k\\text{-subset},

an unbiased estimate of the order-averaged negative log-likelihood (Uria et al. 2014;
Hoogeboom et al. 2022; :func:`support.training.fit`).  Wrapped in
:class:`numpyro_autospec.learned.LearnedOracle` it is the oracle of an
:class:`numpyro_autospec.AnyOrderAR` site, and ``AutospecKernel`` draws from it by
autospeculation (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869).

The trained network is *inconsistent* (its conditionals come from no single joint law), so
"exact" means: the draws follow exactly the law of sequential any-order sampling with a
uniformly random order, :math:`\\mathbb{E}_\\sigma \\prod_k p_\\theta(x_{\\sigma(k)} \\mid
x_{\\sigma(<k)})` -- the same law as ``method="sequential"``, in fewer rounds of network calls.

The script

1. trains the network (``--num-steps`` Adam steps) and prints the objective and the held-out
   order-averaged negative log-likelihood (nats and bits per image);
2. draws ``--num-samples`` digits with ``MCMC(AutospecKernel(model))`` and as many with
   ``AutospecKernel(model, method="sequential")``, and prints the mean rounds and queries per
   draw of each (extra fields ``rounds`` and ``queries``; sequential: 64 and 64);
3. saves a figure: autospec draws, sequential draws, training images and the loss curve.

Run::

    python examples/learned_digits.py                  # about 20 s on 2 CPU cores
    python examples/learned_digits.py --num-steps 8000 --hidden-size 512 --num-samples 32
"""

from __future__ import annotations

import argparse
import time

import jax
import matplotlib.pyplot as plt
import numpy as np
import numpyro
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.learned import LearnedOracle, MaskedMLP

from support.scripts import add_common_options, add_digits_mlp_options, save_figure, script_parser
from support.training import fit, order_averaged_nll

NUM_PIXELS = 64


def load_binary_digits(threshold: int) -> np.ndarray:
    """The 1797 scikit-learn digits as int32 ``[1797, 64]`` pixels: 1 where the intensity
    (0..16) is at least ``threshold``, else 0."""
    from sklearn.datasets import load_digits

    return (load_digits().data >= threshold).astype(np.int32)


def split(data: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random train/test split of the rows of ``data``."""
    permutation = np.random.default_rng(seed).permutation(len(data))
    num_test = int(round(test_fraction * len(data)))
    return data[permutation[num_test:]], data[permutation[:num_test]]


def make_model(oracle: LearnedOracle):
    """One any-order site ``digit``: 64 binary pixels drawn from the learned oracle."""

    def model():
        numpyro.sample("digit", AnyOrderAR(oracle, num_positions=NUM_PIXELS, num_categories=2))

    return model


def run_kernel(model, method: str, args: argparse.Namespace, seed: int) -> MCMC:
    """``args.num_samples`` exact independent draws (one per MCMC iteration)."""
    mcmc = MCMC(
        AutospecKernel(model, method=method),
        num_warmup=0,
        num_samples=args.num_samples,
        progress_bar=args.progress_bar,
    )
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("rounds", "queries"))
    return mcmc


def cost_of(mcmc: MCMC) -> tuple[np.ndarray, np.ndarray]:
    extra = mcmc.get_extra_fields()
    return np.asarray(extra["rounds"]), np.asarray(extra["queries"])


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Moving average over ``window`` steps (shorter at the start)."""
    window = max(1, min(window, len(values)))
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    head = cumulative[1:window] / np.arange(1, window)
    return np.concatenate([head, (cumulative[window:] - cumulative[:-window]) / window])


def tile(images: np.ndarray, columns: int) -> np.ndarray:
    """Binary 8x8 images ``[k, 64]`` as one picture: a grid of ``columns`` images per row, with
    one-pixel gaps (shown mid-grey)."""
    rows = max(1, -(-len(images) // columns))
    picture = np.full((9 * rows + 1, 9 * columns + 1), 0.35)
    for index, image in enumerate(images):
        row, column = divmod(index, columns)
        picture[1 + 9 * row : 9 * row + 9, 1 + 9 * column : 9 * column + 9] = image.reshape(8, 8)
    return picture


def plot(
    draws: dict[str, np.ndarray],
    training_images: np.ndarray,
    losses: np.ndarray,
    costs: dict[str, tuple[float, float]],
) -> plt.Figure:
    """Grids of autospec draws, sequential draws and training images, and the loss curve."""
    columns = int(np.ceil(np.sqrt(max(len(images) for images in draws.values()))))
    panels = [
        (f"AutospecKernel: {costs['autospec'][0]:.1f} rounds/draw", draws["autospec"]),
        (f"sequential: {costs['sequential'][0]:.0f} rounds/draw", draws["sequential"]),
        ("training images", training_images),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.8), width_ratios=[1, 1, 1, 1.4])
    for ax, (title, images) in zip(axes, panels, strict=False):
        ax.imshow(tile(images, columns), cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    ax = axes[-1]
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="C0", alpha=0.3, linewidth=0.6, label="batch objective")
    ax.plot(steps, smooth(losses, 50), color="C0", label="moving average (50 steps)")
    ax.set_xlabel("Adam step")
    ax.set_ylabel("nats per image")
    ax.set_title("any-order objective (an upper bound on -log p)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    train, test = split(load_binary_digits(args.threshold), args.test_fraction, args.seed)
    key_init, key_fit, key_eval = jax.random.split(jax.random.PRNGKey(args.seed), 3)
    network = MaskedMLP(NUM_PIXELS, 2, hidden_size=args.hidden_size, depth=args.depth, key=key_init)
    network, losses = fit(
        key_fit, network, train, args.num_steps, args.batch_size, args.learning_rate
    )
    train_time = time.perf_counter() - start
    held_out = order_averaged_nll(key_eval, network, test, num_orders=args.eval_orders)
    tail = losses[-min(len(losses), 100) :].mean()
    print(
        f"trained {args.num_steps} steps in {train_time:.1f} s: objective {losses[0]:.1f} -> "
        f"{tail:.1f} nats (mean of the last 100 steps); held-out order-averaged NLL "
        f"{held_out.mean():.1f} nats = {held_out.mean() / np.log(2):.1f} bits per image "
        f"({len(test)} images)",
        flush=True,
    )

    oracle = LearnedOracle(network)
    model = make_model(oracle)
    draws, costs, seconds = {}, {}, {}
    for offset, method in enumerate(("autospec", "sequential")):
        begin = time.perf_counter()
        mcmc = run_kernel(model, method, args, args.seed + 1 + offset)
        seconds[method] = time.perf_counter() - begin
        draws[method] = np.asarray(mcmc.get_samples()["digit"])
        rounds, queries = cost_of(mcmc)
        costs[method] = (float(rounds.mean()), float(queries.mean()))
    print(f"\n{'method':<12}{'rounds mean':>12}{'queries mean':>14}{'seconds':>9}")
    for method, (rounds, queries) in costs.items():
        print(f"{method:<12}{rounds:>12.1f}{queries:>14.1f}{seconds[method]:>9.1f}")
    print(
        f"({args.num_samples} draws each, compilation included; sequential needs "
        f"{NUM_PIXELS} rounds; speed-up in rounds {NUM_PIXELS / costs['autospec'][0]:.1f}x)"
    )

    shown = train[: max(len(draws["autospec"]), 1)]
    fig = plot(draws, shown, losses, costs)
    path = save_figure(fig, args.out, "learned_digits.png", started=start)
    return {
        "draws": draws,
        "costs": costs,
        "losses": losses,
        "held_out_nll": float(held_out.mean()),
        "figure": path,
    }


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--threshold", type=int, default=8, help="binarize at intensity >= this")
    add_digits_mlp_options(parser, depth=2, learning_rate_help="Adam learning rate")
    parser.add_argument("--num-steps", type=int, default=4000, help="Adam steps")
    parser.add_argument("--test-fraction", type=float, default=0.1, help="held-out images")
    parser.add_argument("--eval-orders", type=int, default=4, help="orders per held-out image")
    parser.add_argument("--num-samples", type=int, default=36, help="draws per sampler")
    add_common_options(parser, seed_help="seed of training and sampling")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
