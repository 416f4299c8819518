"""Sequence-level knowledge distillation: a student trained on a teacher's headlines.

Kim & Rush (2016), "Sequence-Level Knowledge Distillation": the teacher (an
exported ensemble, say) beam-decodes the training sources, and a student
trains on those headlines in place of, or beside, the references. The
student's greedy output then comes close to the teacher's beam at the cost
of one small model's greedy search.

`train.py --distill-from saved_models/<teacher>/<version>` runs it: the
training split's summaries are replaced (`targets="teacher"`) or joined
(`targets="mixed"`: each document twice, once with its reference, once with
the teacher's headline) by the teacher's `serving_default` headlines in the
data's normalized form, which is the form the references have. With
`targets="inter"` (Kim & Rush's Seq-Inter), each document's summary is,
among the teacher's n best beams (its `n_best` signature: export the teacher
with `--n-best`), the one closest to the reference (`closest_hypotheses`);
`targets="inter-mixed"` joins those to the references (Freitag et al. 2017,
whose student of one member's size matched an ensemble). Teacher headlines
far from their reference can be left out (`min_overlap`). Everything else
(vocabulary, validation on the references, tuning, export, evaluation) is a
run like any other.

The teacher's headlines are kept in the run folder (`teacher/`), one file
per chunk of documents, each written whole or not at all: a rerun decodes
only the chunks still missing, so a killed run loses at most the chunk it
was decoding.
"""

import hashlib
import json
import sys
from pathlib import Path

from tqdm.auto import tqdm

from models.settings.errors import UserError
from models.settings.folder_layout import SAVED_MODEL_FILE, TEACHER_CACHE_DIR
from models.settings.json_files import write_json, write_whole
from models.settings.train import DISTILL_TARGETS as TARGETS

N_BEST_SIGNATURE = "n_best"
# How a cache line holds a document's n-best list (decoded headlines have no
# tab: the text's tokenizer splits on it).
_HYPOTHESES_SEPARATOR = "\t"
_MANIFEST = "manifest.json"


def documents_digest(documents):
    """What identifies the documents a cache was decoded from."""
    h = hashlib.sha256()
    for d in documents:
        h.update(_text(d).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def teacher_digest(teacher_dir):
    """What identifies an exported teacher: its graph and its weights' index."""
    teacher_dir = Path(teacher_dir)
    h = hashlib.sha256()
    for name in (SAVED_MODEL_FILE, "variables/variables.index"):
        path = teacher_dir / name
        if not path.is_file():
            raise UserError(
                "`distill_from` must be a SavedModel version folder "
                f"(saved_models/<name>/<version>), with {name}. "
                f"Received: distill_from={str(teacher_dir)!r}"
            )
        h.update(path.read_bytes())
    return h.hexdigest()


def _text(document):
    return document.decode("utf-8") if isinstance(document, bytes) else document


def _chunk_path(cache_dir, index):
    return cache_dir / f"chunk-{index:05d}.txt"


def _check_manifest(cache_dir, manifest):
    path = cache_dir / _MANIFEST
    if not path.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_json(path, manifest)
        return
    cached = json.loads(path.read_text(encoding="utf-8"))
    # Both ways: an n-best cache has a `signature` a headline cache lacks.
    changed = sorted(
        k for k in {*manifest, *cached} if cached.get(k) != manifest.get(k)
    )
    if changed:
        raise UserError(
            f"the teacher's headlines cached in {cache_dir} were decoded with "
            f"another {' and '.join(changed)}; use another --run-dir (or remove "
            f"{cache_dir}). Received: "
            + ", ".join(f"{k}={manifest.get(k)!r}" for k in changed)
        )


def cached_headlines(
    documents, decode, cache_dir, manifest, chunk_size=2048, batch_size=64
):
    """`decode`'s headline for every document, decoding only what is not cached.

    Args:
        documents: The documents (str or bytes), in the order of the split.
        decode: Takes a list of documents, returns their headlines (str).
        cache_dir: The folder of the chunk files and the manifest.
        manifest: A dict identifying the teacher and the documents; a cache
            written under another one is an error, not silently reused.
        chunk_size: Documents per chunk file.
        batch_size: Documents per call of `decode`.

    Returns:
        One headline per document, as `str`.
    """
    if chunk_size < 1:
        raise ValueError(
            f"`chunk_size` must be >= 1. Received: chunk_size={chunk_size}"
        )
    cache_dir = Path(cache_dir)
    _check_manifest(cache_dir, dict(manifest, chunk_size=chunk_size))
    starts = range(0, len(documents), chunk_size)
    missing = [k for k in range(len(starts)) if not _chunk_path(cache_dir, k).exists()]
    done = len(documents) - sum(
        len(documents[starts[k] : starts[k] + chunk_size]) for k in missing
    )
    with tqdm(
        total=len(documents), initial=done, desc="teacher", unit="doc", file=sys.stderr
    ) as bar:
        for k in missing:
            chunk = documents[starts[k] : starts[k] + chunk_size]
            headlines = []
            for i in range(0, len(chunk), batch_size):
                batch = chunk[i : i + batch_size]
                headlines.extend(decode(batch))
                bar.update(len(batch))
            lines = [_one_line(h) for h in headlines]
            write_whole(_chunk_path(cache_dir, k), "\n".join(lines) + "\n")
    headlines = []
    for k in range(len(starts)):
        text = _chunk_path(cache_dir, k).read_text(encoding="utf-8")
        headlines.extend(text[:-1].split("\n") if text else [])
    if len(headlines) != len(documents):
        raise UserError(
            f"the teacher's headlines cached in {cache_dir} do not match the "
            f"documents; remove the folder. Received: {len(headlines)} headlines "
            f"for {len(documents)} documents"
        )
    return headlines


def _one_line(headline):
    """A headline, or an n-best list (a list of them), as one cache line."""
    if isinstance(headline, str):
        return " ".join(headline.split())
    return _HYPOTHESES_SEPARATOR.join(" ".join(h.split()) for h in headline)


def closest_hypotheses(n_best, references):
    """Of each n-best list, the hypothesis closest to its reference.

    Kim & Rush's Seq-Inter: the student learns, among what the teacher finds
    likely, what scores best; "closest" is the mean of ROUGE-1, ROUGE-2 and
    ROUGE-L F1 (`models.scoring.metrics`), ties to the better-ranked hypothesis.

    Args:
        n_best: One cache line per document: its hypotheses, best first,
            tab-separated (a plain headline is a list of one).
        references: The documents' references.

    Returns:
        `(hypotheses, overlaps)`: one hypothesis per document (`""` for an
        empty list), and its mean ROUGE F1 with the reference, 0-100.
    """
    from models.scoring.metrics import rouge_scores

    lists = [line.split(_HYPOTHESES_SEPARATOR) for line in n_best]
    pairs = [(h, r) for hs, r in zip(lists, references, strict=True) for h in hs]
    every, their_references = [h for h, _ in pairs], [r for _, r in pairs]
    types = ("rouge1", "rouge2", "rougeL")
    scores = iter(100 * rouge_scores(every, their_references, types).mean(1))
    chosen, overlaps = [], []
    for hypotheses in lists:
        mine = [float(next(scores)) for _ in hypotheses]
        best = mine.index(max(mine))
        chosen.append(hypotheses[best])
        overlaps.append(mine[best])
    return chosen, overlaps


def mean_headline_length(teacher_dir, documents):
    """The mean length, in the data's normalized tokens, of the teacher's
    served headlines (`serving_default`) of `documents`: the length a
    student's greedy search is tuned to (`train.py --greedy-length teacher`).
    """
    from models.decoding.saved_model_client import decode_documents

    headlines = decode_documents(str(teacher_dir), documents, progress=False)
    return sum(len(h.split()) for h in headlines) / max(len(headlines), 1)


def distillation_pairs(
    documents, references, headlines, targets="teacher", min_overlap=0.0
):
    """The student's training pairs.

    Args:
        documents, references: The training split.
        headlines: The teacher's headline of each document (with the
            `"inter"` targets, its n-best list: a cache line).
        targets: `"teacher"`: the teacher's headlines only (sequence-level
            KD); `"inter"`: of each n-best list, the hypothesis closest to
            the reference (Seq-Inter); `"mixed"` and `"inter-mixed"`: those,
            and the references besides, each document twice (Freitag et
            al. 2017). A document whose teacher headline is empty is left
            out, except that the mixed targets keep its reference (and if
            every headline is empty, the references are the summaries).
        min_overlap: Teacher headlines whose mean ROUGE-1/2/L F1 with
            their reference (0-100) is below it are left out as well: the
            teacher's mistakes, which Freitag et al. filter. 0: none.

    Returns:
        `(documents, summaries)`, two lists of `str`.
    """
    if targets not in TARGETS:
        raise UserError(
            f"`distill_targets` must be one of {', '.join(TARGETS)}. "
            f"Received: distill_targets={targets!r}"
        )
    if not 0 <= min_overlap <= 100:
        raise UserError(
            "`distill_min_overlap` must be in [0, 100]. Received: "
            f"distill_min_overlap={min_overlap!r}"
        )
    references = [_text(r) for r in references]
    overlaps = [100.0] * len(references)
    if targets.startswith("inter") or min_overlap > 0:
        headlines, overlaps = closest_hypotheses(headlines, references)
    pairs = [
        (_text(d), h)
        for d, h, o in zip(documents, headlines, overlaps, strict=True)
        if h.strip() and o >= min_overlap
    ]
    if targets.endswith("mixed") or not pairs:
        pairs += [(_text(d), r) for d, r in zip(documents, references, strict=True)]
    return [d for d, _ in pairs], [s for _, s in pairs]


def distilled_split(
    train_split, teacher_dir, run_dir, targets="teacher", min_overlap=0.0
):
    """`train_split` with the teacher's headlines as (or beside) its summaries.

    Args:
        train_split: `tf.data.Dataset` of `(document, summary)` string pairs.
        teacher_dir: The teacher's SavedModel version folder; its
            `serving_default` signature decodes (its tuned beam settings),
            or with `targets="inter"` its `n_best` signature.
        run_dir: The student's run folder; the headlines are cached in its
            `teacher/` folder.
        targets: One of `TARGETS` (`distillation_pairs`).
        min_overlap: The least overlap of a kept teacher headline with its
            reference (`distillation_pairs`).

    Returns:
        A `tf.data.Dataset` of `(document, summary)` string pairs.
    """
    import tensorflow as tf

    from models.decoding.saved_model_client import (
        decode_documents,
        load_saved_model,
        signature_names,
    )

    teacher_dir = Path(teacher_dir)
    digest = teacher_digest(teacher_dir)
    pairs = list(train_split.as_numpy_iterator())
    documents = [d for d, _ in pairs]
    manifest = {"teacher": digest, "documents": documents_digest(documents)}
    signature = "serving_default"
    if targets.startswith("inter"):  # Another cache: the n-best lists.
        manifest["signature"] = signature = N_BEST_SIGNATURE
    # Before the cache's manifest is written, so that a rerun with a new
    # export of the teacher is not refused as another teacher.
    signatures = signature_names(teacher_dir)
    if signature not in signatures:
        raise UserError(
            f"`distill_targets={targets!r}` needs a teacher with the "
            f"`{signature}` signature"
            + (
                " (exports have it by default; `python -m models.export ... "
                "--n-best 5` adds it to an older one)"
                if targets.startswith("inter")
                else ""
            )
            + f". Received: distill_from={str(teacher_dir)!r} with the "
            f"signatures {signatures}"
        )
    print(
        f"Distilling from {teacher_dir}: its headlines for {len(documents)} "
        f"training documents (cached in {Path(run_dir) / TEACHER_CACHE_DIR})",
        file=sys.stderr,
    )
    loaded = []  # the teacher, loaded only if a chunk is missing

    def decode(batch):
        if not loaded:
            loaded.append(load_saved_model(teacher_dir))
        return decode_documents(loaded[0], batch, signature=signature, progress=False)

    headlines = cached_headlines(
        documents, decode, Path(run_dir) / TEACHER_CACHE_DIR, manifest
    )
    docs, summaries = distillation_pairs(
        documents, [s for _, s in pairs], headlines, targets, min_overlap
    )
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(docs, tf.string), tf.constant(summaries, tf.string))
    )
