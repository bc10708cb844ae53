// RUN: python -m compilerkit.opt --split-input-file -p fuse-gelu,dead-code %s | filecheck %s
// fuse-gelu (onnx_passes/fuse_gelu.py): 0.5 * x * (1 + erf(x / sqrt(2))) written out as five
// nodes becomes one Gelu node, in either of the groupings exporters write, when no
// intermediate result has another use and the constants are sqrt(2) (or its inverse), 1 and
// 0.5 within the pass's `tolerance`.

// torch.onnx's nn.GELU() before opset 20: Div, Erf, Add, Mul(x, .), Mul(., 0.5).
builtin.module {
  func.func @torch(%x: tensor<2x8xf32>) -> tensor<2x8xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %s2 = "onnx.Constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
    %one = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %half = "onnx.Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %u = "onnx.Div"(%x, %s2) {onnx_node_name = "div"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e = "onnx.Erf"(%u) {onnx_node_name = "erf"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %a = "onnx.Add"(%e, %one) {onnx_node_name = "add"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %m = "onnx.Mul"(%x, %a) {onnx_node_name = "mul"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = "onnx.Mul"(%m, %half) {onnx_node_name = "mul_1"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    func.return %y : tensor<2x8xf32>
  }
}
// CHECK-LABEL: func.func @torch
// CHECK-NEXT:    %{{.*}} = "onnx.Gelu"(%x) {onnx_node_name = "mul_1_gelu"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    func.return

// -----
// The other grouping: Mul by 1/sqrt(2), (0.5 * x) * (erf + 1), constants on the left.
builtin.module {
  func.func @halved(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %r2 = "onnx.Constant"() {value = dense<0.707106769> : tensor<f32>} : () -> tensor<f32>
    %one = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %half = "onnx.Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %u = "onnx.Mul"(%r2, %x) {onnx_node_name = "scale"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %e = "onnx.Erf"(%u) {onnx_node_name = "erf"} : (tensor<4xf32>) -> tensor<4xf32>
    %a = "onnx.Add"(%one, %e) {onnx_node_name = "add"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %h = "onnx.Mul"(%half, %x) {onnx_node_name = "half"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Mul"(%h, %a) {onnx_node_name = "gelu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @halved
// CHECK-NEXT:    %{{.*}} = "onnx.Gelu"(%x) {onnx_node_name = "gelu_gelu"}
// CHECK-NEXT:    func.return

// -----
// What stays: the Erf's result is also returned, and a chain whose 0.5 is 0.6 is not GELU.
builtin.module {
  func.func @keep(%x: tensor<4xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) attributes {input_names = ["x", "z"], output_names = ["y", "e", "w"], onnx_opset = 17 : i64} {
    %s2 = "onnx.Constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
    %one = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %half = "onnx.Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %other = "onnx.Constant"() {value = dense<0.6> : tensor<f32>} : () -> tensor<f32>
    %u = "onnx.Div"(%x, %s2) {onnx_node_name = "div"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %e = "onnx.Erf"(%u) {onnx_node_name = "erf"} : (tensor<4xf32>) -> tensor<4xf32>
    %a = "onnx.Add"(%e, %one) {onnx_node_name = "add"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %m = "onnx.Mul"(%x, %a) {onnx_node_name = "mul"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Mul"(%m, %half) {onnx_node_name = "mul_1"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %u2 = "onnx.Div"(%z, %s2) {onnx_node_name = "div2"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %e2 = "onnx.Erf"(%u2) {onnx_node_name = "erf2"} : (tensor<4xf32>) -> tensor<4xf32>
    %a2 = "onnx.Add"(%e2, %one) {onnx_node_name = "add2"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %m2 = "onnx.Mul"(%z, %a2) {onnx_node_name = "mul2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w = "onnx.Mul"(%m2, %other) {onnx_node_name = "mul2_1"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    func.return %y, %e, %w : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @keep
// CHECK-NOT:     onnx.Gelu
// CHECK:         "onnx.Erf"(%u) {onnx_node_name = "erf"}
// CHECK:         "onnx.Erf"(%u2) {onnx_node_name = "erf2"}
// CHECK-NOT:     onnx.Gelu
// CHECK:         func.return %y, %e, %w

// -----
// The tanh form as tf2onnx writes Keras's gelu(approximate=True): Gelu with approximate = "tanh".
builtin.module {
  func.func @keras_tanh(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %half = "onnx.Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %three = "onnx.Constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
    %c = "onnx.Constant"() {value = dense<0.0447149985> : tensor<f32>} : () -> tensor<f32>
    %k = "onnx.Constant"() {value = dense<0.797884583> : tensor<f32>} : () -> tensor<f32>
    %one = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %h = "onnx.Mul"(%half, %x) {onnx_node_name = "mul"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %p = "onnx.Pow"(%x, %three) {onnx_node_name = "pow"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %t = "onnx.Mul"(%c, %p) {onnx_node_name = "mul_1"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %i = "onnx.Add"(%x, %t) {onnx_node_name = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %s = "onnx.Mul"(%k, %i) {onnx_node_name = "mul_2"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %e = "onnx.Tanh"(%s) {onnx_node_name = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
    %a = "onnx.Add"(%one, %e) {onnx_node_name = "add_1"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Mul"(%h, %a) {onnx_node_name = "mul_3"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// CHECK-LABEL: func.func @keras_tanh
// CHECK-NEXT:    %{{.*}} = "onnx.Gelu"(%x) {onnx_node_name = "mul_3_gelu", approximate = "tanh"}
// CHECK-NEXT:    func.return
