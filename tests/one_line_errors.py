"""The check every one-line-error test shares: tests/test_argument_errors.py,
tests/test_search_stop_ids.py, tests/test_decoder.py."""


def one_line(excinfo):
    """The error's own message, checked to be one line from the argument's
    name to what was received (Keras adds the call's arguments on lines of
    their own to an error raised in a layer's `call`)."""
    lines = [line for line in str(excinfo.value).splitlines() if "Received: " in line]
    assert len(lines) == 1 and lines[0].lstrip("\x1b[1m").startswith("`")
    return lines[0]
