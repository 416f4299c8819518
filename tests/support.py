"""Helpers shared by test modules that are not fixtures."""

import importlib
import os

import pytest


def require(module):
    """Imports `module`; skips the calling module when it is missing, except
    under CI (`CI` set, as .ci/run does), which installs every test extra:
    there a missing dependency fails instead of silently skipping tests."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)
