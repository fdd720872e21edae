"""Training the transformer oracle: the two random-order objectives estimate the same quantity,
training lowers it, bits per character, and checkpoints (save, reload, train once)."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import itertools  # noqa: E402
import math  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from tests.learned.transformer_fixtures import (  # noqa: E402
    N,
    fresh_transformer,
    table_data,
    trained,
)

from support.checkpoints import (
    TransformerConfig,
    cache_directory,
    load_checkpoint,
    load_or_train,
    save_checkpoint,
)
from support.transformer_training import autoregressive_loss, bits_per_character, prefix_loss


def test_both_objectives_average_to_the_same_order_averaged_loss():
    # E_sigma l_sigma(x) / n, exactly, by enumerating all orders (and all prefix lengths)
    model = fresh_transformer(seed=1)
    x = jnp.array([2, 0, 1, 1, 0])
    orders = jnp.array(list(itertools.permutations(range(N))))
    autoregressive = jax.vmap(autoregressive_loss, in_axes=(None, None, 0))(model, x, orders)
    prefix = jax.vmap(
        jax.vmap(prefix_loss, in_axes=(None, None, None, 0)), in_axes=(None, None, 0, None)
    )(model, x, orders, jnp.arange(N))
    np.testing.assert_allclose(float(prefix.mean()), float(autoregressive.mean()), rtol=1e-5)
    assert float(autoregressive.std()) > 1e-3  # the orders give different losses


def test_training_lowers_the_loss_and_the_held_out_bits():
    model, losses = trained()
    assert losses.shape == (250,) and np.all(np.isfinite(losses))
    assert losses[-50:].mean() < losses[:20].mean() - 0.05
    held_out = table_data(seed=0, num_examples=4000)[-500:]
    before = bits_per_character(fresh_transformer(0, num_layers=1), held_out)
    after = bits_per_character(model, held_out)
    assert after < before - 0.05 and after < math.log2(3)


def test_prefix_objective_trains_too():
    from support.transformer_training import train_transformer

    model, losses = train_transformer(
        jax.random.PRNGKey(7),
        fresh_transformer(7, num_layers=1),
        table_data(),
        150,
        batch_size=64,
        learning_rate=1e-2,
        objective="prefix",
        progress_bar=False,
    )
    assert losses[-30:].mean() < losses[:15].mean() - 0.05


def test_bits_per_character_left_to_right_is_the_mean_of_the_sequence_log_probs():
    model = fresh_transformer(seed=2)
    data = table_data(num_examples=40)
    steps = jax.vmap(model.sequence_log_probs, in_axes=(0, None))(data, jnp.arange(N))
    expected = -float(steps.mean()) / math.log(2)
    assert bits_per_character(model, data, order="left_to_right", batch_size=16) == pytest.approx(
        expected, rel=1e-5
    )


def test_checkpoint_round_trip_restores_the_weights_and_metadata(tmp_path):
    config = TransformerConfig(N, 3, model_size=16, num_layers=2, num_heads=2)
    model = config.build(jax.random.PRNGKey(3))
    save_checkpoint(tmp_path / "run", model, config, {"bits": 1.5})
    loaded, metadata = load_checkpoint(tmp_path / "run")
    assert metadata == {"bits": 1.5}
    for a, b in zip(
        jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(loaded), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    x, ranks = jnp.array([0, 1, 2, 0, 1]), jnp.arange(N)
    np.testing.assert_array_equal(
        loaded.log_conditionals(x, ranks, ranks, ranks),
        model.log_conditionals(x, ranks, ranks, ranks),
    )
    with pytest.raises(FileNotFoundError, match=r"no checkpoint in .*missing \(model.eqx"):
        load_checkpoint(tmp_path / "missing")


def test_load_or_train_trains_once_per_setting(tmp_path):
    config = TransformerConfig(N, 3, model_size=16, num_layers=1, num_heads=2)
    calls = []

    def train(model):
        calls.append(1)
        shifted = jax.tree_util.tree_map(lambda leaf: leaf + 1.0, model)
        return shifted, {"note": "trained"}

    first, meta_first, directory = load_or_train(
        "tiny", config, {"steps": 1}, train, cache=tmp_path
    )
    second, meta_second, again = load_or_train("tiny", config, {"steps": 1}, train, cache=tmp_path)
    assert len(calls) == 1 and directory == again and directory.parent == tmp_path
    assert not meta_first["loaded_from_cache"] and meta_second["loaded_from_cache"]
    assert meta_second["note"] == "trained" and meta_second["settings"] == {"steps": 1}
    for a, b in zip(
        jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    _, _, other = load_or_train("tiny", config, {"steps": 2}, train, cache=tmp_path)
    assert len(calls) == 2 and other != directory
    load_or_train("tiny", config, {"steps": 1}, train, cache=tmp_path, retrain=True)
    assert len(calls) == 3


def test_cache_directory_argument_then_environment_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPYRO_AUTOSPEC_CACHE", str(tmp_path / "env"))
    assert cache_directory(tmp_path / "arg") == tmp_path / "arg"
    assert cache_directory() == tmp_path / "env"
    monkeypatch.delenv("NUMPYRO_AUTOSPEC_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory() == tmp_path / "xdg" / "numpyro_autospec"
