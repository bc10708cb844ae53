"""The modern model set: the architectures people bring to a compiler today, tiny but whole.

Keras 3 builders, each deterministic given ``seed`` (same seed -> identical weights and layer
names, so the tf2onnx exports in ``zoo`` are byte-stable):

* ``bert_encoder``   token + position embedding, a padding mask computed from the token ids
                     (id 0 is padding), post-LN encoder layers (MultiHeadAttention with that
                     mask, LayerNorm, Gelu feed-forward), a classifier on the first token.
* ``gpt_decoder``    token + position embedding, pre-LN decoder layers with a causal mask, the
                     next-token logits at every position.
* ``vit``            ViT: a patch convolution, a class token, position embedding, pre-LN
                     encoder layers, a classifier on the class token.
* ``lstm_model``     two stacked LSTM layers (the first returns sequences) and a Dense head.
* ``gru_model``      two stacked GRU layers and a Dense head (tf2onnx exports Keras 3's GRU as
                     a ``Loop`` over the time steps, not as ONNX's GRU op).
* ``unet2d``         2D U-Net with PReLU activations, max-pool down, bilinear UpSampling2D up
                     (ONNX ``Resize``), skip concatenations, a sigmoid mask.
* ``detection_head`` a small two-scale detector: backbone, bilinear upsampling of the coarse
                     map (``Resize``), ``Concat``, per-anchor box and score heads, ``Sigmoid``
                     scores, ``TopK`` over the anchors and the boxes of the top k gathered.

``zoo.sample_inputs(name)`` gives each committed model a deterministic, meaningful input
(token ids with trailing padding, images, sequences): seeded normal floats would be negative
token ids.

Assumes: Keras 3 on the TensorFlow backend, channels-last images. Widths and depths are tiny
(every ONNX file a few ten KB); the structure is what a compiler sees, not the size.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
from keras import layers, ops  # noqa: E402

from .models import _positive_int, _Seeds  # noqa: E402

__all__ = ["bert_encoder", "gpt_decoder", "vit", "lstm_model", "gru_model", "unet2d",
           "detection_head", "BUILDERS", "modern_model"]


# --------------------------------------------------------------------------- shared pieces


class PositionEmbedding(layers.Layer):
    """Adds a learned [length, dim] table to a [batch, length, dim] tensor."""

    def __init__(self, length: int, dim: int, initializer, **kw):
        super().__init__(**kw)
        self.table = self.add_weight(shape=(length, dim), initializer=initializer,
                                     name="table")

    def call(self, x):
        return x + self.table


class ClassToken(layers.Layer):
    """Prepends one learned [dim] token to every sequence of the batch."""

    def __init__(self, dim: int, initializer, **kw):
        super().__init__(**kw)
        self.token = self.add_weight(shape=(1, 1, dim), initializer=initializer, name="token")

    def call(self, x):
        token = ops.broadcast_to(self.token, (ops.shape(x)[0], 1, self.token.shape[-1]))
        return ops.concatenate([token, x], axis=1)


def _normal(s: _Seeds, stddev: float = 0.02):
    return keras.initializers.RandomNormal(stddev=stddev, seed=s._take())


def _layer_norm(s: _Seeds, name: str) -> layers.LayerNormalization:
    # Seeded, non-trivial gamma/beta: a LayerNorm exported without its affine part must fail.
    return layers.LayerNormalization(
        epsilon=1e-5, name=name,
        gamma_initializer=keras.initializers.RandomUniform(0.8, 1.2, seed=s._take()),
        beta_initializer=keras.initializers.RandomUniform(-0.1, 0.1, seed=s._take()))


def _attention(s: _Seeds, heads: int, dim: int, name: str) -> layers.MultiHeadAttention:
    return layers.MultiHeadAttention(heads, dim // heads, name=name,
                                     kernel_initializer=s.glorot(), bias_initializer=s.bias())


def gelu_tanh(x):
    """Gelu in its tanh form (GPT-2's, BERT's "gelu_new"): 0.5x(1 + tanh(c(x + 0.044715x^3))).
    The exact form uses erfc, which tf2onnx 1.17 cannot export; the tanh form gives ONNX
    Pow/Tanh/Mul/Add, what Keras's approximate Gelu looks like to a compiler."""
    return keras.activations.gelu(x, approximate=True)


def _distinct_attention_weights(model: keras.Model, s: _Seeds) -> keras.Model:
    """Give every query/key/value/output projection its own seeded weights.

    MultiHeadAttention clones the initializer it is given for its four projections, seed
    included, so a seeded initializer makes the query, key and value kernels (and biases)
    equal: attention scores then come out symmetric, and tf2onnx merges the equal constants
    under whichever name it meets first. Drawn again here, each from a fresh seed.
    """
    for layer in model.layers:
        if isinstance(layer, layers.MultiHeadAttention):
            for dense in (layer.query_dense, layer.key_dense, layer.value_dense,
                          layer.output_dense):
                dense.kernel.assign(s.glorot()(dense.kernel.shape))
                dense.bias.assign(s.bias()(dense.bias.shape))
    return model


def _feed_forward(x, s: _Seeds, ff: int, dim: int, name: str):
    x = layers.Dense(ff, activation=gelu_tanh, kernel_initializer=s.glorot(),
                     bias_initializer=s.bias(), name=name + "_ff1")(x)
    return layers.Dense(dim, kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                        name=name + "_ff2")(x)


def _heads_divide(heads: int, dim: int) -> None:
    if dim % heads:
        raise ValueError(f"dim {dim} must be a multiple of heads {heads}")


def _embed(ids, s: _Seeds, vocab: int, seq: int, dim: int):
    x = layers.Embedding(vocab, dim, embeddings_initializer=_normal(s, 0.5),
                         name="token_embedding")(ids)
    return PositionEmbedding(seq, dim, _normal(s, 0.5), name="position_embedding")(x)


# --------------------------------------------------------------------------- transformers


def bert_encoder(vocab: int = 64, seq: int = 16, dim: int = 32, heads: int = 2, ff: int = 64,
                 depth: int = 2, classes: int = 4, seed: int = 0) -> keras.Model:
    """BERT-style encoder on int32 token ids [batch, seq] (id 0 = padding) -> [batch, classes].

    Each layer: MultiHeadAttention whose [batch, seq, seq] mask hides the padded keys,
    residual, LayerNorm; Dense(ff, gelu) -> Dense(dim), residual, LayerNorm (post-LN, as BERT).
    """
    vocab, seq, dim, heads, ff, depth, classes = (
        _positive_int(n, v) for n, v in (("vocab", vocab), ("seq", seq), ("dim", dim),
                                         ("heads", heads), ("ff", ff), ("depth", depth),
                                         ("classes", classes)))
    _heads_divide(heads, dim)
    s = _Seeds(seed)
    ids = keras.Input((seq,), dtype="int32", name="ids")
    keep = ops.not_equal(ids, 0)                                    # [b, s] True = real token
    mask = ops.logical_and(ops.expand_dims(keep, 1), ops.expand_dims(keep, 2))  # [b, s, s]
    x = _embed(ids, s, vocab, seq, dim)
    x = _layer_norm(s, "embedding_norm")(x)
    for i in range(depth):
        p = f"layer{i}"
        a = _attention(s, heads, dim, p + "_attention")(x, x, attention_mask=mask)
        x = _layer_norm(s, p + "_norm1")(layers.Add(name=p + "_add1")([x, a]))
        f = _feed_forward(x, s, ff, dim, p)
        x = _layer_norm(s, p + "_norm2")(layers.Add(name=p + "_add2")([x, f]))
    x = x[:, 0, :]                                                  # the first ([CLS]) token
    x = layers.Dense(classes, kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="classifier")(x)
    return _distinct_attention_weights(keras.Model(ids, x, name="bert_encoder"), s)


def gpt_decoder(vocab: int = 64, seq: int = 16, dim: int = 32, heads: int = 2, ff: int = 64,
                depth: int = 2, seed: int = 0) -> keras.Model:
    """GPT-style decoder on int32 token ids [batch, seq] -> logits [batch, seq, vocab].

    Each layer (pre-LN, as GPT-2): LayerNorm, causal MultiHeadAttention (a position attends
    to itself and the ones before), residual; LayerNorm, Dense(ff, gelu) -> Dense(dim),
    residual. A final LayerNorm and a Dense to the vocabulary.
    """
    vocab, seq, dim, heads, ff, depth = (
        _positive_int(n, v) for n, v in (("vocab", vocab), ("seq", seq), ("dim", dim),
                                         ("heads", heads), ("ff", ff), ("depth", depth)))
    _heads_divide(heads, dim)
    s = _Seeds(seed)
    ids = keras.Input((seq,), dtype="int32", name="ids")
    x = _embed(ids, s, vocab, seq, dim)
    for i in range(depth):
        p = f"layer{i}"
        h = _layer_norm(s, p + "_norm1")(x)
        a = _attention(s, heads, dim, p + "_attention")(h, h, use_causal_mask=True)
        x = layers.Add(name=p + "_add1")([x, a])
        h = _layer_norm(s, p + "_norm2")(x)
        x = layers.Add(name=p + "_add2")([x, _feed_forward(h, s, ff, dim, p)])
    x = _layer_norm(s, "final_norm")(x)
    x = layers.Dense(vocab, kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="lm_head")(x)
    return _distinct_attention_weights(keras.Model(ids, x, name="gpt_decoder"), s)


def vit(image: int = 16, patch: int = 4, channels: int = 3, dim: int = 32, heads: int = 2,
        ff: int = 64, depth: int = 2, classes: int = 10, seed: int = 0) -> keras.Model:
    """Vision transformer on [batch, image, image, channels] -> [batch, classes] logits.

    A patch x patch convolution with stride patch (the patch embedding), flattened to
    (image/patch)^2 tokens, a class token in front, position embedding, pre-LN encoder layers
    (no mask), a final LayerNorm and a Dense on the class token.
    """
    image, patch, channels, dim, heads, ff, depth, classes = (
        _positive_int(n, v) for n, v in (("image", image), ("patch", patch),
                                         ("channels", channels), ("dim", dim), ("heads", heads),
                                         ("ff", ff), ("depth", depth), ("classes", classes)))
    _heads_divide(heads, dim)
    if image % patch:
        raise ValueError(f"image {image} must be a multiple of patch {patch}")
    s = _Seeds(seed)
    tokens = (image // patch) ** 2
    x = inp = keras.Input((image, image, channels), name="image")
    x = layers.Conv2D(dim, patch, strides=patch, kernel_initializer=s.he(),
                      bias_initializer=s.bias(), name="patch_embedding")(x)
    x = layers.Reshape((tokens, dim), name="patches")(x)
    x = ClassToken(dim, _normal(s, 0.5), name="class_token")(x)
    x = PositionEmbedding(tokens + 1, dim, _normal(s, 0.5), name="position_embedding")(x)
    for i in range(depth):
        p = f"layer{i}"
        h = _layer_norm(s, p + "_norm1")(x)
        x = layers.Add(name=p + "_add1")([x, _attention(s, heads, dim, p + "_attention")(h, h)])
        h = _layer_norm(s, p + "_norm2")(x)
        x = layers.Add(name=p + "_add2")([x, _feed_forward(h, s, ff, dim, p)])
    x = _layer_norm(s, "final_norm")(x)
    x = layers.Dense(classes, kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="classifier")(x[:, 0, :])
    return _distinct_attention_weights(keras.Model(inp, x, name="vit"), s)


# --------------------------------------------------------------------------- recurrent


def _recurrent(kind: str, steps: int, features: int, units: int, classes: int, seed: int):
    steps, features, units, classes = (
        _positive_int(n, v) for n, v in (("steps", steps), ("features", features),
                                         ("units", units), ("classes", classes)))
    s = _Seeds(seed)
    cell = {"lstm": layers.LSTM, "gru": layers.GRU}[kind]
    x = inp = keras.Input((steps, features), name="sequence")
    for i, last in ((0, False), (1, True)):
        x = cell(units, return_sequences=not last, kernel_initializer=s.glorot(),
                 recurrent_initializer=keras.initializers.Orthogonal(seed=s._take()),
                 bias_initializer=s.bias(), name=f"{kind}{i}")(x)
    x = layers.Dense(classes, kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="classifier")(x)
    return keras.Model(inp, x, name=f"{kind}_model")


def lstm_model(steps: int = 12, features: int = 8, units: int = 16, classes: int = 4,
               seed: int = 0) -> keras.Model:
    """[batch, steps, features] -> LSTM(units, sequences) -> LSTM(units) -> Dense(classes)."""
    return _recurrent("lstm", steps, features, units, classes, seed)


def gru_model(steps: int = 12, features: int = 8, units: int = 16, classes: int = 4,
              seed: int = 0) -> keras.Model:
    """[batch, steps, features] -> GRU(units, sequences) -> GRU(units) -> Dense(classes)."""
    return _recurrent("gru", steps, features, units, classes, seed)


# --------------------------------------------------------------------------- CNNs


def _conv(x, s: _Seeds, filters: int, name: str, kernel: int = 3):
    x = layers.Conv2D(filters, kernel, padding="same", kernel_initializer=s.he(),
                      bias_initializer=s.bias(), name=name)(x)
    # PReLU with seeded per-channel slopes (0 slopes would make it a Relu).
    return layers.PReLU(alpha_initializer=keras.initializers.RandomUniform(
        0.05, 0.3, seed=s._take()), shared_axes=[1, 2], name=name + "_prelu")(x)


def unet2d(side: int = 32, channels: int = 3, classes: int = 2, base_filters: int = 8,
           depth: int = 2, seed: int = 0) -> keras.Model:
    """2D U-Net: [batch, side, side, channels] -> [batch, side, side, classes] sigmoid masks.

    Level l: two 3x3 Conv2D + PReLU with base_filters * 2**l filters, MaxPool(2) down; going
    up, bilinear UpSampling2D(2) (ONNX Resize, linear), concatenation with the encoder's
    output at that level, two Conv2D + PReLU; a 1x1 convolution with sigmoid.
    """
    side, channels, classes, base_filters = (
        _positive_int(n, v) for n, v in (("side", side), ("channels", channels),
                                         ("classes", classes), ("base_filters", base_filters)))
    depth = _positive_int("depth", depth)
    if side % (2 ** depth):
        raise ValueError(f"side {side} cannot be halved {depth} times: it must be a multiple "
                         f"of {2 ** depth}")
    s = _Seeds(seed)
    x = inp = keras.Input((side, side, channels), name="image")
    skips = []
    for level in range(depth + 1):
        f = base_filters * 2 ** level
        x = _conv(x, s, f, f"enc{level}_conv1")
        x = _conv(x, s, f, f"enc{level}_conv2")
        if level < depth:
            skips.append(x)
            x = layers.MaxPooling2D(2, name=f"enc{level}_pool")(x)
    for level in reversed(range(depth)):
        x = layers.UpSampling2D(2, interpolation="bilinear", name=f"dec{level}_up")(x)
        x = layers.Concatenate(name=f"dec{level}_concat")([skips[level], x])
        x = _conv(x, s, base_filters * 2 ** level, f"dec{level}_conv1")
        x = _conv(x, s, base_filters * 2 ** level, f"dec{level}_conv2")
    x = layers.Conv2D(classes, 1, activation="sigmoid", kernel_initializer=s.glorot(),
                      bias_initializer=s.bias(), name="masks")(x)
    return keras.Model(inp, x, name="unet2d")


def detection_head(side: int = 32, channels: int = 3, filters: int = 16, anchors: int = 2,
                   top_k: int = 8, seed: int = 0) -> keras.Model:
    """A two-scale detector: [batch, side, side, channels] -> [batch, top_k, 5].

    Backbone: conv (stride 2) at side/2 ("fine"), conv (stride 2) at side/4 ("coarse"); the
    coarse map is upsampled (bilinear, ONNX Resize) and concatenated with the fine one (a
    feature-pyramid merge); 1x1 heads give per anchor 4 box numbers and one score logit.
    Scores go through a sigmoid; TopK keeps the top_k anchors; each output row is
    (score, box[4]) of one kept anchor, best first.
    """
    side, channels, filters, anchors, top_k = (
        _positive_int(n, v) for n, v in (("side", side), ("channels", channels),
                                         ("filters", filters), ("anchors", anchors),
                                         ("top_k", top_k)))
    if side % 4:
        raise ValueError(f"side {side} must be a multiple of 4 (two stride-2 stages)")
    n_anchors = (side // 2) ** 2 * anchors
    if top_k > n_anchors:
        raise ValueError(f"top_k {top_k} exceeds the {n_anchors} anchors")
    s = _Seeds(seed)

    def conv(x, f, k, stride, name, act="relu"):
        return layers.Conv2D(f, k, strides=stride, padding="same", activation=act,
                             kernel_initializer=s.he(), bias_initializer=s.bias(),
                             name=name)(x)

    x = inp = keras.Input((side, side, channels), name="image")
    fine = conv(x, filters, 3, 2, "fine")
    coarse = conv(fine, 2 * filters, 3, 2, "coarse")
    # Bilinear: Keras's nearest UpSampling2D is exported as Tile + Reshape, not as Resize.
    up = layers.UpSampling2D(2, interpolation="bilinear", name="coarse_up")(coarse)
    merged = layers.Concatenate(name="merge")([fine, up])
    merged = conv(merged, filters, 3, 1, "merged")
    boxes = conv(merged, 4 * anchors, 1, 1, "box_head", act=None)
    scores = conv(merged, anchors, 1, 1, "score_head", act="sigmoid")
    boxes = layers.Reshape((n_anchors, 4), name="boxes")(boxes)
    scores = layers.Reshape((n_anchors,), name="scores")(scores)
    best, index = ops.top_k(scores, top_k)                          # [b, k], [b, k]
    kept = ops.take_along_axis(boxes, ops.expand_dims(index, -1), axis=1)  # [b, k, 4]
    x = ops.concatenate([ops.expand_dims(best, -1), kept], axis=-1)  # [b, k, 5]
    return keras.Model(inp, x, name="detection_head")


# --------------------------------------------------------------------------- dispatch


BUILDERS = {"bert_encoder": bert_encoder, "gpt_decoder": gpt_decoder, "vit": vit,
            "lstm_model": lstm_model, "gru_model": gru_model, "unet2d": unet2d,
            "detection_head": detection_head}


def modern_model(name: str, **params) -> keras.Model:
    """Build a modern-set Keras model by builder name: ``modern_model("vit", depth=1)``."""
    import inspect

    if name not in BUILDERS:
        raise ValueError(f"unknown modern model {name!r}; valid names: {', '.join(BUILDERS)}")
    allowed = list(inspect.signature(BUILDERS[name]).parameters)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} for model {name!r}; "
                         f"valid parameters: {', '.join(allowed)}")
    return BUILDERS[name](**params)
