"""The settings: the dataclasses of what the model is, how it trains and
decodes and where its data comes from, the command lines' flags made from
them, the file names of a run folder and of an export, the error types,
the quiet start-up and the machine a result was measured on (no framework
import)."""
