"""How mpinb's errors are said: each error carries facts (mpinb.errors: ``cause`` and its
fields), and this module words them. Imported, it gives mpinb.errors its voice (``give_voice``).
Pure: no IPython.
"""

from __future__ import annotations

from .. import errors
from .cluster_words import cluster_line
from .outside_end_words import ended_words
from .rank_words import label
from .start_words import difference_words
from .words import RESULT_NAME, busy_words, death_words, lost_job_words

#: how each state that fails a cell is said
FAILED_STATES = {"failed": "failed", "dead": "died", "running": "still running", "restarted": "restarted"}

#: the engines' tasks of a start, as their errors name them (mpinb.cluster.start_checks)
START_TASKS = {"check": "the ranks' check", "setup": "the engines' setup"}


def cell_failed_words(result) -> str:
    """'1 of 2 ranks did not finish the cell: rank 1: ValueError: bad': each rank that failed,
    died, still runs or was restarted."""
    problems = []
    for rank, state in sorted(result.states.items()):
        rec = result.records.get(rank)
        if state == "failed" and rec.error:
            problems.append(f"rank {rank}: {rec.error}")
        elif state == "dead":
            problems.append(f"rank {rank} {death_words(result.dead[rank]) if rank in result.dead else 'died'}")
        elif state == "running":
            problems.append(f"rank {rank} still running")
        elif state == "restarted":
            problems.append(f"rank {rank} restarted")
    return f"{len(problems)} of {len(result.ranks)} ranks did not finish the cell: " + "; ".join(problems)


def cell_failed_line(result) -> str:
    """The one line under a cell's view: 'ranks 0-1 failed (see the view above; the whole result
    is in _mpijax)'."""
    by_state: dict[str, list[int]] = {}
    for rank, state in sorted(result.states.items()):
        if state in FAILED_STATES:
            by_state.setdefault(state, []).append(rank)
    what = ", ".join(f"{label(ranks)} {FAILED_STATES[state]}" for state, ranks in by_state.items())
    return f"{what} (see the view above; the whole result is in {RESULT_NAME})"


def not_running_words(cause: str) -> str:
    """ClusterNotRunning: no cluster was started, or it was stopped."""
    return "no cluster running: start one with %mpijax start -n N (or MPICluster(n).start())"


def lost_words(cause: str, lost: dict | None = None, ended: dict | None = None, replayed: int = 0) -> str:
    """ClusterLost: the MPI job ended in a cell (``lost``: the rank whose death ended it), or the
    cluster ended outside this notebook (``ended``: mpinb.cluster.outside_end's facts)."""
    if cause == "ended_outside":
        return ended_words(ended or {}, replayed)
    return f"the MPI job is gone ({lost_job_words(lost)}); run %mpijax restart (cluster.restart())"


def busy_error_words(cause: str, busy, inflight, where, replayed) -> str:
    """ClusterBusy: the ranks still running an earlier cell, where, and what to do."""
    return busy_words(busy, inflight, where, replayed)


def launcher_output_words(output: str) -> str:
    """The MPI launcher's last output, under the error it explains ('' when it said nothing)."""
    return f"\nlast output of the MPI launcher:\n{output}" if output.strip() else ""


def engines_not_up_words(cause: str, n: int, waited: float, problem: str, output: str = "",
                         registered: int | None = None, seconds: float | None = None,
                         status: int | None = None) -> str:
    """ClusterError of a start whose engines did not all register: the launcher ended first
    (``status``, after ``seconds``), or ``waited`` passed, or ``problem`` (another error's text)."""
    if status is not None:
        said = (f"the MPI launcher ended (exit status {status}) after {seconds:.1f} s, "
                f"with {registered} of {n} engines registered")
    else:
        why = f"{registered} of {n} engines registered" if registered is not None else problem
        said = f"{n} MPI engines did not come up (waited up to {waited:.0f} s): {why}"
    return said + launcher_output_words(output)


def ids_not_ranks_words(cause: str, ids, ranks, alone: bool) -> str:
    """ClusterError: the engines' ids are not their MPI ranks (``alone``: each rank a world of its own)."""
    said = f"engine ids {ids} are not the MPI ranks {ranks}"
    if alone:
        said += (": the ranks do not see each other, as when the launcher belongs to another MPI than the one "
                 "mpi4py loads (leave mpi_cmd unset to use that MPI's own launcher; docs/how-to/choose-mpi.md)")
    return said


def attach_words(cause: str, records=(), cluster_id: str | None = None, pid=None, host=None,
                 answering: int | None = None, n: int | None = None) -> str:
    """ClusterError / ClusterHeld of ``attach``: none or several clusters to choose from, no such
    cluster, one held by another live process (or being attached by one), one whose engines died."""
    known = "\n".join(cluster_line(r) for r in records) or "(none)"
    if cause == "none_to_choose":
        many = "no cluster" if not records else f"{len(records)} clusters"
        return f"{many} to attach to; name one (%mpijax attach ID):\n{known}"
    if cause == "no_such_cluster":
        return f"no cluster {cluster_id!r} here (this user's clusters on this host):\n{known}"
    if cause == "held":
        return (f"cluster {cluster_id} is held by PID {pid} on {host} "
                "(another kernel); attach with force=True (%mpijax attach --force) to take it over")
    if cause == "being_taken":
        who = f"PID {pid} on {host}" if pid is not None else "another process"
        return (f"cluster {cluster_id} is being attached by {who} (another kernel) right now; "
                "once it has, attach with force=True (%mpijax attach --force) to take it over")
    return (f"cluster {cluster_id}: {answering} of its {n} engines answer; the "
            f"others died: end it with %mpijax clean (or mpinb clean)\n{known}")


def already_running_words(cause: str) -> str:
    """ClusterError: start() on a cluster that runs."""
    return "cluster already running; stop() or restart() it first"


def start_task_words(cause: str, task: str, rank: int | None = None, name: str | None = None,
                     words: str | None = None, others=(), silent=(), asked: int = 0,
                     status: int | None = None, waited: float | None = None) -> str:
    """EngineSetupError of the start's ``task`` (START_TASKS): a rank failed (its error's
    ``name`` and ``words``, the ``others`` that failed too), or ``silent`` ranks did not answer."""
    what = START_TASKS.get(task, task)
    if cause == "no_answer":
        why = (f"the MPI launcher ended (exit status {status})" if status is not None
               else f"waited {waited:g} s (start_timeout)")
        return (f"{what}: {label(silent, sep=', ')} of {asked} did not answer ({why}); "
                "a rank that never answers is stuck before the cell could run (its MPI, a "
                "coordinator it waits for); a slow one needs a larger start_timeout")
    if name is None:
        return f"{what} failed on rank {rank}"
    also = f" (and on {label(others, sep=', ')})" if others else ""
    return f"{what} failed on rank {rank}: {name}: {words}{also}"


def ranks_differ_words(cause: str, differences) -> str:
    """PreflightError: what differs between the ranks (mpinb.analysis.rank_accounts), a line each."""
    return ("the ranks cannot run together, they differ in\n  " + "\n  ".join(map(difference_words, differences))
            + "\ninstall the same versions on every host (and in the notebook's environment)")


def controller_died_words(cause: str, pid=None, pids=(), ports=(), holders=None) -> str:
    """Why a controller cannot serve (mpinb.cluster.controller.ControllerDied's facts)."""
    listed = ", ".join(map(str, sorted(ports)))
    if cause == "ended":
        return f"the controller (PID {pid}) ended"
    if cause == "process_ended":
        ended = ", ".join(map(str, sorted(pids)))
        return f"a process of the controller (PID {ended}) ended before ports {listed} opened"
    if cause == "ports_taken":
        owners = ", ".join(f"{port} (PID {owner})" for port, owner in holders.items())
        return f"port {owners} taken by another process"
    return f"ports {listed} never opened"


def controller_words(cause: str, ports=(), attempts: int = 0, died: dict | None = None, output: str = "") -> str:
    """ControllerError: the controller did not open its ports in time, or could not start
    ``attempts`` times (the last one ``died``, with its ``output``)."""
    if cause == "not_opened":
        what = f"ports {', '.join(map(str, sorted(ports)))}" if ports else "its connection files"
        return f"the controller did not open {what} within start_timeout"
    port_lost = died.get("cause") != "ended"
    why = (" (a port it picked was taken before it could listen on it)" if port_lost
           else f"; its last output:\n{output}" if output.strip() else "")
    return f"the controller could not start, {attempts} times; the last time: {controller_died_words(**died)}{why}"


def refusal_words(name: str, refusal: dict) -> str:
    """Why a rank would not give its part of ``name`` (mpinb.engine.shards.local_parts' facts)."""
    cause = refusal["cause"]
    if cause == "no_variable":
        return f"pull: no variable {name!r} on this rank"
    if cause == "not_array":
        problem = f" ({refusal['problem']})" if refusal["problem"] else ""
        return f"pull: {name} is a {refusal['type_name']}, not an array{problem}"
    return (f"pull: {name} is {refusal['nbytes']} bytes on this rank, over the limit of {refusal['limit']} "
            "(raise it: %mpijax pull NAME --max-mib M, or MPICluster.pull(name, max_bytes=...))")


def pull_words(cause: str, name: str = "", rank: int | None = None, ename: str = "", evalue: str = "",
               refusal: dict | None = None, shapes=(), nbytes: int = 0, limit: int = 0, held: int = 0,
               size: int = 0) -> str:
    """PullError of ``MPICluster.pull``: a rank refused or raised, or the ranks' parts do not make one array."""
    if cause == "refused_on_rank":
        return f"rank {rank}: {refusal_words(name, refusal)}"
    if cause == "on_rank":
        return f"rank {rank}: {ename}: {evalue}"
    if cause == "spread_on_some":
        return f"pull: {name} is a jax.Array spread over processes on some ranks only"
    if cause == "shapes_differ":
        listed = ", ".join(map(str, shapes))
        return f"pull: {name} has different shapes on the ranks ({listed}); they cannot be stacked"
    if cause == "too_large_stacked":
        return f"pull: {name} is {nbytes} bytes on the ranks together, over the limit of {limit}"
    if cause == "too_large_global":
        return f"pull: {name} is {nbytes} bytes as a global array, over the limit of {limit}"
    return f"pull: the ranks hold only {held} of {size} elements of {name}"


def launcher_words(cause: str, python: str = "", problem: str = "", said: str = "", version: str = "",
                   path: str = "", family: str = "", names=(), variables=(), root_arg: str = "",
                   command: str = "") -> str:
    """LauncherError (mpinb.launch.mpi_impl): the MPI mpi4py loads, or the launcher for it, and how to fix it."""
    if cause == "probe_failed":
        return f"cannot ask {python} which MPI mpi4py loads: {problem}"
    if cause == "no_mpi":
        return (f"mpi4py finds no MPI library in this Python ({said}): install one, e.g. `pip install mpich` "
                "(or `pip install 'mpinb[mpich]'`), or your system's MPI (docs/how-to/choose-mpi.md)")
    if cause == "unknown_mpi":
        return f"mpinb does not know how to launch {version!r} ({path}): pass its launcher as mpi_cmd=[...] (--mpi-cmd)"
    if cause == "no_launcher":
        return (f"no launcher of {family} found for the MPI mpi4py loads ({version}, {path}): looked for "
                f"{', '.join(names)} beside it and on PATH; pass it as mpi_cmd=[...] (--mpi-cmd)")
    if cause == "refuses_root":
        settings = " ".join(f"{v}=1" for v in variables)
        # not --mpi-args: any mpi_args choose the mpiexec launcher, without the local one's settings
        return (f"{family} refuses to run as root unless told: set {settings} in the environment "
                "(os.environ, before starting the cluster; docs/how-to/choose-mpi.md)")
    return (f"{command} is {said}'s launcher, but mpi4py loads {family} ({version}): its ranks would "
            f"not see each other. Use {family}'s launcher (leave mpi_cmd unset to let mpinb find it)")


#: the words of each error class that carries facts, by the class (the first found along its MRO)
WORDING = {
    errors.ClusterNotRunning: not_running_words,
    errors.ClusterLost: lost_words,
    errors.ClusterBusy: busy_error_words,
    errors.ClusterHeld: attach_words,
    errors.EngineSetupError: start_task_words,
    errors.PreflightError: ranks_differ_words,
    errors.ControllerError: controller_words,
    errors.PullError: pull_words,
    errors.LauncherError: launcher_words,
}

#: the words of each ``cause`` of a plain ClusterError
CLUSTER_CAUSES = {
    "already_running": already_running_words,
    "engines_not_up": engines_not_up_words,
    "ids_not_ranks": ids_not_ranks_words,
    "none_to_choose": attach_words,
    "no_such_cluster": attach_words,
    "engines_died": attach_words,
}


def error_words(error: errors.MpinbError, brief: bool = False) -> str | None:
    """What ``error`` says to the user (None where this module has no words for it); ``brief``:
    the one line shown under a cell's view, where the view already said the rest."""
    if isinstance(error, errors.CellFailed):
        return cell_failed_line(error.result) if brief else cell_failed_words(error.result)
    for cls in type(error).__mro__:
        if cls in WORDING:
            return WORDING[cls](**error.facts)
    words = CLUSTER_CAUSES.get(error.facts.get("cause"))
    return words(**error.facts) if words is not None else None


errors.give_voice(error_words)
