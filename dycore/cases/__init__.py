"""``dycore.cases`` is the repository's top-level ``cases/`` folder (one folder per test case).

An installed package (a wheel) maps ``dycore.cases`` onto that folder itself (``package-dir``
in pyproject.toml), so this file is never installed. In a source tree, used with
``PYTHONPATH=<repo>`` or through an editable install, Python finds this file first: it loads
``cases/__init__.py`` as ``dycore.cases`` in its place, its sub-packages searched in ``cases/``.
"""
import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

_FOLDER = _Path(__file__).resolve().parents[2] / "cases"
_spec = _util.spec_from_file_location(__name__, _FOLDER / "__init__.py",
                                      submodule_search_locations=[str(_FOLDER)])
_module = _util.module_from_spec(_spec)
_sys.modules[__name__] = _module          # the import system returns what sys.modules holds
_spec.loader.exec_module(_module)
