"""Headline summarization models and data pipeline (TensorFlow backend).

The modules in the order data flows through them; each imports only those
above it:

* `errors`, `layout`, `config`: the one user-error type, the SavedModel
  version-folder rules, and the settings dataclasses (no framework);
* `data/`: Gigaword pairs from TFDS or a local copy, and batches;
* `text`, `features`: in-graph normalization, reserved tokens, word ids;
* `summarizer`, `sampled_softmax`: the Keras model and its one-token step
  (searched by `keras_attn.search`);
* `runs`: a run folder's features and trained model, loaded back;
* `inference`: the exported graph (`HeadlineModule`: the search, greedy or
  beam, its bans, the readable output) and decoding in batches;
* `metrics`: ROUGE, for validation, tuning and evaluation;
* `training`, `tuning`, `export`, `evaluate`, `heatmap`: fitting, choosing
  the decoding settings, writing the SavedModel, scoring it;
* `pipeline`: what `train.py` runs, all of the above in order;
* `serve/`: the TF-Serving-compatible server, which imports none of the
  model code (only `errors` and `layout`).
"""
