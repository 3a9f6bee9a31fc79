"""The package's imports form layers (benchmarks/imports.py): no cycle, at most two imports reaching up the
layer order, each with the comment that says why."""

import importlib.util
import sys
from pathlib import Path

import pytest

from rnnrepro.configuration import REPO_ROOT


@pytest.fixture(scope="module")
def imports():
    spec = importlib.util.spec_from_file_location("benchmark_imports", REPO_ROOT / "benchmarks" / "imports.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def plant(root: Path, files: dict[str, str]) -> Path:
    """A package named rnnrepro under ``root`` with the given modules (path: source)."""
    package = root / "rnnrepro"
    for name, source in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source)
    return package


def test_the_package_has_no_import_cycle_and_few_upward_imports(imports):
    edges = imports.graph()
    assert len(edges) > 300, "the graph lost the package's imports: is benchmarks/imports.py reading src/rnnrepro?"
    assert imports.problems(edges) == []


def test_every_module_is_in_a_layer(imports):
    for name in imports.module_names(imports.PACKAGE):
        imports.layer_of(name)  # SystemExit names a module that no layer holds


def test_a_cycle_is_found_through_an_import_inside_a_function(imports, tmp_path):
    package = plant(tmp_path, {
        "grid.py": "from .layout import RESULTS\n",
        "layout.py": "RESULTS = 'results'\n\ndef cells():\n    from . import grid  # the cells live there\n",
        "data/__init__.py": "", "data/registry.py": "from rnnrepro.data import corpus\n",
        "data/corpus.py": "from .registry import EOS\n",
    })
    edges = imports.graph(package)
    assert imports.cycles(edges) == [["rnnrepro.data.corpus", "rnnrepro.data.registry"],
                                     ["rnnrepro.grid", "rnnrepro.layout"]]
    problems = imports.problems(edges)
    assert "import cycle: rnnrepro.grid <-> rnnrepro.layout" in problems
    assert "import cycle: rnnrepro.data.corpus <-> rnnrepro.data.registry" in problems


def test_upward_imports_are_counted_and_need_their_reason(imports, tmp_path):
    upward = {"layout.py": "from . import grid  # why\n", "errors.py": "# why\nfrom .grid import Cell\n",
              "console.py": "import rnnrepro.analysis.results\n", "grid.py": "", "analysis/__init__.py": "",
              "analysis/results.py": "from rnnrepro import grid\n"}
    edges = imports.graph(plant(tmp_path / "three", upward))
    assert [(e.importer, e.imported, e.reason) for e in imports.upward(edges)] == [
        ("rnnrepro.console", "rnnrepro.analysis.results", ""), ("rnnrepro.errors", "rnnrepro.grid", "why"),
        ("rnnrepro.layout", "rnnrepro.grid", "why")]
    assert imports.problems(edges) == [
        "3 upward imports, at most 2: move them down (see --help)",
        "upward import without a reason comment: rnnrepro.console line 1 imports rnnrepro.analysis.results"]
    del upward["console.py"]
    assert imports.problems(imports.graph(plant(tmp_path / "two", upward))) == []


def test_imports_only_a_type_checker_reads_are_not_edges(imports, tmp_path):
    package = plant(tmp_path, {"layout.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from .grid import Cell\n", "grid.py": "from . import layout\n"})
    assert [(e.importer, e.imported) for e in imports.graph(package)] == [("rnnrepro.grid", "rnnrepro.layout")]
