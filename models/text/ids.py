"""The reserved tokens and their ids (plain Python: no TensorFlow import).

The vocabulary starts with the reserved tokens in this order, so their ids
are their positions. What the model and a training process without
TensorFlow (`train.py --backend jax`) need of the text; the in-graph text
steps (`models.text.vocabulary`, `models.text.features`) take them from here.
"""

PAD = "<pad>"
UNK = "<unk>"
START = "<s>"
END = "</s>"
RESERVED = (PAD, UNK, START, END)

# Gigaword writes rare words as `<unk>` (harvardnlp files) or `UNK` (TFDS, which
# rewrites train/validation); both mean the vocabulary's unknown entry.
UNK_ALIASES = frozenset({"<unk>", "UNK", "unk", "<UNK>"})

PAD_ID, UNK_ID, START_ID, END_ID = (RESERVED.index(t) for t in (PAD, UNK, START, END))
# Gigaword's own unknown-word markers: read as <unk>, never copied.
DATA_UNK_TOKENS = tuple(sorted(UNK_ALIASES))
