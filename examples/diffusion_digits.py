"""Diffusion: exact parallel sampling of 8x8 digits by stochastic localization.

The target :math:`Y` is uniform over the 1797 scikit-learn 8x8 digit images scaled to
:math:`[0, 1]^{64}`; its denoiser :math:`f(t, y) = \\mathbb{E}[Y \\mid tY + W_t = y]` is exact
(:func:`numpyro_autospec.denoisers.digits_point_cloud`, softmax weights over the images).
Stochastic localization runs the Euler-Maruyama chain
:math:`y_{k+1} = y_k + h_k f(t_k, y_k) + \\sqrt{h_k}\\,\\xi_k` from :math:`y_0 = 0` on a grid
:math:`0 = t_0 < \\dots < t_N` and outputs the denoised point :math:`f(t_N, y_N)`
(:class:`numpyro_autospec.StochasticLocalization`, docs/algorithm.md section 2b).
``AutospecKernel`` samples that chain *exactly* by autospeculation (Anari et al., *Parallel
Sampling via Autospeculation*, arXiv:2511.07869): a whole stretch of the path is speculated
from one denoiser call with the drift frozen (a Gaussian random walk), scored in one round and
corrected by recursive speculative rejection sampling, so a draw needs fewer rounds of
denoiser calls than the :math:`N + 1` of the sequential chain, with the same law.  With
``--posterior-rank R`` the speculation follows instead the response of a rank-``R`` estimate
of the posterior covariance, read from the denoiser at each block's start
(``speculation_variance="posterior"``, docs/diffusion.md): fewer rounds, the same law.

The script

1. draws ``--num-samples`` digits with ``MCMC(AutospecKernel(model))`` and as many with
   ``method="sequential"`` on the grid of ``--num-steps`` steps, and prints the class and the
   distance to the nearest training image of each draw (the output is a training image up to
   float32 rounding: the default grid ends at :math:`t_N = 1000`);
2. measures mean rounds and queries per draw for every grid size in ``--sizes``;
3. saves a figure: the two sets of digits side by side and mean rounds against :math:`N`.

Run::

    python examples/diffusion_digits.py                        # about 30 s on 2 CPU cores
    python examples/diffusion_digits.py --sizes 64 256 1024 --num-samples 8
    python examples/diffusion_digits.py --posterior-rank 16      # the posterior's response
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import numpyro
from numpyro.infer import MCMC

from numpyro_autospec import AutospecKernel, StochasticLocalization
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.denoisers import PointCloudDenoiser, digits_point_cloud
from numpyro_autospec.processes import default_times

from support.scripts import add_common_options, save_figure, script_parser


def make_model(denoiser: PointCloudDenoiser, times: np.ndarray, posterior_rank: int | None = None):
    """One stochastic-localization site ``digit`` (64 pixels) on the grid ``times``; with
    ``posterior_rank``, the speculation of the posterior covariance's rank-``R`` estimate."""
    options = {}
    if posterior_rank is not None:
        options = {"speculation_variance": "posterior", "posterior_rank": posterior_rank}

    def model():
        numpyro.sample(
            "digit", StochasticLocalization(denoiser, dim=denoiser.dim, times=times, **options)
        )

    return model


def sampler_config(block_size: int | None) -> SamplerConfig:
    """The paper's recursion, explicitly (``block_size=None``: the whole path at once)."""
    return SamplerConfig(method="autospec", block_size=block_size)


def run_kernel(model, method: str, args: argparse.Namespace, seed: int) -> MCMC:
    """``args.num_samples`` exact independent draws (one per MCMC iteration)."""
    kernel = AutospecKernel(model, method=method, config=sampler_config(args.block_size))
    mcmc = MCMC(
        kernel,
        num_warmup=0,
        num_samples=args.num_samples,
        progress_bar=args.progress_bar,
    )
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("rounds", "queries"))
    return mcmc


def nearest_images(denoiser: PointCloudDenoiser, draws: np.ndarray):
    """Index, class and Euclidean distance of the training image nearest to each draw."""
    index = np.asarray(jax.vmap(denoiser.nearest)(jnp.asarray(draws)))
    distance = np.linalg.norm(draws - np.asarray(denoiser.points)[index], axis=-1)
    return index, np.asarray(denoiser.labels)[index], distance


def cost_of(mcmc: MCMC) -> tuple[np.ndarray, np.ndarray]:
    extra = mcmc.get_extra_fields()
    return np.asarray(extra["rounds"]), np.asarray(extra["queries"])


def rounds_against_n(
    denoiser, args: argparse.Namespace, known: dict[int, MCMC]
) -> dict[int, tuple[float, float]]:
    """Mean rounds and queries of autospeculation per draw, for each grid size in ``--sizes``
    (``known``: runs already done, by grid size)."""
    costs = {}
    for n in args.sizes:
        mcmc = known.get(n) or run_kernel(
            make_model(denoiser, default_times(n), args.posterior_rank),
            "autospec",
            args,
            args.seed + n,
        )
        rounds, queries = cost_of(mcmc)
        costs[n] = (float(rounds.mean()), float(queries.mean()))
        print(
            f"N = {n:>5}: autospec {rounds.mean():7.1f} rounds, {queries.mean():8.0f} queries "
            f"per draw; sequential {n + 1} and {n + 1}",
            flush=True,
        )
    return costs


def mosaic(images: np.ndarray, columns: int) -> np.ndarray:
    """8x8 digits tiled ``columns`` per row into one image, one blank pixel between tiles."""
    rows = -(-len(images) // columns)
    canvas = np.full((9 * rows + 1, 9 * columns + 1), np.nan)
    for index, image in enumerate(images):
        row, column = divmod(index, columns)
        canvas[1 + 9 * row : 9 * row + 9, 1 + 9 * column : 9 * column + 9] = image.reshape(8, 8)
    return canvas


def plot(
    autospec: np.ndarray,
    sequential: np.ndarray,
    costs: dict[int, tuple[float, float]],
    num_steps: int,
) -> plt.Figure:
    """Digits of both samplers (one mosaic each) and mean rounds against N (log-log)."""
    columns = int(np.ceil(np.sqrt(max(len(autospec), len(sequential)))))
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), width_ratios=[1, 1, 1.3])
    cmap = plt.get_cmap("gray_r").with_extremes(bad="white")
    samplers = [("autospec", autospec), ("sequential", sequential)]
    for ax, (name, images) in zip(axes[:2], samplers, strict=True):
        ax.imshow(mosaic(images, columns), cmap=cmap, vmin=0.0, vmax=1.0)
        ax.set_title(f"{name}: {len(images)} draws, N = {num_steps}", fontsize=10)
        ax.set_axis_off()
    ax = axes[2]
    sizes = np.array(sorted(costs))
    ax.plot(sizes, sizes + 1, "k--", marker="s", label="sequential: N + 1")
    ax.plot(sizes, [costs[n][0] for n in sizes], marker="o", color="C1", label="autospec")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("grid steps N")
    ax.set_ylabel("mean rounds per draw")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(args: argparse.Namespace) -> dict:
    denoiser = digits_point_cloud()
    times = default_times(args.num_steps)

    start = time.perf_counter()
    autospec = run_kernel(
        make_model(denoiser, times, args.posterior_rank), "autospec", args, args.seed
    )
    elapsed = time.perf_counter() - start
    # the chain never speculates: its model reads no Jacobian
    sequential = run_kernel(make_model(denoiser, times), "sequential", args, args.seed + 1)
    draws = {
        "autospec": np.asarray(autospec.get_samples()["digit"]),
        "sequential": np.asarray(sequential.get_samples()["digit"]),
    }
    print(f"\n{args.num_samples} exact draws in {elapsed:.1f} s (compilation included)")
    for name, values in draws.items():
        _, labels, distance = nearest_images(denoiser, values)
        rounds, queries = cost_of(autospec if name == "autospec" else sequential)
        print(
            f"{name:<11} classes {labels.tolist()}, max distance to a training image "
            f"{distance.max():.1e}; {rounds.mean():.1f} rounds and {queries.mean():.0f} "
            f"queries per draw (N = {args.num_steps})"
        )
    print()
    costs = rounds_against_n(denoiser, args, {args.num_steps: autospec})

    fig = plot(draws["autospec"], draws["sequential"], costs, args.num_steps)
    path = save_figure(fig, args.out, "diffusion_digits.png")
    return {"draws": draws, "costs": costs, "figure": path}


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--num-steps", type=int, default=128, help="grid of the drawn digits")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[32, 128, 512], help="grid sizes N of the plot"
    )
    parser.add_argument("--num-samples", type=int, default=8, help="draws per sampler and N")
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="root recursion block (None: the whole path, the paper as written)",
    )
    parser.add_argument(
        "--posterior-rank",
        type=int,
        default=None,
        help="speculate with the response of a rank-R estimate of the posterior covariance "
        "(None: the drift frozen over a block, the paper)",
    )
    add_common_options(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
