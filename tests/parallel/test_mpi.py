"""Distributed SpMV, reductions and solvers under ``mpiexec -n 1 / 2 / 4`` (CPU ranks,
oversubscribed on a 2-core machine) against the serial SciPy results.

mpiexec comes from the ``mpich`` wheel of the ``mpi`` extra (installed by ``make install``).
Each launch runs tests/parallel/mpi_driver.py once and the tests read its gathered results.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RANKS = (1, 2, 4)


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    from dycore.parallel.launch import find_mpiexec
    found = find_mpiexec()
    if not found:
        pytest.fail("mpiexec not found: install the mpi extra (pip install -e '.[mpi]')")
    return found


def launch(k: int, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess:
    # one thread per rank, and MPICH yielding the core while it waits: the ranks are
    # oversubscribed on a 2-core machine, and a rank spinning in a wait starves the rank it
    # waits for (a 4-rank step took 20 s instead of 3 s)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               MPIR_CVAR_POLLS_BEFORE_YIELD="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([mpiexec(), "-n", str(k), sys.executable, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def results(systems_npz, tmp_path_factory):
    out = {}
    for k in RANKS:
        dst = tmp_path_factory.mktemp(f"ranks{k}") / "out.npz"
        proc = launch(k, str(HERE / "mpi_driver.py"), str(systems_npz), str(dst))
        assert proc.returncode == 0, f"mpiexec -n {k} failed:\n{proc.stdout}\n{proc.stderr}"
        out[k] = dict(np.load(dst))
    return out


def _serial_matrices(s):
    n = s["nnodes"]
    return {
        "tracer": (sp.csr_matrix((s["tracer"], s["indices"], s["indptr"]), shape=(n, n)),
                   s["x1"], s["tracer_b"]),
        "momentum": (sp.bsr_matrix((s["momentum"], s["indices"], s["indptr"]),
                                   shape=(3 * n, 3 * n)), s["x3"], s["momentum_b"]),
        "pressure": (sp.csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]),
                                   shape=(n, n)), s["x1"], s["b_pressure"]),
    }


@pytest.mark.parametrize("k", RANKS)
@pytest.mark.parametrize("what", ("tracer", "momentum", "pressure"))
def test_distributed_spmv_equals_serial_bitwise(systems, results, k, what):
    a, x, _ = _serial_matrices(systems)[what]
    y = (a @ x.ravel()).reshape(x.shape)
    assert np.array_equal(results[k][f"spmv_{what}"], y)
    if k > 1:
        assert np.all(results[k]["halo_bytes_pressure"] > 0)
        assert np.bincount(results[k]["part"]).tolist() == results[k]["n_owned"].tolist()


def test_exact_dot_is_the_same_bits_on_1_2_4_ranks_and_equals_fsum(systems, results):
    s = systems
    ref = math.fsum(s["x1"] * s["b_pressure"])
    assert [float(results[k]["dot_exact"]) for k in RANKS] == [ref] * len(RANKS)
    for k in RANKS:                 # the fast modes agree to rounding
        for mode in ("ordered", "allreduce"):
            assert abs(float(results[k][f"dot_{mode}"]) - ref) <= 1e-13 * abs(ref)


@pytest.mark.parametrize("key", ("cg_jacobi", "cg_vcycle", "cg_vcycle_deep",
                                 "cg_vcycle_whole", "bicgstab_tracer", "bicgstab_momentum"))
def test_solves_are_bitwise_equal_on_1_2_4_ranks(results, key):
    """Exact reductions + bitwise SpMV + a preconditioner applied entry by entry or through
    bitwise SpMVs (Jacobi, 3×3 block-Jacobi, the distributed V-cycle of one global hierarchy):
    the partition cannot change a bit of the iterates, so the solutions and the iteration
    counts agree exactly — also with the V-cycle's coarse levels held whole by every rank,
    which gives the bits of the cycle distributed down to its coarsest level."""
    base = results[1]
    if key == "cg_vcycle_whole":             # levels 2 and below whole; 4 levels or more
        assert len(base["vcycle_deep_sizes"]) >= 4
        assert np.array_equal(results[2][key], results[2]["cg_vcycle_deep"])
        assert int(results[2][f"{key}_its"]) == int(results[2]["cg_vcycle_deep_its"]) > 1
    for k in RANKS[1:]:
        assert int(results[k][f"{key}_its"]) == int(base[f"{key}_its"])
        assert np.array_equal(results[k][key], base[key])


@pytest.mark.parametrize("key,what", [("cg_jacobi", "pressure"), ("cg_amg", "pressure"),
                                      ("cg_vcycle", "pressure"),
                                      ("bicgstab_tracer", "tracer"),
                                      ("bicgstab_momentum", "momentum")])
def test_distributed_solutions_match_the_reference_to_1e10(systems, results, key, what):
    """Tracer and momentum: the manufactured exact solution; pressure (condition number
    ~4e6): SciPy's direct solve."""
    a, _, b = _serial_matrices(systems)[what]
    if what == "pressure":
        x_ref = spla.spsolve(a.tocsc(), b.ravel()).reshape(b.shape)
    else:
        x_ref = systems[f"{what}_x"]
    for k in RANKS:
        x = results[k][key]
        err = np.linalg.norm((x - x_ref).ravel()) / np.linalg.norm(x_ref.ravel())
        assert err <= 1e-10, (key, k, err)


def test_rank_local_amg_iterations_against_serial(systems, results, capsys):
    """One rank's block-AMG is the serial CG + V-cycle (same hierarchy): iterations within ±1
    of SciPy's CG with it. More ranks drop the couplings between ranks from the
    preconditioner: the counts grow, and are printed (docs/architecture.md quotes them)."""
    from dycore.solvers.linear import amg_hierarchy
    a, _, b = _serial_matrices(systems)["pressure"]
    its = [0]
    spla.cg(a, b, rtol=1e-12, M=amg_hierarchy(a).aspreconditioner(cycle="V"), maxiter=500,
            callback=lambda _: its.__setitem__(0, its[0] + 1))
    counts = {k: int(results[k]["cg_amg_its"]) for k in RANKS}
    jac = {k: int(results[k]["cg_jacobi_its"]) for k in RANKS}
    with capsys.disabled():
        print(f"\npressure CG iterations (rtol 1e-12, {systems['nnodes']} nodes): "
              f"SciPy+AMG {its[0]}, rank-local AMG {counts}, Jacobi {jac}")
    assert abs(counts[1] - its[0]) <= 1
    assert counts[1] <= counts[2] <= counts[4] < jac[4]


def test_distributed_vcycle_matches_the_serial_vcycle(systems, results):
    """The distributed V-cycle is the device solvers' cycle (vcycle_reference, one thread per
    row): SciPy's CG with it needs the same iterations (±1) as ours on every rank count."""
    from dycore.solvers.amg import HostHierarchy, vcycle_reference
    a, _, b = _serial_matrices(systems)["pressure"]
    h = HostHierarchy(a)
    m = spla.LinearOperator(a.shape, matvec=lambda r: vcycle_reference(h, r.ravel(), 1))
    its = [0]
    spla.cg(a, b, rtol=1e-12, M=m, maxiter=500,
            callback=lambda _: its.__setitem__(0, its[0] + 1))
    for k in RANKS:
        assert abs(int(results[k]["cg_vcycle_its"]) - its[0]) <= 1, (k, its[0])


FAIL = """
import sys, time
from dycore.parallel.mpi import abort_on_error, world
comm = world()
with abort_on_error(comm):
    if comm.rank == 1:
        raise ValueError("solvers.pressure.rtol: bad value -1 (rank 1 only)")
    comm.Barrier()          # rank 0 would wait here for ever without the abort
print("not reached", flush=True)
"""


def test_a_failure_on_one_rank_ends_all_ranks_with_one_message(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(FAIL)
    proc = launch(2, str(script), timeout=60)
    assert proc.returncode != 0
    assert "not reached" not in proc.stdout
    msg = "rank 1 of 2: ValueError: solvers.pressure.rtol: bad value -1 (rank 1 only)"
    assert proc.stderr.count(msg) == 1, proc.stderr


def test_idle_wait_returns_once_every_rank_has_arrived():
    """idle_wait (ranks waiting for rank 0's mesh sleep instead of spinning): on one rank it
    returns at once; with a request that completes on its third test it sleeps twice."""
    import time
    from types import SimpleNamespace

    from mpi4py import MPI

    from dycore.parallel.mpi import idle_wait
    idle_wait(MPI.COMM_SELF)
    tests = []
    comm = SimpleNamespace(Ibarrier=lambda: SimpleNamespace(
        Test=lambda: tests.append(time.perf_counter()) or len(tests) == 3))
    idle_wait(comm, poll_s=0.02)
    assert len(tests) == 3 and tests[2] - tests[0] >= 0.04
