"""`python -m worksurface` runs the same command as the `worksurface` script."""

from .cli import main

main()
