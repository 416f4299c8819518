"""MkDocs hook: the site's title carries the package's version.

The version is read from `keras_attn/__init__.py` as text, so that building
the site needs no Keras backend; `pyproject.toml` reads the same line.
"""

import ast
from pathlib import Path

INIT = Path(__file__).resolve().parents[1] / "keras_attn" / "__init__.py"


def package_version(path=INIT):
    """`keras_attn.__version__`, read from its assignment in `path`."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            getattr(target, "id", None) == "__version__" for target in node.targets
        ):
            return ast.literal_eval(node.value)
    raise ValueError(f"no `__version__ = ...` in {path}")


def on_config(config):
    config["site_name"] = f"keras-attn {package_version()}"
    return config
