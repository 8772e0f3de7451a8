"""`python -m worksurface.cli` runs the same command as the `worksurface` script."""

from . import main

main()
