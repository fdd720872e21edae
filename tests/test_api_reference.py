"""The API reference is complete and its examples run.

* Every module of the package (found with :func:`pkgutil.walk_packages`, not listed by hand)
  passes its docstring examples as doctests (``doctest.ELLIPSIS``).  A module that needs an
  optional dependency (an extra of ``pyproject.toml``) that is not installed is skipped, with
  the reason.
* Every public class and function has a ``>>>`` example.  Public: the classes and functions
  in ``__all__`` of the package and of its direct submodules and subpackages
  (``numpyro_autospec.oracles``, ``numpyro_autospec.config``, ...); every other module has a
  ``_``-prefixed part in its dotted path (``numpyro_autospec.engine._round``, ...) and is for
  contributors.
* Each public name is rendered by a ``::: target`` directive of a page in ``docs/api/``: its
  own (``::: numpyro_autospec.oracles.CurieWeissOracle``), under any public path of the same
  object, or its module's (``::: numpyro_autospec.config``).
* The public surface stays small: at most 15 public modules naming at most 80 distinct objects.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
from types import ModuleType

import pytest

import numpyro_autospec
from numpyro_autospec._core.rejection import batch_size

API_PAGES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "api")

# Optional dependencies (extras of pyproject.toml) by module prefix: a module under the prefix
# is skipped when one of them is not installed.
OPTIONAL_DEPENDENCIES = {
    "numpyro_autospec.learned": ("equinox", "optax"),  # extra "learned"
    "numpyro_autospec.denoisers._digits": ("sklearn",),  # extra "digits" (its data set)
}


def _raise(name: str) -> None:
    """A subpackage that fails to import fails the walk (it would otherwise leave the doctest
    run without a word)."""
    raise ImportError(f"{name} failed to import while walking the package")


def package_modules() -> list[str]:
    """Every module and subpackage of ``numpyro_autospec``, the package itself first."""
    found = pkgutil.walk_packages(numpyro_autospec.__path__, "numpyro_autospec.", onerror=_raise)
    return ["numpyro_autospec"] + sorted(info.name for info in found)


def public_modules() -> list[str]:
    """The package and its direct submodules and subpackages whose names do not start with an
    underscore: their ``__all__`` is the API."""
    return [
        name
        for name in package_modules()
        if not any(part.startswith("_") for part in name.split("."))
    ]


def missing_dependencies(module_name: str) -> list[str]:
    return [
        dependency
        for prefix, dependencies in OPTIONAL_DEPENDENCIES.items()
        if module_name == prefix or module_name.startswith(prefix + ".")
        for dependency in dependencies
        if importlib.util.find_spec(dependency) is None
    ]


def import_or_skip(module_name: str) -> ModuleType:
    missing = missing_dependencies(module_name)
    if missing:
        pytest.skip(f"{module_name} needs {', '.join(missing)}, which is not installed")
    return importlib.import_module(module_name)


def public_objects(module: ModuleType) -> dict[str, object]:
    """The classes and functions of ``module.__all__``, by the full name where each is defined
    (a name re-exported by several modules appears once)."""
    return {name: value for name, (value, _) in exported(module).items()}


def exported(module: ModuleType) -> dict[str, tuple[object, str]]:
    """``defined name -> (object, public name)`` of the classes and functions of
    ``module.__all__``: the full name where each is defined, and the one it is imported by."""
    objects = {}
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            objects[f"{value.__module__}.{value.__qualname__}"] = (
                value,
                f"{module.__name__}.{name}",
            )
    return objects


def has_example(value: object) -> bool:
    return ">>>" in (inspect.getdoc(value) or "")


def rendered_targets() -> set[str]:
    """The targets of the ``::: target`` directives of ``docs/api/*.md`` that render their
    members (a directive with ``members: false`` renders the module docstring only)."""
    directive = re.compile(r"^::: (\S+)\n((?:[ \t]+.*\n|\n)*)", flags=re.MULTILINE)
    targets = set()
    for page in sorted(os.listdir(API_PAGES)):
        if not page.endswith(".md"):
            continue
        with open(os.path.join(API_PAGES, page)) as file:
            text = file.read() + "\n"
        for target, options in directive.findall(text):
            if not re.search(r"^\s*members:\s*false\s*$", options, flags=re.MULTILINE):
                targets.add(target)
    return targets


@pytest.mark.parametrize("module_name", package_modules())
def test_docstring_examples_run(module_name: str) -> None:
    module = import_or_skip(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{module_name}: {result.failed} docstring examples failed"


def test_module_discovery_finds_every_layer():
    """The walk reaches the subpackages' modules (a broken walk would run no doctests)."""
    modules = package_modules()
    for name in [
        "numpyro_autospec._core.rejection",
        "numpyro_autospec.engine._round",
        "numpyro_autospec.oracles._curie_weiss",
        "numpyro_autospec.infer._inspection",
        "numpyro_autospec.learned._network",
    ]:
        assert name in modules
    assert "numpyro_autospec.oracles" in public_modules()
    assert "numpyro_autospec.engine._round" not in public_modules()
    assert "numpyro_autospec._core.failures" not in public_modules()


@pytest.mark.parametrize("module_name", public_modules())
def test_public_names_have_examples(module_name: str) -> None:
    module = import_or_skip(module_name)
    objects = public_objects(module)
    missing = sorted(name for name, value in objects.items() if not has_example(value))
    assert not missing, f"public names of {module_name} without a '>>>' example: {missing}"


def public_paths() -> dict[int, set[str]]:
    """``id(object) -> {public dotted names}`` over every public module's ``__all__``."""
    paths: dict[int, set[str]] = {}
    for module_name in public_modules():
        if missing_dependencies(module_name):
            continue
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            paths.setdefault(id(getattr(module, name)), set()).add(f"{module_name}.{name}")
    return paths


@pytest.mark.parametrize("module_name", public_modules())
def test_public_names_are_rendered(module_name: str) -> None:
    module = import_or_skip(module_name)
    targets = rendered_targets()
    paths = public_paths()
    unrendered = sorted(
        name
        for name, (value, _) in exported(module).items()
        if value.__module__ not in targets and not paths[id(value)] & targets
    )
    assert not unrendered, (
        f"public names of {module_name} whose module no '::: module' directive of docs/api/*.md "
        f"renders: {unrendered}"
    )


def test_the_public_surface_is_small():
    """At most 15 public modules and 80 distinct public objects (what a user may import and
    the project promises to keep)."""
    modules = public_modules()
    assert "numpyro_autospec.infer" in modules and len(modules) <= 15, modules
    assert 40 <= len(public_paths()) <= 80


def test_checks_catch_a_missing_example_and_an_unrendered_module():
    """The helpers fail where they should: no example, a ``members: false`` directive."""

    def undocumented(x):
        """Twice ``x``."""
        return 2 * x

    assert not has_example(undocumented)
    assert has_example(batch_size)
    targets = rendered_targets()
    assert "numpyro_autospec.oracles.AnyOrderOracle" in targets
    assert "numpyro_autospec.oracles" not in targets  # rendered with members: false


def test_a_module_without_its_optional_dependency_is_skipped_with_the_reason(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "equinox" else find_spec(name)
    )
    with pytest.raises(pytest.skip.Exception, match="needs equinox, which is not installed"):
        import_or_skip("numpyro_autospec.learned._network")
    assert (
        import_or_skip("numpyro_autospec._core.rejection").__name__
        == "numpyro_autospec._core.rejection"
    )
