"""How the MPI job of engines is started and ended: one launcher class per way (local, mpiexec,
Slurm), and the wrapper each rank runs under (``python -m mpinb.launch.rank``)."""
