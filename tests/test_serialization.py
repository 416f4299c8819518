"""Saving and loading: `.keras` files, configs, registered names."""

import json

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

B, TQ, TV, DQ = 2, 3, 5, 4


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x))


def as_json(config):
    """The config as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(config))


def key_dim(spec):
    return DQ if spec.same_dims else 6


def test_save_and_load_functional_model(spec, ref, rng, tmp_path):
    dk = key_dim(spec)
    query = rng.normal(size=(B, TQ, DQ)).astype("float32")
    value = rng.normal(size=(B, TV, dk)).astype("float32")
    q_in, v_in = keras.Input((None, DQ)), keras.Input((None, dk))
    # Dropout and seed round-trip too (inactive at inference).
    layer = spec.make(DQ, dk, dropout=0.1, seed=3, name="attention")
    context, weights = layer([q_in, v_in], return_attention_scores=True)
    model = keras.Model([q_in, v_in], [context, weights])
    ref.randomize_weights(layer, rng)
    expected = [to_np(x) for x in model([query, value])]

    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)  # No custom_objects.

    loaded = restored.get_layer("attention")
    assert type(loaded) is type(layer)
    assert as_json(loaded.get_config()) == as_json(layer.get_config())
    got = [to_np(x) for x in restored([query, value])]
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_array_equal(g, e)
    for w, w_loaded in zip(layer.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(to_np(w_loaded), to_np(w))


def test_save_and_load_with_masks_and_key(tmp_path, rng):
    """Embedding masks and a separate key survive the round trip."""
    q_ids = keras.Input((None,), dtype="int32")
    v_ids = keras.Input((None,), dtype="int32")
    key_in = keras.Input((None, 6))
    value = keras.layers.Embedding(10, 3, mask_zero=True)(v_ids)
    query = keras.layers.Embedding(10, DQ, mask_zero=True)(q_ids)
    context = ka.BahdanauAttention(units=5, normalize=True)([query, value, key_in])
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    model = keras.Model([q_ids, v_ids, key_in], [context, pooled])
    inputs = [
        np.array([[3, 1, 0], [2, 5, 4]], "int32"),
        np.array([[7, 2, 9, 0, 0], [1, 3, 8, 6, 2]], "int32"),
        rng.normal(size=(B, TV, 6)).astype("float32"),
    ]
    expected = [to_np(x) for x in model(inputs)]
    assert np.all(expected[0][0, 2] == 0)

    path = tmp_path / "masked.keras"
    model.save(path)
    got = [to_np(x) for x in keras.saving.load_model(path)(inputs)]
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_array_equal(g, e)


def test_config_round_trip(spec, ref, rng):
    dk = key_dim(spec)
    query = rng.normal(size=(B, TQ, DQ)).astype("float32")
    value = rng.normal(size=(B, TV, dk)).astype("float32")
    layer = spec.make(DQ, dk, dropout=0.25, seed=7)
    layer.build([query.shape, value.shape])
    ref.randomize_weights(layer, rng)
    config = layer.get_config()
    assert config["dropout"] == 0.25 and config["seed"] == 7

    clone = type(layer).from_config(config)
    assert as_json(clone.get_config()) == as_json(config)
    clone.build([query.shape, value.shape])
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(
        to_np(clone([query, value])), to_np(layer([query, value]))
    )

    # Through the registry, by name, with no custom_objects.
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(revived) is type(layer)
    assert as_json(revived.get_config()) == as_json(config)


@pytest.mark.parametrize(
    "cls",
    [
        ka.DotAttention,
        ka.ScaledDotAttention,
        ka.GeneralAttention,
        ka.ConcatAttention,
        ka.BahdanauAttention,
        ka.NetworkAttention,
        ka.PointerGenerator,
    ],
)
def test_registered_name(cls):
    assert keras.saving.get_registered_name(cls) == f"keras_attn>{cls.__name__}"
    assert keras.saving.get_registered_object(f"keras_attn>{cls.__name__}") is cls


def test_a_pointer_generator_saved_from_keras_attn_pointer_loads():
    # Models saved before the layer had a module of its own name that module.
    layer = ka.PointerGenerator(use_bias=False, name="p_gen")
    layer.build([(None, 4), (None, 3), (None, 2)])
    saved = keras.saving.serialize_keras_object(layer)
    saved["module"] = "keras_attn.copy.distributions"
    revived = keras.saving.deserialize_keras_object(saved)
    assert type(revived) is ka.PointerGenerator
    assert revived.get_config() == layer.get_config()
