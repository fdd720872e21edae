"""Smoke test of ``examples/diffusion_digits.py``: it runs with tiny arguments (with the frozen
drift, and with the speculation of a rank-4 posterior estimate), its draws are digit images,
the sequential chain costs N + 1 rounds, and it saves its figure."""

import importlib.util
import os

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "speculation", [[], ["--posterior-rank", "4"]], ids=["frozen", "posterior-rank"]
)
def test_diffusion_digits_example_runs(speculation, tmp_path, capsys):
    pytest.importorskip("sklearn")
    module = load("diffusion_digits")
    assert module.__doc__ and "Run::" in module.__doc__
    argv = ["--num-steps", "8", "--sizes", "8", "--num-samples", "2", "--no-progress-bar"]
    argv += speculation
    result = module.main(module.parse_args(argv + ["--out", str(tmp_path)]))
    assert os.path.getsize(result["figure"]) > 10_000
    out = capsys.readouterr().out
    assert "figure saved" in out and "sequential 9 and 9" in out
    for draws in result["draws"].values():
        assert draws.shape == (2, 64) and np.all(np.isfinite(draws))
        assert draws.min() > -1e-3 and draws.max() < 1 + 1e-3  # averages of [0, 1] images
    mean_rounds, mean_queries = result["costs"][8]
    assert 1 <= mean_rounds <= mean_queries
