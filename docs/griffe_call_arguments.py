"""A griffe extension: Keras' `Call arguments:` sections as argument lists.

Keras documents a layer's `call` in its class docstring, under `Call
arguments:`, a title the Google docstring parser does not know: it would
render the section as one paragraph. This renames it to `Other Parameters:
Call arguments`, a section of parameters with its own title and no column of
defaults (the constructor's signature has none of them), so the site lists
the call's arguments as it lists the constructor's; the docstrings keep
Keras' form.
"""

import re

import griffe

_CALL_ARGUMENTS = re.compile(r"^(\s*)Call arguments:\s*$", re.MULTILINE)


class CallArguments(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = _CALL_ARGUMENTS.sub(
                r"\1Other Parameters: Call arguments", obj.docstring.value
            )
