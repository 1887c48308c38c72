#!/usr/bin/env bash
# MPI on an offline GPU machine: install the mpi4py, mpich (MPI library + Hydra's mpiexec) and
# pymetis wheels carried in .whl_mpi/ (download them here with
#   pip download --no-deps --python-version 3.12 --only-binary=:all: \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 mpi4py mpich pymetis -d .whl_mpi
# ) into a --target folder, put its mpiexec first on PATH, and check that mpi4py and mpiexec
# share one MPI (two ranks must see a world of size 2). Source it after scripts/gpu_env.sh.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
site=${DYCORE_MPI_SITE:-/tmp/mpi-site}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$here"/.whl_mpi/*.whl
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH"
export NCCL_NVLS_ENABLE=0
mpiexec -n 2 python3 -c "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f'MPI rank {c.rank} of {c.size}: {MPI.Get_library_version().splitlines()[0]}')"
