r"""Code infilling with an order-aware transformer: exact autospeculative sampling vs sequential.

A :class:`numpyro_autospec.learned.TransformerOracle` (a two-stream, sigma-GPT / XLNet-style
transformer: one forward pass gives the conditional of every site of an ordered block given its
prefix) is trained at character level on the Python standard library's own source (it ships
with every Python: ``sysconfig.get_paths()["stdlib"]``), split into training and held-out text
*by file*, with the random-order objective

.. math:: L(x) = \tfrac{1}{n}\,\mathbb{E}_\sigma \textstyle\sum_k
    -\log p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)}),

on windows of ``n = --num-positions`` characters (``q = 98`` symbols).  The trained weights are
cached (``equinox.tree_serialise_leaves``) under ``--cache-dir``, so only the first run trains.

Then spans of held-out code are masked and infilled: ``AnyOrderAR(oracle, n, q,
observed=window, observed_mask=...)`` is the law of sequential sampling of the free characters
along a uniformly random order given the rest, :math:`\mathbb{E}_\sigma \prod_k
p_\theta(x_{\sigma(k)} \mid x_{\mathrm{obs}}, x_{\sigma(<k)})` (docs/algorithm.md, section 2a;
docs/learned.md).  ``MCMC(AutospecKernel(model))`` draws from it exactly by autospeculation
(Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869) and
``AutospecKernel(model, method="sequential")`` draws from the same law one character per
network call (a full forward pass per step); ``kv_cached_sequential_run`` draws it one character
per step too, but with the content stream's keys and values cached along the order (one query
row and one appended content row per step: the sequential baseline at its best).  The script
prints, for each method, the rounds of network calls per draw (the latency), the forward passes
per draw (the work; the engine's ``rounds`` and ``queries``) and the seconds per draw after
compilation, and saves a figure with the costs and the infilled code.  ``benchmarks/
code_infilling.py`` measures the same three at ``n = 256``.

Run::

    python examples/code_infilling.py                     # trains once (2 min), then ~20 s
    python examples/code_infilling.py --num-steps 3000 --model-size 128   # a better model
    python examples/code_infilling.py --num-positions 256   # benchmarks/code_infilling.py's model
"""

from __future__ import annotations

import argparse
import textwrap
import time

import jax
import matplotlib.pyplot as plt
import numpy as np
import numpyro
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.learned import TransformerOracle, kv_cached_sequential_run
from numpyro_autospec.processes import AnyOrderProcess

from support.checkpoints import TransformerConfig, load_or_train
from support.scripts import add_common_options, checkpoint_options, save_figure, script_parser
from support.text import VOCABULARY_SIZE, decode, load_code_corpus, random_windows
from support.transformer_training import bits_per_character, train_transformer

METHODS = ("autospec", "sequential", "kv-cache")


def train_or_load(args: argparse.Namespace, corpus) -> tuple[TransformerOracle, dict]:
    """The cached network of these settings, trained (and evaluated) on the first run."""
    config = TransformerConfig(
        args.num_positions, VOCABULARY_SIZE, args.model_size, args.num_layers, args.num_heads
    )
    training = {name: getattr(args, name) for name in ("batch_size", "learning_rate", "objective")}
    data = f"stdlib, held-out fraction {args.held_out_fraction}, {args.max_characters} chars"
    settings = {"data": data, "num_steps": args.num_steps, **training}  # the checkpoint's key

    def train(model: TransformerOracle) -> tuple[TransformerOracle, dict]:
        begin = time.perf_counter()
        key = jax.random.PRNGKey(args.seed + 1)
        model, losses = train_transformer(
            key, model, corpus.train, args.num_steps, progress_bar=args.progress_bar, **training
        )
        seconds = time.perf_counter() - begin
        held_out = random_windows(
            corpus.held_out, args.num_positions, args.eval_sequences, np.random.default_rng(0)
        )
        return model, {
            "training_seconds": seconds,
            "losses_bits": (losses / np.log(2)).tolist(),
            "held_out_bits_random_order": bits_per_character(model, held_out, order="random"),
            "held_out_bits_left_to_right": bits_per_character(
                model, held_out, order="left_to_right"
            ),
            "eval_sequences": args.eval_sequences,
        }

    model, metadata, directory = load_or_train(
        "code-transformer", config, settings, train, **checkpoint_options(args)
    )
    origin = "loaded from" if metadata["loaded_from_cache"] else "trained and saved to"
    print(
        f"model {origin} {directory}\n"
        f"  n = {args.num_positions}, q = {VOCABULARY_SIZE}, d = {args.model_size}, "
        f"{args.num_layers} layers; {args.num_steps} steps, "
        f"{metadata['training_seconds']:.0f} s of training\n"
        f"  held-out bits per character ({metadata['eval_sequences']} windows): "
        f"{metadata['held_out_bits_random_order']:.3f} along random orders, "
        f"{metadata['held_out_bits_left_to_right']:.3f} left to right",
        flush=True,
    )
    return model, metadata


def masked_examples(
    held_out: np.ndarray, n: int, span_length: int, count: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(windows int[count, n], observed_mask bool[n])``: held-out windows that start at a line
    start, with the middle ``span_length`` characters free (the same mask for every window, so
    every draw runs the same compiled sampler)."""
    rng = np.random.default_rng(seed)
    line_starts = np.flatnonzero(held_out[:-n] == 95) + 1  # 95: the code of "\n"
    starts = rng.choice(line_starts, size=count, replace=False)
    windows = held_out[starts[:, None] + np.arange(n)[None, :]]
    observed_mask = np.ones(n, bool)
    first = (n - span_length) // 2
    observed_mask[first : first + span_length] = False
    return windows.astype(np.int32), observed_mask


def make_model(oracle: TransformerOracle, observed_mask: np.ndarray):
    """One site ``code``: the window with its free characters drawn given the observed ones
    (``window`` is a model argument, so new windows reuse the compiled sampler)."""

    def model(window):
        numpyro.sample(
            "code",
            AnyOrderAR(
                oracle,
                num_positions=oracle.num_positions,
                num_categories=oracle.num_categories,
                observed=window,
                observed_mask=observed_mask,
            ),
        )

    return model


def infill(model, method: str, windows: np.ndarray, args: argparse.Namespace) -> dict:
    """Draws and costs of ``method`` on every window; the first run (compilation) is timed
    apart from the others.  The window is a model argument (``jit_model_args=True``), so the
    later runs compile nothing -- with NumPyro's progress bar on: without it (``--no-progress-bar``,
    or ``CI`` set) NumPyro 0.22 jits its sampling loop afresh at every ``run``, and the seconds
    per draw include that compilation (docs/numpyro.md, "Methods, chains, warmup")."""
    mcmc = MCMC(
        AutospecKernel(model, method=method),
        num_warmup=0,
        num_samples=args.num_draws,
        jit_model_args=True,
        progress_bar=args.progress_bar,
    )
    begin = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(args.seed), windows[0], extra_fields=("rounds", "queries"))
    compile_seconds = time.perf_counter() - begin
    draws, rounds, queries, seconds = [], [], [], 0.0
    for index, window in enumerate(windows):
        begin = time.perf_counter()
        mcmc.run(
            jax.random.PRNGKey(args.seed + 1 + index), window, extra_fields=("rounds", "queries")
        )
        samples = np.asarray(mcmc.get_samples()["code"])
        seconds += time.perf_counter() - begin
        extra = mcmc.get_extra_fields()
        draws.append(samples)
        rounds.append(np.asarray(extra["rounds"]))
        queries.append(np.asarray(extra["queries"]))
    total_draws = len(windows) * args.num_draws
    return {
        "draws": np.stack(draws),
        "rounds": float(np.concatenate(rounds).mean()),
        "queries": float(np.concatenate(queries).mean()),
        "seconds_per_draw": seconds / total_draws,
        "first_run_seconds": compile_seconds,
    }


def kv_cache_infill(
    oracle: TransformerOracle, observed_mask: np.ndarray, windows: np.ndarray, args
) -> dict:
    """The same law by sequential sampling with cached keys and values
    (``kv_cached_sequential_run``, jitted with the window as an argument), timed like
    :func:`infill`."""

    def process(window):
        return AnyOrderProcess(
            oracle,
            oracle.num_positions,
            oracle.num_categories,
            observed_values=window,
            observed_mask=observed_mask,
            name="code",
        )

    draw = jax.jit(lambda key, window: kv_cached_sequential_run(process(window), key[None]))
    begin = time.perf_counter()
    jax.block_until_ready(draw(jax.random.PRNGKey(args.seed), windows[0]))
    compile_seconds = time.perf_counter() - begin
    draws, rounds, seconds = [], [], 0.0
    for index, window in enumerate(windows):
        keys = jax.random.split(jax.random.PRNGKey(args.seed + 1 + index), args.num_draws)
        for key in keys:  # one draw per call, as MCMC draws one sample per iteration
            begin = time.perf_counter()
            samples = draw(key, window)
            draws.append(np.asarray(samples.value[0]))
            seconds += time.perf_counter() - begin
            rounds.append(np.asarray(samples.rounds))
    return {
        "draws": np.stack(draws).reshape(len(windows), args.num_draws, -1),
        "rounds": float(np.concatenate(rounds).mean()),
        "queries": float(np.concatenate(rounds).mean()),
        "seconds_per_draw": seconds / (len(windows) * args.num_draws),
        "first_run_seconds": compile_seconds,
    }


def shown(codes: np.ndarray, observed_mask: np.ndarray, hide: bool = False) -> str:
    """The window as text, free characters replaced by a middle dot when ``hide``."""
    text = decode(codes)
    return "".join(
        "\N{MIDDLE DOT}" if hide and not pinned else character
        for character, pinned in zip(text, observed_mask, strict=True)
    )


def plot(results: dict, windows, observed_mask, metadata) -> plt.Figure:
    """Bars of rounds, forward passes and seconds per draw; the first window, masked and
    infilled by each method."""
    fig = plt.figure(figsize=(15, 5.5))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1])
    labels = list(results)
    for column, (field, title) in enumerate(
        [
            ("rounds", "rounds per draw"),
            ("queries", "forward passes per draw"),
            ("seconds_per_draw", "seconds per draw (jitted)"),
        ]
    ):
        ax = fig.add_subplot(grid[0, column])
        values = [results[m][field] for m in labels]
        ax.bar(labels, values, color=[f"C{index}" for index in range(len(labels))])
        for position, value in enumerate(values):
            ax.text(position, value, f"{value:.3g}", ha="center", va="bottom", fontsize=9)
        ax.set_title(title, fontsize=10)
    panels = [("held-out code (free span hidden)", shown(windows[0], observed_mask, hide=True))]
    panels += [(f"{m} infill", shown(results[m]["draws"][0, 0], observed_mask)) for m in labels]
    panels += [("original", shown(windows[0], observed_mask))]
    for column, (title, text) in enumerate(panels[:3]):
        ax = fig.add_subplot(grid[1, column])
        ax.axis("off")
        ax.set_title(title, fontsize=10, loc="left")
        wrapped = "\n".join(
            textwrap.fill(line, 48) or " " for line in text.expandtabs(4).split("\n")
        )
        ax.text(0, 1, wrapped, family="monospace", fontsize=8, va="top", ha="left")
    fig.suptitle(
        f"Infilling {int((~observed_mask).sum())} of {len(observed_mask)} characters with a "
        f"two-stream transformer ({metadata['held_out_bits_random_order']:.2f} held-out bits/char, "
        f"random orders); original span: {decode(windows[0][~observed_mask])!r}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def main(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    corpus = load_code_corpus(args.held_out_fraction, args.max_characters)
    print(
        f"stdlib corpus: {len(corpus.train_files)} training files ({len(corpus.train)} chars), "
        f"{len(corpus.held_out_files)} held-out files ({len(corpus.held_out)} chars)"
    )
    oracle, metadata = train_or_load(args, corpus)
    windows, observed_mask = masked_examples(
        corpus.held_out, args.num_positions, args.span_length, args.num_examples, args.seed
    )
    model = make_model(oracle, observed_mask)
    results = {method: infill(model, method, windows, args) for method in METHODS[:2]}
    results["kv-cache"] = kv_cache_infill(oracle, observed_mask, windows, args)
    print(f"\n{'method':<12}{'rounds/draw':>12}{'passes/draw':>13}{'s/draw':>9}{'first run s':>13}")
    for method, result in results.items():
        print(
            f"{method:<12}{result['rounds']:>12.1f}{result['queries']:>13.1f}"
            f"{result['seconds_per_draw']:>9.3f}{result['first_run_seconds']:>13.1f}"
        )
    print(f"({args.num_examples} windows x {args.num_draws} draws per method)")
    for index, window in enumerate(windows):
        print(f"\n--- window {index}: original span {decode(window[~observed_mask])!r}")
        for method in METHODS:
            for draw in results[method]["draws"][index]:
                print(f"  {method:<10} {decode(draw[~observed_mask])!r}")
    fig = plot(results, windows, observed_mask, metadata)
    print()
    path = save_figure(fig, args.out, "code_infilling.png", dpi=110, started=start)
    return {"results": results, "metadata": metadata, "figure": path}


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--num-positions", type=int, default=128, help="n: characters per window")
    parser.add_argument("--model-size", type=int, default=64, help="transformer width d")
    parser.add_argument("--num-layers", type=int, default=3, help="two-stream layers")
    parser.add_argument("--num-heads", type=int, default=4, help="attention heads")
    parser.add_argument("--num-steps", type=int, default=900, help="AdamW steps")
    parser.add_argument("--batch-size", type=int, default=16, help="windows per step")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument(
        "--objective",
        choices=["autoregressive", "prefix"],
        default="autoregressive",
        help="random-order objective: all n conditionals of one order, or one random prefix",
    )
    parser.add_argument("--held-out-fraction", type=float, default=0.1, help="files held out")
    parser.add_argument(
        "--max-characters", type=int, default=4_000_000, help="characters read per split"
    )
    parser.add_argument("--eval-sequences", type=int, default=256, help="held-out windows scored")
    parser.add_argument("--num-examples", type=int, default=3, help="held-out windows infilled")
    parser.add_argument("--span-length", type=int, default=32, help="masked characters per window")
    parser.add_argument("--num-draws", type=int, default=8, help="draws per window and method")
    add_common_options(
        parser,
        seed_help="seed of training and sampling",
        checkpoints=True,
        quiet_help="quiet training and sampling (NumPyro then compiles its sampling loop again "
        "at every run, which the seconds per draw include)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
