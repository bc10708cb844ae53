// RUN: python -m compilerkit.opt --split-input-file -p fuse-conv,fuse-elementwise,dead-code %s | filecheck %s
// fuse-elementwise (onnx_passes/fuse_elementwise.py): the activation after an Add, Sub, Mul or
// Div becomes that op's `activation` / `activation_params` attributes (fuse-conv's names and
// table), when the op's result has no other use. fuse-conv runs first: a Conv keeps the
// activation after it.

// ResNet's residual block ends: Add of the block's Conv and the shortcut, then Relu.
builtin.module {
  func.func @residual(%a: tensor<1x4x3x3xf32>, %b: tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %s = "onnx.Add"(%a, %b) {onnx_node_name = "add"} : (tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    %y = "onnx.Relu"(%s) {onnx_node_name = "relu"} : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    func.return %y : tensor<1x4x3x3xf32>
  }
}
// CHECK-LABEL: func.func @residual
// CHECK-NEXT:    %s = "onnx.Add"(%a, %b) {onnx_node_name = "add", activation = "Relu"}
// CHECK-NEXT:    func.return %s

// -----
// A Clip after a broadcasting Mul: its bounds become the parameters.
builtin.module {
  func.func @mul_clip(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %m = "onnx.Mul"(%a, %b) {onnx_node_name = "mul"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %lo = "onnx.Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %hi = "onnx.Constant"() {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
    %y = "onnx.Clip"(%m, %lo, %hi) {onnx_node_name = "relu6"} : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
    func.return %y : tensor<2x3xf32>
  }
}
// CHECK-LABEL: func.func @mul_clip
// CHECK-NEXT:    %m = "onnx.Mul"(%a, %b) {onnx_node_name = "mul", activation = "Clip", activation_params = [0.000000e+00 : f32, 6.000000e+00 : f32]}
// CHECK-NEXT:    func.return %m

// -----
// What stays: the Add's result is also returned (the Relu must not change it), and a Conv's
// Relu goes to the Conv (fuse-conv), not to a later op.
builtin.module {
  func.func @keep(%a: tensor<1x1x3x3xf32>, %b: tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) attributes {input_names = ["a", "b"], output_names = ["s", "r", "c"], onnx_opset = 17 : i64} {
    %s = "onnx.Add"(%a, %b) {onnx_node_name = "shared"} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
    %r = "onnx.Relu"(%s) {onnx_node_name = "relu"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
    %w = "onnx.Constant"() {value = dense<2.0> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%r, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<1x1x1x1xf32>, none) -> tensor<1x1x3x3xf32>
    %cr = "onnx.Relu"(%c) {onnx_node_name = "conv_relu"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
    func.return %s, %r, %cr : tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>
  }
}
// CHECK-LABEL: func.func @keep
// CHECK:         %s = "onnx.Add"(%a, %b) {onnx_node_name = "shared"}
// CHECK-NEXT:    %r = "onnx.Relu"(%s)
// CHECK:         "onnx.Conv"(%r, {{.*}}activation = "Relu"
