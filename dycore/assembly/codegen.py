"""Source generator of the element-loop contract: loop table -> CPU ``prange`` drivers and
``@cuda.jit`` kernel bodies, written as checked-in Python modules.

Why generated files and not ``exec`` at run time: the drivers are ordinary modules, so stack
traces point at real lines, ``@njit(cache=True)`` caches them on disk, numba-cuda sees literal
local-array shapes, and a reviewer reads the code that runs. A drift test
(tests/unit/test_loop_codegen.py) fails when a generated file differs from its table.

Usage::

    python -m dycore.assembly.codegen          # rewrite every generated file
    python -m dycore.assembly.codegen --check  # exit 1 naming the stale files

The tables are listed in :data:`TABLES` (module path and attribute of each
:class:`~dycore.assembly.loop_spec.LoopTable`).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from math import prod
from pathlib import Path

from dycore.assembly.loop_spec import (
    ATOMIC, ELEMENTS, MODE_NAMES, SEARCH, Diagonal, ElementLoop, Gather, Literal, LoopTable,
    Output, Row, Scalar, Scratch, Table,
)

__all__ = ["TABLES", "render_cpu", "render_gpu", "generated_files", "stale_files", "main"]

#: every loop table of the project: (module, attribute)
TABLES = (("dycore.assembly.loops", "ASSEMBLY"), ("dycore.bench.loops", "BENCH"),
          ("dycore.checks.loops", "FEM_CHECKS"), ("dycore.checks.loops", "STRICT_CHECKS"))

ROOT = Path(__file__).resolve().parents[2]
_IDX = ("i0", "i1", "i2", "i3", "i4")


def _header(table: LoopTable, what: str) -> list[str]:
    return ['"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).',
            "", f"From the loop table {table.name}.", "",
            f"{what} The contract is dycore/assembly/loop_spec.py;",
            "docs/architecture.md (\"Element loops\") explains the generated code.",
            '"""']


def _wrap(line: str, width: int = 99) -> list[str]:
    """Split a long ``def``/call/import line after commas, aligned under its first ``(``."""
    if len(line) <= width or "(" not in line:
        return [line]
    col = line.index("(") + 1
    out, cur = [], line[:col]
    for part in line[col:].split(", "):
        piece = part if cur.endswith("(") or cur.strip() == "" else ", " + part
        if len(cur) + len(piece) > width - 1 and cur.strip():
            out.append(cur + ",")
            cur = " " * col + part
        else:
            cur += piece
    out.append(cur)
    return out


def _finish(lines: list[str]) -> str:
    """Join the generated lines, wrapping long code lines (docstrings are left alone)."""
    text, in_doc = [], False
    for line in "\n".join(lines).split("\n"):
        quotes = line.count('"""')
        text += [line] if in_doc or quotes else _wrap(line)
        if quotes == 1:
            in_doc = not in_doc
    return "\n".join(text)


def _import(module: str, names) -> str:
    """``from module import (names)`` wrapped like the project's imports."""
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 99:
        return line
    body, cur = [], "   "
    for n in names:
        if len(cur) + len(n) + 2 > 99:
            body.append(cur.rstrip())
            cur = "   "
        cur += f" {n},"
    body.append(cur)
    return "\n".join([f"from {module} import ("] + body + [")"])


def _registry(name: str, suffix: str, table: LoopTable) -> list[str]:
    return [f"{name} = {{"] + [f'    "{lp.name}": {lp.name}{suffix},' for lp in table.loops] + ["}"]


def _shape(shape: tuple) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def _nest(out: list, ind: int, shape: tuple, body: list[str], idx=_IDX) -> None:
    """Emit ``for`` loops over ``shape`` (indices ``idx``) around ``body`` lines."""
    for d, n in enumerate(shape):
        out.append("    " * (ind + d) + f"for {idx[d]} in range({n}):")
    for line in body:
        out.append("    " * (ind + len(shape)) + line)


def _sub(shape_or_n, idx=_IDX, first=None) -> str:
    names = ([first] if first else []) + list(idx[:len(shape_or_n)])
    return ", ".join(names)


def _copy(dst: str, src: str, shape: tuple, first=None) -> str:
    """``dst[idx] = src[first, idx]`` over ``shape``'s indices."""
    return f"{dst}[{_sub(shape)}] = {src}[{_sub(shape, first=first)}]"


def _flat(shape: tuple, idx=_IDX) -> str:
    """Row-major flat offset of index (idx...) in ``shape`` with literal strides."""
    terms = []
    for d in range(len(shape)):
        stride = prod(shape[d + 1:])
        terms.append(idx[d] if stride == 1 else f"{idx[d]} * {stride}")
    return " + ".join(terms) if terms else "0"


def _count(loop: ElementLoop) -> str:
    return f"{loop.count_source}.shape[0]"


def _gathers(out: list, ind: int, loop: ElementLoop, local) -> None:
    """One loop over the 4 nodes reading every Gather (grouped by trailing shape)."""
    gathers = loop.of(Gather)
    if not gathers:
        return
    out.append("    " * ind + "for i in range(4):")
    out.append("    " * (ind + 1) + "nd = tets[e, i]")
    groups: dict[tuple, list] = {}
    for g in gathers:
        groups.setdefault(tuple(g.shape[1:]), []).append(g)
    for rest, gs in groups.items():
        idx = _IDX[1:]
        body = [f"{local(g)}[{_sub(rest, idx, 'i')}] = {g.source}[{_sub(rest, idx, 'nd')}]"
                for g in gs]
        _nest(out, ind + 1, rest, body, idx)


def _gather_only(out: list, ind: int, loop: ElementLoop) -> None:
    """The body of a loop without a function: its Gather written straight to its Output."""
    g, o = loop.of(Gather)[0], loop.outputs[0]
    rest = tuple(g.shape[1:])
    out.append("    " * ind + "for i in range(4):")
    src = "tets[e, i]"
    if rest:
        out.append("    " * (ind + 1) + "nd = tets[e, i]")
        src = "nd"
    _nest(out, ind + 1, rest, [f"{o.elements}[{_sub(rest, _IDX[1:], 'e, i')}] = "
                               f"{g.source}[{_sub(rest, _IDX[1:], src)}]"], _IDX[1:])


def local(a) -> str:
    """The local (per-thread / per-chunk) name of argument ``a``."""
    return f"{a.name}_e"


def _call(loop: ElementLoop, argexpr) -> str:
    call = f"{loop.function}({', '.join(argexpr(a) for a in loop.args)})"
    return f"{loop.result.target}[e] = {call}" if loop.result else call


def _doc(loop: ElementLoop, params: list[str], target: str) -> list[str]:
    return [f'    """{loop.doc or loop.name}', "", f"    {target}; loop {loop.name!r}.",
            '    """']


# ---------------------------------------------------------------------------------- CPU
def _cpu_local(loop: ElementLoop, a) -> bool:
    """Whether the CPU driver keeps argument ``a`` in per-chunk local storage."""
    if isinstance(a, (Gather, Scratch, Diagonal)):
        return True
    if isinstance(a, Table):
        return a.module_global or not loop.cpu_views
    if isinstance(a, Row) and a.shape == ():
        return False                            # a scalar per element: passed as source[e]
    if isinstance(a, (Row, Output)):
        return not loop.cpu_views
    return False


def _cpu_driver(loop: ElementLoop) -> list[str]:
    params = loop.cpu_params()
    out = ["@njit(parallel=True, cache=True)", f"def {loop.name}_elements({', '.join(params)}):"]
    out += _doc(loop, params, "CPU driver, element arrays out")
    out.append(f"    nele = {_count(loop)}")
    if not loop.function:                       # gather only: straight into the element array
        out.append("    for e in prange(nele):")
        _gather_only(out, 2, loop)
        return out

    def argexpr(a):
        if _cpu_local(loop, a):
            return local(a)
        if isinstance(a, (Row,)):
            return f"{a.source}[e]"
        if isinstance(a, Output):
            return f"{a.elements}[e]"
        if isinstance(a, Table):
            return a.source
        if isinstance(a, Scalar):
            return a.param
        if isinstance(a, Literal):
            return a.expr
        raise TypeError(a)

    chunked = any(_cpu_local(loop, a) for a in loop.args)
    if chunked:
        out.append("    for c in prange((nele + CHUNK - 1) // CHUNK):")
        ind = 2
        for a in loop.args:
            if not _cpu_local(loop, a):
                continue
            if isinstance(a, Table) and a.module_global:
                out.append(f"        {local(a)} = {a.source}.copy()")
            elif isinstance(a, Diagonal):
                out.append(f"        {local(a)} = np.zeros((3, 3))")
                for d, p in enumerate(a.params):
                    out.append(f"        {local(a)}[{d}, {d}] = {p}")
            elif isinstance(a, Table):
                out.append(f"        {local(a)} = np.empty({_shape(a.shape)})")
                _nest(out, 2, a.shape, [_copy(local(a), a.source, a.shape)])
            else:
                out.append(f"        {local(a)} = np.empty({_shape(a.shape)})")
        out.append("        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):")
        ind = 3
    else:
        out.append("    for e in prange(nele):")
        ind = 2
    _gathers(out, ind, loop, local)
    for a in loop.of(Row):
        if _cpu_local(loop, a):
            _nest(out, ind, a.shape, [_copy(local(a), a.source, a.shape, "e")])
    out.append("    " * ind + _call(loop, argexpr))
    for o in loop.outputs:
        if _cpu_local(loop, o):
            _nest(out, ind, o.shape,
                  [f"{o.elements}[{_sub(o.shape, first='e')}] = {local(o)}[{_sub(o.shape)}]"])
    return out


def render_cpu(table: LoopTable) -> str:
    """The CPU driver module of ``table`` (source text)."""
    fns = sorted({lp.function for lp in table.loops if lp.function})
    lines = _header(table, "CPU drivers: @njit(parallel=True) prange loops over chunks of "
                    "CHUNK elements, each\ngathering, calling the element function and "
                    "writing element arrays (the deterministic\ngather by nonzero is "
                    "dycore.assembly.gather).")
    lines += ["import numpy as np", "from numba import njit, prange", ""]
    if fns:
        lines.append(_import(table.module, fns))
    lines += list(table.imports)
    lines += ["", "CHUNK = 256  #: elements per prange iteration", ""]
    for loop in table.loops:
        lines += ["", *_cpu_driver(loop), ""]
    lines += ["", "#: loop name -> CPU driver", *_registry("DRIVERS", "_elements", table), ""]
    return _finish(lines)


# ---------------------------------------------------------------------------------- GPU
def _gpu_kernel(loop: ElementLoop) -> list[str]:
    params = loop.gpu_params()
    out = [f"def {loop.name}_kernel({', '.join(params)}):"]
    out += _doc(loop, params, "@cuda.jit body, one thread per element")
    out.append("    e = cuda.grid(1)")
    out.append(f"    if e >= {_count(loop)}:")
    out.append("        return")
    if not loop.function:
        _gather_only(out, 1, loop)
        return out

    def scalar_row(a):
        return isinstance(a, Row) and a.shape == ()

    def argexpr(a):
        if isinstance(a, Scalar):
            return a.param
        if isinstance(a, Literal):
            return a.expr
        if scalar_row(a):
            return f"{a.source}[e]"
        return local(a)

    for a in loop.args:
        if isinstance(a, (Scalar, Literal)) or scalar_row(a):
            continue
        shape = (3, 3) if isinstance(a, Diagonal) else a.shape
        out.append(f"    {local(a)} = cuda.local.array({_shape(shape)}, float64)")
    for a in loop.args:
        if isinstance(a, Table):
            _nest(out, 1, a.shape, [_copy(local(a), a.source, a.shape)])
        elif isinstance(a, Diagonal):
            _nest(out, 1, (3, 3), [f"{local(a)}[i0, i1] = 0.0"])
            for d, p in enumerate(a.params):
                out.append(f"    {local(a)}[{d}, {d}] = {p}")
    _gathers(out, 1, loop, local)
    for a in loop.of(Row):
        if not scalar_row(a):
            _nest(out, 1, a.shape, [_copy(local(a), a.source, a.shape, "e")])
    out.append("    " + _call(loop, argexpr))

    def store(ind):
        for o in loop.outputs:
            if loop.flat:
                size = prod(o.shape)
                dst = f"{o.elements}[e * {size} + {_flat(o.shape)}]"
            else:
                dst = f"{o.elements}[{_sub(o.shape, first='e')}]"
            _nest(out, ind, o.shape, [f"{dst} = {local(o)}[{_sub(o.shape)}]"])

    if len(loop.modes) == 1:
        store(1)
        return out
    out.append("    if mode == ELEMENTS:")
    store(2)
    out.append("    else:")
    out.append("        for i in range(4):")
    out.append("            nd = tets[e, i]")
    bidx = _IDX[2:]
    for o in [o for o in loop.outputs if o.kind == "vector"]:
        blk = o.block
        pos = "nd" if o.block_size == 1 else f"nd * {o.block_size} + {_flat(blk, bidx)}"
        body = [f"cuda.atomic.add({o.target}, {pos}, {local(o)}[{_sub(blk, bidx, 'i')}])"]
        ind = 3
        if o.optional:
            out.append("            " + f"if want_{o.name}:")
            ind = 4
        _nest(out, ind, blk, body, bidx)
    for o in [o for o in loop.outputs if o.kind == "matrix"]:
        ind = 3
        if o.optional:
            out.append("            " + f"if want_{o.name}:")
            ind = 4
        out.append("    " * ind + "for j in range(4):")
        if SEARCH in loop.modes:
            out.append("    " * (ind + 1) + "if mode == ATOMIC:")
            out.append("    " * (ind + 2) + "k = lookup[e, i, j]")
            out.append("    " * (ind + 1) + "else:")
            out.append("    " * (ind + 2) + "k = csr_find_device(indptr, indices, nd, tets[e, j])")
        else:
            out.append("    " * (ind + 1) + "k = lookup[e, i, j]")
        blk = o.block
        pos = "k" if o.block_size == 1 else f"k * {o.block_size} + {_flat(blk, bidx)}"
        _nest(out, ind + 1, blk,
              [f"cuda.atomic.add({o.target}, {pos}, {local(o)}[{_sub(blk, bidx, 'i, j')}])"], bidx)
    return out


def render_gpu(table: LoopTable) -> str:
    """The GPU kernel-body module of ``table`` (source text; compiled by
    :func:`dycore.backend.gpu_kernels.kernel_compiler`, never at import)."""
    fns = sorted({lp.function for lp in table.loops if lp.function})
    modes = set()
    for lp in table.loops:
        if len(lp.modes) > 1:
            modes.add(ELEMENTS)
        if SEARCH in lp.modes:
            modes.add(ATOMIC)
    lines = _header(table, "@cuda.jit kernel bodies (plain functions; compiled lazily by\n"
                    "dycore.backend.gpu_kernels.kernel_compiler): one thread per element, "
                    "gathering into\ncuda.local.array storage, calling the element function and "
                    "scattering by the loop's\nrules.")
    lines += ["from numba import cuda, float64", ""]
    if modes:
        lines.append("from dycore.assembly.loop_spec import "
                     + ", ".join(MODE_NAMES[m] for m in (ATOMIC, ELEMENTS, SEARCH)
                                 if m in modes))
    if fns:
        lines.append(_import(table.module, fns))
    lines += list(table.imports)
    if any(SEARCH in lp.modes for lp in table.loops):
        lines += ["", "#: a CUDA device-function copy of dycore.assembly.csr_search.csr_find,",
                  "#: set by dycore.backend.gpu_kernels before the first compile",
                  "csr_find_device = None"]
    lines.append("")
    for loop in table.loops:
        lines += ["", *_gpu_kernel(loop), ""]
    lines += ["", "#: loop name -> kernel body", *_registry("KERNELS", "_kernel", table), ""]
    return _finish(lines)


# ---------------------------------------------------------------------------- the files
def _tables() -> list[LoopTable]:
    return [getattr(importlib.import_module(m), a) for m, a in TABLES]


def generated_files() -> dict[str, str]:
    """Repository-relative path -> the text it must hold, for every table."""
    out = {}
    for t in _tables():
        if t.cpu_path:
            out[t.cpu_path] = render_cpu(t)
        if t.gpu_path:
            out[t.gpu_path] = render_gpu(t)
    return out


def stale_files(root: Path | None = None) -> list[str]:
    """Generated files that are missing or differ from their table (paths under ``root``,
    default the repository)."""
    root = ROOT if root is None else root
    bad = []
    for rel, text in generated_files().items():
        p = root / rel
        if not p.is_file() or p.read_text(encoding="utf-8") != text:
            bad.append(rel)
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dycore.assembly.codegen",
                                 description="Write (or --check) the generated element loops.")
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale_files()
        for rel in bad:
            print(f"stale: {rel} (run python -m dycore.assembly.codegen)")
        return 1 if bad else 0
    for rel, text in generated_files().items():
        (ROOT / rel).write_text(text, encoding="utf-8")
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
