"""How an export decodes: `SearchOptions`, baked into the exported graph.

Plain dataclass with no TensorFlow import, like the other settings.
"""

import dataclasses
import json
from pathlib import Path

from models.settings.errors import UserError, check_at_least
from models.settings.folder_layout import SEARCH_TUNING_FILE


@dataclasses.dataclass
class SearchOptions:
    """Decoding settings baked into the exported graph.

    Written beside the export as `search_options.json`, whose `min_length`,
    `max_length` and `length_penalty` are the defaults the server fills in
    for the `length_control` signature's inputs.

    Attributes:
        beam_size: Beams of the `serving_default` and `attention` signatures.
        length_penalty: GNMT's alpha: beams are ranked by log-probability
            over `((5 + n) / 6) ** length_penalty` (0: no normalisation).
        min_length: `</s>` is banned for the first `min_length` tokens.
        max_length: Most headline tokens. None (`train.py`'s default): the
            run's `max_target_length`.
        no_repeat_ngram_size: Never repeat an n-gram of this size (0: off).
        suppress_unk: Never generate <unk> (off: Gigaword's test references
            hold UNK, which the model may then match; readable headlines
            leave it out).
        shortlist: Opt-in speed lever: if > 0, each step scores only the
            `shortlist` most frequent words and the source's words, and
            renormalises over them (`keras_attn.shortlist_log_distribution`):
            approximate. 0: the whole vocabulary, exact.
        xla: Opt-in speed lever: the encoder and search compiled by XLA
            (`jit_compile`), on a batch padded to a power of two and a source
            padded to a multiple of 16. The same model, computed in another
            order, so a near tie may fall the other way. The SavedModel then
            needs TensorFlow with XLA (pip's TensorFlow, the project's
            server); stock TensorFlow Serving runs it only behind
            `--xla_cpu_compilation_enabled`. XLA keeps shapes fixed, so
            greedy halves its batch as rows end (`drop_finished="halves"`)
            instead of dropping each ended row, and the encoder runs on the
            rows inside their length, halved likewise
            (`keras_attn.bidirectional_by_length`).
        shards: The batch is decoded as this many independent searches,
            which TensorFlow runs at the same time. Same headlines; it gains
            where one search leaves a core idle (under XLA, and for beam
            search).
        n_best: If > 0, the export has an `n_best` signature, the `n_best`
            best beams of each document (without XLA), which a student's
            `train.py --distill-from` reads (`--distill-targets inter`).
            None: 5, or `beam_size` if smaller; 1 beam: none.
        greedy_end_penalty: Greedy search only (the `greedy` signature;
            every signature when `beam_size` is 1): subtracted from the end
            token's log-probability at every step, so that its headlines
            run longer (`keras_attn.EndPenalty`; 0: off), and from their
            scores. Greedy search has no length penalty; this is its length
            lever, chosen on validation after the beam's settings.
    """

    beam_size: int = 5
    length_penalty: float = 1.0
    min_length: int = 3
    max_length: int | None = 20
    no_repeat_ngram_size: int = 3
    suppress_unk: bool = False
    shortlist: int = 0
    xla: bool = False
    shards: int = 1
    n_best: int | None = None
    greedy_end_penalty: float = 0.0

    def __post_init__(self):
        check_at_least(
            self,
            [
                ("beam_size", 1),
                ("min_length", 0),
                ("no_repeat_ngram_size", 0),
                ("shortlist", 0),
                ("shards", 1),
            ],
        )
        if self.max_length is not None and self.max_length < 1:
            raise UserError(
                "`max_length` must be >= 1, or unset for the run's "
                f"`max_target_length`. Received: max_length={self.max_length}"
            )
        if self.n_best is None:
            self.n_best = 0 if self.xla else min(5, self.beam_size)
        if self.beam_size < 2:
            self.n_best = 0  # greedy search has no beams to list
        if not 0 <= self.n_best <= self.beam_size:
            raise UserError(
                f"`n_best` must be in [0, beam_size={self.beam_size}]. "
                f"Received: n_best={self.n_best}"
            )

    @classmethod
    def tuned(cls, run_dir):
        """The settings a run chose on validation, else the defaults."""
        path = Path(run_dir) / SEARCH_TUNING_FILE
        return cls(**json.loads(path.read_text())["chosen"]) if path.exists() else cls()
