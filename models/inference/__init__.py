"""Inference: the graph that turns text into headlines.

* `module`: `HeadlineModule`, what `models.export` saves and what validation
  and tuning decode with (its docstring lists the signatures);
* `xla`: the search compiled by XLA, on padded shapes (`SearchOptions.xla`);
* `shards`: a batch decoded as several searches at once
  (`SearchOptions.shards`).

Decoding many documents, batch by batch, is `models.saved_model_client`'s.
"""

from models.inference.module import HeadlineModule

__all__ = ["HeadlineModule"]
