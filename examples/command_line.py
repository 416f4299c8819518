"""The examples' command lines: a bad flag or value is one line on stderr
and exit status 2, before any data is made or any model is built.

The examples depend on `keras_attn` alone (a user copies them), so this is
their own small parser, not the summarizer's (`models.settings.flags`).
"""

import argparse


class OneLineParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line, without the usage."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def check_at_least(parser, args, bounds):
    """Refuses, in one line (`parser.error`), the first flag of `args` below
    its bound in `bounds` (`{name: least}`, `name` as in `args`).

    Example:

    >>> parser = OneLineParser(prog="example")
    >>> _ = parser.add_argument("--epochs", type=int)
    >>> parser.exit = lambda status, message: print(status, message.strip())
    >>> check_at_least(parser, parser.parse_args(["--epochs", "0"]), {"epochs": 1})
    2 example: error: `--epochs` must be >= 1. Received: --epochs=0 (see --help)
    """
    for name, least in bounds.items():
        if (value := getattr(args, name)) < least:
            flag = "--" + name.replace("_", "-")
            parser.error(f"`{flag}` must be >= {least}. Received: {flag}={value}")
