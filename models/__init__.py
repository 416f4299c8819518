"""Headline summarization models and data pipeline (TensorFlow backend)."""
