"""Smoke tests: every example runs with tiny arguments and saves its figure."""

import importlib.util
import os

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name, argv",
    [
        ("quickstart", ["--num-positions", "16", "--num-samples", "6", "--num-chains", "2"]),
        ("infilling", ["--num-positions", "8", "--num-pinned", "2", "--num-samples", "6"]),
        (
            "posterior_coupling",
            ["--num-positions", "16", "--num-samples", "20", "--num-warmup", "10"]
            + ["--num-chains", "1", "--sizes", "--num-draws", "2"],
        ),
        (
            "learned_digits",
            ["--num-steps", "20", "--hidden-size", "16", "--num-samples", "4", "--eval-orders", "1"]
            + ["--no-progress-bar"],
        ),
        (
            "code_infilling",
            ["--num-positions", "32", "--model-size", "16", "--num-layers", "1"]
            + ["--num-heads", "2", "--num-steps", "5", "--batch-size", "4", "--eval-sequences", "4"]
            + ["--num-examples", "1", "--span-length", "8", "--num-draws", "1"]
            + ["--max-characters", "200000", "--no-progress-bar"],
        ),
    ],
)
def test_example_runs(name, argv, tmp_path, capsys):
    module = load(name)
    assert module.__doc__ and "Run::" in module.__doc__
    extra = ["--cache-dir", str(tmp_path / "cache")] if name == "code_infilling" else []
    result = module.main(module.parse_args(argv + extra + ["--out", str(tmp_path)]))
    assert os.path.getsize(result["figure"]) > 10_000
    assert "figure saved" in capsys.readouterr().out
    if name == "code_infilling":  # the three samplers of the same law, the KV cache included
        assert set(result["results"]) == {"autospec", "sequential", "kv-cache"}


def test_quickstart_exact_law_is_normalized():
    module = load("quickstart")
    from numpyro_autospec.oracles import CurieWeissOracle

    law = np.exp(CurieWeissOracle(16, beta=1.0).magnetization_log_probs())
    assert abs(law.sum() - 1) < 1e-9
    assert module.make_model(CurieWeissOracle(16, beta=1.0)) is not None


def test_infilling_exact_laws_match_enumeration():
    module = load("infilling")
    from numpyro_autospec.oracles import IsingChainOracle

    oracle = IsingChainOracle.uniform(6, coupling=0.8)
    values, mask = module.pinned_sites(6, 1)
    up, wall_law = module.exact_laws(oracle, values, mask)
    assert up[0] == pytest.approx(1.0) and up[-1] == pytest.approx(0.0, abs=1e-6)
    assert wall_law.sum() == pytest.approx(1.0) and wall_law[::2].sum() == pytest.approx(0.0)


def test_learned_diffusion_example_runs(tmp_path, capsys):
    pytest.importorskip("equinox")
    pytest.importorskip("sklearn")
    module = load("learned_diffusion")
    assert module.__doc__ and "Run::" in module.__doc__
    argv = ["--num-steps", "8", "--num-samples", "2", "--train-steps", "5", "--hidden-size", "8"]
    argv += ["--depth", "1", "--no-progress-bar", "--cache-dir", str(tmp_path / "cache")]
    result = module.main(module.parse_args(argv + ["--out", str(tmp_path)]))
    assert os.path.getsize(result["figure"]) > 10_000
    out = capsys.readouterr().out
    assert "figure saved" in out and "saved to" in out
    for name, run in result["results"].items():
        assert run["draws"].shape == (2, 64) and np.all(np.isfinite(run["draws"])), name
        if name.endswith("sequential"):
            assert run["rounds"] == run["queries"] == 9, name  # the chain: N + 1
        else:
            assert 1 <= run["rounds"] <= run["queries"], name
