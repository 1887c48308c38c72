"""Test-case definitions: one sub-package per case, loaded by the configuration's case name.

A case package (:mod:`dycore.cases.mountainwave3d`, :mod:`dycore.cases.schar`) provides its
``Parameters`` model, ``build_mesh`` (and optionally ``check_mesh``), ``sponge``, ``theta_bar``,
``dtheta_bar_dz``, ``reference_state``, ``initial_state``, ``DIRICHLET_TAGS`` and
``NO_NORMAL_FLOW_TAGS``; optionally ``ground_normals`` (exact terrain normals),
``linear_reference`` (``dycore verify``) and ``REFINE_AXES`` (``dycore verify --convergence``).
Nothing outside the case's folder and its configs names a case (docs/architecture.md, "Adding a
case"); :mod:`dycore.cases._background` holds what the cases share.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from dycore.errors import ConfigError

__all__ = ["available_cases", "load_case", "build_config_mesh"]


def available_cases() -> list[str]:
    """Sorted names of the case packages found in this folder (list of str)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_case(name: str) -> ModuleType:
    """Import and return the case module ``cases.<name>``.

    Parameters
    ----------
    name : str
        Case name, e.g. ``"mountainwave3d"``.

    Returns
    -------
    module
        The imported case package.

    Raises
    ------
    ConfigError
        If ``name`` is not a string or not one of :func:`available_cases` (the message lists
        them). Import errors inside an existing case propagate unchanged.
    """
    available = available_cases()
    if not isinstance(name, str) or name not in available:
        raise ConfigError(
            f"unknown case {name!r}; available cases: {', '.join(available) or '(none)'}"
        )
    return importlib.import_module(f"{__name__}.{name}")


def build_config_mesh(config, case: ModuleType | None = None, params=None):
    """The mesh a configuration describes: its case's mesh builder with the ``mesh`` section.

    Parameters
    ----------
    config : dycore.config.Config
    case : the loaded case module (default: ``load_case(config.case.name)``)
    params : the case's parameters (default: ``config.case.build_parameters()``)

    Returns
    -------
    dycore.mesh.Mesh

    With ``mesh.file`` the mesh is read from that file (:func:`dycore.mesh.read.read_mesh`,
    renumbered as ``mesh.renumber`` says, then shuffled when ``mesh.shuffle``) and checked
    against the case by its ``check_mesh(params, mesh, source)`` when the case has one.

    Raises
    ------
    ConfigError for an unknown case; MeshError from the builder, the reader or the case's check.
    """
    case = load_case(config.case.name) if case is None else case
    params = config.case.build_parameters() if params is None else params
    m = config.mesh
    if m.file is not None:
        from dycore.mesh import read_mesh, shuffle

        mesh = read_mesh(m.file, renumber=m.renumber)
        if m.shuffle:
            mesh = shuffle(mesh, m.seed)
        check = getattr(case, "check_mesh", None)
        if check is not None:
            check(params, mesh, source=m.file)
        return mesh
    return case.build_mesh(params, nx=m.nx, ny=m.ny, nz=m.nz, dx_min=m.dx_min, dz_min=m.dz_min,
                           renumber=m.renumber, shuffle=m.shuffle, seed=m.seed, split=m.split,
                           core_x=m.core_x, core_y_half=m.core_y_half, core_dx=m.core_dx,
                           core_z_top=m.core_z_top, dz_core=m.dz_core)
