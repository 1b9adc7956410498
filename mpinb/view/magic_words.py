"""What the line magic (and the command line) says when a command did what was asked: the
cluster started, attached, stopped, a variable pulled, the default timeout set. Pure."""

from __future__ import annotations


def started_words(n: int, seconds: float) -> str:
    """'4 MPI engines ready in 7.2 s'."""
    return f"{n} MPI engines ready in {seconds:.1f} s"


def attached_words(cluster_id: str, n: int, setup_cells: int) -> str:
    """'attached to ID: 4 ranks, the engines' variables as they were, 2 --setup cells known'."""
    known = f", {setup_cells} --setup cells known" if setup_cells else ""
    return f"attached to {cluster_id}: {n} ranks, the engines' variables as they were{known}"


def pulled_words(local: str, dtype, shape, n: int) -> str:
    """'x = float32[8, 4] from 2 ranks'."""
    return f"{local} = {dtype}{list(shape)} from {n} ranks"


def timeout_words(seconds: float | None) -> str:
    """'default %%mpijax timeout: 30 s' (or none)."""
    return f"default %%mpijax timeout: {'none' if seconds is None else f'{seconds:g} s'}"


#: what ``%mpijax stop`` says
STOPPED = "cluster stopped"
