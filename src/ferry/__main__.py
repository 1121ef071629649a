"""`python -m ferry` runs the command line."""

from ferry.cli import main

main()
