"""Command line: ``mpinb demo [-n N] [cluster options]`` (those of ``%mpijax start``, from
mpinb.options.cluster_options), ``mpinb tutorials [DIR] [--force]``, ``mpinb list``,
``mpinb clean``, ``mpinb profile [NAME] [--force]``, ``mpinb --version`` (also
``python -m mpinb ...``)."""

from __future__ import annotations

import argparse
import sys


def parser() -> argparse.ArgumentParser:
    from . import __version__
    from .options.cluster_options import add_arguments
    from .workshop import DEFAULT_DIR

    top = argparse.ArgumentParser(prog="mpinb", description="mpinb: distributed JAX over MPI, interactively")
    top.add_argument("--version", action="version", version=f"mpinb {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    add_arguments(sub.add_parser("demo", help="run the distributed-transpose demo on N MPI engines"))
    tutorials = sub.add_parser(
        "tutorials", help="copy the workshop notebooks into a folder",
        description="Copy the workshop notebooks into DIR. A notebook you changed there is kept "
                    "unless --force; one still as mpinb wrote it is brought up to date.")
    tutorials.add_argument("dir", nargs="?", default=DEFAULT_DIR, metavar="DIR",
                           help=f"the folder to copy into (default ./{DEFAULT_DIR}; made if missing)")
    tutorials.add_argument("--force", action="store_true", help="also replace notebooks you changed")
    sub.add_parser("list", help="this user's clusters on this host: held by a kernel, or idle for how long")
    sub.add_parser("clean", help="end the clusters no kernel holds and remove their files")
    profile = sub.add_parser(
        "profile", help="an IPython profile whose clusters are mpinb's (JupyterLab's IPython Parallel panel)",
        description="Write the IPython profile NAME, whose clusters are mpinb's MPI engines: the '+ NEW' "
                    "button of JupyterLab's IPython Parallel panel, or ipcluster start --profile=NAME -n N, "
                    "then starts one, and %%mpijax attach CLUSTER_ID takes it into a notebook.")
    profile.add_argument("name", nargs="?", default="mpinb", help="the profile's name (default mpinb)")
    profile.add_argument("--force", action="store_true", help="replace an ipcluster_config.py of other content")
    return top


def main(argv=None) -> int:
    top = parser()
    args = top.parse_args(argv)
    if args.command == "demo":
        from .demo import run
        from .options.cluster_options import from_arguments

        try:
            options = from_arguments(args)
        except ValueError as exc:
            top.error(str(exc))
        return run(options)
    if args.command == "tutorials":
        from .workshop import copy_tutorials

        try:
            report = copy_tutorials(args.dir, force=args.force)
        except OSError as exc:
            print(f"mpinb tutorials: {exc}", file=sys.stderr)
            return 1
        print("\n".join(report.lines()))
        return 0
    if args.command == "profile":
        from .cluster import profile
        from .view.cluster_words import profile_words

        where, written = profile.write(args.name, force=args.force)
        print(profile_words(args.name, where, written))
        return 0 if written else 1
    if args.command in ("list", "clean"):
        from .cluster import attach
        from .view.cluster_words import cleaned_words, listing_words

        print(listing_words(attach.listing()) if args.command == "list" else cleaned_words(attach.clean()))
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
