"""An IPython profile whose clusters are mpinb's, for the tools that start clusters from
profiles: ``mpinb profile`` writes it (``profile_mpinb`` in the IPython directory: an
``ipcluster_config.py`` that calls mpinb.cluster.profile_config.configure). Then the "+ NEW" button of JupyterLab's
IPython Parallel panel (profile ``mpinb``), or ``ipcluster start --profile=mpinb -n 4``, starts
a cluster of MPI engines as ``%mpijax start`` would (the same launcher, rank wrapper and
environment), and ``%mpijax attach ID`` takes it into a notebook (mpinb.cluster.attach: its
ranks checked and set up there). Such a cluster belongs to what started it: it outlives the
kernels that attach to it, and ends with the panel's STOP or ``ipcluster stop``.
"""

from __future__ import annotations

import os

#: the profile's name
NAME = "mpinb"
#: the module whose ``configure`` the profile's configuration calls (how a profile of mpinb's is known)
CONFIGURED_BY = "mpinb.cluster.profile_config"
#: the profile's configuration file, as ``mpinb profile`` writes it
CONFIG_FILE = "ipcluster_config.py"
CONFIG = '''\
# Written by `mpinb profile`: clusters of this profile are mpinb's MPI engines (one engine per
# MPI rank, mpinb loaded on each), started by the "+ NEW" button of JupyterLab's IPython Parallel
# panel or by `ipcluster start --profile={name} -n N`. A notebook takes one with
# `%mpijax attach CLUSTER_ID`. Options of mpinb.ClusterOptions may be given to configure():
# configure(c, devices="cpu", checked=False).
from mpinb.cluster.profile_config import configure

c = get_config()  # noqa: F821 - given by IPython when it loads this file
configure(c)
'''


def write(name: str = NAME, ipython_dir: str | None = None, force: bool = False) -> tuple[str, bool]:
    """Make the profile (its folder and its ``ipcluster_config.py``) in ``ipython_dir`` (default:
    IPython's own); (its folder, whether the file was written). A configuration file of another
    content is kept unless ``force``."""
    from IPython.core.profiledir import ProfileDir
    from IPython.paths import get_ipython_dir

    profile = ProfileDir.create_profile_dir_by_name(ipython_dir or get_ipython_dir(), name)
    path = os.path.join(profile.location, CONFIG_FILE)
    text = CONFIG.format(name=name)
    if os.path.exists(path) and not force:
        with open(path) as fh:
            if fh.read() != text:
                return profile.location, False
    with open(path, "w") as fh:
        fh.write(text)
    return profile.location, True


def made_by_mpinb(profile_dir: str) -> bool:
    """Whether a profile's ``ipcluster_config.py`` configures its clusters through mpinb."""
    try:
        with open(os.path.join(profile_dir, CONFIG_FILE)) as fh:
            return CONFIGURED_BY in fh.read()
    except OSError:
        return False
