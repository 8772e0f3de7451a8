"""`python -m pgcluster start [--dir DIR] [--durable]` starts a throwaway cluster and prints
`export WORKSURFACE_TEST_POSTGRES=...` for a shell to eval; `python -m pgcluster stop --dir DIR`
stops it and removes DIR."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from . import Cluster, ClusterUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pgcluster", description=__doc__)
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", type=Path, help="the cluster's directory (start: must not exist yet)")
    parser.add_argument("--durable", action="store_true", help="keep PostgreSQL's fsync settings")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            cluster = Cluster.start(durable=args.durable, directory=args.dir)
            print(f"export WORKSURFACE_TEST_POSTGRES={shlex.quote(cluster.url)}")
            print(f"export WORKSURFACE_TEST_POSTGRES_DIR={shlex.quote(str(cluster.directory))}")
        else:
            if args.dir is None:
                parser.error("stop needs --dir")
            Cluster.attach(args.dir).stop()
    except ClusterUnavailable as exc:
        print(f"pgcluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
