"""Domain decomposition over MPI ranks (issue 15): partition, halo exchange, distributed SpMV,
reductions and Krylov solvers. docs/architecture.md, "Scaling out", describes the design.

Modules: ``partition`` (pure functions, no MPI), ``halo`` (mpi4py point-to-point), ``spmv``,
``reduce``, ``krylov``, ``mpi`` (start-up and error handling), ``launch`` (the launcher's
environment against mpi4py's world). mpi4py and pymetis come with
the ``mpi`` extra: ``pip install -e ".[mpi]"``.
"""
