"""No import runs back up the layers: a folder of dycore/ imports only folders listed before it
in docs/architecture.md (module-level and function-level imports alike)."""
import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dycore"

#: the folders in import order (docs/architecture.md); top-level modules sit outside it
ORDER = ("mesh", "fem", "assembly", "backend", "solvers", "physics", "cases", "diagnostics", "io",
         "timestepping", "checks", "parallel", "bench")


def imported_folders(path: Path):
    """(line, module) of every ``dycore.<folder>...`` import in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "dycore":
                names = [f"dycore.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "dycore" and len(parts) > 1 and parts[1] in ORDER:
                yield node.lineno, name


def upward_imports():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        if len(rel) < 2:
            continue                                   # a top-level module
        assert rel[0] in ORDER, f"dycore/{rel[0]}/ is missing from ORDER and the module map"
        me = ORDER.index(rel[0])
        for line, name in imported_folders(path):
            if ORDER.index(name.split(".")[1]) > me:
                found.append(f"dycore/{'/'.join(rel)}:{line} imports {name}")
    return found


def test_every_folder_is_in_the_order_and_in_the_module_map():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(ORDER)
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    positions = [re.search(rf"^dycore/{f}/", text, re.M).start() for f in ORDER]
    assert positions == sorted(positions), "docs/architecture.md lists the folders in ORDER"


def test_no_import_runs_back_up_the_layers():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The walker finds function-level and ``from dycore import`` forms (so the test can fail)."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from dycore.io.netcdf import open_output\n"
                   "from dycore import timestepping\nimport dycore.solvers.krylov\n")
    assert list(imported_folders(src)) == [(3, "dycore.timestepping"),
                                           (4, "dycore.solvers.krylov"),
                                           (2, "dycore.io.netcdf")]
