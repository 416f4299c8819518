"""The SavedModel's text steps in plain Python, for an ids-level ONNX export.

An ONNX export (`python -m models.export --format onnx`) takes source ids
and returns headline ids; the text on either side is the client's. This
module is that client's text, as the SavedModel's graph does it
(`models.text`), with Python's `re` and the regexes the export wrote into
its `onnx_model.json` (`text`): no TensorFlow, no model code.

* `encode`: documents to the model's inputs: each cut to `max_chars`
  characters, its format characters removed, control and separator
  characters made spaces, PTB-tokenized by the export's rules in order (its
  own case and digits: the surface words), cut to `max_source_length`
  words; each word folded (lowercased, digits `#` for `gigaword`) and
  looked up in the vocabulary; a word outside it is `vocab_size` plus its
  first position in the source (a copy), but Gigaword's unknown markers,
  which are the unknown id.
* `headline`: the model's ids back to text: a copy id is its source word,
  reserved ids print nothing (but the unknown id), a word the source holds
  is written as the source writes it (at the position the step's attention
  weighs most), the unknown word is dropped, and the PTB tokens are joined
  as written text (`models.text.detokenize`).
"""

import re

import numpy as np

_FLAGS = re.ASCII
# The suffix of a quarter's or a half's ordinal as Gigaword masks it
# (`#st-qtr`).
_MASKED_SUFFIX = re.compile("^#(st|nd|rd|th)-", _FLAGS)


class TextSteps:
    """Text to ids and back, as the contract (`onnx_model.json`) says.

    Args:
        contract: The export's `onnx_model.json`, a dict.
        vocabulary: Its words, the line number of `vocab.txt` the id.
    """

    def __init__(self, contract, vocabulary):
        text = contract["text"]
        self.contract = contract
        self.words = list(vocabulary)
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.vocab_size = contract["vocab_size"]
        self.unknown_tokens = frozenset(contract["unknown_tokens"])
        self.reserved = contract["ids"]

        def compiled(pairs):
            return [(re.compile(p, _FLAGS), r) for p, r in pairs]

        self.prepare = compiled(text["prepare"])
        self.rules = compiled(text["rules"])
        self.detokenize_rules = compiled(text["detokenize_words"])
        self.digit = re.compile(text["digit"], _FLAGS)
        self.patterns = {
            k: re.compile(text[k], _FLAGS)
            for k in ("closes", "opens", "cjk_symbol", "cjk_letter", "number")
        }
        self.patterns["orphans"] = re.compile(text["orphans"], _FLAGS)
        self.first = re.compile(text["first"], _FLAGS)
        # Per ordinal: its masked form (`#st-qtr`), its spelled forms
        # hyphenated with a period and alone, the periods, its digits.
        period = re.compile(text["periods"], _FLAGS)
        self.ordinals = [
            (
                re.compile(f"#(st|nd|rd|th)-({periods})", _FLAGS),
                re.compile(f"({spelled})-({text['periods']})", _FLAGS),
                re.compile(spelled, _FLAGS),
                period,
                digits,
            )
            for digits, spelled, periods in text["period_ordinals"]
        ]

    def surface_words(self, document):
        """The document's PTB words in its own case and digits."""
        max_chars = self.contract["max_chars"]
        # A lone surrogate is invalid UTF-8, replaced as TensorFlow does.
        data = document.encode("utf-8", "surrogatepass")[: 4 * max_chars]
        x = data.decode("utf-8", errors="replace")[:max_chars]
        for pattern, rewrite in self.prepare + self.rules:
            x = pattern.sub(rewrite, x)
        return [w for w in x.split(" ") if w]

    def fold(self, word):
        """A surface word as the vocabulary writes it."""
        word = word.lower()
        if self.contract["normalization"] == "gigaword":
            word = self.digit.sub("#", word)
        return word

    def encode(self, documents):
        """`(source_ids, source_lengths, sources)`: int32 `[batch, S]` (0
        padded, at least one column), int32 `[batch]`, and per document a
        dict of its `tokens` and `surface_words`."""
        unk, limit = self.reserved["unk"], self.contract["max_source_length"]
        sources = []
        for document in documents:
            surface = self.surface_words(document)[:limit]
            sources.append(
                {"surface_words": surface, "tokens": [self.fold(w) for w in surface]}
            )
        width = max([1] + [len(s["tokens"]) for s in sources])
        ids = np.zeros((len(sources), width), np.int32)
        for row, source in enumerate(sources):
            first = {}
            for position, token in enumerate(source["tokens"]):
                first.setdefault(token, position)
                i = self.ids.get(token, unk)
                if i == unk and token not in self.unknown_tokens:
                    i = self.vocab_size + first[token]
                ids[row, position] = i
        lengths = np.array([len(s["tokens"]) for s in sources], np.int32)
        return ids, lengths, sources

    def headline(self, ids, length, attention, source):
        """`(headline, normalized)` from one row's ids `[T]`, its length, its
        attention `[T, S]` and `encode`'s `source`: the readable text and
        the model's tokens joined by spaces (what ROUGE scores)."""
        tokens = source["tokens"]
        normalized, words = [], []
        for step, i in enumerate(ids[:length].tolist()):
            if i < len(self.reserved) and i != self.reserved["unk"]:
                continue  # reserved ids print nothing
            if i < self.vocab_size:
                token = self.words[i]
            else:
                position = i - self.vocab_size
                token = tokens[position] if position < len(tokens) else ""
            normalized.append(token)
            at = [p for p, t in enumerate(tokens) if t == token]
            if at:
                weights = attention[step, at]
                token = source["surface_words"][at[int(np.argmax(weights))]]
            words.append("" if token in self.unknown_tokens else token)
        words = self.source_ordinals(words, source["surface_words"])
        return self.detokenize(words), " ".join(t for t in normalized if t)

    def source_ordinals(self, words, surface_words):
        """`words` with a masked quarter's or half's ordinal (`#st-qtr`) as
        the source names it, where it names one the period can have."""
        masked = [any(m.fullmatch(w) for m, *_ in self.ordinals) for w in words]
        if not any(masked):
            return words
        lowered = [w.translate(_ASCII_LOWER) for w in surface_words]
        following = [*lowered[1:], ""][: len(lowered)]
        named = [
            any(
                hyphenated.fullmatch(w)
                or (alone.fullmatch(w) and period.fullmatch(after))
                for w, after in zip(lowered, following, strict=True)
            )
            for _, hyphenated, alone, period, _ in self.ordinals
        ]
        if sum(named) != 1:
            return words
        pattern, *_, digits = self.ordinals[named.index(True)]
        return [
            digits + "-" + _MASKED_SUFFIX.sub("", w) if pattern.fullmatch(w) else w
            for w in words
        ]

    def detokenize(self, tokens):
        """PTB tokens to written text, first letter capitalized."""
        tokens = [t for t in tokens if t]
        while tokens and self.patterns["orphans"].fullmatch(tokens[0]):
            tokens.pop(0)
        words = []
        for token in tokens:
            for pattern, rewrite in self.detokenize_rules:
                token = pattern.sub(rewrite, token)
            words.append(token)
        out = []
        for k, word in enumerate(words):
            previous = words[k - 1] if k else ""
            glued = k == 0 or self._glued(word, previous)
            # `Calif.` ending the text is followed by the sentence's period.
            if k and word == "." and previous.endswith("."):
                word = ""
            out.append(word if glued else " " + word)
        match = self.first.fullmatch("".join(out))
        lead, head, rest = match.groups()
        return lead + head.upper() + rest

    def _glued(self, word, previous):
        """Whether `word` is written against `previous`."""
        p = self.patterns
        letter, letter_before = (
            p["cjk_letter"].fullmatch(word),
            p["cjk_letter"].fullmatch(previous),
        )
        return bool(
            p["closes"].fullmatch(word)
            or p["opens"].fullmatch(previous)
            or p["cjk_symbol"].fullmatch(word)
            or p["cjk_symbol"].fullmatch(previous)
            or (letter and (letter_before or p["number"].fullmatch(previous)))
            or (letter_before and p["number"].fullmatch(word))
        )


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
