"""Declared block sparsity (``Output.nonzeros``) is true of the element function.

The ATOMIC and SEARCH scatters add only the declared entries of each block; an entry left out is
0.0 in the assembled array because the target is zero-filled first. That is right only while the
element function writes exactly 0.0 to every undeclared entry. This test runs each element
function that has a declared pattern (CPU ``@njit``) on random elements, with its outputs filled
with NaN beforehand, and asserts that every undeclared entry came back exactly 0.0 — so a change
of the weak form that fills such an entry fails here, not silently in the atomic assembly.
"""
import importlib

import numpy as np
import pytest

from dycore.assembly import codegen
from dycore.assembly.loop_spec import (
    Diagonal, Gather, Literal, Output, Row, Scalar, Scratch, Table,
)

N_ELEMENTS = 200


def _declared():
    """(table, loop) for every loop of every project table with a declared block sparsity."""
    return [(t, lp) for t in codegen._tables() for lp in t.loops
            if any(o.nonzeros is not None for o in lp.outputs)]


def _args(table, loop, rng, scale):
    """The element function's arguments for one random element (outputs NaN-filled)."""
    mod = importlib.import_module(table.module)
    ns: dict = {}
    for line in table.imports:
        exec(line, ns)
    out = []
    for a in loop.args:
        if isinstance(a, (Gather, Row)):
            v = rng.standard_normal(a.shape) * scale
            out.append(float(v) if a.shape == () else v)
        elif isinstance(a, Table):
            out.append(np.ascontiguousarray(ns[a.source] if a.source in ns
                                            else getattr(mod, a.source)) if a.module_global
                       else rng.standard_normal(a.shape))
        elif isinstance(a, Scalar):
            out.append(float(rng.standard_normal() * scale))
        elif isinstance(a, Literal):
            out.append(eval(a.expr, ns))
        elif isinstance(a, Diagonal):
            out.append(np.diag(rng.uniform(0.1, 10.0, 3)))
        elif isinstance(a, Scratch):
            out.append(np.full(a.shape, np.nan))
        elif isinstance(a, Output):
            out.append(np.full(a.shape, np.nan))
        else:
            raise TypeError(a)
    return out


def test_the_momentum_matrix_declares_its_sparsity():
    """The momentum blocks [[l, -fm, 0], [fm, l, 0], [0, 0, l]]: 5 of 9 entries scattered."""
    loops = {lp.name: lp for _, lp in _declared()}
    assert "momentum" in loops
    mat = next(o for o in loops["momentum"].outputs if o.name == "mat")
    assert mat.scattered == ((0, 0), (0, 1), (1, 0), (1, 1), (2, 2))
    assert 16 * len(mat.scattered) == 80


@pytest.mark.parametrize("table, loop", _declared(), ids=lambda x: getattr(x, "name", ""))
def test_undeclared_block_entries_are_exactly_zero(table, loop):
    fn = getattr(importlib.import_module(table.module), loop.function)
    rng = np.random.default_rng(20)
    outputs = [(k, o) for k, o in enumerate(loop.args)
               if isinstance(o, Output) and o.nonzeros is not None]
    seen = {o.name: np.zeros(o.block, bool) for _, o in outputs}
    for e in range(N_ELEMENTS):
        # magnitudes from 1e-3 to 1e3, and every fourth element with all scalars 0 (f = 0 ...)
        args = _args(table, loop, rng, 10.0 ** rng.uniform(-3, 3))
        if e % 4 == 3:
            args = [0.0 if isinstance(a, Scalar) else v for a, v in zip(loop.args, args)]
        fn(*args)
        for k, o in outputs:
            blocks = args[k].reshape(-1, *o.block)
            undeclared = np.ones(o.block, bool)
            for t in o.scattered:
                undeclared[t] = False
            bad = blocks[:, undeclared]
            assert np.all(bad == 0.0), (
                f"loop {loop.name}: output {o.name} has a nonzero (or unwritten NaN) entry "
                f"outside its declared nonzeros {o.scattered}: {bad[bad != 0.0][:4]}")
            seen[o.name] |= np.any(blocks != 0.0, axis=0)
    for _, o in outputs:                 # the pattern is not over-declared either
        declared = np.zeros(o.block, bool)
        for t in o.scattered:
            declared[t] = True
        assert np.array_equal(seen[o.name], declared), (loop.name, o.name, seen[o.name])
