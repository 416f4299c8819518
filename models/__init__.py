"""Headline summarization models and data pipeline (TensorFlow backend).

The modules in the order data flows through them; each imports only those
above it:

* `errors`, `version_folders`, `config`, `flags`, `startup`: the error
  types, the SavedModel version-folder rules, the settings dataclasses and
  the flags generated from them, the command lines' quiet start-up (no
  framework);
* `saved_model_client`: an export loaded, its signatures, documents decoded
  batch by batch (TensorFlow and `version_folders` only);
* `text/`: in-graph tokenizing, normalization, detokenizing, the vocabulary;
* `data/`: Gigaword pairs from TFDS or a local copy, a split's vocabulary,
  the model's examples and batches;
* `text_features`: word ids, and the readable headline;
* `distribute`, `sampled_softmax`, `summarizer`, `ensemble`: the Keras model
  and its one-token step (searched by `keras_attn.search`);
* `members`: an ensemble's member folders and whether each has finished
  (only finished members are exported);
* `run_folder`: a run folder's features and trained model, loaded back;
* `inference/`: the exported graph (`HeadlineModule`: the search, greedy or
  beam, its bans, the readable output), under XLA or in shards;
* `metrics`, `baselines`, `evaluation_report`, `heatmap`: ROUGE, the lead
  baseline, the printed table of scores, attention heatmaps;
* `progress`, `callbacks`, `training`, `risk_fine_tuning`, `tuning`,
  `export`, `evaluate`: a command's progress lines, fitting, minimum-risk
  fine-tuning, choosing the decoding settings, writing the SavedModel,
  scoring it;
* `distill`: a teacher export's headlines of the training split, cached in
  the run folder, as a student's summaries;
* `pipeline`: what `train.py` runs, all of the above in order;
* `serve/`: the TF-Serving-compatible server, which imports none of the
  model code (only `errors`, `flags`, `startup`, `folder_layout`,
  `version_folders` and `saved_model_client`).

Importing `models` changes nothing in the process: the command lines hide
TensorFlow's start-up lines themselves (`models.settings.startup`).
"""
