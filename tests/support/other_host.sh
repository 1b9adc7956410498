#!/bin/sh
# Start an MPI launcher "on another host", for the tests: in its own PID, UTS and mount
# namespaces (other PIDs, hostname mpinb-other-host resolved by a private /etc/hosts, a private
# /tmp and /dev/shm), sharing only the loopback network with the notebook. Root only (unshare).
#   usage: other_host.sh MPIEXEC [ARGS...]      e.g. as MPICluster(mpi_cmd=[this, mpiexec.gforker])
# The directory holding the Python environment (MPINB_KEEP_DIR, default: this repository) stays
# visible even when it lives under /tmp, as a shared software installation would be.
set -e
KEEP="${MPINB_KEEP_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
exec unshare --pid --fork --mount-proc --uts --mount -- sh -c '
  set -e
  keep="$1"; shift
  hostname mpinb-other-host
  mkdir -p /mnt/mpinb-keep
  mount --bind "$keep" /mnt/mpinb-keep
  mount -t tmpfs mpinb-private-tmp /tmp
  mount -t tmpfs mpinb-private-shm /dev/shm
  mkdir -p "$keep"
  mount --move /mnt/mpinb-keep "$keep"
  printf "127.0.0.1 localhost mpinb-other-host\n" > /tmp/hosts
  mount --bind /tmp/hosts /etc/hosts
  exec stdbuf -oL -eL "$@"' other-host "$KEEP" "$@"
