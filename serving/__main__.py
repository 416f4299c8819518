"""`python -m serving`: see `serving.cli`."""

from serving.cli import main

main()
