"""The packages the examples need beyond keras and numpy: the `examples` extra.

`pip install -e ".[examples]"` installs them; a missing one is refused up
front, in one line naming the extra, before any training.
"""

import importlib

INSTALL = 'pip install -e ".[examples]"'


class MissingExtra(ModuleNotFoundError):
    """An example's package is not installed."""


def require(*modules):
    """Imports `modules`, or raises `MissingExtra` naming the first missing.

    Args:
        *modules: Module names, e.g. `"statsmodels.datasets"`.

    Examples:
        >>> from examples.optional import require
        >>> require("json", "numpy")
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise MissingExtra(
                f"`{module}` is not installed: the examples need the `examples` "
                f"extra, `{INSTALL}`. Received: {error}",
                name=error.name,
            ) from None
