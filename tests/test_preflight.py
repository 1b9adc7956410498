"""The ranks compared before the first cell (mpinb.analysis.preflight), on made-up accounts (pure)."""

from mpinb.analysis.preflight import differences, oversubscribed
from mpinb.engine.preflight import package_versions, report

SAME = {"python": "3.11.7", "mpinb": "0.1.0", "jax": "0.10.2", "jaxlib": "0.10.2", "mpi4py": "4.1.2",
        "mpi_library": "MPICH Version: 5.0.2", "mpinb_library": "ok", "cores": 2}


def ranks(*changes, hosts=("a", "a", "b", "b")):
    out = []
    for rank, host in enumerate(hosts):
        account = dict(SAME, rank=rank, host=host)
        for changed_rank, field, value in changes:
            if changed_rank == rank:
                account[field] = value
        out.append(account)
    return out


def test_equal_ranks_and_notebook_pass():
    assert differences(ranks(), {k: SAME[k] for k in ("python", "mpinb", "jax", "jaxlib", "mpi4py")}) == []


def test_a_rank_with_another_version_is_named_with_its_host():
    found = differences(ranks((3, "jax", "0.9.0")), {})
    assert found == ["JAX: 0.10.2 on ranks 0-2 (a, b); 0.9.0 on rank 3 (b)"]


def test_the_notebook_s_own_version_counts():
    found = differences(ranks(), {"mpinb": "0.2.0", "mpi_library": None})
    assert found == ["mpinb: 0.1.0 on ranks 0-3 (a, b); 0.2.0 in the notebook"]


def test_another_mpi_library_and_a_library_that_does_not_load_are_both_named():
    found = differences(ranks((2, "mpi_library", "Open MPI v4.1.4"),
                              (2, "mpinb_library", "built for MPICH, but mpi4py loaded Open MPI")), {})
    assert found == [
        "the MPI library: MPICH Version: 5.0.2 on ranks 0-1,3 (a, b); Open MPI v4.1.4 on rank 2 (b)",
        "mpinb's compiled library: ok on ranks 0-1,3 (a, b); built for MPICH, but mpi4py loaded Open MPI on "
        "rank 2 (b)",
    ]


def test_a_library_that_does_not_load_anywhere_is_named_too():
    found = differences([dict(r, mpinb_library="does not load: libmpi.so.12") for r in ranks()], {})
    assert found == ["mpinb's compiled library: does not load: libmpi.so.12 on ranks 0-3 (a, b)"]


def test_more_ranks_than_cores_is_a_note_per_host():
    notes = oversubscribed(ranks(hosts=("a", "a", "a", "b")))
    assert notes == ["3 ranks on a, which has 2 cores: fine for correctness, slow for timing (each rank's MPI "
                     "waits busy)"]
    assert oversubscribed(ranks()) == []


def test_this_process_s_own_account():
    """What an engine reports, here in one process: the versions from the metadata, the MPI
    mpi4py loaded, and mpinb's library loading with it."""
    mine = report()
    assert mine["rank"] == 0 and mine["cores"] >= 1
    assert {k: mine[k] for k in package_versions()} == package_versions()
    assert mine["mpinb_library"] == "ok" and mine["mpi_library"]
