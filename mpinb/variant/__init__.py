"""Which compiled variant of mpinb's libraries a process loads: the table of variants, one per
MPI ABI (abitable), the choice at import from the MPI that mpi4py loaded (abi), and the reader of
ELF files behind its checks (elf). Imports nothing heavy: setup.py reads the table by path.
"""
