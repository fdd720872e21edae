"""Deliberately broken pieces of the engine, for the tests that run a wrong sampler through the
same code path as an exactness test and assert that the same statistic rejects it.

Nothing here is a test.  Patch a piece in with ``monkeypatch`` (it is read when the engine is
traced, so the run needs a compilation of its own, not a cached program):

* ``monkeypatch.setitem(verification.VERIFIERS, "block", keep_every_site)`` (or ``"token"``):
  verification that keeps the whole draft, the speculation never corrected;
* ``monkeypatch.setattr(_tasks, "residual_log_accept_prob", accept_every_residual)``: the
  paper's residual trials accepted unconditionally (the law becomes
  :math:`\\min(\\mu, \\nu) + \\mathrm{TV}\\,\\mu`).
"""

from __future__ import annotations

import numpyro_autospec._core.verification as verification


def keep_every_site(key, target_rows, draft_rows, values, gamma):
    """A broken verifier: every speculated site kept, the window's draft never corrected."""
    return verification.Verdict(gamma, values[0])


def accept_every_residual(log_mu, log_nu):
    """A broken residual rule: every residual trial accepted (log-probability 0)."""
    return 0.0 * log_mu
