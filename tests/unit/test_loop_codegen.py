"""The element-loop contract: generated drivers match their tables (drift), specs match the
element functions' signatures, and the contract rejects malformed loops."""
import importlib
import inspect

import pytest

from dycore.assembly import codegen
from dycore.assembly.loop_spec import (
    ATOMIC, ELEMENTS, ElementLoop, Gather, Output, Result, Scratch,
)


def test_generated_files_match_their_tables():
    stale = codegen.stale_files()
    assert stale == [], f"stale generated loops {stale}: run python -m dycore.assembly.codegen"


def test_check_cli_reports_stale(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(codegen, "ROOT", tmp_path)
    assert codegen.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: dycore/assembly/cpu_loops.py" in out and "codegen" in out


@pytest.mark.parametrize("table", codegen._tables(), ids=lambda t: t.name)
def test_spec_arguments_are_the_element_functions_parameters(table):
    mod = importlib.import_module(table.module)
    for loop in table.loops:
        if not loop.function:
            continue
        fn = getattr(mod, loop.function)
        params = list(inspect.signature(getattr(fn, "py_func", fn)).parameters)
        assert params == [a.name for a in loop.args], loop.name


def test_generated_source_has_literal_local_shapes_and_flat_stores():
    from dycore.assembly.loops import ASSEMBLY

    gpu = codegen.render_gpu(ASSEMBLY)
    assert "cuda.local.array((11, 4), float64)" in gpu          # NGI written as a literal
    assert "ele_mat[e * 144 + i0 * 36 + i1 * 9 + i2 * 3 + i3]" in gpu   # momentum, flat
    assert "cuda.atomic.add(values, k * 9 + i2 * 3 + i3, mat_e[i, j, i2, i3])" in gpu
    assert "k = csr_find_device(indptr, indices, nd, tets[e, j])" in gpu   # tracer SEARCH
    cpu = codegen.render_cpu(ASSEMBLY)
    assert "@njit(parallel=True, cache=True)" in cpu and "cuda" not in cpu


def test_contract_rejects_malformed_loops():
    out = Output("v", (4,), "vector", "ele_v", "v")
    with pytest.raises(ValueError, match="repeat"):
        ElementLoop("x", "f", (Scratch("a", (3,)), Scratch("a", (3,)), out))
    with pytest.raises(ValueError, match="ELEMENTS"):
        ElementLoop("x", "f", (out,), modes=(ATOMIC,))
    with pytest.raises(ValueError, match="start with 4"):
        ElementLoop("x", "f", (Gather("g", (3,), "g"), out))
    with pytest.raises(ValueError, match="one Gather"):
        ElementLoop("x", "", (Gather("g", (4,), "g"), out, Output("w", (4,), "vector", "ele_w")))
    loop = ElementLoop("x", "f", (Gather("g", (4,), "g"), out), Result("r"),
                       modes=(ATOMIC, ELEMENTS))
    assert loop.gpu_params() == ["tets", "g", "lookup", "mode", "v", "ele_v", "r"]
    assert loop.cpu_params() == ["tets", "g", "ele_v", "r"]
