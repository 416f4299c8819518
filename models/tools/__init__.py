"""Command-line tools around a trained run, each run as
`python -m models.tools.NAME`: `tune_end_penalty` (a run's end penalty
chosen on validation as a `--search-options` file) and `headline_table`
(an export's headlines beside their documents and references, as a
Markdown table)."""
