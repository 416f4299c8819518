"""The settings: the dataclasses of what the model is, how it trains and
decodes, the command lines' flags made from them, the file names of a run
folder and of an export, the error types and the quiet start-up (no
framework import)."""
