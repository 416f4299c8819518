"""Decoding: the graph that turns text into headlines, and the choice of
how it searches.

* `headline_module`: `HeadlineModule`, what `models.export.saved_model` saves and what
  validation and tuning decode with (its docstring lists the signatures);
* `xla`: the search compiled by XLA, on padded shapes (`SearchOptions.xla`);
* `shards`: a batch decoded as several searches at once
  (`SearchOptions.shards`);
* `saved_model_client`: an export loaded, its signatures, documents decoded
  batch by batch (TensorFlow and `models.settings` only: the server imports
  it);
* `tuning`: the end penalty and search options chosen on validation;
* `lead_check`, `member_check`: the served search held against the lead
  baseline and against a teacher's first member.

The package imports nothing itself, so that the server can load
`saved_model_client` without the model code.
"""
