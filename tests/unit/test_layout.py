"""The repository's layout: its top level, the test cases in cases/ (installed as dycore.cases)
and the package list of pyproject.toml."""
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tracked_top_level() -> set[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return {line.split("/")[0] for line in out.splitlines() if not line.startswith(".")}


def test_top_level_is_the_design_cards():
    assert tracked_top_level() == {"pyproject.toml", "README.md", "Makefile", "dycore", "configs",
                                   "cases", "tests", "scripts", "docs"}


def test_one_folder_per_case_with_its_readme():
    import dycore.cases

    assert Path(dycore.cases.__file__).resolve() == ROOT / "cases" / "__init__.py"
    folders = sorted(p.name for p in (ROOT / "cases").iterdir()
                     if p.is_dir() and not p.name.startswith(("_", ".")))
    assert folders == dycore.cases.available_cases() == ["mountainwave3d", "schar"]
    for name in folders:
        readme = (ROOT / "cases" / name / "README.md").read_text(encoding="utf-8")
        assert f"configs/{name}" in readme, f"cases/{name}/README.md names no config"
        assert "## " in readme


def test_pyproject_lists_every_package_and_maps_the_cases():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"] == {"dycore.cases": "cases"}
    found = {".".join(p.relative_to(ROOT).parts[:-1]) for p in (ROOT / "dycore").rglob("__init__.py")}
    found.discard("dycore.cases")                # the source tree's loader of cases/
    found |= {".".join(("dycore",) + p.relative_to(ROOT).parts[:-1])
              for p in (ROOT / "cases").rglob("__init__.py")}
    assert sorted(tool["packages"]) == sorted(found)
