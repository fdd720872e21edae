"""Deliberately broken pieces of the engine, for the tests that run a wrong sampler through the
same code path as an exactness test and assert that the same statistic rejects it.

Nothing here is a test.  Patch a piece in with ``monkeypatch`` (it is read when the engine is
traced, so the run needs a compilation of its own, not a cached program):

* ``monkeypatch.setitem(verification.VERIFIERS, "block", keep_every_site)`` (or ``"token"``):
  verification that keeps the whole draft, the speculation never corrected;
* ``monkeypatch.setattr(_tasks, "residual_log_accept_prob", accept_every_residual)``: the
  paper's residual trials accepted unconditionally (the law becomes
  :math:`\\min(\\mu, \\nu) + \\mathrm{TV}\\,\\mu`);
* ``monkeypatch.setattr(jax.random, "permutation", identity_permutation)``: the random order
  of sequential sampling never shuffled;
* ``monkeypatch.setattr(kv_cache, "append_site", drop_one_key)``
  (``numpyro_autospec.learned.kv_cache``): a key-value cache that drops one site's key.
"""

from __future__ import annotations

import numpyro_autospec.verification as verification

try:  # the learned extra (equinox); the original, before a test patches it in the module
    from numpyro_autospec.learned.kv_cache import append_site as _append_site
except ImportError:  # pragma: no cover
    _append_site = None


def keep_every_site(key, target_rows, draft_rows, values, gamma):
    """A broken verifier: every speculated site kept, the window's draft never corrected."""
    return verification.Verdict(gamma, values[0])


def accept_every_residual(log_mu, log_nu):
    """A broken residual rule: every residual trial accepted (log-probability 0)."""
    return 0.0 * log_mu


def identity_permutation(key, x, *args, **kwargs):
    """A broken shuffle for ``jax.random.permutation``: the order is never permuted (sequential
    sampling then runs in index order, not a uniformly random one)."""
    return x


#: the site whose keys and values :func:`drop_one_key` leaves out of the cache
DROPPED_SITE = 1


def drop_one_key(oracle, cache, site, value):
    """A broken :func:`numpyro_autospec.learned.kv_cache.append_site`: the keys and values of
    site :data:`DROPPED_SITE` are written but never marked as part of the prefix, so every
    later conditional ignores that site's value (the other sites are appended as usual)."""
    appended = _append_site(oracle, cache, site, value)
    dropped = appended.filled.at[1 + DROPPED_SITE].set(cache.filled[1 + DROPPED_SITE])
    return appended._replace(filled=dropped)
