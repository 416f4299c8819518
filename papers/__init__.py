"""The papers' reproductions: Entity Networks on bAbI, Pointer Networks on
convex hulls and TSP.

`entity_networks`, `pointer_networks` and `planar_problems` hold each
paper's model wiring, data and reference solvers, and run one experiment
from the command line (`python -m papers.entity_networks --help`). `units`
defines the papers' recipes as resumable training runs, `runner` runs them
and records each in `papers/results/` (`records`), and `tables` renders the
docs' tables from those records (`python -m papers.runner render`).
Checkpoints and other outputs go to `papers/output/` (not tracked).
"""
