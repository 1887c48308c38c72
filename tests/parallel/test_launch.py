"""Launch safety: the launcher's variables are read, a world of one rank under a launcher that
started several processes is refused with the fix named (monkeypatched environment), and the
same under a real ``mpiexec -n 2`` whose ranks cannot reach their launcher (the PMI_FD link
removed: mpi4py then initialises each process as a singleton, as with a mismatched MPI) and
under a Slurm step of 4 tasks: one message, exit status 1, no output file."""
import os
import subprocess
import sys

import pytest
from test_mpi import ROOT, mpiexec
from test_mpi_run import _config

from dycore.errors import BackendUnavailableError
from dycore.parallel.launch import LAUNCHER_VARIABLES, check_world, launched_ranks, launcher_ranks

LIB = "Open MPI v4.1.5, package: Debian OpenMPI"


def test_each_launcher_variable_is_read_and_the_first_wins():
    assert launcher_ranks({}) is None and launched_ranks({}) == 0
    for var, _, _ in LAUNCHER_VARIABLES:
        assert launcher_ranks({var: "4"}) == (var, 4)
    assert launcher_ranks({"PMI_SIZE": "2", "SLURM_STEP_NUM_TASKS": "8"}) == ("PMI_SIZE", 2)
    assert launched_ranks({"OMPI_COMM_WORLD_SIZE": " 3 "}) == 3
    assert launched_ranks({"PMI_SIZE": "", "PMIX_SIZE": "x2", "MV2_COMM_WORLD_SIZE": "5"}) == 5


def test_mpiexec_n_1_counts_but_a_one_task_srun_stays_serial():
    assert launched_ranks({"PMI_SIZE": "1"}) == 1            # the MPI branch, as before
    assert launched_ranks({"OMPI_COMM_WORLD_SIZE": "1"}) == 1
    for var in ("MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_NUM_TASKS"):
        assert launched_ranks({var: "1"}) == 0, var
    assert launched_ranks({"PMI_SIZE": "0"}) == 0


def test_a_world_of_one_rank_under_a_launcher_of_four_is_refused_naming_the_fix():
    with pytest.raises(BackendUnavailableError) as err:
        check_world(1, {"PMI_SIZE": "4", "PMI_RANK": "2"}, library=LIB)
    msg = str(err.value)
    assert "launched as 4 processes (PMI_SIZE=4, set by MPICH / Intel MPI mpiexec" in msg
    assert f"(mpi4py: {LIB})" in msg
    assert "launch with the mpiexec of mpi4py's MPI" in msg
    assert "--no-binary mpi4py" in msg and "docs/parallel.md" in msg
    with pytest.raises(BackendUnavailableError, match=r"SLURM_STEP_NUM_TASKS=2, set by Slurm"):
        check_world(1, {"SLURM_STEP_NUM_TASKS": "2"}, library=LIB)


def test_worlds_that_match_the_launcher_pass():
    check_world(4, {"PMI_SIZE": "4"}, library=LIB)
    check_world(1, {"PMI_SIZE": "1"}, library=LIB)              # mpiexec -n 1
    check_world(1, {}, library=LIB)                             # not launched
    check_world(4, {"MPI_LOCALNRANKS": "2"}, library=LIB)       # 2 nodes × 2 ranks


def test_the_library_is_named_from_mpi4py_by_default():
    import mpi4py  # noqa: F401  (the mpi extra; `make install` has it)
    with pytest.raises(BackendUnavailableError, match=r"\(mpi4py: MPICH Version:|"
                                                      r"\(mpi4py: Open MPI"):
        check_world(1, {"PMIX_SIZE": "3"})


def _env(**extra):
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for var, _, _ in LAUNCHER_VARIABLES:
        env.pop(var, None)
    env.update(extra)
    return env


def test_mpiexec_whose_ranks_see_a_world_of_one_stops_every_rank_once(tmp_path):
    import mpi4py  # noqa: F401  (the mpi extra; `make install` has it)
    version = subprocess.run([mpiexec(), "--version"], capture_output=True, text=True,
                             check=False).stdout
    # PMI_FD is how Hydra's ranks find their launcher: the mpich wheel's mpiexec (`make install`)
    assert "HYDRA" in version, f"{mpiexec()} is not MPICH's Hydra (the mpich wheel's mpiexec)"
    out = tmp_path / "x.nc"
    proc = subprocess.run([mpiexec(), "-n", "2", "env", "-u", "PMI_FD", sys.executable, "-m",
                           "dycore", "run", str(_config(tmp_path)), "--output", str(out)],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("launched as 2 processes (PMI_SIZE=2") == 1, proc.stderr
    assert "1 MPI ranks" not in proc.stdout
    assert not out.exists()


def test_a_serial_run_in_a_slurm_step_of_four_tasks_is_refused(tmp_path):
    import mpi4py  # noqa: F401  (the mpi extra; `make install` has it)
    out = tmp_path / "x.nc"
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(_config(tmp_path)),
                           "--output", str(out)], cwd=ROOT,
                          env=_env(SLURM_STEP_NUM_TASKS="4", SLURM_PROCID="0"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("launched as 4 processes (SLURM_STEP_NUM_TASKS=4, set by Slurm "
                             "srun)") == 1, proc.stderr
    assert not out.exists()


def test_gpu_ranks_with_atomic_sums_take_the_all_reduce_sum():
    """Exact dot products where the run asks for reproducible sums (and on CPU ranks); the
    plain all-reduce sum on GPU ranks with atomic assembly (not reproducible anyway)."""
    from dycore.config import load_config
    from dycore.parallel.run import default_reduction

    def cfg(**backend):
        return load_config("configs/mountainwave3d_small.yaml", {"backend": backend})

    assert default_reduction(cfg(name="cpu")) == "exact"
    assert default_reduction(cfg(name="gpu", solver_mode="device")) == "allreduce"
    assert default_reduction(cfg(name="gpu", solver_mode="device",
                                 assembly="deterministic")) == "exact"
    assert default_reduction(cfg(name="gpu", solver_mode="device", strict=True)) == "exact"
    # backend.reduction other than auto is taken as it is
    assert default_reduction(cfg(name="gpu", solver_mode="device", reduction="exact")) == "exact"
    assert default_reduction(cfg(name="gpu", solver_mode="device", assembly="deterministic",
                                 reduction="allreduce")) == "allreduce"
    assert default_reduction(cfg(name="cpu", reduction="allreduce")) == "allreduce"


def test_the_transport_of_one_rank_moves_nothing_and_reduces_to_itself():
    """SelfTransport (a serial run with the GPU ranks' solvers): all-reduces leave the array as
    it is, an all-gather copies, a message to a peer is an error."""
    import numpy as np
    import pytest

    from dycore.parallel.nccl import SelfTransport
    t = SelfTransport()
    a = np.array([1.5, -2.0])
    t.allreduce(a, "sum")
    t.allreduce(a, "max")
    assert list(a) == [1.5, -2.0] and t.capturable and (t.rank, t.size) == (0, 1)
    recv = np.zeros((1, 2))
    t.allgather(a, recv)
    assert list(recv[0]) == [1.5, -2.0]
    t.post([], [])
    t.complete()
    with pytest.raises(ValueError, match="no peer"):
        t.post([(1, a)], [])
    with pytest.raises(ValueError, match="'sum' or 'max'"):
        t.allreduce(a, "min")


@pytest.mark.parametrize("given, ordered", ((None, True), ("0", True), ("1", False),
                                             (" 0 ", True)))
def test_nccl_runs_stream_ordered_unless_the_user_turned_graph_mixing_on(given, ordered):
    """NcclTransport sets NCCL_GRAPH_MIXING_SUPPORT=0 before its communicator is made, and
    keeps a value the user set (the A/B: NCCL_GRAPH_MIXING_SUPPORT=1)."""
    from dycore.parallel.nccl import GRAPH_MIXING, stream_ordered_nccl
    env = {"PATH": "/bin"} if given is None else {"PATH": "/bin", GRAPH_MIXING: given}
    assert stream_ordered_nccl(env) is ordered
    assert env[GRAPH_MIXING] == ("0" if given is None else given)
    assert env["PATH"] == "/bin"


def test_one_gpu_with_exact_dots_names_the_setting_when_the_rank_solvers_lack_a_solver():
    """backend.reduction: exact on one GPU takes the GPU ranks' solvers: a pressure
    preconditioner they lack ('none') is a ConfigError naming both keys, not a traceback."""
    import pytest

    from dycore.config import load_config
    from dycore.errors import ConfigError
    from dycore.timestepping.simulation import Simulation
    cfg = load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 2, "ny": 2, "nz": 2},
        "backend": {"name": "gpu", "solver_mode": "device", "reduction": "exact"},
        "solvers": {"pressure": {"method": "cg", "preconditioner": "none"}}})
    with pytest.raises(ConfigError, match=r"backend.reduction: 'exact'.*"
                                          r"solvers.pressure.preconditioner: 'none'"):
        Simulation(cfg)


def test_the_global_vcycle_without_the_amg_preconditioner_is_refused_by_name():
    import dycore
    from dycore.errors import ConfigError
    from dycore.parallel.gpu_simulation import GpuRankSimulation
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml",
                             solvers={"pressure": {"method": "cg", "preconditioner": "jacobi"}})
    with pytest.raises(ConfigError, match="solvers.pressure.preconditioner is 'jacobi', not "
                                          "'amg'"):
        GpuRankSimulation(cfg, None, global_amg=True)


@pytest.mark.parametrize("bad", (-1, 2.5, "50000"))
def test_a_bad_replicate_below_is_refused_by_name(bad):
    import dycore
    from dycore.errors import ConfigError
    from dycore.parallel.gpu_simulation import GpuRankSimulation
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml",
                             solvers={"pressure": {"method": "cg", "preconditioner": "amg"}})
    with pytest.raises(ConfigError, match=f"replicate_below must be an integer >= 0 .*got "
                                          f"{bad!r}"):
        GpuRankSimulation(cfg, None, global_amg=True, replicate_below=bad)


def test_binding_advice_names_the_hosts_and_the_cores_a_rank_could_have():
    """Ranks bound to one core each on a host with ≥ 2 cores a rank get the launch options
    that give each rank cores/ranks of them; any rank with more than one core, or a host with
    fewer than two cores a rank (CI: 4 ranks on 2 cores), gets no warning."""
    from dycore.parallel.launch import binding_advice, rank_cores
    host, mine, cpus = rank_cores()
    assert 1 <= mine <= cpus
    bound = [("gpu1", 1, 16)] * 4
    msg = binding_advice(bound)
    assert "4 on gpu1 (16 cores)" in msg
    assert "--map-by slot:PE=4 --bind-to core" in msg and "-bind-to core:4" in msg
    two = binding_advice(bound + [("gpu2", 1, 64)] * 4)     # the smaller share is named
    assert "4 on gpu2 (64 cores)" in two and "PE=4 " in two
    assert binding_advice([("gpu1", 4, 16)] * 4) is None
    assert binding_advice([("gpu1", 1, 16)] * 3 + [("gpu1", 16, 16)]) is None
    assert binding_advice([("ci", 1, 2)] * 4) is None
    assert binding_advice([("ci", 1, 2)] * 1) == binding_advice([("ci", 1, 2)])
    assert "PE=2 " in binding_advice([("ci", 1, 2)])
