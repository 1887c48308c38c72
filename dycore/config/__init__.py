"""The run configuration: typed, validated pydantic models of the YAML file.

A configuration file has eight sections, every key optional (the defaults below are the only place
defaults live; ``dycore config --reference`` prints them as Markdown)::

    case:     which test case and overrides of its own parameters
    mesh:     terrain-following mesh size, grading and node numbering
    physics:  Coriolis parameter, viscosities, diffusivities, KMK stabilisation (docs/equations.md §2-3)
    time:     time step, end time, theta-scheme and Picard iteration (docs/equations.md §4)
    solvers:  Krylov method, preconditioner and tolerances per linear system
    backend:  cpu / gpu, host or device solvers, assembly mode, strict floating point
    output:   netCDF path, formats (netCDF, XDMF), snapshot interval, diagnostics, progress
    stability: the speed limit that stops a run which leaves physical bounds

Unknown keys and non-finite numbers (``.inf``, ``.nan``) are rejected at every level.
:func:`load_config` turns every validation problem into one :class:`~dycore.errors.ConfigError`
whose message has one line per problem::

    configs/run.yaml: time.dt: expected greater than 0 (got -1.0)
    configs/run.yaml: mesh.nxx: unknown key; expected one of nx, ny, nz, ... (got 48)

The package: :mod:`~dycore.config.schema` (the models), :mod:`~dycore.config.loading` (YAML,
overrides, validation), :mod:`~dycore.config.messages` (one line per problem) and
:mod:`~dycore.config.reference` (the key reference and the JSON Schema); every public name is
importable from ``dycore.config``.
"""
from dycore.config.loading import MAX_YAML_VALUES, default_config, load_config
from dycore.config.reference import config_json_schema, config_reference_markdown
from dycore.config.schema import (
    MESH_GENERATOR_KEYS, BackendConfig, CaseConfig, Config, LinearSolverConfig, MeshConfig,
    OutputConfig, PhysicsConfig, SolversConfig, StabilityConfig, TimeConfig, parse_section,
)

__all__ = [
    "CaseConfig", "MeshConfig", "PhysicsConfig", "TimeConfig", "LinearSolverConfig",
    "SolversConfig", "BackendConfig", "OutputConfig", "StabilityConfig", "Config",
    "load_config", "default_config", "config_reference_markdown", "config_json_schema",
    "parse_section", "MESH_GENERATOR_KEYS", "MAX_YAML_VALUES",
]
