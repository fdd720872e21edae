"""The package's exception types: one base class for every error it raises on bad input.

Every error that numpyro-autospec raises because of what a user passed -- an oracle or denoiser
that breaks its contract, a configuration, an observation, a time grid, a model it cannot draw
exactly -- is an :class:`AutospecError`, so ``except AutospecError`` catches them all, also
when a run fails inside its compiled program (the kernel and an eager engine run re-raise the
failure as its type, and so does the output of your own ``jax.jit`` that returns the samples;
docs/numpyro.md, "Errors inside the compiled program").  Each is also a
:class:`ValueError`, the type Python code expects for a bad value.  The families:

* :class:`ConfigError`: a sampler's knobs (:class:`~numpyro_autospec.config.SamplerConfig`,
  :class:`~numpyro_autospec.engine.Capacity` and its mesh, a baseline's or a training loop's
  options);
* :class:`InputError`: data handed to the samplers (observed values and masks, orders, keys,
  time grids -- :class:`~numpyro_autospec.denoisers.validation.TimeGridError`, also a
  ``DenoiserError`` --, sizes of a site, training data);
* :class:`~numpyro_autospec.defects.OracleError` (and its
  :class:`~numpyro_autospec.denoisers.validation.DenoiserError`): an oracle, a denoiser or one of
  their parameters or answers;
* :class:`~numpyro_autospec.numpyro.inspection.UnsupportedModelError`: a model site that
  :class:`~numpyro_autospec.numpyro.AutospecKernel` cannot draw exactly.

Misuse of an API keeps Python's own types: a model that is not callable (:class:`TypeError`),
a kernel's ``sample`` before its ``init`` (:class:`RuntimeError`).

Example
-------
>>> from numpyro_autospec import SamplerConfig
>>> try:
...     SamplerConfig(growth=-1.0).validate()
... except AutospecError as error:
...     print(type(error).__name__, isinstance(error, ValueError))
ConfigError True
"""

from __future__ import annotations

import numbers

__all__ = ["AutospecError", "ConfigError", "InputError", "positive_integer"]


class AutospecError(ValueError):
    """Base class of every error numpyro-autospec raises on bad input (a
    :class:`ValueError`); its message names the site, the parameter, the shape or the value.

    >>> issubclass(ConfigError, AutospecError), issubclass(InputError, AutospecError)
    (True, True)
    """


class ConfigError(AutospecError):
    """A sampler's knobs are out of range or inconsistent: a
    :class:`~numpyro_autospec.config.SamplerConfig`, a
    :class:`~numpyro_autospec.engine.Capacity` (and its mesh), the options of a baseline or of
    a training loop.

    >>> import jax
    >>> from numpyro_autospec import engine
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(4, beta=1.0), 4, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 2)
    >>> engine.run(process, keys, capacity=engine.Capacity(max_queries=0))
    Traceback (most recent call last):
    ...
    numpyro_autospec.exceptions.ConfigError: capacity.max_queries must be a positive integer, got 0
    """


class InputError(AutospecError):
    """Data given to a sampler is malformed: observed values out of the support, an observed
    mask of the wrong shape or traced, an order that is not a permutation, keys of the wrong
    shape, a bad time grid, a site's sizes, training data.

    >>> import numpy as np
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> try:
    ...     AnyOrderProcess(CurieWeissOracle(3, beta=1.0), 3, 2,
    ...                     observed_mask=np.ones(2, bool), observed_values=np.zeros(3, int))
    ... except InputError as error:
    ...     print(error)
    site 'x': observed_mask must be a bool array of shape (3,), got bool (2,)
    """


def positive_integer(value: object, label: str, error: type[AutospecError] = InputError) -> int:
    """``value`` as an ``int`` if it is a positive integer (a Python or NumPy integer; a
    ``bool``, a float such as ``2.0`` and a traced value are not), else ``error`` with the
    message ``"{label} must be a positive integer, got {value!r}"``.  The one check of every
    size and count the package takes (sites, categories, steps, layers, batch sizes).

    >>> positive_integer(3, "num_steps")
    3
    >>> positive_integer(2.0, "fit: batch_size", ConfigError)
    Traceback (most recent call last):
    ...
    numpyro_autospec.exceptions.ConfigError: fit: batch_size must be a positive integer, got 2.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{label} must be a positive integer, got {value!r}")
    return int(value)
