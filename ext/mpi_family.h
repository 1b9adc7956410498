/* Which MPI implementation's mpi.h this extension was compiled against, recorded at build
   time so that the Python side can refuse to run against a different MPI at import. */
#ifndef MPINB_MPI_FAMILY_H
#define MPINB_MPI_FAMILY_H
#include <mpi.h>

#if defined(MPI_ABI_VERSION)
#define MPINB_MPI_FAMILY "MPI ABI"
#elif defined(OPEN_MPI)
#define MPINB_MPI_FAMILY "Open MPI"
#elif defined(MPICH_VERSION) && defined(I_MPI_VERSION)
#define MPINB_MPI_FAMILY "Intel MPI"
#elif defined(MPICH_VERSION)
#define MPINB_MPI_FAMILY "MPICH"
#else
#define MPINB_MPI_FAMILY "unknown"
#endif

#ifndef MPINB_BUILD_MPICC
#define MPINB_BUILD_MPICC "unknown"
#endif

#endif
