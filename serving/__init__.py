"""A small TensorFlow-Serving-compatible REST server for the headline SavedModel.

Run it with:

```
python -m serving --model-dir saved_models/headlines --port 8501
```

It speaks TensorFlow Serving's REST API (`/v1/models/<name>[:predict|/metadata]`,
row and columnar formats, `/versions/<v>` paths), batches requests that arrive
within a few milliseconds into one call of the signature (requests with
different length settings, `min_length` / `max_length` / `length_penalty`,
never share one), hot-swaps to a newer
integer version folder when one appears, and serves a web page at `/` that shows
the headline and its attention heatmap.

One module per part, each importing only those before it:

* `settings`: the server's settings (`ServerConfig`) and the command
  line's (`ServeSettings`), plain dataclasses;
* `servable`: a loaded version (`Servable`, through
  `models.decoding.saved_model_client`) and the hot-swapping `ModelManager`;
* `batcher`: the `Batcher` worker that merges requests into one call;
* `codec`: JSON <-> numpy for the row and columnar formats;
* `app`: the Starlette app (`create_app`);
* `cli`: the command line (`python -m serving`, `parse_serve_settings`).

Apart from the server, for an ONNX export (`python -m models.export
--format onnx`), which it does not serve: `onnx_text`, the SavedModel's text
steps in plain Python from the export's regexes, and `onnx_client`
(`OnnxSummarizer`), text to headlines with ONNX Runtime and numpy alone.

Only TensorFlow, numpy, starlette and uvicorn are needed: this package must
never import the model-building code (`keras_attn` or the other `models/`
modules but `errors`, `flags`, `startup`, `version_folders` and
`saved_model_client`, which import none of it), so that it can run anywhere
the SavedModel can.

The app's names are read from `serving.app` when first used, so that
`python -m serving` parses its flags and hides TensorFlow's start-up lines
(`models.settings.startup`) before TensorFlow loads.
"""

import importlib

from serving.cli import main, parse_serve_settings
from serving.settings import ServerConfig, ServeSettings

__all__ = [
    "HeadlineServer",
    "ServeSettings",
    "ServerConfig",
    "create_app",
    "main",
    "parse_serve_settings",
]
_APP_NAMES = ("HeadlineServer", "create_app")


def __getattr__(name):
    # PEP 562: `serving.create_app` imports the app (and TensorFlow) then.
    if name in _APP_NAMES:
        return getattr(importlib.import_module("serving.app"), name)
    raise AttributeError(f"module 'serving' has no attribute {name!r}")
