"""Headline summarization models and data pipeline (TensorFlow backend).

The modules in the order data flows through them; each imports only those
above it, but for `export.export_run`, which loads a run through `training`:

* `errors`, `layout`, `config`: the one user-error type, the SavedModel
  version-folder rules, and the settings dataclasses (no framework);
* `data/`: Gigaword pairs from TFDS or a local copy, and batches;
* `text`, `features`: in-graph normalization, reserved tokens, word ids;
* `summarizer`, `sampled_softmax`: the Keras model and its one-token step;
* `decoding`: greedy and beam search over any one-token step;
* `metrics`: ROUGE, for validation, tuning and evaluation;
* `training`, `tuning`, `export`, `evaluate`, `heatmap`: fitting, choosing
  the decoding settings, writing the SavedModel, scoring it;
* `pipeline`: what `train.py` runs, all of the above in order;
* `serve/`: the TF-Serving-compatible server, which imports none of the
  model code (only `errors` and `layout`).
"""
