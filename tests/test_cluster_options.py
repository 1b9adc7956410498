"""mpinb.options.cluster_options: one table of a cluster's options, shared by MPICluster, %mpijax start
and mpinb demo (pure: nothing is started)."""

import dataclasses
import shlex

import pytest

import mpinb
from mpinb.cli import parser as cli_parser
from mpinb.cluster.lifetime import options_of
from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.magic import COMMANDS, MpiJaxMagics, line_parser
from mpinb.options.cluster_options import ClusterOptions, from_arguments

START = "start -n 8 --launcher slurm --mpi-args '--cpu-bind=cores -v' --nodes 2 --partition p --account a " \
        "--time 1:00:00 --controller-ip * --no-hlo --unchecked --jax-distributed --local-devices 3 " \
        "--start-timeout 30 --keep-alive 60 --devices per-rank"
SAME = ClusterOptions(n=8, launcher="slurm", mpi_args=["--cpu-bind=cores", "-v"], nodes=2, partition="p", account="a",
                      time_limit="1:00:00", controller_ip="*", hlo=False, checked=False, jax_distributed=True,
                      local_devices=3, start_timeout=30, keep_alive=60, devices="per-rank")


def start_options(line: str) -> ClusterOptions:
    return from_arguments(line_parser().parse_args(shlex.split(line)))


def demo_options(line: str) -> ClusterOptions:
    return from_arguments(cli_parser().parse_args(["demo", *shlex.split(line)]))


def test_the_magic_and_the_command_line_read_every_flag_into_the_same_options():
    assert start_options(START) == SAME
    assert demo_options(START.removeprefix("start ")) == SAME
    assert start_options("start --mpi-cmd 'srun --x'").mpi_cmd == ("srun", "--x")


def test_no_flag_means_each_default_of_the_table():
    assert start_options("start") == demo_options("") == ClusterOptions()
    assert ClusterOptions().start_timeout == 120.0 and ClusterOptions().n == 4
    assert start_options("start --keep-alive none").keep_alive is None


def test_the_help_of_each_flag_is_the_table_s():
    def helps(parser):
        return {action.dest: action.help for action in parser._actions if action.dest in fields}

    fields = {entry.name for entry in dataclasses.fields(ClusterOptions)}
    start = line_parser()._subparsers._group_actions[0].choices["start"]
    demo = cli_parser()._subparsers._group_actions[0].choices["demo"]
    assert helps(start) == helps(demo)
    assert helps(start)["n"] == f"{ClusterOptions.help_of('n')} (default 4)"
    assert helps(start)["hlo"].startswith(ClusterOptions.help_of("hlo"))
    flagged = {e.name for e in dataclasses.fields(ClusterOptions) if e.metadata["flag"] is not None}
    assert set(helps(start)) == flagged
    assert all(ClusterOptions.help_of(name) for name in fields)


def test_mpicluster_takes_the_options_or_their_fields_as_keywords():
    assert MPICluster(n=3, hlo=False).options == ClusterOptions(n=3, hlo=False)
    assert MPICluster(3).options == MPICluster(ClusterOptions(n=3)).options
    given = MPICluster(ClusterOptions(n=3, mpi_cmd=["mpiexec"]), hlo=False)
    assert (given.n, given.hlo, given.launcher, given.mpi_cmd) == (3, False, "mpiexec", ("mpiexec",))
    assert mpinb.ClusterOptions is ClusterOptions and mpinb.CellOptions.__name__ == "CellOptions"


def test_an_unknown_keyword_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"unknown cluster option hlo_capture; the options are n, launcher"):
        MPICluster(n=2, hlo_capture=False)
    with pytest.raises(TypeError, match="n given twice"):
        MPICluster(2, n=3)


@pytest.mark.parametrize(("keywords", "message"), [
    ({"devices": "gpu"}, "devices must be one of cpu, per-rank, got 'gpu'"),
    ({"keep_alive": -1}, "keep_alive must be a number of seconds >= 0"),
    ({"local_devices": 0}, "local_devices must be a positive int"),
])
def test_values_that_cannot_work_are_refused_at_once(keywords, message):
    with pytest.raises(ValueError, match=message):
        ClusterOptions(**keywords)


def test_attach_makes_the_cluster_again_with_the_same_options():
    """What the registry keeps (lifetime.options_of) gives back the options the cluster ran with."""
    cluster = MPICluster(n=2, mpi_args=["-bind-to", "none"], keep_alive=30, engine_env={"A": "1"})
    again = MPICluster(progress=False, **options_of(cluster))
    assert dataclasses.replace(again.options, progress=True) == dataclasses.replace(cluster.options, launcher="mpiexec")


def test_the_public_methods_are_mpicluster_s_own():
    assert MPICluster.__mro__ == (MPICluster, object)
    for name in ("status", "wait_idle", "interrupt", "wake", "at_rest", "join", "drop_left", "dead_ranks", "inflight",
                 "where", "on_engines", "start", "stop", "restart", "run_cell", "pull"):
        assert name in vars(MPICluster), name


def test_the_magic_s_docstring_lists_every_command():
    subcommands = line_parser()._subparsers._group_actions[0].choices
    assert list(subcommands) == list(COMMANDS)
    assert len(COMMANDS) == 10
    doc = MpiJaxMagics.mpijax.__doc__
    assert all(f"%mpijax {name} " in doc for name in COMMANDS) and "%%mpijax" in doc
