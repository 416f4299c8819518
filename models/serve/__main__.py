"""`python -m models.serve`: see `models.serve.cli`."""

from models.serve.cli import main

main()
