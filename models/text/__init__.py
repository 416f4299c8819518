"""Text in the graph, in Gigaword's form and back, with stock TensorFlow ops.

One module per step, each importing only those before it:

* `vocabulary`: the reserved tokens and `build_vocabulary`;
* `tokenizing`: raw text to PTB tokens in its own case and digits, Chinese
  and Japanese a character a token (`surface`, `surface_words`);
* `normalization`: the tokens in the data's form (`fold`, `tokenize`,
  `normalize`, `guess_normalization`);
* `detokenizing`: PTB tokens back to written text (`detokenize`,
  `detokenize_words`).
"""

from models.text.detokenizing import PERIOD_ORDINALS, detokenize, detokenize_words
from models.text.normalization import (
    fold,
    guess_normalization,
    normalize,
    tokenize,
)
from models.text.tokenizing import surface, surface_words
from models.text.vocabulary import (
    END,
    PAD,
    RESERVED,
    START,
    UNK,
    UNK_ALIASES,
    build_vocabulary,
)

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
