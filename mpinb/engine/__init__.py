"""What runs inside each MPI engine (one ipyparallel engine per MPI rank): its setup and state,
the execution of a cell, the jit and eager passes, HLO capture, tracebacks, trace bookkeeping."""
