"""Text in the graph, in Gigaword's form and back, with stock TensorFlow ops.

One module per step, each importing only those before it:

* `vocabulary`: the reserved tokens and `build_vocabulary`;
* `tokenizing`: raw text to PTB tokens in its own case and digits, Chinese
  and Japanese a character a token (`surface`, `surface_words`);
* `normalization`: the tokens in the data's form (`fold`, `tokenize`,
  `normalize`, `guess_normalization`);
* `detokenizing`: PTB tokens back to written text (`detokenize`,
  `detokenize_words`);
* `cjk`: the Chinese and Japanese characters, a token each (plain Python);
* `features`: `TextFeatures`, raw text to word ids and the model's output
  back to the readable headline.

The names below are read from their modules when first used, so that
importing `models.text.cjk` (ROUGE and the lead baseline do) loads no
TensorFlow before a command line has hidden its start-up lines
(`models.settings.startup`).
"""

import importlib

__all__ = [
    "END",
    "PAD",
    "PERIOD_ORDINALS",
    "RESERVED",
    "START",
    "UNK",
    "UNK_ALIASES",
    "build_vocabulary",
    "detokenize",
    "detokenize_words",
    "fold",
    "guess_normalization",
    "normalize",
    "surface",
    "surface_words",
    "tokenize",
]
_MODULES = {
    **dict.fromkeys(
        ("PERIOD_ORDINALS", "detokenize", "detokenize_words"), "detokenizing"
    ),
    **dict.fromkeys(
        ("fold", "guess_normalization", "normalize", "tokenize"), "normalization"
    ),
    **dict.fromkeys(("surface", "surface_words"), "tokenizing"),
    **dict.fromkeys(
        ("END", "PAD", "RESERVED", "START", "UNK", "UNK_ALIASES", "build_vocabulary"),
        "vocabulary",
    ),
}


def __getattr__(name):
    # PEP 562: `models.text.normalize` imports `models.text.normalization`
    # (and TensorFlow) then.
    if name in _MODULES:
        return getattr(importlib.import_module(f"models.text.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'models.text' has no attribute {name!r}")
