"""Deliberately broken pieces of the engine, for the tests that run a wrong sampler through the
same code path as an exactness test and assert that the same statistic rejects it.

Nothing here is a test.  Patch a piece in with ``monkeypatch`` (it is read when the engine is
traced, so the run needs a compilation of its own, not a cached program); the four most used
patches are functions of the ``monkeypatch`` fixture (:func:`break_block_verification`,
:func:`break_token_verification`, :func:`break_residual_trials`, :func:`break_target_steps`):

* ``monkeypatch.setitem(verification.VERIFIERS, "block", keep_every_site)`` (or ``"token"``):
  verification that keeps the whole draft, the speculation never corrected;
* ``monkeypatch.setattr(_tasks, "residual_log_accept_prob", accept_every_residual)``: the
  paper's residual trials accepted unconditionally (the law becomes
  :math:`\\min(\\mu, \\nu) + \\mathrm{TV}\\,\\mu`);
* ``monkeypatch.setattr(AnyOrderProcess, "target_sample", tempered_target_sample)``: every
  target step drawn from its conditional squared and renormalized (sequential sampling, and
  every method's exact steps, from the wrong law);
* ``monkeypatch.setattr(AnyOrderProcess, "spec_sample", tempered_spec_sample)``: every
  speculated site drawn from its speculation row squared and renormalized, while the rows the
  verifier reads (``spec_reduce``, ``spec_logp``) stay the reported ones: a speculation whose
  draws do not follow the law it reports;
* ``monkeypatch.setattr(jax.random, "permutation", identity_permutation)``: the random order
  of sequential sampling never shuffled;
* ``monkeypatch.setattr(kv_cache, "append_site", drop_one_key)``
  (``numpyro_autospec.learned._kv_cache``): a key-value cache that drops one site's key;
* :class:`TargetWithVarianceError` with ``error = 1`` (a traced argument, so that the right
  sampler, ``error = 0``, shares its compiled program): a diffusion whose target density has
  the wrong variance in the acceptance tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import numpyro_autospec._core.verification as verification
import numpyro_autospec.engine._tasks as _tasks
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess

#: the original, before a test patches :func:`tempered_spec_sample` in
_spec_sample = AnyOrderProcess.spec_sample

try:  # the learned extra (equinox); the original, before a test patches it in the module
    from numpyro_autospec.learned._kv_cache import append_site as _append_site
except ImportError:  # pragma: no cover
    _append_site = None


def keep_every_site(key, target_rows, draft_rows, values, gamma):
    """A broken verifier: every speculated site kept, the window's draft never corrected."""
    return verification.Verdict(gamma, values[0])


def accept_every_residual(log_mu, log_nu):
    """A broken residual rule: every residual trial accepted (log-probability 0)."""
    return 0.0 * log_mu


def tempered_target_sample(process, key, x, k, reduced):
    """A broken ``AnyOrderProcess.target_sample``: the step's value drawn from its conditional
    row squared and renormalized (log-probabilities doubled), not from the row itself."""
    value = jax.random.categorical(key, 2.0 * reduced).astype(jnp.int32)
    return x._replace(values=x.values.at[process._site(x, k)].set(value))


def tempered_spec_sample(process, key, x, a, m, answer):
    """A broken ``AnyOrderProcess.spec_sample``: the speculated sites drawn from the rows of
    ``answer`` squared and renormalized (log-probabilities doubled); the verifier still reads
    the rows themselves."""
    return _spec_sample(process, key, x, a, m, jax.nn.log_softmax(2.0 * answer, axis=-1))


def break_block_verification(patch) -> None:
    """Patch :func:`keep_every_site` in as the block verifier (the roots' windows)."""
    patch.setitem(verification.VERIFIERS, "block", keep_every_site)


def break_token_verification(patch) -> None:
    """Patch :func:`keep_every_site` in as the token verifier (ASSD's windows)."""
    patch.setitem(verification.VERIFIERS, "token", keep_every_site)


def break_residual_trials(patch) -> None:
    """Patch :func:`accept_every_residual` in as the paper's residual acceptance rule."""
    patch.setattr(_tasks, "residual_log_accept_prob", accept_every_residual)


def break_target_steps(patch) -> None:
    """Patch :func:`tempered_target_sample` in as ``AnyOrderProcess.target_sample``."""
    patch.setattr(AnyOrderProcess, "target_sample", tempered_target_sample)


def identity_permutation(key, x, *args, **kwargs):
    """A broken shuffle for ``jax.random.permutation``: the order is never permuted (sequential
    sampling then runs in index order, not a uniformly random one)."""
    return x


#: the site whose keys and values :func:`drop_one_key` leaves out of the cache
DROPPED_SITE = 1


def drop_one_key(oracle, cache, site, value):
    """A broken :func:`numpyro_autospec.learned._kv_cache.append_site`: the keys and values of
    site :data:`DROPPED_SITE` are written but never marked as part of the prefix, so every
    later conditional ignores that site's value (the other sites are appended as usual)."""
    appended = _append_site(oracle, cache, site, value)
    dropped = appended.filled.at[1 + DROPPED_SITE].set(cache.filled[1 + DROPPED_SITE])
    return appended._replace(filled=dropped)


class TargetWithVarianceError(DiffusionProcess):
    r"""A diffusion process with ``error`` (a traced weight) times the error term
    :math:`\log \mathcal{N}(r; 0, 2h_k I) - \log \mathcal{N}(r; 0, h_k I)` added to its target
    density (``step_log_density``, which ``target_logp`` and the engine's batched scoring use),
    :math:`r = y_{k+1} - y_k - h_k f`.  ``error = 0``: the package's density (plus ``0 * term``,
    which adds nothing), so that one compiled program serves the right sampler and the wrong
    one.  ``error = 1``, wrong on purpose: :math:`\mu(y_{k+1} \mid y_k) = \mathcal{N}(y_k + h_k
    f,\, 2h_k I)` in the speculations' acceptance and the residual trials while
    ``target_sample`` keeps variance :math:`h_k`; the ratio :math:`\mu/\nu` of whole blocks is
    then wrong, the single steps are not."""

    def __init__(self, *args, error, **kwargs):
        super().__init__(*args, **kwargs)
        self.error = error

    def step_log_density(self, k, y, y_next, drift):
        h = self.step_sizes[k]
        residual = y_next - y - h * drift
        doubled = -0.5 * self.dim * jnp.log(2.0) + 0.25 * jnp.sum(residual**2) / h
        return super().step_log_density(k, y, y_next, drift) + self.error * doubled
