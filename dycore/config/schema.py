"""The configuration schema: the pydantic models of the YAML file's sections (``extra="forbid"``,
finite numbers, units in every field) and the checks across keys.

The defaults below are the only place defaults live; :mod:`dycore.config.reference` prints them.
"""
from __future__ import annotations

import logging
import math
import re
import string
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from dycore.errors import ConfigError

__all__ = [
    "CaseConfig", "MeshConfig", "PhysicsConfig", "TimeConfig", "LinearSolverConfig",
    "SolversConfig", "BackendConfig", "OutputConfig", "StabilityConfig", "Config",
    "MESH_GENERATOR_KEYS", "parse_section",
]

_CONFIG_ERROR = "config_value"          # pydantic error type carrying an explicit sub-key
_CASE_PARAMETERS_ERROR = "case_parameters"  # pydantic error type carrying the case's own errors

log = logging.getLogger("dycore")


def _field(default: Any = ..., *, unit: str, description: str, **constraints: Any) -> Any:
    """A pydantic ``Field`` with a default, a unit (for the key reference) and a description."""
    if callable(default):  # a model class, ``dict`` or a lambda: called for every new instance
        return Field(default_factory=default, description=description,
                     json_schema_extra={"unit": unit}, **constraints)
    return Field(default, description=description, json_schema_extra={"unit": unit}, **constraints)


def _key_errors(*problems: tuple[str, str, Any]) -> PydanticCustomError:
    """Errors on sub-keys of the model being validated (for cross-field validators).

    Each problem is ``(key, what was expected, value)``; :func:`load_config` prints one line each.
    """
    summary = "; ".join(f"{key}: {message}" for key, message, _ in problems)
    return PydanticCustomError(_CONFIG_ERROR, "{summary}",
                               {"summary": summary, "problems": list(problems)})


class _Section(BaseModel):
    """Base of every configuration model: unknown keys and non-finite floats (inf, nan) are
    errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info) -> Any:
        """``true`` / ``false`` where a number is expected is an error (pydantic would read it
        as 1 / 0)."""
        if isinstance(value, bool) and _is_number_field(cls.model_fields[info.field_name]):
            raise ValueError(f"expected a number, not {str(value).lower()}")
        return value


def _is_number_field(field) -> bool:
    """Whether a model field takes int or float (optionally None) and no bool."""
    args = typing.get_args(field.annotation) or (field.annotation,)
    return bool(set(args) & {int, float}) and bool not in args


# --------------------------------------------------------------------------------------- case
class CaseConfig(_Section):
    """Test case: which case module, and overrides of its own Parameters model."""

    name: str = _field("mountainwave3d", unit="-",
                       description="case module under cases/ (e.g. mountainwave3d)")
    parameters: dict[str, Any] = _field(dict, unit="-",
                                        description="overrides of the case's own Parameters model "
                                                    "(keys and units: see the case's README)")

    @model_validator(mode="after")
    def _check_case(self) -> "CaseConfig":
        from dycore.cases import load_case  # lazy: the case packages import physics code

        try:
            module = load_case(self.name)
        except ConfigError as exc:
            raise _key_errors(("name", str(exc), self.name)) from None
        params_cls = getattr(module, "Parameters", None)
        if params_cls is None:
            if self.parameters:
                raise _key_errors(("parameters", f"case {self.name!r} takes no parameters",
                                   self.parameters))
            return self
        allowed = sorted(params_cls.model_fields)
        errors = [{"type": "extra_forbidden", "loc": (key,), "msg": "unknown key",
                   "input": value}
                  for key, value in self.parameters.items() if key not in params_cls.model_fields]
        non_finite = {key for key, value in self.parameters.items()
                      if isinstance(value, float) and not math.isfinite(value)}
        errors += [{"type": "finite_number", "loc": (key,), "msg": "expected a finite number",
                    "input": self.parameters[key]} for key in sorted(non_finite)]
        booleans = {key for key, value in self.parameters.items()
                    if isinstance(value, bool) and key in params_cls.model_fields
                    and _is_number_field(params_cls.model_fields[key])}
        errors += [{"type": "number", "loc": (key,),
                    "msg": f"expected a number, not {str(self.parameters[key]).lower()}",
                    "input": self.parameters[key]} for key in sorted(booleans)]
        non_finite |= booleans
        try:
            params_cls(**{key: value for key, value in self.parameters.items()
                          if key in params_cls.model_fields and key not in non_finite})
        except ValidationError as exc:
            errors += exc.errors(include_url=False)
        if errors:
            raise PydanticCustomError(
                _CASE_PARAMETERS_ERROR, "invalid parameters of case {case}",
                {"case": self.name, "errors": errors, "allowed": allowed})
        return self

    def build_parameters(self) -> Any:
        """The case's ``Parameters`` instance with the overrides of this section applied."""
        from dycore.cases import load_case

        return load_case(self.name).Parameters(**self.parameters)


# --------------------------------------------------------------------------------------- mesh
class MeshConfig(_Section):
    """Mesh: terrain-following generator (6 tetrahedra per hexahedron) or a file; numbering."""

    file: str | None = _field(
        None, unit="-",
        description="tetrahedral mesh file read instead of generating the mesh: gmsh .msh "
                    "(2.2/4.1) or any meshio format, boundary triangles in physical groups "
                    "ground, top, west, east, south, north (docs/mesh.md); relative to the "
                    "working directory. With a file the generator keys (nx ... dz_core) must "
                    "keep their defaults; renumber, shuffle and seed apply to the file's mesh")
    nx: int = _field(48, unit="cells", description="cells along x (streamwise)", ge=1)
    ny: int = _field(48, unit="cells", description="cells along y (spanwise)", ge=1)
    nz: int = _field(40, unit="cells", description="cells along z (vertical)", ge=1)
    dx_min: float = _field(250.0, unit="m",
                           description="horizontal spacing at the mountain (graded outwards)", gt=0)
    dz_min: float = _field(125.0, unit="m",
                           description="vertical spacing at the ground (graded upwards)", gt=0)
    renumber: Literal["none", "rcm"] = _field("rcm", unit="-",
                                              description="node renumbering: none or reverse "
                                                          "Cuthill-McKee (bandwidth reduction)")
    shuffle: bool = _field(False, unit="-",
                           description="randomly permute nodes and elements (stress test of "
                                       "assembly order)")
    seed: int = _field(0, unit="-", description="random seed of the shuffle", ge=0)
    split: Literal["mirror_y", "kuhn", "symmetric_y"] = _field(
        "mirror_y", unit="-",
        description="hexahedron -> tetrahedra split: mirror_y = 6-tet Kuhn split mirrored in y "
                    "for y < 0, so the mesh is mirror-symmetric about y = 0 (needs an even ny; "
                    "an odd ny falls back to kuhn with a warning); kuhn = the same Kuhn split in "
                    "every cell; symmetric_y = 20 tets per cell around cell- and face-centre "
                    "nodes, every cell mirror-symmetric about its own mid-plane in y (a channel "
                    "with free-slip walls, e.g. schar: w independent of y to round-off)")
    core_x: tuple[float, float] | None = _field(
        None, unit="m",
        description="[x_lo, x_hi] of the uniform horizontal core (with core_y_half and core_dx; "
                    "replaces the dx_min grading): uniform cells of at most core_dx there, "
                    "graded geometrically only outside the core")
    core_y_half: float | None = _field(
        None, unit="m", description="the horizontal core spans |y| <= core_y_half (needs an "
                                    "even ny)", gt=0)
    core_dx: float | None = _field(
        None, unit="m", description="largest horizontal cell size in the core", gt=0)
    core_z_top: float | None = _field(
        None, unit="m",
        description="top of the uniform vertical core (with dz_core; replaces the dz_min "
                    "grading): uniform layers from the ground up to here, graded above", gt=0)
    dz_core: float | None = _field(
        None, unit="m", description="largest vertical cell size in the core", gt=0)

    @model_validator(mode="after")
    def _check_core(self) -> "MeshConfig":
        if self.file is not None:
            if not self.file.strip():
                raise _key_errors(("file", "expected a mesh file path or null", self.file))
            changed = [key for key in MESH_GENERATOR_KEYS
                       if getattr(self, key) != type(self).model_fields[key].default]
            if changed:
                raise _key_errors(*((key, "expected no value with mesh.file (the file gives "
                                          "the mesh; leave the generator keys out)",
                                     getattr(self, key)) for key in changed))
        for group in (("core_x", "core_y_half", "core_dx"), ("core_z_top", "dz_core")):
            given = [k for k in group if getattr(self, k) is not None]
            if given and len(given) < len(group):
                raise _key_errors(*((k, f"expected a value: {', '.join(group)} go together",
                                     None) for k in group if k not in given))
        if self.core_x is not None and not self.core_x[0] < self.core_x[1]:
            raise _key_errors(("core_x", "expected [x_lo, x_hi] with x_lo < x_hi",
                               list(self.core_x)))
        return self


#: MeshConfig keys of the generator, which mesh.file replaces
MESH_GENERATOR_KEYS = ("nx", "ny", "nz", "dx_min", "dz_min", "split", "core_x", "core_y_half",
                       "core_dx", "core_z_top", "dz_core")


# ------------------------------------------------------------------------------------ physics
class PhysicsConfig(_Section):
    """Physical coefficients of docs/equations.md §2 and the P1-P1 pressure stabilisation of §3."""

    coriolis_f: float = _field(0.0, unit="1/s", description="f-plane Coriolis parameter")
    nu_h: float = _field(5.0, unit="m^2/s", description="horizontal momentum viscosity", ge=0)
    nu_v: float = _field(1.0, unit="m^2/s", description="vertical momentum viscosity", ge=0)
    kappa_h: float = _field(5.0, unit="m^2/s", description="horizontal diffusivity of theta'",
                            ge=0)
    kappa_v: float = _field(1.0, unit="m^2/s", description="vertical diffusivity of theta'", ge=0)
    kappa_q_h: float = _field(5.0, unit="m^2/s",
                              description="horizontal diffusivity of the moisture tracers", ge=0)
    kappa_q_v: float = _field(1.0, unit="m^2/s",
                              description="vertical diffusivity of the moisture tracers", ge=0)
    stabilisation: float = _field(1.0, unit="1",
                                  description="scale of the P1-P1 pressure stabilisation KMK "
                                              "(0 switches it off)", ge=0)
    no_normal_flow: Literal["strong", "weak"] = _field(
        "strong", unit="-",
        description="no flow through ground and lid: 'strong' rotates the velocity at their "
                    "nodes to normal/tangential components and sets the normal one to 0 "
                    "(free slip); 'weak' only leaves the boundary term out of the divergence")


# --------------------------------------------------------------------------------------- time
class TimeConfig(_Section):
    """Time stepping: theta-scheme with a Picard iteration per step (docs/equations.md §4)."""

    dt: float = _field(10.0, unit="s", description="time step", gt=0)
    t_end: float = _field(3000.0, unit="s", description="end time of the run", gt=0)
    theta: float = _field(0.5, unit="1",
                          description="implicitness of the theta-scheme (0.5 Crank-Nicolson, "
                                      "1 backward Euler)", ge=0.5, le=1.0)
    nonlinear_iterations: int = _field(2, unit="1",
                                       description="Picard iterations per time step", ge=1)
    relaxation: float = _field(0.5, unit="1",
                               description="theta_nl: advecting velocity = theta_nl*u + "
                                           "(1-theta_nl)*u_old", ge=0.0, le=1.0)
    picard_tolerance: float = _field(1e-10, unit="m/s",
                                     description="stop the Picard loop early when the max-norm "
                                                 "velocity change is below this", ge=0)

    @model_validator(mode="after")
    def _check_dt(self) -> "TimeConfig":
        if self.dt > self.t_end:
            raise _key_errors(("dt", f"expected at most t_end = {self.t_end:g} s", self.dt))
        if not math.isfinite(self.t_end / self.dt):
            raise _key_errors(("dt", f"expected a time step that divides t_end = "
                                     f"{self.t_end:g} s into a finite number of steps", self.dt))
        return self

    @property
    def n_steps(self) -> int:
        """Number of time steps to reach ``t_end`` (the last step may overshoot by < dt)."""
        ratio = self.t_end / self.dt
        nearest = round(ratio)
        return int(nearest) if abs(ratio - nearest) <= 1e-9 * ratio else int(ratio) + 1


# ------------------------------------------------------------------------------------ solvers
class LinearSolverConfig(_Section):
    """One Krylov solve: method, preconditioner and stopping criteria."""

    method: Literal["cg", "gmres", "bicgstab", "direct", "auto"] = _field(
        "gmres", unit="-", description="Krylov method (cg only for the SPD pressure system), "
        "or direct: the constant pressure matrix factorised once per run (cuDSS on a GPU with "
        "device solvers, SuperLU on the host), or auto: direct on a GPU with device solvers "
        "where cuDSS is installed and the matrix has at most 1,000,000 rows (K times that "
        "on K GPU ranks sharing one factorisation), cg otherwise (pressure only; "
        "docs/performance.md)")
    preconditioner: Literal["amg", "jacobi", "block_jacobi", "ilu", "none"] = _field(
        "jacobi", unit="-", description="preconditioner (amg: pressure only)")
    rtol: float = _field(1e-10, unit="1", description="relative residual tolerance", gt=0, lt=1)
    atol: float = _field(0.0, unit="system units", description="absolute residual tolerance",
                         ge=0)
    max_iterations: int = _field(500, unit="iterations",
                                 description="iteration limit (then SolverDivergedError); "
                                             "host gmres rounds it up to whole restart cycles",
                                 ge=1)
    restart: int = _field(30, unit="iterations", description="GMRES restart length", ge=1)
    factorisation: Literal["auto", "distributed", "replicated"] = _field(
        "auto", unit="-", description="the direct pressure solve on several GPU ranks: "
        "distributed (one factorisation over all ranks' GPUs: cuDSS's multi-GPU mode, which "
        "needs its NCCL communication layer and Open MPI; the factors are spread over the "
        "GPUs; its solve blocks the host, which costs one graph launch once the Picard "
        "iterations are captured), replicated (every GPU factorises the whole matrix), or "
        "auto: distributed where every rank supports it, the run is not strict or "
        "deterministic and the matrix has at least 500,000 rows (measured shorter steps at "
        "762,129 rows), replicated otherwise (pressure only; docs/parallel.md)")
    amg_coarsening: Literal["aggregation", "classical"] = _field(
        "aggregation", unit="-", description="the pressure AMG hierarchy (PyAMG): "
        "aggregation (smoothed aggregation with the evolution strength measure and "
        "energy-minimising prolongation: the fewest iterations and the shortest step), or "
        "classical (Ruge-Stuben, strength theta 0.25: a shorter set-up, a longer step — on "
        "an H200's paper-mesh run 2.6 s against 9.7 s to build, 38.9 ms against 21.5 ms a "
        "step, so it pays only for runs of fewer than about 400 steps; on rank-local blocks "
        "as many CG iterations as aggregation; docs/performance.md) "
        "(pressure only, with preconditioner amg)")
    precision: Literal["auto", "float64", "float32"] = _field(
        "auto", unit="-", description="storage of the AMG levels' matrix values in device "
        "mode (float32: 2/3 of the bytes per nonzero, arithmetic stays float64; auto: float32 "
        "for the pressure AMG levels, float64 elsewhere; strict mode and host solvers use "
        "float64)")


_SOLVER_DEFAULTS: dict[str, dict[str, Any]] = {
    "pressure": {"method": "auto", "preconditioner": "amg", "rtol": 1e-10,
                 "max_iterations": 500},
    "momentum": {"method": "gmres", "preconditioner": "block_jacobi", "rtol": 1e-10,
                 "max_iterations": 500},
    "tracer": {"method": "gmres", "preconditioner": "jacobi", "rtol": 1e-10,
               "max_iterations": 500},
}


def _solver_default(system: str):
    return lambda: LinearSolverConfig(**_SOLVER_DEFAULTS[system])


class SolversConfig(_Section):
    """Linear solvers per system; keys left out keep the per-system defaults."""

    pressure: LinearSolverConfig = _field(_solver_default("pressure"), unit="-",
                                          description="(CMC + KMK) dp = r, SPD (docs/equations.md §4.5)")
    momentum: LinearSolverConfig = _field(_solver_default("momentum"), unit="-",
                                          description="big_m du = rhs, BCSR 3x3 blocks (§4.4)")
    tracer: LinearSolverConfig = _field(_solver_default("tracer"), unit="-",
                                        description="theta' and moisture tracers (§4.3)")

    @model_validator(mode="before")
    @classmethod
    def _fill_system_defaults(cls, data: Any) -> Any:
        """A partial system section (e.g. only ``rtol``) keeps that system's other defaults."""
        if isinstance(data, dict):
            data = dict(data)
            for system, defaults in _SOLVER_DEFAULTS.items():
                if isinstance(data.get(system), dict):
                    data[system] = {**defaults, **data[system]}
        return data

    @model_validator(mode="after")
    def _check_methods(self) -> "SolversConfig":
        problems = []
        if self.pressure.method not in ("cg", "direct", "auto"):
            problems.append(("pressure.method", "expected 'cg', 'direct' or 'auto' (the "
                             "pressure system is SPD)", self.pressure.method))
        if (self.pressure.amg_coarsening != "aggregation"
                and self.pressure.preconditioner != "amg"):
            problems.append(("pressure.amg_coarsening", "needs preconditioner amg (it chooses "
                             "the AMG hierarchy)", self.pressure.amg_coarsening))
        if self.pressure.precision == "float32" and self.pressure.preconditioner != "amg":
            problems.append(("pressure.precision", "float32 needs preconditioner amg (it "
                             "stores the AMG levels' matrices)", self.pressure.precision))
        for system in ("momentum", "tracer"):
            solver = getattr(self, system)
            if solver.method in ("direct", "auto"):
                problems.append((f"{system}.method", "expected gmres or bicgstab (direct and "
                                 "auto are for the constant pressure matrix only: this matrix is "
                                 "assembled anew every Picard iteration)", solver.method))
            if solver.amg_coarsening != "aggregation":
                problems.append((f"{system}.amg_coarsening", "expected aggregation (the AMG "
                                 "hierarchy is for the pressure system only)",
                                 solver.amg_coarsening))
            if solver.precision == "float32":
                problems.append((f"{system}.precision", "expected float64 (float32 is for the "
                                 "pressure AMG levels)", solver.precision))
            if solver.preconditioner == "amg":
                problems.append((f"{system}.preconditioner",
                                 "expected one of jacobi, block_jacobi, ilu, none "
                                 "(amg is for the pressure system only)", solver.preconditioner))
        if problems:
            raise _key_errors(*problems)
        return self


# ------------------------------------------------------------------------------------ backend
class BackendConfig(_Section):
    """Where the work runs: the backend value (one object passed down the layers) is built
    from this."""

    name: Literal["cpu", "gpu", "auto"] = _field(
        "cpu", unit="-", description="cpu (@njit), gpu (@cuda.jit), auto (gpu if available)")
    solver_mode: Literal["host", "device"] = _field(
        "host", unit="-", description="host: copy matrices to SciPy/PyAMG; device: solve on the "
        "GPU with our CG + AMG and BiCGStab kernels")
    assembly: Literal["atomic", "deterministic"] = _field(
        "atomic", unit="-", description="GPU scatter: atomic adds, or fixed-order gather "
                                        "(bitwise reproducible)")
    strict: bool = _field(False, unit="-",
                          description="bitwise floating-point mode: no FMA contraction on the GPU")
    graphs: bool = _field(True, unit="-",
                          description="device solvers: replay solves and Picard iterations as "
                                      "CUDA graphs (false: launch every kernel from Python, "
                                      "with per-stage timers)")
    threads: int = _field(0, unit="threads",
                          description="CPU threads of @njit parallel loops (0 = all cores)", ge=0)
    reduction: Literal["auto", "exact", "allreduce"] = _field(
        "auto", unit="-",
        description="dot products of the device solvers and MPI ranks. exact: correctly "
                    "rounded sums (one GPU without MPI then solves with the GPU ranks' "
                    "solvers): with deterministic assembly, strict mode and pressure jacobi "
                    "the same bits on one GPU and on any number of GPU ranks, and on any "
                    "number of CPU ranks; allreduce: per-rank partial sums added across ranks "
                    "(one GPU: the device solvers' block sums); auto: exact on CPU ranks and "
                    "on GPU ranks with deterministic assembly or strict mode, allreduce "
                    "otherwise (one GPU: the device solvers' block sums)")
    transport: Literal["auto", "nccl", "peer", "mpi"] = _field(
        "auto", unit="-",
        description="how GPU ranks (mpiexec with backend gpu) move halo messages and "
                    "reductions. nccl: NCCL send/recv and all-reduce; peer: our own kernels "
                    "store each message into the neighbour GPU's memory (CUDA IPC; all ranks "
                    "on one host, GPUs with peer access); mpi: staged through the host "
                    "(correct, slow); auto: peer for two ranks that allow it (on two H200s 4 % "
                    "faster than nccl), else nccl where CuPy has NCCL and every rank has a GPU "
                    "of its own, else peer where the ranks allow it, else mpi")


# ------------------------------------------------------------------------------------- output
_PATH_PLACEHOLDERS = ("case", "config")


class OutputConfig(_Section):
    """netCDF output (UGRID-1.0 snapshots + per-step diagnostics) and terminal progress.

    Intervals named ``*_interval`` are model seconds; ``diagnostics_every_steps`` counts steps
    (its old name ``diagnostics_every`` is read with a deprecation notice and stays readable as
    an attribute)."""

    @model_validator(mode="before")
    @classmethod
    def _deprecated_names(cls, data: Any) -> Any:
        """``diagnostics_every`` -> ``diagnostics_every_steps`` (notice; both given: error)."""
        if isinstance(data, dict) and "diagnostics_every" in data:
            data = dict(data)
            old = data.pop("diagnostics_every")
            if "diagnostics_every_steps" in data:
                raise _key_errors(("output.diagnostics_every",
                                   "give only its new name output.diagnostics_every_steps", old))
            log.warning("notice: output.diagnostics_every is deprecated; write "
                        "output.diagnostics_every_steps (the same number of steps)")
            data["diagnostics_every_steps"] = old
        return data

    @property
    def diagnostics_every(self) -> int:
        """Deprecated alias of :attr:`diagnostics_every_steps` [steps]."""
        return self.diagnostics_every_steps

    path: str = _field("output/{case}.nc", unit="-",
                       description="netCDF file; {case} = case name, {config} = config file stem; "
                                   "relative to the working directory")
    formats: list[Literal["netcdf", "xdmf"]] = _field(
        lambda: ["netcdf"], unit="-",
        description="files a run writes: netcdf (always, the primary record) and optionally xdmf "
                    "(an XDMF + HDF5 time series for ParaView beside the netCDF file, same stem, "
                    "exported when the run ends, as `dycore export FILE --xdmf` does)")
    output_interval: float = _field(300.0, unit="s", description="model time between snapshots",
                                    gt=0)
    diagnostics_every_steps: int = _field(
        1, unit="steps", description="write the per-step diagnostics every this many steps "
                                     "(the old name diagnostics_every is still read, with a "
                                     "deprecation notice)", ge=1)
    progress: bool = _field(True, unit="-", description="show a progress bar on the terminal")
    checkpoint_interval: float = _field(
        0.0, unit="s",
        description="model time between checkpoints (0 = none): the state of that step replaces "
                    "FILE's stem + .checkpoint.nc atomically, for `dycore run --restart`; a "
                    "whole multiple of time.dt", ge=0)
    sections: list[str] = _field(
        list, unit="m",
        description="plane sections written with every snapshot, each as a 2-D UGRID triangle "
                    "mesh (CF netCDF, readable by uxarray, xugrid and ParaView) in its own file "
                    "FILE's stem + .section_<axis><level>m.nc beside FILE, the P1 fields "
                    "interpolated exactly: 'z=3000' a horizontal level, 'y=0' a vertical "
                    "section (docs/output.md)")

    @field_validator("path")
    @classmethod
    def _check_placeholders(cls, value: str) -> str:
        try:
            names = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
        except ValueError as exc:
            raise ValueError(f"a path with valid {{}} placeholders ({exc})") from None
        bad = [name for name in names if name not in _PATH_PLACEHOLDERS]
        if bad:
            raise ValueError(f"placeholders only from {{case}}, {{config}}; unknown {{{bad[0]}}}")
        if not value.strip():
            raise ValueError("a non-empty path")
        return value

    @field_validator("sections")
    @classmethod
    def _check_sections(cls, value: list[str]) -> list[str]:
        planes = [parse_section(item) for item in value]
        if len(set(planes)) != len(planes):
            raise ValueError("each section at most once")
        return value

    @field_validator("formats")
    @classmethod
    def _check_formats(cls, value: list[str]) -> list[str]:
        if "netcdf" not in value:
            raise ValueError("a list that contains netcdf (the netCDF file is the run's record; "
                             "xdmf is exported from it)")
        if len(set(value)) != len(value):
            raise ValueError("each format at most once")
        return value


_SECTION = re.compile(r"\s*([xyz])\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*")


def parse_section(text: str) -> tuple[int, float]:
    """``'z=3000'`` of ``output.sections`` as (axis 0/1/2, level [m]).

    Raises
    ------
    ValueError
        Not ``AXIS=LEVEL`` with AXIS x, y or z and a finite LEVEL in metres.
    """
    match = _SECTION.fullmatch(str(text))
    if match is None:
        raise ValueError(f"a plane AXIS=LEVEL [m] such as z=3000 or y=0, not {text!r}")
    return "xyz".index(match.group(1)), float(match.group(2))


# ---------------------------------------------------------------------------------- stability
class StabilityConfig(_Section):
    """Stability watch: a run that leaves physical bounds stops with an error (exit status 1)."""

    max_speed_factor: float = _field(
        10.0, unit="1",
        description="stop when max|w| (every step) or max|u| (at every snapshot) exceeds this "
                    "multiple of the case's inflow speed u0 (taken as at least 1 m/s); 0 "
                    "switches the speed limit off (NaN/inf still stop the run), else it must be "
                    "above 1", ge=0)

    @field_validator("max_speed_factor")
    @classmethod
    def _off_or_above_one(cls, value: float) -> float:
        if 0.0 < value <= 1.0:
            raise ValueError("expected 0 (off) or more than 1 (the inflow itself moves at 1 x u0)")
        return value


# ------------------------------------------------------------------------------------- config
class Config(_Section):
    """A complete run configuration (the resolved content of one YAML file)."""

    case: CaseConfig = _field(CaseConfig, unit="-", description="test case")
    mesh: MeshConfig = _field(MeshConfig, unit="-", description="mesh")
    physics: PhysicsConfig = _field(PhysicsConfig, unit="-", description="physical coefficients")
    time: TimeConfig = _field(TimeConfig, unit="-", description="time stepping")
    solvers: SolversConfig = _field(SolversConfig, unit="-", description="linear solvers")
    backend: BackendConfig = _field(BackendConfig, unit="-", description="hardware backend")
    output: OutputConfig = _field(OutputConfig, unit="-", description="output")
    stability: StabilityConfig = _field(StabilityConfig, unit="-", description="stability watch")

    _source_path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_mesh_fits_domain(self) -> "Config":
        """``mesh.n? * mesh.d?_min`` must fit in the case's domain (``lx``, ``ly``, ``lz``).

        Checked here, against the case's parameters, so that the error names ``mesh.dx_min``
        and comes before anything is built (the mesh generator would name its own GridSpec).
        """
        if self.mesh.file is not None:
            return self                     # the generator keys are unused (MeshConfig checks)
        params = self.case.build_parameters()
        problems = []
        for n_key, length_key, d_key in (("nx", "lx", "dx_min"), ("ny", "ly", "dx_min"),
                                         ("nz", "lz", "dz_min")):
            length = getattr(params, length_key, None)
            n, d_min = getattr(self.mesh, n_key), getattr(self.mesh, d_key)
            if isinstance(length, (int, float)) and n * d_min > length * (1.0 + 1e-12):
                problems.append((f"mesh.{d_key}",
                                 f"expected at most case.parameters.{length_key} / mesh.{n_key} "
                                 f"= {length:g} m / {n} = {length / n:g} m (mesh.{n_key} cells "
                                 f"of at least mesh.{d_key} must fit in the domain)", d_min))
        if problems:
            raise _key_errors(*problems)
        return self

    @model_validator(mode="after")
    def _check_checkpoint_interval(self) -> "Config":
        """``output.checkpoint_interval`` is 0 or a whole multiple of ``time.dt`` (a checkpoint
        holds the state at the end of a step; an interval between steps is refused, not
        rounded)."""
        interval, dt = self.output.checkpoint_interval, self.time.dt
        if interval > 0:
            ratio = interval / dt
            if not (round(ratio) >= 1 and abs(ratio - round(ratio)) <= 1e-9 * ratio):
                raise _key_errors(("output.checkpoint_interval",
                                   f"expected 0 (off) or a whole multiple of time.dt = {dt:g} s",
                                   interval))
        return self

    @property
    def checkpoint_steps(self) -> int:
        """Steps between checkpoints (``output.checkpoint_interval / time.dt``; 0 = none)."""
        interval = self.output.checkpoint_interval
        return int(round(interval / self.time.dt)) if interval > 0 else 0

    @property
    def source_path(self) -> Path | None:
        """The YAML file this configuration was loaded from (None when built in code)."""
        return self._source_path

    @property
    def output_path(self) -> Path:
        """``output.path`` with ``{case}`` and ``{config}`` (file stem or 'default') filled in."""
        stem = self._source_path.stem if self._source_path is not None else "default"
        return Path(self.output.path.format(case=self.case.name, config=stem))

    def to_yaml(self) -> str:
        """Every key of the configuration, defaults included, as YAML text (loads back equal)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False,
                              default_flow_style=False)

    def resolved_yaml(self) -> str:
        """:meth:`to_yaml` with a comment header naming the source file."""
        source = str(self._source_path) if self._source_path is not None else "built-in defaults"
        return f"# dycore resolved configuration (source: {source})\n{self.to_yaml()}"
