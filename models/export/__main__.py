"""`python -m models.export`: see `models.export.saved_model`."""

from models.export.saved_model import main

main()
