// RUN: python -m compilerkit.opt --split-input-file -p shape-inference,validate-onnx,constant-folding,decompose,constant-folding,dead-code,validate-onnx %s | filecheck %s
// The whole ONNX IR pipeline (passes.onnx_pipeline(), in that order) through the opt driver:
// each pass alone is tested in onnx_<pass>.mlir; here, what they do together to the
// subgraphs exporters write.

func.func @keras_shape_subgraph(%x: tensor<2x3x4xf32>) -> tensor<*xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Shape"(%x) {onnx_node_name = "shape"} : (tensor<2x3x4xf32>) -> tensor<*xi64>
  %zero = "onnx.Constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %n = "onnx.Gather"(%s, %zero) {axis = 0 : i64, onnx_node_name = "batch"} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
  %ax = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = "onnx.Unsqueeze"(%n, %ax) {onnx_node_name = "unsq"} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %rest = "onnx.Constant"() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %shape = "onnx.Concat"(%n1, %rest) {axis = 0 : i64, onnx_node_name = "concat"} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %y = "onnx.Reshape"(%x, %shape) {onnx_node_name = "flatten"} : (tensor<2x3x4xf32>, tensor<*xi64>) -> tensor<*xf32>
  func.return %y : tensor<*xf32>
}
// Shape(x) = [2, 3, 4]; Gather index 0 -> 2; Unsqueeze -> [2]; Concat with [-1] -> [2, -1];
// so the Reshape is 24 elements into 2 x 12. Only the Reshape and its shape are left.
// CHECK-LABEL: func.func @keras_shape_subgraph
// CHECK-SAME:    -> tensor<2x12xf32>
// CHECK-NEXT:    %[[S:.*]] = "onnx.Constant"() {value = dense<[2, -1]> : tensor<2xi64>}
// CHECK-NEXT:    %[[Y:.*]] = "onnx.Reshape"(%x, %[[S]]) {{.*}} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x12xf32>

// -----
func.func @conv_batchnorm_relu(%x: tensor<1x1x3x3xf32>) -> tensor<*xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 15 : i64} {
  %w = "onnx.Constant"() {value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %none = "onnx.NoValue"() : () -> none
  %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<*xf32>
  %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %bn, %rm, %rv = "onnx.BatchNormalization"(%c, %g, %b, %m, %v) {epsilon = 1.0 : f32, onnx_node_name = "bn"} : (tensor<*xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<*xf32>, none, none)
  %y = "onnx.Relu"(%bn) {onnx_node_name = "relu"} : (tensor<*xf32>) -> tensor<*xf32>
  func.return %y : tensor<*xf32>
}
// Shapes first (1x2x3x3), then the BatchNorm folds into the Conv: scale' = gamma /
// sqrt(var + eps) = [1/2, 6/3] = [0.5, 2], shift' = beta - mean * scale' = [0, -5], so
// W' = [1 * 0.5, 3 * 2] = [0.5, 6] and B' = [0, -5]; dead-code drops every unused constant.
// CHECK-LABEL: func.func @conv_batchnorm_relu
// CHECK-SAME:    -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    %[[W:.*]] = "onnx.Constant"() {value = dense<{{\[\[\[\[}}5.000000e-01]]], {{\[\[\[}}6.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-NEXT:    %[[B:.*]] = "onnx.Constant"() {value = dense<[0.000000e+00, -5.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT:    %[[C:.*]] = "onnx.Conv"(%x, %[[W]], %[[B]]) {{.*}} -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    %[[Y:.*]] = "onnx.Relu"(%[[C]])
// CHECK-NEXT:    func.return %[[Y]]

// -----
func.func @identity_chain_and_dead_branch(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %one = "onnx.Constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %two = "onnx.Add"(%one, %one) {onnx_node_name = "two"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %i = "onnx.Identity"(%x) {onnx_node_name = "id"} : (tensor<4xf32>) -> tensor<4xf32>
  %unused = "onnx.Exp"(%i) {onnx_node_name = "dead"} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "onnx.Mul"(%i, %two) {onnx_node_name = "mul"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// 1 + 1 folds to a splat 2; the Identity goes (the Mul reads x); the unused Exp goes.
// CHECK-LABEL: func.func @identity_chain_and_dead_branch
// CHECK-NEXT:    %[[TWO:.*]] = "onnx.Constant"() {value = dense<2.000000e+00> : tensor<4xf32>}
// CHECK-NEXT:    %[[Y:.*]] = "onnx.Mul"(%x, %[[TWO]])
// CHECK-NEXT:    func.return %[[Y]]
