"""The momentum scatter A/B (dycore.bench.scatter_ab, scripts/momentum_scatter_ab.py) under the
CUDA simulator: the kernel with all 9 entries per block and the production kernel with the 5
declared ones assemble the same values, both equal to the deterministic assembly up to atomic
order, with the undeclared entries exactly 0.0."""
import numpy as np
from tiny_mesh import tiny_mesh

from dycore.assembly.codegen import render_gpu
from dycore.assembly.loops import ASSEMBLY
from dycore.assembly.sparsity import build_sparsity
from dycore.bench.scatter_ab import dense_kernel_body, dense_source, scatter_ab


def test_dense_variant_is_the_loop_without_its_pattern():
    text = dense_source(ASSEMBLY, "momentum")
    momentum = text.split("def momentum_kernel")[1].split("\ndef ")[0]
    assert "cuda.atomic.add(values, k * 9 + i2 * 3 + i3, mat_e[i, j, i2, i3])" in momentum
    assert "block sparsity" not in momentum
    # every other loop (and the production text) as generated
    prod = render_gpu(ASSEMBLY)
    assert text.replace(momentum, "") == prod.replace(
        prod.split("def momentum_kernel")[1].split("\ndef ")[0], "")
    assert "cuda.atomic.add(values, k * 9 + 8, mat_e[i, j, 2, 2])" in prod
    assert ASSEMBLY["momentum"].outputs[0].nonzeros is not None     # the table is untouched
    fn = dense_kernel_body(ASSEMBLY, "momentum")
    assert fn.__name__ == "momentum_kernel"
    assert fn.__code__.co_filename == "<dycore.assembly.loops.ASSEMBLY without block sparsity>"


def test_scatter_ab_on_the_simulator():
    mesh = tiny_mesh(3, 3, 2)
    sp = build_sparsity(mesh.tets, mesh.nnodes)
    res = scatter_ab(mesh, sp, repeat=1, warmup=0, block=32,
                     order=("declared", "all entries"))
    assert res["atomics_per_element"] == {"declared": 80 + 12, "all entries": 144 + 12}
    assert res["declared_nonzeros"] == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 2]]
    assert [r["variant"] for r in res["runs"]] == ["declared", "all entries"]
    for r in res["runs"]:
        assert r["undeclared_nonzero"] == 0
        assert r["max_rel_diff_vs_deterministic"] <= 1e-14
        assert r["rhs_max_rel_diff_vs_deterministic"] <= 1e-14
        assert r["kernel"]["n"] == r["call"]["n"] == 1 and r["kernel"]["median_ms"] > 0
    assert res["mesh"] == {"tets": mesh.nele, "nodes": mesh.nnodes, "nnz": int(sp.nnz)}
    assert np.isfinite(res["runs"][0]["kernel_atomic_gb_s"])
