"""What an mpinb profile's ``ipcluster_config.py`` runs (mpinb.cluster.profile writes it): the
configuration of a cluster that ipyparallel starts from the profile, as mpinb's own start
configures its clusters.
"""

from __future__ import annotations

import os
import secrets
import tempfile


def configure(c, **options) -> None:
    """Fill an ``ipcluster_config.py``'s configuration ``c`` as ``MPICluster(**options).config()``
    fills its own (the MPI launcher, the rank wrapper, the engines' environment); the number of
    engines is what the panel or ``ipcluster start -n`` asks, ``options``' ``n`` otherwise. The
    ranks' exit records go to a folder of their own (made when the engines start)."""
    from .mpi_cluster import MPICluster

    cluster = MPICluster(progress=False, **options)
    cluster.workdir = os.path.join(tempfile.gettempdir(), f"mpinb-profile-{secrets.token_hex(4)}")
    c.merge(cluster.config())


