// RUN: python -m compilerkit.opt --split-input-file -p decompose %s | filecheck %s
// decompose: inference BatchNormalization -> Mul by scale' = gamma / sqrt(var + eps) and Add of
// shift' = beta - mean * scale' (or folded into the Conv before it); Dropout/Identity -> their
// input; a Gemm's constant transposed operand -> the transposed constant. Numbers by hand:
// gamma = [1, 6], beta = [0.5, -1], mean = [1, 2], var = [3, 8], eps = 1 give
// sqrt(var + eps) = [2, 3], scale' = [0.5, 2], shift' = [0.5 - 1 * 0.5, -1 - 2 * 2] = [0, -5].

builtin.module {
  func.func @batchnorm_to_mul_add(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 15 : i64} {
    %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %m = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y, %rm, %rv = "onnx.BatchNormalization"(%x, %g, %b, %m, %v) {epsilon = 1.0 : f32, onnx_node_name = "bn"} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2xf32>, none, none)
    func.return %y : tensor<1x2x2x2xf32>
  }
}
// scale' and shift' are shaped [C, 1, 1] so they broadcast over H and W.
// CHECK-LABEL: func.func @batchnorm_to_mul_add
// CHECK-NOT:     "onnx.BatchNormalization"
// CHECK:         %[[S:.*]] = "onnx.Constant"() {value = dense<{{\[\[\[}}5.000000e-01]], {{\[\[}}2.000000e+00]]]> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[T:.*]] = "onnx.Constant"() {value = dense<{{\[\[\[}}0.000000e+00]], {{\[\[}}-5.000000e+00]]]> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[MUL:.*]] = "onnx.Mul"(%x, %[[S]]) {onnx_node_name = "bn_mul"}
// CHECK-NEXT:    %[[ADD:.*]] = "onnx.Add"(%[[MUL]], %[[T]]) {onnx_node_name = "bn_add"}
// CHECK-NEXT:    func.return %[[ADD]]

// -----
builtin.module {
  func.func @batchnorm_folds_into_conv(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 15 : i64} {
    %w = "onnx.Constant"() {value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %m = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y, %rm, %rv = "onnx.BatchNormalization"(%c, %g, %b, %m, %v) {epsilon = 1.0 : f32, onnx_node_name = "bn"} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x3x3xf32>, none, none)
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// The Conv (constant weights, result read only by the BatchNorm) absorbs it:
// W' = W * scale' per output channel = [1 * 0.5, 3 * 2] = [0.5, 6]; B' = 0 * scale' + shift'.
// CHECK-LABEL: func.func @batchnorm_folds_into_conv
// CHECK:         %[[W:.*]] = "onnx.Constant"() {value = dense<{{\[\[\[\[}}5.000000e-01]]], {{\[\[\[}}6.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-NEXT:    %[[B:.*]] = "onnx.Constant"() {value = dense<[0.000000e+00, -5.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT:    %[[C:.*]] = "onnx.Conv"(%x, %[[W]], %[[B]]) {onnx_node_name = "conv"}
// CHECK-NOT:     "onnx.BatchNormalization"
// CHECK-NOT:     "onnx.Mul"
// CHECK:         func.return %[[C]]

// -----
builtin.module {
  func.func @conv_read_twice_keeps_its_weights(%x: tensor<1x1x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) attributes {input_names = ["x"], output_names = ["y", "c"], onnx_opset = 15 : i64} {
    %w = "onnx.Constant"() {value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %m = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y, %rm, %rv = "onnx.BatchNormalization"(%c, %g, %b, %m, %v) {epsilon = 1.0 : f32, onnx_node_name = "bn"} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x3x3xf32>, none, none)
    func.return %y, %c : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  }
}
// The Conv's own output is a model output too: its weights must stay, so Mul + Add instead.
// CHECK-LABEL: func.func @conv_read_twice_keeps_its_weights
// CHECK:         %c = "onnx.Conv"(%x, %w, %none)
// CHECK:         %[[MUL:.*]] = "onnx.Mul"(%c, %{{.*}})
// CHECK-NEXT:    %[[ADD:.*]] = "onnx.Add"(%[[MUL]], %{{.*}})
// CHECK-NEXT:    func.return %[[ADD]], %c

// -----
builtin.module {
  func.func @batchnorm_runtime_mean_is_kept(%x: tensor<1x2x2x2xf32>, %m: tensor<2xf32>) -> tensor<1x2x2x2xf32> attributes {input_names = ["x", "m"], output_names = ["y"], onnx_opset = 15 : i64} {
    %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y, %rm, %rv = "onnx.BatchNormalization"(%x, %g, %b, %m, %v) {epsilon = 1.0 : f32, onnx_node_name = "bn"} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2xf32>, none, none)
    func.return %y : tensor<1x2x2x2xf32>
  }
}
// The mean is a graph input: scale' and shift' cannot be computed now; lowering handles it.
// CHECK-LABEL: func.func @batchnorm_runtime_mean_is_kept
// CHECK:         "onnx.BatchNormalization"(%x, %g, %b, %m, %v)
// CHECK-NOT:     "onnx.Mul"

// -----
builtin.module {
  func.func @dropout_identity_sum1_vanish(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %d, %mask = "onnx.Dropout"(%x, %none, %none) {onnx_node_name = "drop"} : (tensor<4xf32>, none, none) -> (tensor<4xf32>, none)
    %i = "onnx.Identity"(%d) {onnx_node_name = "id"} : (tensor<4xf32>) -> tensor<4xf32>
    %s = "onnx.Sum"(%i) {onnx_node_name = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Relu"(%s) {onnx_node_name = "relu"} : (tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// Inference Dropout, Identity and a one-operand Sum are their input: the Relu reads %x.
// CHECK-LABEL: func.func @dropout_identity_sum1_vanish
// CHECK-NOT:     "onnx.Dropout"
// CHECK-NOT:     "onnx.Identity"
// CHECK-NOT:     "onnx.Sum"
// CHECK:         %y = "onnx.Relu"(%x)
// CHECK-NEXT:    func.return %y

// -----
builtin.module {
  func.func @dropout_training_is_kept(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %r = "onnx.Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %t = "onnx.Constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    %d, %mask = "onnx.Dropout"(%x, %r, %t) {onnx_node_name = "drop"} : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, none)
    func.return %d : tensor<4xf32>
  }
}
// training_mode = true: Dropout is not the identity, so it stays.
// CHECK-LABEL: func.func @dropout_training_is_kept
// CHECK:         %d, %mask = "onnx.Dropout"(%x, %r, %t)
// CHECK-NEXT:    func.return %d

// -----
builtin.module {
  func.func @gemm_constant_transb(%a: tensor<4x2xf32>) -> tensor<4x3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 13 : i64} {
    %b = "onnx.Constant"() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Gemm"(%a, %b, %none) {transB = 1 : i64, onnx_node_name = "gemm"} : (tensor<4x2xf32>, tensor<3x2xf32>, none) -> tensor<4x3xf32>
    func.return %y : tensor<4x3xf32>
  }
}
// B (3x2) is stored transposed, [[1, 3, 5], [2, 4, 6]] (2x3), and transB is cleared.
// CHECK-LABEL: func.func @gemm_constant_transb
// CHECK:         %[[BT:.*]] = "onnx.Constant"() {value = dense<{{\[\[}}1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>}
// CHECK-NEXT:    %y = "onnx.Gemm"(%a, %[[BT]], %none)
// CHECK-SAME:    transB = 0 : i64
// CHECK-SAME:    (tensor<4x2xf32>, tensor<2x3xf32>, none) -> tensor<4x3xf32>

// -----
builtin.module {
  func.func @gemm_runtime_transb_is_kept(%a: tensor<4x2xf32>, %b: tensor<3x2xf32>) -> tensor<4x3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Gemm"(%a, %b, %none) {transB = 1 : i64, onnx_node_name = "gemm"} : (tensor<4x2xf32>, tensor<3x2xf32>, none) -> tensor<4x3xf32>
    func.return %y : tensor<4x3xf32>
  }
}
// CHECK-LABEL: func.func @gemm_runtime_transb_is_kept
// CHECK-NEXT:    %none = "onnx.NoValue"()
// CHECK-NEXT:    %y = "onnx.Gemm"(%a, %b, %none) {transB = 1 : i64
