"""Deserializing the layers nested in a layer's config."""

import copy

import keras


def deserialize_layer(obj, custom_objects=None):
    """`obj` as a layer: a serialized config (dict) is deserialized, anything
    else (a layer, None) is returned as it is.

    Deserializing consumes the dict it reads, so it reads a deep copy: the
    caller's config stays intact (a config may be read twice, as
    `from_config` after `__init__`, or by a clone).
    """
    if isinstance(obj, dict):
        return keras.saving.deserialize_keras_object(
            copy.deepcopy(obj), custom_objects=custom_objects
        )
    return obj
