"""No import runs back up the layers: a module of dycore/ (a folder, or a top-level module)
imports only the layers listed before it in docs/architecture.md (module-level and
function-level imports alike)."""
import ast
import re
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[2] / "dycore"
#: the test cases: the top-level folder cases/, imported as dycore.cases (layer "cases")
CASES = PACKAGE.parent / "cases"

#: the layers in import order (docs/architecture.md's module map): folders of dycore/ and the
#: top-level modules (``dycore/__init__.py``, which imports its public names on first use, sits
#: above all of them)
ORDER = ("dtypes", "errors", "mesh", "fem", "assembly", "backend", "solvers", "physics", "cases",
         "config", "diagnostics", "io", "preflight", "api", "timestepping", "checks", "parallel",
         "bench", "doctor", "cli", "__main__")


def layer_of(path: Path) -> str:
    """The layer of a module file of the package: its folder, or its own name at the top."""
    if path.is_relative_to(CASES):
        return "cases"
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else path.stem


def module_files():
    """Every module file of the package: dycore/ and the cases in cases/."""
    return sorted(PACKAGE.rglob("*.py")) + sorted(CASES.rglob("*.py"))


def imported_layers(path: Path):
    """(line, module) of every ``dycore.<layer>...`` import in ``path``."""
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
    """``(file, line, module)`` of every import of a layer above the importing file's."""
    found = []
    for path in module_files():
        if path == PACKAGE / "__init__.py":
            continue
        me = layer_of(path)
        rel = path.relative_to(PACKAGE.parent).as_posix()
        assert me in ORDER, f"{rel}: layer {me!r} is missing from ORDER"
        for line, name in imported_layers(path):
            if ORDER.index(name.split(".")[1]) > ORDER.index(me):
                found.append((rel, line, name))
    return found


def test_every_layer_is_in_the_order_and_in_the_module_map():
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    layers |= {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert layers == set(ORDER)
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    positions = []
    for layer in ORDER:
        match = re.search(rf"^dycore/{re.escape(layer)}(/|\.py)", text, re.M)
        assert match, f"docs/architecture.md's module map does not list dycore/{layer}"
        positions.append(match.start())
    assert positions == sorted(positions), "docs/architecture.md lists the layers in ORDER"


def test_no_import_runs_back_up_the_layers():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The walker finds function-level and ``from dycore import`` forms (so the test can fail),
    for folders and top-level modules alike."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from dycore.io.netcdf import open_output\n"
                   "from dycore import timestepping\nimport dycore.solvers.krylov\n"
                   "from dycore.config import load_config\nfrom dycore import __version__\n")
    assert list(imported_layers(src)) == [(3, "dycore.timestepping"),
                                          (4, "dycore.solvers.krylov"),
                                          (5, "dycore.config"),
                                          (2, "dycore.io.netcdf")]
    fake = tmp_path / "dycore"
    (fake / "io").mkdir(parents=True)
    (fake / "io" / "w.py").write_text("from dycore.preflight import check_memory\n")
    (fake / "errors.py").write_text("def f():\n    import dycore.cli\n")
    (fake / "cli.py").write_text("from dycore.io import w\n")
    (tmp_path / "cases" / "a").mkdir(parents=True)
    (tmp_path / "cases" / "a" / "__init__.py").write_text("import dycore.io.netcdf\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    monkeypatch.setitem(globals(), "CASES", tmp_path / "cases")
    assert upward_imports() == [("dycore/errors.py", 2, "dycore.cli"),
                                ("dycore/io/w.py", 1, "dycore.preflight"),
                                ("cases/a/__init__.py", 1, "dycore.io.netcdf")]
