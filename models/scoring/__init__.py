"""Scoring headlines against their references: ROUGE (`metrics`) and the
lead baseline (`baselines`), used by validation, tuning and evaluation."""
