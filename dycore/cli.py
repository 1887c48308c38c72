"""The ``dycore`` command line: ``dycore run | plot | export | config | validate | bench | verify
| mesh | doctor``.

Each subcommand is one ``_add_<name>(parser)`` function that defines its arguments (its docstring
is the subcommand's description) and one ``_cmd_<name>(args)`` handler; :data:`_COMMANDS` lists
them with the one-line help, so a new subcommand (``validate``, ``bench``) is two functions plus
one entry. Every :class:`~dycore.errors.DycoreError` is reported as
``dycore: error: <message>`` on stderr (one line per line of the message, e.g. one per invalid
configuration key), without a traceback; exit status 2 for configuration errors, 1 for others;
``dycore doctor`` exits 3 when a GPU run cannot work here. ``-v`` / ``-q`` / ``--log-file`` work
before and after the subcommand; ``--set KEY.PATH=VALUE`` on every subcommand with a CONFIG.
"""
from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path

from dycore import __version__
from dycore.errors import ConfigError, DycoreError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_ERROR, EXIT_CONFIG_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _number(text: str, convert, what: str, ok, what_ok: str):
    """``convert(text)`` for an argparse ``type``: "expected WHAT" when it does not convert,
    "expected WHAT_OK" when ``ok(value)`` is false (argparse prints the message)."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what_ok}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    return _number(text, int, "a positive integer", lambda v: v >= 1, "a positive integer")


def _positive_float(text: str) -> float:
    return _number(text, float, "a positive number", lambda v: v > 0 and math.isfinite(v),
                   "a positive finite number")


def _finite_float(text: str) -> float:
    return _number(text, float, "a number", math.isfinite, "a finite number")


def _block_size(text: str) -> int:
    """Threads per block of the element kernels: a multiple of 32 from 32 to 256 (the assembly
    kernels use up to 168 registers per thread; 512 x 168 exceeds the 64K registers of a block
    on the H200 and the launch fails)."""
    value = _positive_int(text)
    if value % 32 or not 32 <= value <= 256:
        raise argparse.ArgumentTypeError(
            f"expected a multiple of 32 from 32 to 256, got {text!r} (the element kernels use up "
            "to 168 registers per thread; 512 threads exceed a block's 64K registers)")
    return value


def _check_image_path(flag: str, path: Path | None) -> None:
    """Refuse an image file name matplotlib cannot write (before any work is done)."""
    if path is None or not path.suffix:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if path.suffix[1:].lower() not in formats:
        raise ConfigError(f"{flag} {path}: unknown image format {path.suffix!r}; expected a "
                          f"file name ending in one of {', '.join('.' + f for f in formats)}")


def _check_writes(outputs: dict, inputs: dict, *, overwrite: bool | None = None) -> None:
    """Refuse outputs that are inputs (same file), and (``overwrite`` False) existing outputs."""
    from dycore.errors import OutputError
    from dycore.io.safety import check_outputs_not_inputs

    check_outputs_not_inputs(outputs, inputs)
    if overwrite is False:
        for flag, out in outputs.items():
            if out is not None and out.is_file():
                raise OutputError(f"{out}: {flag} file exists; pass --overwrite to replace it")


#: the positional inputs of the subcommands: metavar, help
_INPUTS = {"config": ("CONFIG", "YAML configuration file"),
           "file": ("FILE", "netCDF output of 'dycore run'")}


def _add_input(parser: argparse.ArgumentParser, name: str, *, optional: bool = False,
               note: str = "") -> None:
    """The positional ``config`` or ``file`` of :data:`_INPUTS` (a Path; ``optional``: it may be
    left out), ``note`` appended to its help."""
    metavar, what = _INPUTS[name]
    parser.add_argument(name, type=Path, metavar=metavar, nargs="?" if optional else None,
                        help=what + note)


def _add_overwrite(parser: argparse.ArgumentParser, what: str) -> None:
    """``--overwrite``: "replace WHAT (default: refuse)"."""
    parser.add_argument("--overwrite", action="store_true",
                        help=f"replace {what} (default: refuse)")


# ----------------------------------------------------------------------------------- run
def _add_run(parser: argparse.ArgumentParser) -> None:
    """Run the case of CONFIG and write its netCDF output (and, with output.formats: [netcdf,
    xdmf], an XDMF series for ParaView, with output.sections 2-D UGRID section files, both
    snapshot by snapshot); print the stage-timer table and the output path at the end. Options
    override the file."""
    _add_input(parser, "config")
    parser.add_argument("--steps", type=_positive_int, metavar="N",
                        help="stop after N time steps (default: run to time.t_end)")
    parser.add_argument("--t-end", type=_positive_float, metavar="SECONDS",
                        help="override time.t_end [s]")
    parser.add_argument("--output", metavar="FILE",
                        help="override output.path ({case} and {config} placeholders allowed)")
    parser.add_argument("--backend", choices=("cpu", "gpu", "auto"), help="override backend.name")
    parser.add_argument("--solver-mode", choices=("host", "device"),
                        help="override backend.solver_mode")
    parser.add_argument("--assembly", choices=("atomic", "deterministic"),
                        help="override backend.assembly (GPU)")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="override backend.strict (GPU: no FMA contraction)")
    parser.add_argument("--reduction", choices=("auto", "exact", "allreduce"),
                        help="override backend.reduction (exact: correctly rounded dot "
                             "products; one GPU then gives the GPU ranks' bits)")
    parser.add_argument("--transport", choices=("auto", "nccl", "peer", "mpi"),
                        help="override backend.transport (GPU ranks under mpiexec: NCCL, our "
                             "peer stores over NVLink/PCIe, or staged through MPI)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-setup-cache", action="store_true",
                        help="neither read nor write the set-up cache (mesh, operators, AMG "
                             "hierarchies, MPI ranks' pieces) for this run; same as "
                             "DYCORE_CACHE_DIR=off")
    parser.add_argument("--nvtx", action="store_true",
                        help="NVTX ranges around every timed stage, named as the stage timers, "
                             "for Nsight Systems (same as DYCORE_NVTX=1; needs CuPy or the nvtx "
                             "package, a notice otherwise)")
    _add_overwrite(parser, "the output file (and its XDMF export) if it exists")
    parser.add_argument("--restart", type=_restart_arg, metavar="FILE[@TIME]",
                        help="continue the run from a snapshot of FILE (output of an earlier or "
                             "killed run with the same configuration, or its checkpoint "
                             "FILE-stem.checkpoint.nc; only time.t_end and output.* may differ): "
                             "the snapshot nearest TIME [s] within time.dt / 2, default the last "
                             "complete one (or the checkpoint when later, or when FILE cannot be "
                             "read). Appends to FILE when the output path is FILE; --output NEW "
                             "writes a new file instead")


def _restart_arg(text: str) -> tuple[Path, float | None]:
    """``FILE[@TIME]`` of ``--restart``: (FILE, TIME or None). A suffix after the last ``@``
    that is not a number belongs to the file name."""
    head, sep, tail = text.rpartition("@")
    if sep and head:
        try:
            value = float(tail)
        except ValueError:
            return Path(text), None
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(
                f"expected FILE@TIME with a finite TIME >= 0 [s], got {text!r}")
        return Path(head), value
    return Path(text), None


def _set_item(text: str) -> tuple[str, object]:
    """``KEY.PATH=VALUE`` of ``--set``: (the dotted key, VALUE read as a YAML scalar or flow
    collection: ``5`` an int, ``1e-8`` a float, ``null``, ``[netcdf, xdmf]`` a list)."""
    import yaml

    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise argparse.ArgumentTypeError(
            f"expected KEY.PATH=VALUE such as time.dt=5 (got {text!r})")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value                   # not YAML: the text itself (validation judges it)
    return key, parsed


def _with_set(args: argparse.Namespace, overrides: dict) -> tuple[dict, tuple[str, ...]]:
    """``overrides`` (from the subcommand's own flags) merged with the ``--set`` items:
    (nested overrides, the dotted keys given by --set). A key given twice by --set, or by
    --set and a flag, is a ConfigError naming both."""
    from dycore.api import _overrides_tree

    items = getattr(args, "set", None) or []
    if not items:
        return overrides, ()
    keys = [key for key, _ in items]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ConfigError(f"--set {twice[0]}: given more than once")
    flags = _flat_keys(overrides)
    clash = sorted(set(keys) & set(flags))
    if clash:
        raise ConfigError(f"--set {clash[0]}: also set by {flags[clash[0]]}; give one of them")
    tree = _overrides_tree({**{k: v for k, v in _flat_values(overrides).items()},
                            **dict(items)})
    return tree, tuple(keys)


#: the flag that sets each dotted key (for :func:`_with_set`'s messages)
_FLAG_OF = {"time.t_end": "--t-end", "output.path": "--output", "output.progress":
            "--no-progress / --quiet", "backend.name": "--backend",
            "backend.solver_mode": "--solver-mode", "backend.assembly": "--assembly",
            "backend.strict": "--strict / --no-strict", "backend.reduction": "--reduction",
            "backend.transport": "--transport"}


def _flat_values(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat_values(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _flat_keys(tree: dict) -> dict:
    return {key: _FLAG_OF.get(key, "a flag") for key in _flat_values(tree)}


def _load(path: Path, overrides: dict, set_keys: tuple[str, ...] = ()):
    """``load_config(path, overrides)``; an error line about a key given by ``--set`` names
    ``--set KEY`` instead of the file (the file does not hold that value)."""
    from dycore.config import load_config

    logging.getLogger("dycore").debug("configuration: %s%s", path, "".join(
        f"; --set {key}" for key in set_keys))
    try:
        return load_config(path, overrides)
    except ConfigError as exc:
        if not set_keys:
            raise
        lines = []
        for line in str(exc).splitlines():
            for key in set_keys:
                head = f"{path}: {key}:"
                if line.startswith(head) or line.startswith(f"{path}: {key}."):
                    line = f"--set {line[len(str(path)) + 2:]}"
                    break
            lines.append(line)
        raise ConfigError("\n".join(lines)) from None


def _load_with_t_end(path: Path, overrides: dict, t_end: float | None,
                     set_keys: tuple[str, ...] = ()):
    """``load_config(path, overrides)`` with ``--t-end`` applied, naming the flag when it is
    shorter than the file's time step (the file's own ``time.dt`` is not the mistake)."""
    try:
        return _load(path, overrides, set_keys)
    except ConfigError:
        if t_end is None:
            raise
        without = {**overrides, "time": {k: v for k, v in overrides.get("time", {}).items()
                                         if k != "t_end"}}
        dt = _load(path, without, set_keys).time.dt   # the file's own errors, if any, first
        if t_end < dt:
            raise ConfigError(f"--t-end: expected at least time.dt = {dt:g} s of {path} "
                              f"(got {t_end:g})") from None
        raise


def _run_overrides(args: argparse.Namespace) -> dict:
    """The nested configuration overrides given on the command line."""
    overrides: dict = {}
    if args.t_end is not None:
        overrides.setdefault("time", {})["t_end"] = args.t_end
    if args.output is not None:
        overrides.setdefault("output", {})["path"] = args.output
    if args.no_progress or getattr(args, "quiet", False):
        overrides.setdefault("output", {})["progress"] = False
    if args.backend is not None:
        overrides.setdefault("backend", {})["name"] = args.backend
    if args.solver_mode is not None:
        overrides.setdefault("backend", {})["solver_mode"] = args.solver_mode
    if args.assembly is not None:
        overrides.setdefault("backend", {})["assembly"] = args.assembly
    if args.strict is not None:
        overrides.setdefault("backend", {})["strict"] = args.strict
    if getattr(args, "reduction", None) is not None:
        overrides.setdefault("backend", {})["reduction"] = args.reduction
    if getattr(args, "transport", None) is not None:
        overrides.setdefault("backend", {})["transport"] = args.transport
    return overrides


def _cmd_run(args: argparse.Namespace) -> int:
    import os

    from dycore.backend.stage_hooks import NVTX_ENV

    env = {}
    if args.nvtx:
        env[NVTX_ENV] = "1"                # read when the stage timers are made
    if args.no_setup_cache:
        env["DYCORE_CACHE_DIR"] = "off"    # read when the set-up starts (every MPI rank)
    previous = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return _run(args)
    finally:                               # main() may be called again in the same process
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(args: argparse.Namespace) -> int:
    from dycore.errors import OutputError
    from dycore.timestepping.simulation import run_from_config

    overrides, set_keys = _with_set(args, _run_overrides(args))
    config = _load_with_t_end(args.config, overrides, args.t_end, set_keys)
    from dycore.parallel.run import launched_ranks
    if launched_ranks():              # under mpiexec: the decomposed run (docs/architecture.md)
        from dycore.parallel.cli_run import cmd_run_mpi
        return cmd_run_mpi(args, config)
    restart, restart_at = args.restart if args.restart is not None else (None, None)
    appending = False
    if restart is not None and restart.is_dir():
        raise ConfigError(f"--restart {restart}: is a directory; expected an output file of "
                          "dycore run (FILE.nc) or its checkpoint (FILE.checkpoint.nc)")
    if restart is not None:
        from dycore.io.restart import checkpoint_path
        from dycore.timestepping.simulation import _same_file

        appending = (_same_file(config.output_path, restart)     # FILE or FILE's checkpoint
                     or _same_file(checkpoint_path(config.output_path), restart))
        if not appending and args.output is None:
            raise ConfigError(
                f"--restart {restart}: output.path of {args.config} is {config.output_path}, not "
                f"the restart file; pass --output {restart} to append to it, or --output "
                f"{config.output_path} to start a new file")
    if config.output.sections and not args.overwrite and not appending:
        from dycore.io.sections import section_paths

        existing = [str(p) for p in section_paths(config.output_path, config.output.sections)
                    if p.exists()]
        if existing:
            raise OutputError(f"{', '.join(existing)}: section file(s) of output.sections "
                              "exist; pass --overwrite to replace them")
    xdmf = "xdmf" in config.output.formats
    if xdmf:                  # refuse an existing export before the run, not after it
        from dycore.io.xdmf import xdmf_paths

        existing = [str(p) for p in xdmf_paths(config.output_path) if p.exists()]
        if existing and not args.overwrite and not appending:
            raise OutputError(f"{' and '.join(existing)}: XDMF output exists; pass --overwrite "
                              "to replace it")
    from dycore.io.safety import output_lock
    from dycore.preflight import check_output_path

    check_output_path(config.output_path, overwrite=True)   # before a lock file is made there
    with output_lock(config.output_path):    # the run (and its XDMF series): one writer
        more = {} if restart is None else {"restart": restart, "restart_at": restart_at}
        # the XDMF series and the sections are written with each snapshot (a run that stops
        # early, unstable or killed, leaves them with its finished snapshots)
        summary = run_from_config(config, max_steps=args.steps, overwrite=args.overwrite,
                                  **more)
        if not getattr(args, "quiet", False):
            print(summary.timers_table)
            if getattr(summary, "split_text", ""):
                print(summary.split_text)
        print(f"{summary.steps} steps to t = {summary.t:g} s in {summary.wall_time:.2f} s wall "
              "time")
        print(f"output: {summary.output_path}")
        if xdmf:
            from dycore.io.xdmf import xdmf_summary
            print(xdmf_summary(summary.output_path))
        return EXIT_OK


# ---------------------------------------------------------------------------------- plot
def _add_plot(parser: argparse.ArgumentParser) -> None:
    """Plot a node field (default w) of FILE on the vertical plane y = 0 and on the horizontal
    plane z = Z-LEVEL: filled colours chosen from the window shown (a symmetric scale around 0
    for the perturbations v, w, p, theta_prime; the field's own range for u and the mixing
    ratios), contour lines at a fixed interval (in the field's units), the terrain on both
    (grey below the vertical plane; brown height contours on the horizontal one, grey where the
    ground rises above it). --diagnostics plots the per-step diagnostics instead."""
    _add_input(parser, "file")
    parser.add_argument("--png", type=Path, metavar="OUT",
                        help="image to write (default: FILE's stem + '_FIELD.png' beside FILE)")
    parser.add_argument("--field", default="w", metavar="NAME",
                        help="node field: u, v, w, p, theta_prime, q_v, q_c, q_r (default: w)")
    parser.add_argument("--time", type=_finite_float, metavar="SECONDS",
                        help="the snapshot nearest this model time (default: the last)")
    parser.add_argument("--z-level", type=_finite_float, default=3000.0, metavar="M",
                        help="height of the horizontal section [m] (default: 3000)")
    from dycore.io.plot import DEFAULT_XLIM, DEFAULT_YLIM, DEFAULT_ZLIM   # no matplotlib yet

    def window(name, lim, what):
        parser.add_argument(f"--{name}lim", type=_finite_float, nargs=2, default=lim,
                            metavar=(f"{name.upper()}0", f"{name.upper()}1"),
                            help=f"{what} [m] (default: {lim[0]:g} {lim[1]:g})")
    window("x", DEFAULT_XLIM, "x window")
    window("y", DEFAULT_YLIM, "y window of the horizontal section")
    window("z", DEFAULT_ZLIM, "z window of the vertical section")
    parser.add_argument("--whole-domain", action="store_true",
                        help="show the whole domain (ignore --xlim/--ylim/--zlim)")
    parser.add_argument("--diagnostics", action="store_true",
                        help="plot the per-step diagnostics (max|w|, kinetic energy, max|div u|, "
                             "iterations) against time instead")


def _cmd_plot(args: argparse.Namespace) -> int:
    from dycore.io.plot import plot_diagnostics, plot_w

    _check_image_path("--png", args.png)
    _check_writes({"--png": args.png}, {"FILE (the output file read)": args.file})
    if args.diagnostics:
        print(plot_diagnostics(args.file, args.png))
        return EXIT_OK
    whole = args.whole_domain
    for name in "xyz":
        low, high = getattr(args, f"{name}lim")
        if not low < high:
            raise ConfigError(f"--{name}lim: expected {name.upper()}0 < {name.upper()}1 [m] "
                              f"(got {low:g} {high:g})")
    print(plot_w(args.file, args.png, field=args.field, at=args.time, z_level=args.z_level,
                 xlim=None if whole else args.xlim, ylim=None if whole else args.ylim,
                 zlim=None if whole else args.zlim))
    return EXIT_OK


# -------------------------------------------------------------------------------- export
def _add_export(parser: argparse.ArgumentParser) -> None:
    """Write every snapshot of FILE as an XDMF time series (FILE's stem + .xdmf, with the HDF5
    data in the folder FILE-stem_xdmf beside it) that ParaView and VTK open: the tetrahedral
    mesh with the node arrays u, v, w, p, theta_prime, q_v, q_c, q_r and the vector velocity
    (units as metadata), and the boundary triangles with face_tag (1 = ground: the terrain). A
    run with output.formats: [netcdf, xdmf] writes the same series as it goes."""
    _add_input(parser, "file")
    formats = parser.add_mutually_exclusive_group(required=True)
    formats.add_argument("--xdmf", action="store_true",
                         help="XDMF 3 + HDF5 time series (ParaView: XDMF Reader)")
    parser.add_argument("--out", type=Path, metavar="PATH",
                        help="the .xdmf file to write (default: FILE with suffix .xdmf); the "
                             "HDF5 data goes into the folder <stem>_xdmf beside it")
    _add_overwrite(parser, "an existing .xdmf file and its data folder")


def _cmd_export(args: argparse.Namespace) -> int:
    from dycore.io.xdmf import export_xdmf, xdmf_summary

    export_xdmf(args.file, args.out, overwrite=args.overwrite)
    print(xdmf_summary(args.file, args.out))
    return EXIT_OK


# ---------------------------------------------------------------------------------- mesh
def _add_mesh(parser: argparse.ArgumentParser) -> None:
    """Build the mesh of CONFIG (generated, or read from mesh.file) and write it with its
    boundary tags: gmsh .msh with the physical groups ground, top, west, east, south, north
    (what mesh.file reads back, docs/mesh.md), or any other format meshio writes (by the
    extension of --out, tags as the cell data face_tag), to inspect it in gmsh or ParaView or
    to start a mesh of your own from it."""
    _add_input(parser, "config")
    parser.add_argument("--out", type=Path, metavar="PATH",
                        help="file to write (default: CONFIG's stem + .msh in the working "
                             "directory)")
    parser.add_argument("--msh-version", choices=("2.2", "4.1"), default="2.2",
                        help="gmsh format version of a .msh file (default 2.2)")
    _add_overwrite(parser, "an existing file")


def _cmd_mesh(args: argparse.Namespace) -> int:
    from dycore import cases
    from dycore.errors import OutputError
    from dycore.mesh import FaceTag, write_mesh

    config = _load(args.config, *_with_set(args, {}))
    out = args.out if args.out is not None else Path(f"{args.config.stem}.msh")
    if out.is_dir():
        raise OutputError(f"{out}: --out is a directory; expected a file name such as "
                          f"{out / (args.config.stem + '.msh')}")
    _check_writes({"--out": out}, {"CONFIG (the configuration file)": args.config,
                                   "mesh.file (the mesh read)": config.mesh.file})
    if out.exists() and not args.overwrite:
        raise OutputError(f"{out}: file exists; pass --overwrite to replace it")
    mesh = cases.build_config_mesh(config)
    write_mesh(mesh, out, msh_version=args.msh_version)
    counts = ", ".join(f"{tag.name.lower()} {int((mesh.face_tags == tag).sum()):,}"
                       for tag in FaceTag)
    print(f"mesh: {mesh.nnodes:,} nodes, {mesh.nele:,} tetrahedra, {mesh.nfaces:,} boundary "
          f"faces ({counts})")
    print(f"written: {out}")
    return EXIT_OK


# -------------------------------------------------------------------------------- config
def _add_config(parser: argparse.ArgumentParser) -> None:
    """Print CONFIG with every default filled in (all defaults without CONFIG), or with
    --reference the Markdown reference of every key."""
    _add_input(parser, "config", optional=True)
    parser.add_argument("--reference", action="store_true",
                        help="print the key reference (Markdown tables: key, type, default, "
                             "unit, description)")
    parser.add_argument("--schema", action="store_true",
                        help="print the JSON Schema of a configuration file (from the "
                             "pydantic models), for editors that check YAML")


def _cmd_config(args: argparse.Namespace) -> int:
    from dycore.config import config_json_schema, config_reference_markdown, default_config

    given = [flag for flag, on in (("CONFIG", args.config is not None),
                                   ("--reference", args.reference),
                                   ("--schema", args.schema)) if on]
    if len(given) > 1:
        raise ConfigError(f"give one of CONFIG, --reference, --schema (got {' and '.join(given)})")
    if args.set and args.config is None:
        raise ConfigError(f"--set {args.set[0][0]}: needs CONFIG (the file it overrides)")
    if args.schema:
        import json

        print(json.dumps(config_json_schema(), indent=2))
    elif args.reference:
        print(config_reference_markdown(), end="")
    elif args.config is not None:
        print(_load(args.config, *_with_set(args, {})).resolved_yaml(), end="")
    else:
        print(default_config().resolved_yaml(), end="")
    return EXIT_OK


# ------------------------------------------------------------------------------ validate
def _add_validate(parser: argparse.ArgumentParser) -> None:
    """Build CONFIG on the CPU and on the GPU (host solvers), compare every assembly kernel on
    the (perturbed) initial state, step both and compare every field at each output time; write
    a text/JSON report, a netCDF of the GPU - CPU fields and a PNG of |dw| on y = 0 into
    --output-dir. GPU assembly and strict FP come from the file's backend section when set
    there, else deterministic + strict (bitwise mode). Exit status 1 when a difference exceeds
    the tolerance."""
    _add_input(parser, "config")
    parser.add_argument("--t-end", type=_positive_float, metavar="SECONDS",
                        help="override time.t_end [s]")
    parser.add_argument("--steps", type=_positive_int, metavar="N",
                        help="stop after N time steps (default: run to time.t_end)")
    parser.add_argument("--output-dir", type=Path, default=Path("output/validate"),
                        metavar="DIR", help="folder for the reports (default: output/validate)")
    parser.add_argument("--tolerance", type=float, metavar="X",
                        help="relative tolerance: fail when max|GPU-CPU| > X * max|CPU| for a "
                             "field or kernel output (default: 0 for deterministic + strict, "
                             "else 1e-10)")
    parser.add_argument("--assembly", choices=("atomic", "deterministic"),
                        help="override the GPU assembly mode")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="override strict floating point on the GPU")
    parser.add_argument("--repeat-gpu", action="store_true",
                        help="run the GPU twice and compare the final-field SHA-256 hashes "
                             "(must match with deterministic assembly)")
    parser.add_argument("--checks", default="fields", metavar="LIST",
                        help="comma-separated subset of fields (the comparison above), libm "
                             "(strict FP per operation, GPU vs CPU), restart (bitwise GPU "
                             "restart, dycore.checks.bitwise) (default: fields)")
    parser.add_argument("--restart-steps", type=_positive_int, default=20, metavar="N",
                        help="steps of the restart check, restarted at N/2 (default: 20)")
    parser.add_argument("--restart-modes", default="device,host", metavar="LIST",
                        help="solver modes of the restart check (default: device,host)")


def _cmd_validate(args: argparse.Namespace) -> int:
    from dycore.checks.validate import validate

    if args.tolerance is not None and not args.tolerance >= 0:
        raise ConfigError(f"--tolerance: expected a number >= 0, got {args.tolerance!r}")
    overrides = {"output": {"progress": False}}
    if args.t_end is not None:
        overrides["time"] = {"t_end": args.t_end}
    overrides, set_keys = _with_set(args, overrides)
    config = _load_with_t_end(args.config, overrides, args.t_end, set_keys)
    from dycore.preflight import notice_threads
    notice_threads(config)              # the CPU side would use fewer threads without a word
    _check_writes({f"--output-dir ({name})": args.output_dir / name
                   for name in ("validate_diff.nc", "validate_dw.png", "validate_report.txt",
                                "validate_report.json")},
                  {"CONFIG (the configuration file)": args.config,
                   "mesh.file (the mesh read)": config.mesh.file})
    checks = _split_checks(args.checks)
    passed = True
    if "fields" in checks:
        result = validate(config, steps=args.steps, output_dir=args.output_dir,
                          tolerance=args.tolerance, repeat_gpu=args.repeat_gpu,
                          assembly=args.assembly, strict=args.strict)
        print(result.text(), end="")
        if not result.passed:
            _report(f"validate: {result.message}")
            passed = False
    if set(checks) - {"fields"}:
        from dycore.checks.bitwise import run_checks
        ok, message, _ = run_checks(config, checks, args.output_dir, args.restart_steps,
                                    [m for m in args.restart_modes.split(",") if m])
        print(f"validate --checks: {message}")
        if not ok:
            _report(f"validate: {message}")
            passed = False
    return EXIT_OK if passed else EXIT_ERROR


def _split_checks(text: str) -> list[str]:
    """``--checks`` as a list, each one of fields and :data:`dycore.checks.bitwise.CHECKS`."""
    from dycore.checks.bitwise import CHECKS
    checks = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in checks if c not in ("fields", *CHECKS)]
    if bad or not checks:
        raise ConfigError(f"--checks: unknown check {bad[0] if bad else text!r} (choose from "
                          f"{', '.join(('fields', *CHECKS))})")
    return checks


# --------------------------------------------------------------------------------- bench
def _add_bench(parser: argparse.ArgumentParser) -> None:
    """Benchmark tables (measured ones: docs/performance.md): standalone element kernels (GPU,
    @njit on 1 core and all cores, GB/s against the measured copy bandwidth), tracer CSR
    assembly variants, the per-stage time of a step per backend variant, and the step at
    several mesh sizes. GPU columns appear only where a GPU is usable."""
    _add_input(parser, "config", optional=True, note=" (default: all defaults)")
    parser.add_argument("--paths", choices=("cpu", "gpu", "both"), default=None,
                        help="code paths to time (default: both; the GPU only where usable)")
    parser.add_argument("--backend", choices=("cpu", "gpu", "both"), default=None,
                        dest="backend_deprecated",
                        help="deprecated name of --paths (in `dycore run`, --backend sets "
                             "backend.name)")
    parser.add_argument("--repeat", type=_positive_int, default=10, metavar="N",
                        help="timed repetitions per kernel after warm-up (default: 10)")
    parser.add_argument("--steps", type=_positive_int, default=3, metavar="K",
                        help="timed steps per simulation after the warm-up (1 step; 2 with "
                        "device solvers) (default: 3)")
    parser.add_argument("--mesh", metavar="NX,NY,NZ",
                        help="override the mesh size (also sets the scaling sizes to 1x, "
                             "1.5x, 2x of it unless --sizes is given)")
    parser.add_argument("--sizes", nargs="+", metavar="NXxNYxNZ",
                        help="scaling mesh sizes (default: 12x12x10 24x24x20 48x48x40 "
                             "96x96x80)")
    parser.add_argument("--parts", default="kernels,assembly,steps,scaling",
                        help="comma-separated subset of kernels,assembly,steps,scaling,run,"
                             "operators,modes,device,solver_ab,pressure_profile (run: whole "
                             "runs split into set-up, steps, output; the last five: the GPU "
                             "machine's parts, dycore.bench.gpu_parts; none of these six in "
                             "the default)")
    parser.add_argument("--block", type=_block_size, default=128, metavar="THREADS",
                        help="GPU threads per block of the element kernels: a multiple of 32 "
                             "up to 256 (default: 128)")
    parser.add_argument("--cpu-max-elements", type=_positive_int, default=150_000, metavar="N",
                        help="skip CPU scaling runs above N tetrahedra (default: 150000)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write every result and table to FILE as JSON")


def _cmd_bench(args: argparse.Namespace) -> int:
    from dycore.bench import parse_mesh, parse_sizes, run_bench

    try:
        mesh = parse_mesh(args.mesh) if args.mesh else None
    except ConfigError as exc:
        raise ConfigError(f"--mesh: {exc}") from None
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else None
    except ConfigError as exc:
        raise ConfigError(f"--sizes: {exc}") from None
    _check_writes({"--json": args.json}, {"CONFIG (the configuration file)": args.config})
    paths = args.paths
    if args.backend_deprecated is not None:
        print("dycore bench: --backend is deprecated here, use --paths (the code paths to "
              "time; in `dycore run` --backend sets backend.name)", file=sys.stderr)
        if paths is not None and paths != args.backend_deprecated:
            raise ConfigError(f"--paths {paths} and --backend {args.backend_deprecated} "
                              "disagree (give --paths only)")
        paths = args.backend_deprecated
    run_bench(args.config, backend=paths or "both", repeat=args.repeat, steps=args.steps,
              mesh=mesh, sizes=sizes,
              parts=[p.strip() for p in args.parts.split(",") if p.strip()],
              block=args.block, cpu_max_elements=args.cpu_max_elements, json_path=args.json)
    if args.json is not None:
        print(f"results: {args.json}")
    return EXIT_OK


# -------------------------------------------------------------------------------- verify
def _add_verify(parser: argparse.ArgumentParser) -> None:
    """Compare the time-mean w of FILE (snapshots with t >= --t-start, else the last one) with
    the steady non-hydrostatic linear solution of the case recorded in FILE (mountainwave3d:
    Smith 1980, 3-D; schar: Schär et al. 2002, 2-D) on the section y = 0 (z = 1-9 km) and
    at z = 2, 4, 6 km (planes in 3-D, lines in 2-D): nRMS, correlation, peak ratios, the
    antisymmetric part about y = 0 (3-D) or the y-dependence of w (2-D) and |w| at the summit
    node. With --convergence CONFIG, run the case of CONFIG on --levels meshes refined by 2 and
    fit the order of the w error (docs/verify.md)."""
    _add_input(parser, "file", optional=True, note=" (not with --convergence)")
    parser.add_argument("--t-start", type=_finite_float, default=5000.0, metavar="S",
                        help="average the snapshots with t >= S [s] (default: 5000)")
    parser.add_argument("--png", type=Path, metavar="OUT",
                        help="also draw model and theory side by side into OUT")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the metrics as JSON")
    _add_overwrite(parser, "existing --png / --json files")
    parser.add_argument("--half-width", type=float, default=None, metavar="M",
                        help="compare only inside |x|, |y| <= M [m] (default: 20000, the whole "
                             "window, for a 3-D case; 15000, inside the absorbing layers, for "
                             "schar; 8000 for a paper-size 3-D mesh, which resolves only that)")
    parser.add_argument("--convergence", type=Path, metavar="CONFIG",
                        help="run CONFIG's case on --levels meshes, each refined by 2 (cells and "
                             "dt), and fit the order of the w error (docs/verify.md)")
    parser.add_argument("--levels", type=int, default=3, metavar="K",
                        help="meshes of the convergence study (>= 3; default 3)")
    parser.add_argument("--level", type=int, default=None, metavar="L",
                        help="with --convergence: run only level L (0 = CONFIG as written); "
                             "finished levels are reused, so a study can be run level by level")
    parser.add_argument("--norm", default="section 1-9 km", metavar="ROW",
                        choices=("section 1-9 km", "section 1-3 km", "section 3-5 km",
                                 "section 5-7 km", "section 7-9 km"),
                        help="with --convergence: the verify row whose nRMS is the error "
                             "(default 'section 1-9 km'; every band is shown)")
    parser.add_argument("--backend", choices=("cpu", "gpu", "auto"), default=None,
                        help="with --convergence: override backend.name of the runs")
    parser.add_argument("--solver-mode", choices=("host", "device"), default=None,
                        help="with --convergence: override backend.solver_mode of the runs")
    parser.add_argument("--workdir", type=Path, default=Path("output/convergence"),
                        metavar="DIR", help="where the convergence runs write (default "
                                            "output/convergence)")


def _check_reports(args: argparse.Namespace, inputs: dict, example: str) -> None:
    """Refuse the ``--json`` / ``--png`` files of ``dycore verify`` before the work: an image
    format matplotlib cannot write, an input (``inputs``: flag -> path), an existing file
    without ``--overwrite``, a path that cannot be written (``example``: the file name the
    message suggests, EXAMPLE.json / EXAMPLE.png)."""
    from dycore.preflight import check_output_path

    _check_image_path("--png", args.png)
    _check_writes({"--json": args.json, "--png": args.png}, inputs, overwrite=args.overwrite)
    for flag, out in (("--json", args.json), ("--png", args.png)):
        if out is not None:
            check_output_path(out, overwrite=True, name=flag, example=f"{example}.{flag[2:]}")


def _print_reports(args: argparse.Namespace, table: str, write_json, plot) -> int:
    """Print ``table``, then write ``--json`` (``write_json(path)``) and ``--png``
    (``plot(path)``) where given, printing the paths written."""
    print(table, end="")
    if args.json is not None:
        print(f"json: {write_json(args.json)}")
    if args.png is not None:
        print(f"png: {plot(args.png)}")
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from dycore.checks.verify import plot_verify, verify, write_json

    if args.half_width is not None and not 0.0 < args.half_width <= 20000.0:
        print(f"dycore verify: error: argument --half-width: expected a width in (0, 20000] m "
              f"(got {args.half_width:g})", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if (args.file is None) == (args.convergence is None):
        print("dycore verify: error: give either FILE or --convergence CONFIG (not both)",
              file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if args.convergence is not None:
        return _cmd_convergence(args)
    _check_reports(args, {"FILE (the output file read)": args.file}, "verify")
    result = verify(args.file, t_start=args.t_start, keep_fields=args.png is not None,
                    half_width=args.half_width)
    return _print_reports(args, result.table(), lambda path: write_json(result, path),
                          lambda path: plot_verify(result, path))


def _cmd_convergence(args: argparse.Namespace) -> int:
    from dycore.checks.convergence import convergence_study, plot_convergence

    if args.levels < 3:
        print(f"dycore verify: error: argument --levels: expected at least 3 meshes to fit an "
              f"order (got {args.levels})", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    _check_reports(args, {"CONFIG": args.convergence}, "convergence")
    study = convergence_study(args.convergence, levels=args.levels, workdir=args.workdir,
                              t_start=args.t_start, half_width=args.half_width,
                              only_level=args.level, norm=args.norm,
                              overrides={key: value for key, value in (
                                  ("backend.name", args.backend),
                                  ("backend.solver_mode", args.solver_mode))
                                  if value is not None})
    return _print_reports(args, study.table(), study.write_json,
                          lambda path: plot_convergence(study, path))


# -------------------------------------------------------------------------------- doctor
def _add_doctor(parser: argparse.ArgumentParser) -> None:
    """Print Python, the platform and the versions of the packages a run uses (numpy, numba,
    numba-cuda, CuPy, SciPy, netCDF4, ...), the GPU, its driver and the CUDA version of the
    installed wheels (CUDA 13 needs driver >= 580), NCCL, MPI (mpi4py's library and mpiexec
    agreeing) and the kernel cache directory (writable or not). Exit status 0 when a GPU run
    can work here, 3 when it cannot (CPU runs are not affected). Paste the whole output into a
    bug report."""
    parser.add_argument("--json", action="store_true",
                        help="print the findings as JSON instead of text")


def _cmd_doctor(args: argparse.Namespace) -> int:
    from dycore.doctor import main_text

    text, status = main_text(as_json=args.json)
    print(text, end="")
    return status


# --------------------------------------------------------------------------------- main
#: subcommands, in the order ``dycore --help`` lists them: (name, the function that adds its
#: arguments, whose docstring is the description of ``dycore NAME --help``, the handler of
#: the parsed arguments, the one-line help of ``dycore --help``)
_COMMANDS = (
    ("run", _add_run, _cmd_run, "run a simulation from a YAML configuration"),
    ("plot", _add_plot, _cmd_plot,
     "plot a field of an output file (default w at the last snapshot)"),
    ("export", _add_export, _cmd_export, "convert an output file for ParaView (XDMF + HDF5)"),
    ("config", _add_config, _cmd_config, "print a resolved configuration or the key reference"),
    ("validate", _add_validate, _cmd_validate,
     "compare the GPU backend with the CPU path on one configuration"),
    ("bench", _add_bench, _cmd_bench,
     "time element kernels, assembly, the time step and its scaling"),
    ("verify", _add_verify, _cmd_verify,
     "compare w of an output with its case's steady linear theory"),
    ("mesh", _add_mesh, _cmd_mesh,
     "write the mesh a configuration describes to a mesh file (gmsh, VTU, ...)"),
    ("doctor", _add_doctor, _cmd_doctor,
     "print what a bug report needs; check whether a GPU run can work"),
)


def build_parser() -> argparse.ArgumentParser:
    """The ``dycore`` argument parser with every subcommand of :data:`_COMMANDS`."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="dycore", parents=[common],
        description="Continuous-Galerkin Boussinesq dynamical core: the mountainwave3D case on "
                    "CPU (@njit) or GPU (@cuda.jit).",
        epilog="examples:\n"
               "  dycore run configs/mountainwave3d_small.yaml --steps 10\n"
               "  dycore plot output/mountainwave3d_small.nc\n"
               "  dycore export output/mountainwave3d_small.nc --xdmf\n"
               "  dycore config --reference\n"
               "  dycore validate configs/mountainwave3d_small.yaml --steps 5\n"
               "  dycore doctor                 # versions, GPU, MPI: for a bug report",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"dycore {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add_arguments, handler, summary in _COMMANDS:
        # the docstring's lines joined (None under python -OO, which drops docstrings)
        description = " ".join((add_arguments.__doc__ or "").split()) or None
        sub = subparsers.add_parser(name, help=summary, description=description)
        add_arguments(sub)
        sub.set_defaults(handler=handler)
        _add_common_options(sub, suppress=True)   # after the COMMAND too, as before it
        if name in _SET_COMMANDS:
            sub.add_argument("--set", type=_set_item, action="append", metavar="KEY.PATH=VALUE",
                             help="override one configuration key (repeatable): the dotted "
                                  "path of `dycore config --reference`, the value in YAML "
                                  "(time.dt=5, output.formats=[netcdf,xdmf], mesh.file=null); "
                                  "checked like the file")
    return parser


#: rank variables of the launchers (MPICH / Intel MPI, Open MPI, PMIx, MVAPICH2, Hydra's
#: rank on the node, Slurm srun): those of dycore.parallel.launch.LAUNCHER_VARIABLES
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK",
              "MPI_LOCALRANKID", "SLURM_PROCID")


def _other_rank() -> bool:
    """True on an MPI rank other than 0 (from the launcher's environment): errors every rank
    meets alike (a bad configuration) are printed by rank 0 alone."""
    import os

    return any(os.environ.get(var, "0") not in ("", "0") for var in _RANK_VARS)


#: subcommands with a CONFIG that ``--set`` overrides
_SET_COMMANDS = ("run", "validate", "mesh", "config")


def _common_options() -> argparse.ArgumentParser:
    """The parent parser of the logging options (``dycore -v run ...``)."""
    common = argparse.ArgumentParser(add_help=False)
    _add_common_options(common, suppress=False)
    return common


def _add_common_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``-v/--verbose``, ``-q/--quiet`` and ``--log-file``; on a subcommand with defaults
    suppressed, so an option given before the subcommand is not reset by it."""
    def default(value):
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("messages")
    loudness = group.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="store_true", default=default(False),
                          help="also DEBUG lines on stderr: the configuration source, each "
                               "stage's first call, each step's iterations")
    loudness.add_argument("-q", "--quiet", action="store_true", default=default(False),
                          help="only warnings and errors on stderr (run: no progress bar, no "
                               "timer table)")
    group.add_argument("--log-file", type=Path, metavar="PATH", default=default(None),
                       help="append every message, DEBUG lines and errors included, with a "
                            "UTC time stamp to PATH (whatever -v / -q say for stderr; its "
                            "folder is made)")


def _report(message: str) -> None:
    if _other_rank():
        return
    for line in str(message).splitlines() or [""]:
        print(f"dycore: error: {line}", file=sys.stderr)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "file_only", False):
            return
        print(self.format(record), file=sys.stderr, flush=True)


class _LogFileHandler(logging.FileHandler):
    """The ``--log-file`` handler (one per :func:`main` call, closed at its end)."""


class _StderrFormatter(logging.Formatter):
    """``dycore: message``; DEBUG lines as ``dycore: debug: message``."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = "dycore: debug: " if record.levelno <= logging.DEBUG else "dycore: "
        return prefix + record.getMessage()


def _setup_logging(verbose: bool = False, quiet: bool = False,
                   log_file: Path | None = None) -> logging.Logger:
    """The ``dycore`` logger's handlers: stderr at INFO (DEBUG with ``verbose``, WARNING with
    ``quiet``), and with ``log_file`` a file that gets every record, DEBUG included, appended
    with a UTC time stamp.

    Raises
    ------
    OutputError
        ``log_file`` cannot be opened for appending (names the file; its folder is made).
    """
    from dycore.errors import OutputError

    logger = logging.getLogger("dycore")
    stderr = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
    if stderr is None:
        stderr = _StderrHandler()
        logger.addHandler(stderr)
    stderr.setFormatter(_StderrFormatter())
    stderr.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    for old in [h for h in logger.handlers if isinstance(h, _LogFileHandler)]:
        logger.removeHandler(old)
        old.close()
    if log_file is not None:
        try:
            Path(log_file).parent.mkdir(parents=True, exist_ok=True)
            handler = _LogFileHandler(log_file, mode="a", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"--log-file {log_file}: cannot open the log file for appending "
                              f"({exc.strerror or exc})") from None
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s",
                                      "%Y-%m-%dT%H:%M:%SZ")
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
        handler.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    logger.setLevel(logging.CRITICAL + 1 if _other_rank() else
                    logging.DEBUG if verbose or log_file is not None else
                    logging.WARNING if quiet else logging.INFO)
    return logger


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 error, 2 configuration error,
    130 interrupted; ``dycore doctor``: 3 when a GPU run cannot work)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    for token in argv:
        if token == "--":
            break
        flag = token.split("=", 1)[0]
        if flag.startswith("--") and len(flag) > 3 and flag != "--overwrite" and \
                "--overwrite".startswith(flag):
            _report(f"{flag}: abbreviated --overwrite; write the flag in full (it replaces "
                    "files)")
            return EXIT_CONFIG_ERROR
    args = build_parser().parse_args(argv)
    if args.verbose and args.quiet:
        _report("-v/--verbose and -q/--quiet: give one of them")
        return EXIT_CONFIG_ERROR
    try:
        logger = _setup_logging(args.verbose, args.quiet, args.log_file)
    except DycoreError as exc:
        _report(str(exc))
        return EXIT_ERROR
    logger.debug("dycore %s (Python %s): dycore %s", __version__, sys.version.split()[0],
                 " ".join(sys.argv[1:] if argv is None else argv))

    def failed(message: str, status: int) -> int:
        _report(message)
        for line in message.splitlines():         # stderr has it already
            logger.error("error: %s", line, extra={"file_only": True})
        return status

    try:
        return args.handler(args)
    except ConfigError as exc:
        return failed(str(exc), EXIT_CONFIG_ERROR)
    except DycoreError as exc:
        return failed(str(exc), EXIT_ERROR)
    except KeyboardInterrupt:
        return failed("interrupted", EXIT_INTERRUPTED)
    finally:                 # back to the default state for a later call in this process
        for handler in [h for h in logger.handlers if isinstance(h, _LogFileHandler)]:
            logger.removeHandler(handler)
            handler.close()
        _setup_logging()
