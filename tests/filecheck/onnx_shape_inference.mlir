// RUN: not python -m compilerkit.opt --split-input-file -p shape-inference %s 2>&1 | filecheck %s
// shape-inference: every result whose type is not static is asked of ONNX's own (strict)
// inference, one node at a time, and retyped; the function's signature follows its returns.
// Dims below are worked out by hand from the ONNX operator definitions.
// The error case comes first: opt reports errors (stderr) as it goes and prints modules at the end.

builtin.module {
  func.func @matmul_inner_dims_disagree(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<*xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "bad_mm"} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<*xf32>
    func.return %y : tensor<*xf32>
  }
}
// All operands known and ONNX's inference refuses them (3 != 4): an error naming the node,
// not a result left dynamic.
// CHECK-LABEL: compilerkit-opt: error: node 'bad_mm' (MatMul):
// CHECK-SAME:    {{[Ii]}}ncompatible dimensions

// -----
builtin.module {
  func.func @conv_strided_padded(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<*xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 2 : i64], onnx_node_name = "conv"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, none) -> tensor<*xf32>
    %y = "onnx.Relu"(%c) {onnx_node_name = "relu"} : (tensor<*xf32>) -> tensor<*xf32>
    func.return %y : tensor<*xf32>
  }
}
// Conv: (5 + 1 + 1 - 3) / 2 + 1 = 3 per spatial dim, 3 output channels; the Relu after it and
// the function's result type follow.
// CHECK-LABEL: func.func @conv_strided_padded
// CHECK-SAME:    -> tensor<1x3x3x3xf32>
// CHECK:         "onnx.Conv"(%x, %w, %none) {{.*}} -> tensor<1x3x3x3xf32>
// CHECK-NEXT:    "onnx.Relu"(%c) {{.*}} : (tensor<1x3x3x3xf32>) -> tensor<1x3x3x3xf32>
// CHECK-NEXT:    func.return %y : tensor<1x3x3x3xf32>

// -----
builtin.module {
  func.func @maxpool_ceil_mode_drops_window(%x: tensor<1x2x7x7xf32>) -> tensor<*xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
    %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], ceil_mode = 1 : i64, onnx_node_name = "pool"} : (tensor<1x2x7x7xf32>) -> (tensor<*xf32>, none)
    func.return %y : tensor<*xf32>
  }
}
// ceil((7 + 1 + 1 - 2) / 2) + 1 = 5, but the 5th window would start at padded position
// 8 = 7 + 1, inside the right padding, so (spec since opset 19, onnxruntime) it is dropped: 4.
// CHECK-LABEL: func.func @maxpool_ceil_mode_drops_window
// CHECK-NOT:     5x5
// CHECK:         "onnx.MaxPool"(%x) {{.*}} : (tensor<1x2x7x7xf32>) -> (tensor<1x2x4x4xf32>, none)

// -----
builtin.module {
  func.func @matmul_batch_broadcast(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x6xf32>) -> tensor<*xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "mm"} : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<*xf32>
    func.return %y : tensor<*xf32>
  }
}
// Batch dims [2, 1] and [5] broadcast to [2, 5]; (3x4) @ (4x6) = 3x6.
// CHECK-LABEL: func.func @matmul_batch_broadcast
// CHECK:         "onnx.MatMul"(%a, %b) {{.*}} -> tensor<2x5x3x6xf32>

// -----
builtin.module {
  func.func @reshape_zero_and_minus_one(%x: tensor<2x3x4xf32>) -> tensor<*xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %s = "onnx.Constant"() {value = dense<[0, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
    %y = "onnx.Reshape"(%x, %s) {onnx_node_name = "reshape"} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
    func.return %y : tensor<*xf32>
  }
}
// 0 copies dim 0 (2); -1 takes the rest: 24 / 2 = 12. The shape must be a constant to be seen.
// CHECK-LABEL: func.func @reshape_zero_and_minus_one
// CHECK:         "onnx.Reshape"(%x, %s) {{.*}} -> tensor<2x12xf32>

// -----
builtin.module {
  func.func @reshape_unknown_shape_stays_dynamic(%x: tensor<2x3x4xf32>, %s: tensor<2xi64>) -> tensor<*xf32> attributes {input_names = ["x", "s"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Reshape"(%x, %s) {onnx_node_name = "reshape"} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
    %z = "onnx.Relu"(%y) {onnx_node_name = "relu"} : (tensor<*xf32>) -> tensor<*xf32>
    func.return %z : tensor<*xf32>
  }
}
// The target shape is a graph input: ONNX knows only the rank (2), never the dims, so the
// result is not given a static type (and the Relu after it is left alone).
// CHECK-LABEL: func.func @reshape_unknown_shape_stays_dynamic
// CHECK-NOT:     tensor<2x12xf32>
// CHECK:         "onnx.Reshape"(%x, %s) {{.*}} -> tensor<{{\?x\?|\*}}xf32>
// CHECK-NEXT:    "onnx.Relu"(%y) {{.*}} -> tensor<*xf32>

// -----
builtin.module {
  func.func @already_static_is_kept(%x: tensor<4x6xf32>) -> tensor<4x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Sigmoid"(%x) {onnx_node_name = "sig"} : (tensor<4x6xf32>) -> tensor<4x6xf32>
    func.return %y : tensor<4x6xf32>
  }
}
// CHECK-LABEL: func.func @already_static_is_kept
// CHECK-NEXT:    %y = "onnx.Sigmoid"(%x) {onnx_node_name = "sig"} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT:    func.return %y : tensor<4x6xf32>

// -----
builtin.module {
  func.func @pool_type_from_cxx_inference_corrected(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x5x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
    %p, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], ceil_mode = 1 : i64, onnx_node_name = "pool"} : (tensor<1x2x7x7xf32>) -> (tensor<1x2x5x5xf32>, none)
    %y = "onnx.Relu"(%p) {onnx_node_name = "relu"} : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
    func.return %y : tensor<1x2x5x5xf32>
  }
}
// The same pool already typed 5x5 (what onnx's C++ inference says, which lags the spec): the
// static type is corrected to 4x4 and everything computed from it is re-inferred.
// CHECK-LABEL: func.func @pool_type_from_cxx_inference_corrected
// CHECK-SAME:    -> tensor<1x2x4x4xf32>
// CHECK-NOT:     5x5
// CHECK:         "onnx.MaxPool"(%x) {{.*}} -> (tensor<1x2x4x4xf32>, none)
// CHECK-NEXT:    "onnx.Relu"(%p) {{.*}} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %y : tensor<1x2x4x4xf32>
