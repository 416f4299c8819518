"""Evaluation: an export scored on a split with ROUGE and bootstrap
intervals beside the lead baseline (`evaluate`, run as
`python -m models.evaluation`, with the printed table of its scores) and
attention heatmaps (`heatmap`)."""
