"""The code of the documentation site runs as written.

* Every code block fenced as ``python`` in a page of ``docs/`` runs, in order, in one namespace
  per page, all pages in one fresh Python process (``docs/numpyro.md`` is run by
  ``tests/infer/test_arviz.py``, together with the checks of its first block's run).  Blocks
  fenced as ``py`` are illustrations that are not run; the page says why next to each.  Blocks
  fenced as ``bash``/``text`` are commands and pseudo-code.
* The docstring examples that the API reference renders run in ``tests/test_api_reference.py``.
* The docs' own Griffe extension (``docs/griffe_rest.py``) turns reST markup into Markdown.
"""

import importlib
import importlib.util
import os
import re

import pytest

from tests.fresh_process import run_fresh, user_environment
from tests.infer.test_arviz import python_blocks

DOCS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs")
RUN_ELSEWHERE = {"numpyro.md": "tests/infer/test_arviz.py"}
FENCE = re.compile(r"^```([^\n`]*)$", flags=re.MULTILINE)
LANGUAGES = {"python", "py", "bash", "text"}


def pages() -> list[str]:
    names = []
    for root, _, files in os.walk(DOCS):
        names += [os.path.relpath(os.path.join(root, f), DOCS) for f in files if f.endswith(".md")]
    return sorted(names)


def read(page: str) -> str:
    with open(os.path.join(DOCS, page)) as file:
        return file.read()


PAGES_WITH_CODE = [p for p in pages() if python_blocks(read(p)) and p not in RUN_ELSEWHERE]


def test_fences_are_known_languages():
    """Every fenced block says what it is (so that none is silently skipped)."""
    for page in pages():
        openings = FENCE.findall(read(page))[::2]  # opening fences; closings alternate
        unknown = sorted(set(openings) - LANGUAGES)
        assert not unknown, f"docs/{page}: fenced blocks with language {unknown}"


def test_pages_with_python_blocks_are_run():
    assert "algorithm.md" in PAGES_WITH_CODE
    for page, test in RUN_ELSEWHERE.items():
        assert python_blocks(read(page)), f"docs/{page} has no python blocks for {test}"


_RUNNER = """
import json, sys, traceback
pages, results_path = json.loads(sys.stdin.read())
failures = {}
for page, blocks in pages:
    namespace = {"__name__": "docs_" + page.replace("/", "_").removesuffix(".md")}
    try:
        for index, block in enumerate(blocks):
            exec(compile(block, f"docs/{page}, python block {index}", "exec"), namespace)
    except BaseException:
        failures[page] = traceback.format_exc()
    else:
        failures[page] = None
with open(results_path, "w") as file:
    json.dump(failures, file)
"""


@pytest.fixture(scope="module")
def page_failures(tmp_path_factory):
    """Every page's blocks run in order in one namespace per page, all pages in one fresh
    Python process (as a reader runs them, with the suite's strict JAX settings): a page's
    result does not depend on the tests that ran before it in the same worker, and JAX is
    imported once for all pages (a few seconds each).  Maps each page to its traceback, or to
    ``None`` when its blocks ran."""
    results_path = tmp_path_factory.mktemp("docs") / "failures.json"
    environment = user_environment(JAX_PLATFORMS="cpu", JAX_NUMPY_RANK_PROMOTION="raise")
    pages = [[page, python_blocks(read(page))] for page in PAGES_WITH_CODE]
    completed, failures = run_fresh(
        _RUNNER, pages, results_path, os.path.dirname(DOCS), environment, timeout=900
    )
    if failures is None:
        crash = f"the pages' process failed:\n{completed.stderr[-3000:]}"
        return dict.fromkeys(PAGES_WITH_CODE, crash)
    return failures


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_python_blocks_run(page, page_failures):
    """The blocks of a page run in order in one namespace (see ``page_failures``)."""
    failure = page_failures[page]
    assert failure is None, f"docs/{page} failed:\n{failure[-3000:]}"


@pytest.fixture(scope="module")
def griffe_rest():
    """The docs' Griffe extension, loaded from its file (it is not part of the package)."""
    pytest.importorskip("griffe")  # the docs extra
    spec = importlib.util.spec_from_file_location(
        "griffe_rest", os.path.join(DOCS, "griffe_rest.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_griffe_extension_renders_rest_as_markdown(griffe_rest):
    text = "\n".join(
        [
            "Uses :class:`~a.b.Thing` and :func:`f` with :math:`x_i^2`.",
            "",
            ".. math:: y = 1",
            "",
            ">>> 1 + 1",
            "2",
        ]
    )
    assert griffe_rest.rest_to_markdown(text).splitlines() == [
        "Uses `Thing` and `f` with \\(x_i^2\\).",
        "",
        "\\[",
        "y = 1",
        "\\]",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        "```",
    ]


def test_griffe_extension_moves_an_example_after_fields_before_them(griffe_rest):
    """In reST a paragraph at the margin ends a field list; Griffe's sphinx parser would read
    it as part of the last field, so the extension moves it before the first field."""
    text = "\n".join(
        [
            "Twice ``x``.",
            "",
            ":param x: a number,",
            "    any number.",
            ":raises ValueError: never.",
            "",
            ">>> twice(2)",
            "4",
        ]
    )
    assert griffe_rest.rest_to_markdown(text).splitlines() == [
        "Twice ``x``.",
        "",
        "```pycon",
        ">>> twice(2)",
        "4",
        "```",
        "",
        ":param x: a number,",
        "    any number.",
        ":raises ValueError: never.",
    ]
    unchanged = "Twice ``x``.\n\n:param x: a number.\n:math:`x` is not a field."
    assert griffe_rest.rest_to_markdown(unchanged).splitlines()[2:] == [
        ":param x: a number.",
        "\\(x\\) is not a field.",
    ]


#: a reference to a section of a page: ``docs/page.md, "Heading"`` (or ``docs/page.md "Heading"``)
SECTION_REFERENCE = re.compile(r'(docs/[\w/]+\.md),?\s*"([^"]{3,100})"')


def headings(page: str) -> list[str]:
    """The headings of ``docs/page``, without their numbers (``5. Measured rounds``) and
    backquotes."""
    found = re.findall(r"^#+\s+(.*)$", read(page), flags=re.MULTILINE)
    return [re.sub(r"^\d+[a-z]?\.\s*", "", heading).replace("`", "").strip() for heading in found]


def dangling_section_references(text: str) -> list[tuple[str, str]]:
    """The ``(page, heading)`` references of ``text`` (line breaks and comment markers folded
    into spaces) whose page has no heading of that name."""
    flat = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", text)
    dangling = []
    for page_path, heading in SECTION_REFERENCE.findall(flat):
        page = page_path.removeprefix("docs/")
        names = [name.lower() for name in headings(page)] if page in pages() else []
        if heading.replace("`", "").strip().lower() not in names:
            dangling.append((page_path, heading))
    return dangling


def test_section_references_name_existing_headings():
    """Code, tests, scripts and pages cite a page's section by its heading; a heading that was
    renamed or removed leaves the citation pointing nowhere."""
    root = os.path.dirname(DOCS)
    sources = [os.path.join(root, "README.md")]
    for folder in ("numpyro_autospec", "examples", "benchmarks", "tests", "docs"):
        for directory, _, files in os.walk(os.path.join(root, folder)):
            sources += [os.path.join(directory, f) for f in files if f.endswith((".py", ".md"))]
    dangling = {}
    for source in sources:
        with open(source) as file:
            found = dangling_section_references(file.read())
        if found and os.path.abspath(source) != os.path.abspath(__file__):
            dangling[os.path.relpath(source, root)] = found
    assert not dangling, f"references to sections that do not exist: {dangling}"


def test_a_dangling_section_reference_is_found():
    assert dangling_section_references('see (docs/numpyro.md,\n# "Diagnostics and ArviZ")') == []
    assert dangling_section_references('see (docs/numpyro.md, "Compilation")') == [
        ("docs/numpyro.md", "Compilation")
    ]
    assert dangling_section_references('docs/nowhere.md, "A first model"') == [
        ("docs/nowhere.md", "A first model")
    ]
