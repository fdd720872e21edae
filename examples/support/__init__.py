"""What the example and benchmark scripts share, and the library does not ship.

* :mod:`support.scripts` -- their command line (plain-text ``--help`` with defaults, the usual
  options) and saving a figure;
* :mod:`support.training` -- the any-order objective and Adam loop of a
  :class:`~numpyro_autospec.learned.MaskedMLP`;
* :mod:`support.transformer_training` -- the objectives, training loop and held-out bits per
  character of a :class:`~numpyro_autospec.learned.TransformerOracle`;
* :mod:`support.denoiser_training` -- denoising regression of a
  :class:`~numpyro_autospec.learned.LearnedDenoiser`;
* :mod:`support.checkpoints` -- train once, reload (``equinox`` serialisation);
* :mod:`support.text` -- the Python standard library's source as character data.

The scripts import it by bare name: ``python examples/name.py`` has ``examples/`` first on
``sys.path``; the benchmarks' ``cases`` module and the tests (``pythonpath`` in
``pyproject.toml``) put it there too.  A network trained any other way samples the same:
the library needs only the network (docs/learned.md).
"""
