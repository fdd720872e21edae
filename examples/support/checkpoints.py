r"""Checkpoints of a :class:`~numpyro_autospec.learned.TransformerOracle`: train once, reload.

A checkpoint is a directory with two files:

* ``config.json`` -- the architecture (:class:`TransformerConfig`) and free-form metadata
  (training settings, measured figures);
* ``model.eqx`` -- the weights, written by ``equinox.tree_serialise_leaves`` and read back by
  ``equinox.tree_deserialise_leaves`` into a skeleton built from the architecture (built
  abstractly with ``equinox.filter_eval_shape``: no initialisation computed).

:func:`load_or_train` keys a checkpoint by a name and a hash of everything that determines the
weights (architecture and training settings), under :func:`cache_directory`
(``~/.cache/numpyro_autospec`` unless overridden), so an example trains once per setting
(docs/learned.md; Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax

from numpyro_autospec.learned._transformer import TransformerOracle

__all__ = [
    "CACHE_ENVIRONMENT_VARIABLE",
    "TransformerConfig",
    "cache_directory",
    "load_checkpoint",
    "load_or_train",
    "save_checkpoint",
]

#: environment variable that overrides the default cache directory
CACHE_ENVIRONMENT_VARIABLE = "NUMPYRO_AUTOSPEC_CACHE"
_WEIGHTS = "model.eqx"
_CONFIG = "config.json"


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """The architecture of a :class:`TransformerOracle` (the arguments of its constructor).

    Example
    -------
    >>> import jax
    >>> config = TransformerConfig(num_positions=6, num_categories=3, model_size=16,
    ...                            num_layers=1, num_heads=2)
    >>> oracle = config.build(jax.random.PRNGKey(0))
    >>> oracle.num_positions, oracle.num_categories
    (6, 3)
    """

    num_positions: int
    num_categories: int
    model_size: int = 128
    num_layers: int = 3
    num_heads: int = 4
    mlp_ratio: int = 4

    def build(self, key: jax.Array) -> TransformerOracle:
        """A freshly initialised network of this architecture."""
        return TransformerOracle(
            self.num_positions,
            self.num_categories,
            model_size=self.model_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            mlp_ratio=self.mlp_ratio,
            key=key,
        )


def cache_directory(override: str | os.PathLike | None = None) -> Path:
    """``override`` if given, else ``$NUMPYRO_AUTOSPEC_CACHE`` if set, else
    ``~/.cache/numpyro_autospec`` (``$XDG_CACHE_HOME/numpyro_autospec`` when that is set).

    Example
    -------
    >>> cache_directory("/tmp/my-cache").as_posix()
    '/tmp/my-cache'
    """
    if override is not None:
        return Path(override).expanduser()
    if os.environ.get(CACHE_ENVIRONMENT_VARIABLE):
        return Path(os.environ[CACHE_ENVIRONMENT_VARIABLE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "numpyro_autospec"


def save_checkpoint(
    directory: str | os.PathLike,
    model: TransformerOracle,
    config: TransformerConfig,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` (whose architecture is ``config``) and ``metadata`` (JSON-serialisable)
    to ``directory``; the weights are written first to a temporary name and renamed, so an
    interrupted save never leaves a checkpoint that looks complete.  Returns the directory.

    Example: a round trip with :func:`load_checkpoint`.

    >>> import tempfile, jax, numpy as np
    >>> config = TransformerConfig(6, 3, model_size=16, num_layers=1, num_heads=2)
    >>> model = config.build(jax.random.PRNGKey(0))
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     _ = save_checkpoint(directory, model, config, {"steps": 10})
    ...     loaded, metadata = load_checkpoint(directory)
    >>> metadata, bool(np.all(loaded.start_token == model.start_token))
    ({'steps': 10}, True)
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / (_WEIGHTS + ".partial")
    eqx.tree_serialise_leaves(temporary, model)
    description = {"config": dataclasses.asdict(config), "metadata": metadata or {}}
    (directory / _CONFIG).write_text(json.dumps(description, indent=2, sort_keys=True))
    os.replace(temporary, directory / _WEIGHTS)
    return directory


def load_checkpoint(
    directory: str | os.PathLike, config_type: type = TransformerConfig
) -> tuple[TransformerOracle, dict[str, Any]]:
    """``(model, metadata)`` saved by :func:`save_checkpoint`; ``config_type`` is the class of
    the saved architecture (a dataclass with ``build(key)``, e.g. ``DenoiserConfig``).

    :raises FileNotFoundError: if the directory holds no complete checkpoint.

    Example
    -------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     load_checkpoint(directory)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileNotFoundError: no checkpoint in ... (model.eqx and config.json)
    """
    directory = Path(directory)
    if not (directory / _WEIGHTS).is_file() or not (directory / _CONFIG).is_file():
        raise FileNotFoundError(f"no checkpoint in {directory} ({_WEIGHTS} and {_CONFIG})")
    description = json.loads((directory / _CONFIG).read_text())
    config = config_type(**description["config"])
    skeleton = eqx.filter_eval_shape(config.build, jax.random.PRNGKey(0))
    model = eqx.tree_deserialise_leaves(directory / _WEIGHTS, skeleton)
    return model, description["metadata"]


def checkpoint_name(name: str, config: TransformerConfig, settings: dict[str, Any]) -> str:
    """``name-<12 hex digits>``: the hash of the architecture and the training settings."""
    text = json.dumps([dataclasses.asdict(config), settings], sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def load_or_train(
    name: str,
    config: TransformerConfig,
    settings: dict[str, Any],
    train: Callable[[TransformerOracle], tuple[TransformerOracle, dict[str, Any]]],
    *,
    seed: int = 0,
    cache: str | os.PathLike | None = None,
    retrain: bool = False,
) -> tuple[TransformerOracle, dict[str, Any], Path]:
    """``(model, metadata, directory)``: the checkpoint of ``(name, config, settings)`` under
    :func:`cache_directory` if there is one (and not ``retrain``), else
    ``train(config.build(PRNGKey(seed)))`` -- which returns the trained model and its metadata
    -- saved there first.  ``settings`` must name everything that determines the weights
    besides the architecture (steps, batch size, learning rate, seed, data).

    Example: the second call loads what the first trained.

    >>> import tempfile
    >>> config = TransformerConfig(6, 3, model_size=16, num_layers=1, num_heads=2)
    >>> def train(model):  # a real one runs train_transformer
    ...     return model, {"final_loss": 1.0}
    >>> with tempfile.TemporaryDirectory() as cache:
    ...     _, first, _ = load_or_train("toy", config, {"steps": 0}, train, cache=cache)
    ...     _, again, _ = load_or_train("toy", config, {"steps": 0}, train, cache=cache)
    >>> first["loaded_from_cache"], again["loaded_from_cache"], again["final_loss"]
    (False, True, 1.0)
    """
    directory = cache_directory(cache) / checkpoint_name(name, config, {**settings, "seed": seed})
    if not retrain:
        try:
            model, metadata = load_checkpoint(directory, type(config))
            return model, {**metadata, "loaded_from_cache": True}, directory
        except FileNotFoundError:
            pass
    model, metadata = train(config.build(jax.random.PRNGKey(seed)))
    metadata = {**metadata, "settings": settings, "seed": seed}
    save_checkpoint(directory, model, config, metadata)
    return model, {**metadata, "loaded_from_cache": False}, directory
