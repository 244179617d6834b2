#!/usr/bin/env python3
"""Writes small binary ONNX models for the importer's lit tests.

    make_model.py KIND OUT

KIND is one of the k_* functions below (without the prefix), a key of
SHORT_NODES (a single node with too few inputs or an empty scalar input) or
of RAW_FILES (bytes that are not a model at all).

Most kinds are deliberately malformed (cycles, dangling edges, bad external
data, ...), so nothing here runs onnx.checker. Files a kind needs besides the
model (external data, a symlink, a file outside the model directory) are
written next to OUT or in its parent directory, as each kind says.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, name="test_graph"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="merak-lit")


def relu_model():
    """y = Relu(x), x and y float[2,3]."""
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu_0")],
                 [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def weight(name, shape, start=1.0):
    n = int(np.prod(shape))
    return numpy_helper.from_array(
        (np.arange(n, dtype=np.float32) + start).reshape(shape), name)


# --- valid models -----------------------------------------------------------

def k_relu(out):
    return relu_model()


def k_params(out):
    """torch-style parameter names; an Identity over an initializer (torch's
    de-duplication of equal parameters); integer and scalar initializers."""
    w = weight("encoder.layer.0.weight", [4, 5])          # 20 elements: resource
    b = weight("encoder.layer.0.bias", [5])               # 5 elements
    shape = numpy_helper.from_array(np.array([5, 4], np.int64), "reshape.shape")
    scale = numpy_helper.from_array(np.array(2.0, np.float32), "scale")
    unused = weight("unused.weight", [4, 5])
    nodes = [
        helper.make_node("Add", ["x", "encoder.layer.0.weight"], ["h0"], name="add_w"),
        helper.make_node("Identity", ["encoder.layer.0.weight"],
                         ["encoder.layer.1.weight"], name="dedup"),
        helper.make_node("Mul", ["h0", "encoder.layer.1.weight"], ["h1"], name="mul_w"),
        helper.make_node("Add", ["h1", "encoder.layer.0.bias"], ["h2"], name="add_b"),
        helper.make_node("Mul", ["h2", "scale"], ["h3"], name="mul_s"),
        helper.make_node("Reshape", ["h3", "reshape.shape"], ["y"], name="reshape"),
    ]
    return model(nodes, [vi("x", F, [4, 5])], [vi("y", F, [5, 4])],
                 [w, b, shape, scale, unused])


def one_element_model(fx):
    """x * act.alpha + act.beta + onnx::Mul_7 * scale: one-element float
    initializers named as module state (alpha [1], beta []) and as folded
    constants; fx: with dynamo's metadata reading alpha as a parameter and
    beta as a buffer."""
    inits = [weight("act.alpha", [1], 0.5), weight("act.beta", [], 0.25),
             weight("onnx::Mul_7", [1], 2.0), weight("scale", [], 3.0)]
    nodes = [helper.make_node("Mul", ["x", "act.alpha"], ["h"], name="node_mul"),
             helper.make_node("Add", ["h", "act.beta"], ["h2"], name="node_add"),
             helper.make_node("Mul", ["onnx::Mul_7", "scale"], ["c"], name="node_c"),
             helper.make_node("Add", ["h2", "c"], ["y"], name="node_y")]
    if fx:
        with_fx(nodes[0], "aten.mul.Tensor", "%x, %p_act_alpha", ["act"])
        with_fx(nodes[1], "aten.add.Tensor", "%mul, %b_act_beta", ["act"])
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], inits,
                 opset=20 if fx else 17)


def k_one_element_params(out):
    return one_element_model(fx=False)


def k_dynamo_one_element_params(out):
    return one_element_model(fx=True)


def k_params_odd_names(out):
    """Names torch.onnx.export produces for folded constants and nested
    modules: they need quoting as MLIR symbols and sanitising as resource
    keys; two of them sanitise to the same key."""
    a = weight("onnx::MatMul_42", [5, 4])
    b = weight("/encoder/layer.0/weight", [4, 5], start=100.0)
    c = weight("onnx__MatMul_42", [4, 5], start=200.0)
    nodes = [
        helper.make_node("MatMul", ["x", "onnx::MatMul_42"], ["h"], name="/encoder/MatMul"),
        helper.make_node("Add", ["x", "/encoder/layer.0/weight"], ["h2"], name="add"),
        helper.make_node("Add", ["h2", "onnx__MatMul_42"], ["h3"], name="add2"),
    ]
    return model(nodes, [vi("x", F, [4, 5])], [vi("h", F, [4, 4]), vi("h3", F, [4, 5])],
                 [a, b, c])


def k_ext_ok(out):
    """A 6-element initializer in external data at an offset (the valid
    counterpart of the ext_* refusals)."""
    d = os.path.dirname(out)
    data = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(b"\0" * 16 + data.tobytes())
    return ext_model("weights.bin", offset=16, length=24)


# --- malformed graphs -----------------------------------------------------------

def k_unknown_ops(out):
    """Several unsupported op types (standard and custom domain) around a
    supported one; every unsupported type must be reported."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu_ok"),
        helper.make_node("TfIdfVectorizer", ["a"], ["b"], name="tfidf_1", mode="TF",
                         min_gram_length=1, max_gram_length=1, max_skip_count=0,
                         ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1]),
        helper.make_node("NonMaxSuppression", ["b", "b"], ["c"], name="nms_2"),
        helper.make_node("Frobnicate", ["b"], ["d"], name="frob_3", domain="com.example"),
        helper.make_node("StringNormalizer", ["b"], ["e"], name="strnorm_4"),
        helper.make_node("Add", ["b", "e"], ["y"], name="add_ok"),
        helper.make_node("TfIdfVectorizer", ["a"], ["f"], name="tfidf_5", mode="TF",
                         min_gram_length=1, max_gram_length=1, max_skip_count=0,
                         ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1]),
    ]
    m = model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3]), vi("c", I64, [None, 3]),
                                             vi("d", F, [2, 3]), vi("f", F, [2, 1])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def k_complex_input(out):
    nodes = [helper.make_node("Cast", ["x"], ["y"], name="cast", to=F)]
    return model(nodes, [vi("x", TensorProto.COMPLEX64, [2, 3])], [vi("y", F, [2, 3])])


def k_complex_init(out):
    q = numpy_helper.from_array(np.arange(6, dtype=np.complex64).reshape(2, 3), "phase.table")
    nodes = [helper.make_node("Cast", ["phase.table"], ["qf"], name="cast", to=F),
             helper.make_node("Add", ["x", "qf"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [q])


def k_cast_string(out):
    nodes = [helper.make_node("Cast", ["x"], ["y"], name="to_str", to=TensorProto.STRING)]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", TensorProto.STRING, [2, 3])])


def k_cycle(out):
    nodes = [
        helper.make_node("Add", ["x", "c"], ["a"], name="add_a"),
        helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
        helper.make_node("Neg", ["b"], ["c"], name="neg_c"),
        helper.make_node("Identity", ["b"], ["y"], name="out"),
    ]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def k_dangling(out):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu_a"),
             helper.make_node("Add", ["a", "nowhere"], ["y"], name="add_dangling")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def k_dangling_output(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3]), vi("ghost", F, [2, 3])])


def k_dup_value(out):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Neg", ["x"], ["a"], name="second"),
             helper.make_node("Identity", ["a"], ["y"], name="out")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def k_dup_input_value(out):
    """A node output that redefines a graph input."""
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="shadow"),
             helper.make_node("Identity", ["x"], ["y"], name="out")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def k_dup_input(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [vi("x", F, [2, 3]), vi("x", F, [2, 3])], [vi("y", F, [2, 3])])


def k_dup_init(out):
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                 [weight("w", [2, 3]), weight("w", [2, 3], start=7.0)])


def k_init_no_data(out):
    """A graph input that is also an initializer, with dims but no data."""
    w = TensorProto(name="w", data_type=F, dims=[2, 3])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [2, 3]), vi("w", F, [2, 3])], [vi("y", F, [2, 3])], [w])


def k_init_short_raw(out):
    """raw_data holds 8 bytes for a 2x3 float tensor."""
    w = TensorProto(name="w", data_type=F, dims=[2, 3], raw_data=b"\0" * 8)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [w])


def k_no_opset(out):
    m = relu_model()
    del m.opset_import[:]
    return m


def k_no_graph(out):
    m = relu_model()
    m.ClearField("graph")
    return m


def k_input_no_shape(out):
    x = helper.make_tensor_value_info("x", F, None)
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [x], [vi("y", F, [2, 3])])


# --- nodes with too few inputs, or empty tensors where scalars belong -----------

# kind -> (op type, inputs, attributes); node name "<kind>_node".
SHORT_NODES = {
    "short_mul": ("Mul", ["x"], {}),
    "short_relu": ("Relu", [], {}),
    "short_gemm": ("Gemm", ["x"], {}),
    "short_conv": ("Conv", ["x4"], {}),
    "short_where": ("Where", ["c", "x"], {}),
    "short_batchnorm": ("BatchNormalization", ["x4", "s", "s"], {}),
    "short_gather": ("Gather", ["x"], {}),
    "short_concat": ("Concat", [], {"axis": 0}),
    "short_mean": ("Mean", [], {}),
    "short_sce": ("SoftmaxCrossEntropyLoss", ["x"], {}),
    "short_softmax": ("Softmax", [], {}),
    "short_transpose": ("Transpose", [], {}),
    "short_dropout": ("Dropout", [], {}),
    "empty_dropout_ratio": ("Dropout", ["x", "empty_f", "true"], {}),
    "empty_range_start": ("Range", ["empty_i", "five", "one"], {}),
    "empty_trilu_k": ("Trilu", ["x", "empty_i"], {}),
}


def short_node(kind):
    op, inputs, attrs = SHORT_NODES[kind]
    inits = [numpy_helper.from_array(np.array([], np.float32), "empty_f"),
             numpy_helper.from_array(np.array([], np.int64), "empty_i"),
             numpy_helper.from_array(np.array(True), "true"),
             numpy_helper.from_array(np.array(5, np.int64), "five"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             weight("s", [2])]
    node = helper.make_node(op, inputs, ["y"], name=kind + "_node", **attrs)
    return model([node], [vi("x", F, [2, 3]), vi("x4", F, [1, 2, 5, 5]),
                          vi("c", TensorProto.BOOL, [2, 3])],
                 [vi("y", F, None)], inits)


# --- absurd dimensions ----------------------------------------------------------

BIG = 1 << 40


def k_absurd_input(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [vi("x", F, [BIG, BIG])], [vi("y", F, [BIG, BIG])])


def k_absurd_init(out):
    """An initializer whose dims overflow (no data: it must not be allocated)."""
    w = TensorProto(name="w", data_type=F, dims=[BIG, BIG])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [w])


def k_absurd_cos(out):
    shape = numpy_helper.from_array(np.array([BIG, BIG], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")]
    return model(nodes, [], [vi("y", F, [BIG, BIG])], [shape])


def reshape_to(target):
    shape = numpy_helper.from_array(np.array(target, np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_big")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, None)], [shape])


def k_absurd_reshape(out):
    return reshape_to([1 << 62, 4, 1 << 62])


def k_absurd_reshape_infer(out):
    """-1 next to dims whose product overflows int64."""
    return reshape_to([-1, (1 << 32) + 1, (1 << 32) - 1])


def k_absurd_reshape_infer0(out):
    """-1 next to dims whose product wraps to exactly 0 in 64 bits."""
    return reshape_to([-1, 1 << 62, 4])


def k_absurd_expand(out):
    shape = numpy_helper.from_array(np.array([BIG, BIG, 1, 1], np.int64), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_big")]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, None)], [shape])


def range_model(start, limit, delta):
    inits = [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in (("start", start), ("limit", limit), ("delta", delta))]
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range_f")]
    return model(nodes, [], [vi("y", F, None)], inits)


def k_range_float_huge(out):
    """Range(0, 1e30, 1): 1e30 elements, not an empty range."""
    return range_model(0.0, 1e30, 1.0)


def k_range_float_nan(out):
    return range_model(0.0, float("nan"), 1.0)


def k_depth_to_space_huge(out):
    """blocksize^2 overflows int64."""
    nodes = [helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s_big", blocksize=1 << 62)]
    return model(nodes, [vi("x", F, [1, 4, 2, 2])], [vi("y", F, None)])


# --- external data ----------------------------------------------------------------

def ext_model(location, offset=None, length=None, dims=(2, 3)):
    w = TensorProto(name="ext.weight", data_type=F, dims=list(dims))
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = w.external_data.add()
            e.key, e.value = k, str(v)
    nodes = [helper.make_node("Add", ["x", "ext.weight"], ["y"], name="add_ext")]
    return model(nodes, [vi("x", F, list(dims))], [vi("y", F, list(dims))], [w])


def secret_outside(out):
    """A file one level above the model directory."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(out))), "secret.bin")
    with open(path, "wb") as f:
        f.write(np.ones(6, np.float32).tobytes())
    return path


def k_ext_dotdot(out):
    secret_outside(out)
    return ext_model("../secret.bin")


def k_ext_dotdot_inner(out):
    """'..' in the middle of a path that would resolve inside the directory."""
    d = os.path.dirname(out)
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    with open(os.path.join(d, "w.bin"), "wb") as f:
        f.write(np.ones(6, np.float32).tobytes())
    return ext_model("sub/../w.bin")


def k_ext_absolute(out):
    return ext_model(secret_outside(out))


def k_ext_symlink(out):
    secret = secret_outside(out)
    link = os.path.join(os.path.dirname(out), "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(secret, link)
    return ext_model("link.bin")


def k_ext_symlink_dir(out):
    """A symlinked directory on the way to a regular-looking file."""
    secret = secret_outside(out)
    link = os.path.join(os.path.dirname(out), "data")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.dirname(secret), link)
    return ext_model("data/secret.bin")


def k_ext_missing(out):
    return ext_model("no_such_weights.bin")


def write_weights(out, nbytes):
    with open(os.path.join(os.path.dirname(out), "weights.bin"), "wb") as f:
        f.write(b"\1" * nbytes)


def k_ext_length(out):
    write_weights(out, 24)
    return ext_model("weights.bin", offset=0, length=4096)


def k_ext_offset(out):
    write_weights(out, 24)
    return ext_model("weights.bin", offset=100, length=24)


def k_ext_short(out):
    """No length given and the file is too short for the tensor."""
    write_weights(out, 10)
    return ext_model("weights.bin")


def k_ext_negative(out):
    write_weights(out, 24)
    return ext_model("weights.bin", offset=-8, length=24)


def k_ext_huge_offset(out):
    """offset + length overflows int64."""
    write_weights(out, 24)
    return ext_model("weights.bin", offset=(1 << 63) - 8, length=24)


def k_ext_bad_offset(out):
    """A malformed offset (once read as 0)."""
    write_weights(out, 24)
    return ext_model("weights.bin", offset="abc", length=24)


def k_ext_trailing_offset(out):
    """Trailing characters after the number (once read as 12)."""
    write_weights(out, 48)
    return ext_model("weights.bin", offset="12abc", length=24)


def k_ext_negative_length(out):
    write_weights(out, 24)
    return ext_model("weights.bin", offset=0, length=-5)


def k_ext_no_location(out):
    write_weights(out, 24)
    return ext_model(None, offset=0, length=24)


# --- review regressions: empty variadic inputs, odd Identity outputs ------------

def k_concat_empty_input(out):
    return model([helper.make_node("Concat", ["", "a"], ["y"], axis=0)],
                 [vi("a", F, [2])], [vi("y", F, None)])


def k_constant_empty_ints(out):
    """Constant<value_ints = []> (torch's dynamo exporter writes it for an
    empty shape list): an INTS attribute without elements, which onnx 1.12's
    schema check rejects and newer ONNX allows. y = Concat(c, x) = x."""
    node = helper.make_node("Constant", [], ["c"])
    attr = node.attribute.add()
    attr.name = "value_ints"
    attr.type = onnx.AttributeProto.INTS
    return model([node, helper.make_node("Concat", ["c", "x"], ["y"], axis=0)],
                 [vi("x", I64, [3])], [vi("y", I64, [3])], opset=18)


def _scaled_fn():
    """local.Scaled(x) = x * alpha (alpha: the call's attribute)."""
    c = helper.make_node("Constant", [], ["c"])
    ref = c.attribute.add()
    ref.name = "value_float"
    ref.type = onnx.AttributeProto.FLOAT
    ref.ref_attr_name = "alpha"
    return helper.make_function("local", "Scaled", ["x"], ["y"],
                                [c, helper.make_node("Mul", ["x", "c"], ["y"])],
                                [helper.make_opsetid("", 17)], ["alpha"])


def _with_functions(nodes, functions):
    m = model(nodes, [vi("x", F, [3])], [vi("y", F, [3])])
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.extend(functions)
    return m


def k_local_functions(out):
    """y = Twice(x) + x with Twice(x) = Scaled(Scaled(x, alpha=2), alpha=3)
    (a function calling a function, each call's attribute its own)."""
    twice = helper.make_function(
        "local", "Twice", ["x"], ["y"],
        [helper.make_node("Scaled", ["x"], ["t"], domain="local", alpha=2.0),
         helper.make_node("Scaled", ["t"], ["y"], domain="local", alpha=3.0)],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    return _with_functions(
        [helper.make_node("Twice", ["x"], ["t"], domain="local", name="call"),
         helper.make_node("Add", ["t", "x"], ["y"])], [_scaled_fn(), twice])


def k_local_function_recursive(out):
    loop = helper.make_function(
        "local", "Loop", ["x"], ["y"],
        [helper.make_node("Loop", ["x"], ["y"], domain="local")],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    return _with_functions([helper.make_node("Loop", ["x"], ["y"], domain="local")], [loop])


def k_local_function_no_attr(out):
    return _with_functions([helper.make_node("Scaled", ["x"], ["y"], domain="local")],
                           [_scaled_fn()])


def k_sum_empty_input(out):
    return model([helper.make_node("Sum", ["a", ""], ["y"])],
                 [vi("a", F, [2])], [vi("y", F, None)])


def k_identity_no_output(out):
    return model([helper.make_node("Identity", ["w"], []),
                  helper.make_node("Add", ["w", "w"], ["y"])],
                 [], [vi("y", F, None)], [weight("w", [2, 2])])


def k_param_named_forward(out):
    return model([helper.make_node("Add", ["forward", "forward"], ["y"])],
                 [], [vi("y", F, None)], [weight("forward", [2, 2])])


# --- torch's dynamo exporter: the FX node in each node's metadata -----------

def with_fx(node, target, args, scopes, kwargs="{}"):
    """`node` with the metadata torch's dynamo exporter writes (NodeProto
    field 9, metadata_props, which Debian's onnx 1.12 lacks: appended as raw
    bytes, which protobuf keeps as an unknown field)."""
    name = target.split(".")[1]
    entries = {
        "pkg.torch.onnx.fx_node": "%%%s : [num_users=1] = call_function[target=torch.ops.%s]"
                                  "(args = (%s), kwargs = %s)" % (name, target, args, kwargs),
        "pkg.torch.onnx.name_scopes": repr(["", *scopes, name]),
    }
    raw = b""
    for key, value in entries.items():
        entry = onnx.StringStringEntryProto(key=key, value=value).SerializeToString()
        raw += bytes([9 << 3 | 2]) + varint(len(entry)) + entry
    node.MergeFromString(raw)
    return node


def varint(n):
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


BN_ARGS = "%%x, %%p_%s_weight, %%p_%s_bias, %%b_%s_running_mean, %%b_%s_running_var, %s, 0.1, 1e-05"


def bn_model(training, opt_folded=False, fx_training="True"):
    """Conv then a BatchNormalization without training_mode (opset 20), as
    dynamo writes nn.BatchNorm2d 'layer1.0.bn1'; fx_training=None: no
    metadata; opt_folded: the optimizer's form, the norm folded into the
    Conv, which keeps the norm's metadata."""
    target = ("aten._native_batch_norm_legit_functional.default" if training
              else "aten._native_batch_norm_legit_no_training.default")
    args = BN_ARGS % (("layer1_0_bn1",) * 4 + (fx_training,))
    conv = helper.make_node("Conv", ["x", "conv.weight"], ["c" if not opt_folded else "y"],
                            name="node_Conv_0", pads=[1, 1, 1, 1])
    inits = [weight("conv.weight", [2, 2, 3, 3])]
    nodes = [conv]
    if opt_folded:
        with_fx(conv, target, args, ["layer1", "0", "bn1"])
    else:
        bn = helper.make_node("BatchNormalization",
                              ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                              ["y"], name="node_bn_0", epsilon=1e-5, momentum=0.9)
        if fx_training is not None:
            with_fx(bn, target, args, ["layer1", "0", "bn1"])
        nodes.append(bn)
        inits += [weight("bn.weight", [2]), weight("bn.bias", [2]),
                  numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "bn.running_mean"),
                  numpy_helper.from_array(np.array([2.0, 3.0], np.float32), "bn.running_var")]
    return model(nodes, [vi("x", F, [4, 2, 5, 5])], [vi("y", F, [4, 2, 5, 5])], inits, opset=20)


def k_dynamo_bn_train(out):
    return bn_model(True)


def k_dynamo_bn_eval(out):
    return bn_model(False)


def k_dynamo_bn_no_metadata(out):
    return bn_model(True, fx_training=None)


def k_dynamo_bn_folded(out):
    return bn_model(True, opt_folded=True)


def k_dynamo_fx_garbage(out):
    """An FX node cut short (its arguments' brackets unclosed): read by
    ONNX's semantics alone (inference), as without metadata."""
    return bn_model(True, fx_training="True, ((((")


def k_dynamo_sdpa_dropout_removed(out):
    """scaled_dot_product_attention(q, q, q, dropout_p=0.1) written without
    its Dropout (the optimizer's form), and a native_dropout whose Dropout
    the optimizer also removed."""
    sdpa = "aten.scaled_dot_product_attention.default"
    nodes = [
        with_fx(helper.make_node("MatMul", ["x", "x"], ["s"], name="node_MatMul_0"),
                sdpa, "%q, %q, %q", ["attn"], "{'dropout_p': 0.1, 'is_causal': True}"),
        with_fx(helper.make_node("Softmax", ["s"], ["p"], name="node_Softmax_1"),
                sdpa, "%q, %q, %q", ["attn"], "{'dropout_p': 0.1, 'is_causal': True}"),
        with_fx(helper.make_node("Relu", ["p"], ["y"], name="node_Relu_2"),
                "aten.native_dropout.default", "%p, 0.25, True", ["drop"]),
    ]
    return model(nodes, [vi("x", F, [2, 3, 3])], [vi("y", F, [2, 3, 3])], opset=20)


def k_dynamo_alias(out):
    """A buffer read twice through aten.alias (dynamo's Identity nodes, as
    MiniMax's decay buffers export): both read the one initializer."""
    nodes = [
        with_fx(helper.make_node("Identity", ["decay"], ["alias"], name="node_alias"),
                "aten.alias.default", "%b_decay,", ["attn"]),
        with_fx(helper.make_node("Identity", ["decay"], ["alias_1"], name="node_alias_1"),
                "aten.alias.default", "%b_decay,", ["attn"]),
        helper.make_node("Mul", ["x", "alias"], ["h"], name="node_mul"),
        helper.make_node("Add", ["h", "alias_1"], ["y"], name="node_add"),
    ]
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [weight("decay", [2, 3])],
                 opset=20)


def k_float16_linear(out):
    """A Linear exported in float16 (model.half()): float16 input, weight and
    logits."""
    H = TensorProto.FLOAT16
    w = numpy_helper.from_array(np.arange(12, dtype=np.float16).reshape(4, 3) / 16, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="node_matmul")]
    return model(nodes, [vi("x", H, [2, 4])], [vi("y", H, [2, 3])], [w])


# --- files that are not models ----------------------------------------------------

RAW_FILES = {
    "random_bytes": lambda: bytes(np.random.default_rng(1234).integers(0, 256, 4096, np.uint8)),
    "text": lambda: b"name,value\nlearning_rate,0.1\n",
    "empty": lambda: b"",
}


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind in RAW_FILES:
        with open(out, "wb") as f:
            f.write(RAW_FILES[kind]())
        return
    fn = globals().get("k_" + kind)
    if fn is None and kind in SHORT_NODES:
        fn = lambda out: short_node(kind)
    if fn is None:
        sys.exit("unknown kind " + kind)
    m = fn(out)
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
