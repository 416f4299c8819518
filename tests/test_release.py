"""The release: one version, read alike by the package, its metadata, the
changelog and the docs' title.

`keras_attn.__version__` is the one place the version is written
(`pyproject.toml` reads it, so does the site's hook); the installed
distribution (editable here, the wheel in CI's JAX leg) must say the same,
and CHANGELOG.md's newest version heading must be it.
"""

import importlib.metadata
import importlib.util
import re
from pathlib import Path

import pytest

import keras_attn

ROOT = Path(__file__).resolve().parents[1]
VERSION_HEADING = re.compile(r"^## (\d+\.\d+\.\d+)\b", re.MULTILINE)


def test_the_installed_distribution_has_the_package_version():
    assert importlib.metadata.version("keras-attn") == keras_attn.__version__


def test_the_version_is_semantic():
    assert re.fullmatch(r"\d+\.\d+\.\d+", keras_attn.__version__)


def test_the_changelog_newest_version_is_the_package_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = VERSION_HEADING.findall(changelog)
    assert versions, "CHANGELOG.md has no `## X.Y.Z` heading"
    assert versions[0] == keras_attn.__version__
    assert len(versions) == len(set(versions)), f"a version twice: {versions}"


@pytest.mark.source_tree  # the hook reads keras_attn/__init__.py as a file
def test_the_docs_title_carries_the_package_version():
    spec = importlib.util.spec_from_file_location(
        "version_hook", ROOT / "docs" / "version_hook.py"
    )
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    config = hook.on_config({"site_name": "keras-attn"})
    assert config["site_name"] == f"keras-attn {keras_attn.__version__}"
    assert "docs/version_hook.py" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
