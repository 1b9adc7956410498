"""Command line: ``mpinb demo [-n N]`` (also ``python -m mpinb demo``)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="mpinb", description="mpinb: distributed JAX over MPI, interactively")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the distributed-transpose demo on N MPI engines")
    demo.add_argument("-n", type=int, default=4, help="number of MPI ranks (default 4)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.n < 1:
            parser.error("-n must be at least 1")
        from .demo import run

        return run(args.n)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
