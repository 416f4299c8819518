"""JSON <-> numpy for TF Serving's row (`instances`) and columnar (`inputs`) formats."""

import base64
import json
import math

import numpy as np
import tensorflow as tf

from models.settings.errors import HttpError

DEFAULT_SIGNATURE = "serving_default"
# The signature that takes the length settings as inputs, and the request
# fields that set them (top-level, next to `instances` / `inputs`).
LENGTH_SIGNATURE = "length_control"
LENGTH_FIELDS = ("min_length", "max_length", "length_penalty")
# Outputs of the `attention` signature padded to the longest row of the *batch*;
# they are trimmed per request so a response never depends on its batch-mates.
_PADDED_TOKEN_OUTPUTS = ("source_tokens", "headline_tokens")
# The same positions as the reader sees them (a heatmap's labels).
_WORD_OUTPUTS = {"source_tokens": "source_words", "headline_tokens": "headline_words"}


def _decode_string(value, where):
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"b64"}:
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise HttpError(
                400, f"`{where}.b64` must be valid base64. Received: {exc}"
            ) from None
    raise HttpError(
        400,
        f'`{where}` must be a string or {{"b64": ...}}. Received: '
        f"{where}={preview(value)} ({type(value).__name__})",
    )


def preview(value, limit=60):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _convert(value, dtype, where):
    if dtype == tf.string:
        return _decode_string(value, where)
    if isinstance(value, (bool, int, float)) or value is None:
        if value is None or (isinstance(value, bool) and dtype != tf.bool):
            raise HttpError(
                400, f"`{where}` must be a number. Received: {where}={preview(value)}"
            )
        return value
    if isinstance(value, list):
        return [_convert(v, dtype, f"{where}[{i}]") for i, v in enumerate(value)]
    raise HttpError(
        400, f"`{where}` must be a number. Received: {where}={preview(value)}"
    )


def parse_row(instances, dtypes):
    if not isinstance(instances, list):
        raise HttpError(
            400, f"`instances` must be a list. Received: instances={preview(instances)}"
        )
    if not instances:
        raise HttpError(400, "`instances` must be a non-empty list. Received: []")
    names = sorted(dtypes)
    inputs = {name: [] for name in names}
    for i, instance in enumerate(instances):
        where = f"instances[{i}]"
        named = isinstance(instance, dict) and set(instance) != {"b64"}
        if named:
            unknown = sorted(set(instance) - set(names))
            missing = sorted(set(names) - set(instance))
            if unknown or missing:
                raise HttpError(400, _key_mismatch(where, instance, names))
            for name in names:
                inputs[name].append(
                    _convert(instance[name], dtypes[name], f"{where}.{name}")
                )
        elif len(names) == 1:
            inputs[names[0]].append(_convert(instance, dtypes[names[0]], where))
        else:
            raise HttpError(
                400,
                f"`{where}` must be an object naming the signature's inputs "
                f"{names}. Received: {where}={preview(instance)}",
            )
    return inputs, len(instances)


def parse_columnar(columns, dtypes):
    names = sorted(dtypes)
    named = isinstance(columns, dict) and set(columns) != {"b64"}
    if not named:
        if len(names) != 1:
            raise HttpError(
                400,
                f"`inputs` must be an object naming the signature's inputs {names}. "
                f"Received: inputs={preview(columns)}",
            )
        columns = {names[0]: columns}
    unknown = sorted(set(columns) - set(names))
    missing = sorted(set(names) - set(columns))
    if unknown or missing:
        raise HttpError(400, _key_mismatch("inputs", columns, names))
    inputs, size = {}, None
    for name in names:
        column = columns[name]
        if not isinstance(column, list):
            raise HttpError(
                400,
                f"`inputs.{name}` must be a list, one entry per example. "
                f"Received: inputs.{name}={preview(column)}",
            )
        if not column:
            raise HttpError(
                400, f"`inputs.{name}` must be a non-empty list. Received: []"
            )
        if size is not None and len(column) != size:
            raise HttpError(
                400,
                "`inputs` columns must all have the same length. Received: "
                f"lengths {size} and {len(column)} ({name})",
            )
        size = len(column)
        inputs[name] = [
            _convert(v, dtypes[name], f"inputs.{name}[{i}]")
            for i, v in enumerate(column)
        ]
    return inputs, size


def parse_lengths(payload):
    """The length fields a request gives, checked; the others are left out."""
    given = {k: payload[k] for k in LENGTH_FIELDS if k in payload}
    for name, low in (("min_length", 0), ("max_length", 1)):
        if name not in given:
            continue
        value = given[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise HttpError(
                400,
                f"`{name}` must be an integer >= {low}. "
                f"Received: {name}={preview(value)}",
            )
    if "length_penalty" in given:
        value = given["length_penalty"]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise HttpError(
                400,
                "`length_penalty` must be a finite number. "
                f"Received: length_penalty={preview(value)}",
            )
        given["length_penalty"] = float(value)
    if given.get("min_length", 0) > given.get("max_length", math.inf):
        raise HttpError(
            400,
            "`min_length` must be at most `max_length`. Received: "
            f"min_length={given['min_length']}, max_length={given['max_length']}",
        )
    return given


def _key_mismatch(where, given, names):
    unknown = sorted(set(given) - set(names))
    missing = sorted(set(names) - set(given))
    return (
        f"The keys of `{where}` must be the signature's inputs {names}. "
        f"Received: keys {sorted(given)}"
        + (f" (unknown: {unknown})" if unknown else "")
        + (f" (missing: {missing})" if missing else "")
    )


def to_json(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        if value.dtype == object or value.dtype.kind == "S":
            return [to_json(v) for v in value] if value.ndim else to_json(value[()])
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/Infinity.
    return value


def crop_batch_padding(outputs):
    """Cuts batch padding of the `attention` signature to this request's rows."""
    if not all(k in outputs for k in _PADDED_TOKEN_OUTPUTS):
        return outputs
    src, hyp = outputs["source_tokens"], outputs["headline_tokens"]
    if src.ndim != 2 or hyp.ndim != 2:
        return outputs

    def used(tokens):
        nonempty = np.vectorize(len, otypes=[int])(tokens) > 0 if tokens.size else None
        if nonempty is None or not nonempty.any():
            return 0
        return int(np.nonzero(nonempty.any(axis=0))[0][-1]) + 1

    s, t = used(src), used(hyp)
    trimmed = dict(outputs)
    for name, size in (("source_tokens", s), ("headline_tokens", t)):
        for key in (name, _WORD_OUTPUTS[name]):
            if key in outputs:
                trimmed[key] = outputs[key][:, :size]
    att = outputs.get("attention")
    if att is not None and att.ndim == 3:
        trimmed["attention"] = att[:, :t, :s]
    return trimmed
