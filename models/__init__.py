"""Headline summarization models and data pipeline (TensorFlow backend).

One folder per stage, in the order data flows through them; a stage
imports only itself and the stages above it
(tests/test_import_direction.py):

* `settings/`: the settings dataclasses and the flags made from them, the
  file names of a run folder and of an export, the errors, the quiet
  start-up (no framework);
* `text/`: in-graph tokenizing, normalization, detokenizing, the
  vocabulary, the CJK ranges, word ids and the readable headline;
* `data/`: Gigaword pairs from TFDS or a local copy, a split's vocabulary,
  the model's examples and batches;
* `scoring/`: ROUGE and the lead baseline;
* `model/`: the Keras model, an ensemble of its members, a run folder
  loaded back;
* `decoding/`: the exported graph and its search, an export's client, the
  search tuned and checked on validation;
* `training/`: the run's lengths, the schedule, fitting, minimum-risk
  fine-tuning, distillation, the progress lines;
* `evaluation/`: an export scored (`python -m models.evaluation`);
* `export/`: the served search chosen and the SavedModel written
  (`python -m models.export`).

`pipeline` is what `train.py` runs, every stage in order; `tools/` holds the
command-line tools around a run. The server (`serving/`, beside `models/`)
needs only the settings and the export's client.

Importing `models` changes nothing in the process: the command lines hide
TensorFlow's start-up lines themselves (`models.settings.startup`).
"""
