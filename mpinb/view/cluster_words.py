"""How the clusters of this user on this host are said (``%mpijax list``, ``clean``, ``attach``):
a line each from the facts mpinb.cluster.attach gathers. Pure: no IPython.
"""

from __future__ import annotations

import time


def cluster_line(seen: dict) -> str:
    """One line about a cluster: id, ranks, launcher, age, and who holds it or how long it idles.
    ``seen`` is its registry record with ``now`` and ``idle`` (None while a live process holds it)."""
    now, idle = seen["now"], seen["idle"]
    holder = seen.get("holder") or {}
    if seen.get("profile"):
        state = f"started by ipyparallel (profile {seen['profile']}), not attached yet"
    elif idle is None:
        state = f"held by PID {holder.get('pid')} on {holder.get('host')}"
    elif seen.get("started_outside"):
        state = f"idle {idle:.0f} s (ipyparallel's: it ends with ipyparallel's stop)"
    else:
        keep = seen.get("keep_alive")
        state = f"idle {idle:.0f} s" + (f" (ends after {keep:.0f} s idle)" if keep is not None else " (ending)")
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seen.get("started_at", now)))
    return (f"{seen['id']}  {seen.get('n')} ranks  {seen.get('launcher')}  started {started} "
            f"({now - seen.get('started_at', now):.0f} s ago)  {state}")


def listing_words(seen: list[dict]) -> str:
    """``%mpijax list``: a line per cluster, or that there is none."""
    return "\n".join(map(cluster_line, seen)) or "no mpinb clusters of this user on this host"


def cleaned_words(ended: list[dict]) -> str:
    """``%mpijax clean``: a line per cluster ended, or that every one is held."""
    return "\n".join(f"ended {cluster_line(s)}" for s in ended) or "nothing to clean: every cluster is held"


def profile_words(name: str, where: str, written: bool) -> str:
    """``mpinb profile``: what was written and what to do with it, or why nothing was."""
    if not written:
        return (f"{where}/ipcluster_config.py exists with other content: kept (mpinb profile {name} --force "
                "replaces it)")
    return (f"profile {name} written ({where}): in JupyterLab's IPython Parallel panel, + NEW with profile {name} "
            f"starts mpinb's MPI engines (or: ipcluster start --profile={name} -n 4); %mpijax attach CLUSTER_ID "
            "takes the cluster into a notebook")
