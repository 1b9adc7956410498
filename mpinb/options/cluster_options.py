"""The options of a cluster, in one table: :class:`ClusterOptions`, each field with its default
and its help written once. ``MPICluster`` takes it (or its fields as keywords); ``%mpijax start``
and ``mpinb demo`` make their command-line options from it (``add_arguments``) and read them
back into one (``from_arguments``), so that the three agree.

Pure: no IPython, no JAX.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import field

#: how the ranks are started (mpinb.launch.launchers)
LAUNCHERS = ("local", "mpiexec", "slurm")
#: which devices an engine's JAX uses (mpinb.engine.devices)
DEVICES = ("cpu", "per-rank")
#: the fields only a Slurm launcher reads
SLURM_ONLY = ("nodes", "partition", "account", "time_limit")


def seconds(text: str) -> float | None:
    """A command line's number of seconds: positive, or ``none``/``off``/``0`` for None."""
    if text.lower() in ("none", "off", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def words_or_none(text: str) -> tuple[str, ...] | None:
    """A quoted command line's words; None for none."""
    return tuple(shlex.split(text)) or None


def words(text: str) -> tuple[str, ...]:
    """A quoted command line's words."""
    return tuple(shlex.split(text))


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a field is written on a command line: its flag, how its text becomes the value
    (``parse``, argparse's ``type``), its choices; ``switch``: a flag alone that sets the field to
    the opposite of its default (``--no-hlo``, ``--jax-distributed``)."""

    name: str
    parse: Callable | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    switch: bool = False


def about(text: str, flag: Flag | None = None) -> dict:
    """A field's entry in the table: its one line of help, its command-line flag if any."""
    return {"help": text, "flag": flag}


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """How a cluster is started and what its engines do; see each field's help
    (``ClusterOptions.help_of(name)``) or ``%mpijax start --help``. The launchers are described in
    :mod:`mpinb.launch.launchers`. ValueError for a value that cannot work, at once."""

    n: int = field(default=4, metadata=about("number of MPI ranks (engines)", Flag("-n", int)))
    launcher: str | None = field(default=None, metadata=about(
        "how the ranks start: local (the launcher of the MPI mpi4py loads, on this host; the default), mpiexec "
        "(the given launcher command and arguments as they are; the default when either is given) or slurm (a "
        "step of the current allocation, else a batch job)", Flag("--launcher", choices=LAUNCHERS)))
    mpi_cmd: tuple[str, ...] | None = field(default=None, metadata=about(
        "launcher command (default: the mpiexec of the MPI mpi4py loads; srun with slurm)",
        Flag("--mpi-cmd", words_or_none, metavar="CMD")))
    mpi_args: tuple[str, ...] = field(default=(), metadata=about(
        "extra launcher arguments, quoted (to srun with slurm)", Flag("--mpi-args", words, metavar='"ARGS"')))
    nodes: int | None = field(default=None, metadata=about(
        "slurm: number of nodes of the step or batch job", Flag("--nodes", int, metavar="N")))
    partition: str | None = field(default=None, metadata=about(
        "slurm batch job: partition", Flag("--partition", metavar="P")))
    account: str | None = field(default=None, metadata=about(
        "slurm batch job: account", Flag("--account", metavar="A")))
    time_limit: str | None = field(default=None, metadata=about(
        "slurm batch job: time limit, e.g. 1:00:00", Flag("--time", metavar="T")))
    engine_env: dict | None = field(default=None, metadata=about(
        "environment variables for the engines, e.g. {'JAX_ENABLE_X64': '1'}"))
    controller_ip: str | None = field(default=None, metadata=about(
        "interface the controller listens on (default loopback; * with slurm)",
        Flag("--controller-ip", metavar="IP")))
    encrypt: bool | None = field(default=None, metadata=about(
        "CurveZMQ encryption of the cluster's connections (default: on whenever the controller listens "
        "beyond loopback)"))
    hlo: bool = field(default=True, metadata=about(
        "capture the optimized HLO of what each rank compiles, for layout warnings", Flag("--no-hlo", switch=True)))
    checked: bool = field(default=True, metadata=about(
        "checked mode: ranks agree on each collective before running it (a mismatch is an error on every rank "
        "instead of a hang)", Flag("--unchecked", switch=True)))
    jax_distributed: bool = field(default=False, metadata=about(
        "start JAX's multi-process runtime on the ranks (jax.distributed.initialize: jax.process_count() is n, "
        "shard_map and lax collectives run across the ranks)", Flag("--jax-distributed", switch=True)))
    local_devices: int | None = field(default=None, metadata=about(
        "CPU devices per engine process (default JAX's: one)", Flag("--local-devices", int, metavar="K")))
    start_timeout: float = field(default=120.0, metadata=about(
        "seconds each phase of the start waits (the controller's ports, the engines registering, checked, "
        "set up)", Flag("--start-timeout", float, metavar="S")))
    progress: bool = field(default=True, metadata=about("show a progress bar while the cluster starts"))
    cluster_id: str | None = field(default=None, metadata=about(
        "the cluster's id (default: made at start, anew at each restart)"))
    keep_alive: float | None = field(default=None, metadata=about(
        "let the cluster outlive the process that started it (a kernel restarted or killed), ending itself "
        "after this many seconds with none attached (attach reconnects); default: it ends with its holder",
        Flag("--keep-alive", seconds, metavar="S")))
    standby: bool = field(default=True, metadata=about(
        "prepare the next restart's engines ahead, while the notebook is idle, so that a restart takes a "
        "second (costs the memory of a second set of engines; not with a Slurm batch job)",
        Flag("--no-standby", switch=True)))
    devices: str = field(default="cpu", metadata=about(
        "which devices each rank's JAX uses: cpu (what mpinb's collectives move) or per-rank (one local "
        "accelerator per rank, by its rank on its host)", Flag("--devices", choices=DEVICES)))

    def __post_init__(self):
        self._check_counts()
        self._check_launcher()
        if self.devices not in DEVICES:
            raise ValueError(f"devices must be one of {', '.join(DEVICES)}, got {self.devices!r}")
        keep = self.keep_alive
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, float)) or keep < 0):
            raise ValueError(f"keep_alive must be a number of seconds >= 0, got {keep!r}")
        self._set("mpi_cmd", tuple(self.mpi_cmd) if self.mpi_cmd else None)
        self._set("mpi_args", tuple(self.mpi_args))
        self._set("engine_env", dict(self.engine_env or {}))
        self._set("jax_distributed", bool(self.jax_distributed))
        self._set("start_timeout", float(self.start_timeout))
        self._set("keep_alive", None if keep is None else float(keep))

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)

    def _check_counts(self) -> None:
        """ValueError unless n, nodes and local_devices are counts that can work."""
        if not _count(self.n):
            raise ValueError(f"n must be a positive int, got {self.n!r}")
        if self.nodes is not None and not (_count(self.nodes) and self.nodes <= self.n):
            raise ValueError(f"nodes must be an int from 1 to n={self.n}, got {self.nodes!r}")
        if self.local_devices is not None and not _count(self.local_devices):
            raise ValueError(f"local_devices must be a positive int, got {self.local_devices!r}")

    def _check_launcher(self) -> None:
        """ValueError for a launcher that is none of LAUNCHERS, or options it does not read."""
        launcher = self.chosen_launcher
        if launcher not in LAUNCHERS:
            raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
        if launcher == "local" and (self.mpi_cmd or self.mpi_args):
            raise ValueError("the local launcher takes no mpi_cmd or mpi_args (use launcher='mpiexec')")
        given = [name for name in SLURM_ONLY if getattr(self, name) is not None]
        if given and launcher != "slurm":
            raise ValueError(f"{', '.join(given)} only apply to launcher='slurm'")

    @property
    def chosen_launcher(self) -> str:
        """The launcher that starts the ranks: the one named, else mpiexec when a launcher command
        or arguments are given, else local."""
        if self.launcher is not None:
            return self.launcher
        return "mpiexec" if (self.mpi_cmd or self.mpi_args) else "local"

    @classmethod
    def help_of(cls, name: str) -> str:
        """The one line of help of a field."""
        return _fields()[name].metadata["help"]

    @classmethod
    def given(cls, options, keywords: dict) -> ClusterOptions:
        """The options MPICluster was given: a ClusterOptions, its fields as keywords (overriding
        those of one given), or ``n`` first."""
        if options is None or isinstance(options, ClusterOptions):
            return (options or cls()).updated(keywords)
        if "n" in keywords:
            raise TypeError("MPICluster: n given twice (first and as n=)")
        return cls().updated({"n": options, **keywords})

    def updated(self, keywords: dict) -> ClusterOptions:
        """These options with the fields ``keywords`` names changed; TypeError naming a keyword
        that is no field."""
        unknown = sorted(set(keywords) - set(_fields()))
        if unknown:
            raise TypeError(f"unknown cluster option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                            f"the options are {', '.join(_fields())} (mpinb.options.cluster_options.ClusterOptions)")
        return dataclasses.replace(self, **keywords) if keywords else self


def _count(value) -> bool:
    """Whether ``value`` is an int of 1 or more (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _fields() -> dict[str, dataclasses.Field]:
    return {entry.name: entry for entry in dataclasses.fields(ClusterOptions)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options of every field that has a flag, each with its help from the table."""
    for entry in _fields().values():
        flag = entry.metadata["flag"]
        if flag is None:
            continue
        if flag.switch:
            parser.add_argument(flag.name, dest=entry.name, action="store_false" if entry.default else "store_true",
                                help=_help_line(entry))
        else:
            parser.add_argument(flag.name, dest=entry.name, type=flag.parse, choices=flag.choices,
                                metavar=flag.metavar, default=entry.default, help=_help_line(entry))


def _help_line(entry: dataclasses.Field) -> str:
    """A field's help on the command line: with its default; a switch that turns a field off
    says that it is on unless given."""
    text, flag, default = entry.metadata["help"], entry.metadata["flag"], entry.default
    if flag.switch:
        return f"{text}; on unless {flag.name}" if default else text
    if default in (None, ()):
        return text
    return f"{text} (default {default:g})" if isinstance(default, float) else f"{text} (default {default})"


def from_arguments(args: argparse.Namespace) -> ClusterOptions:
    """The options parsed by a parser that ``add_arguments`` filled (the fields it has no flag
    for at their defaults)."""
    return ClusterOptions(**{name: getattr(args, name) for name in _fields() if hasattr(args, name)})
