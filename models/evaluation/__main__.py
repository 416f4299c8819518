"""`python -m models.evaluation`: see `models.evaluation.evaluate`."""

import sys

from models.evaluation.evaluate import main

sys.exit(main())
