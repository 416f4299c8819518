"""The CI script installs from the index pip is configured with, or from the
local wheel folder: it names no package index."""

import re
from pathlib import Path

CI_SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "run"


def test_the_ci_script_names_no_url():
    text = CI_SCRIPT.read_text()
    assert "pip install" in text
    assert re.findall(r"\S*https?://\S*|--(?:extra-)?index-url", text) == []
