// RUN: python -m compilerkit.opt --split-input-file -p fuse-conv,dead-code %s | filecheck %s
// fuse-conv (onnx_passes/fuse_conv.py): a zero constant Pad of the spatial axes becomes Conv
// pads; a per-channel constant Mul/Add after a Conv folds into its weights and bias; an
// activation after it becomes the Conv's `activation` / `activation_params` attributes
// (onnxruntime's FusedConv names). dead-code then drops the replaced constants.

// Keras's unfolded BatchNorm (Mul, Add by [1, C, 1, 1] constants), then ReLU6 as Clip.
// By hand: W = [1, 3], b = [1, -1], scale s = [0.5, 2], shift t = [0.25, -4]:
// W' = W * s = [0.5, 6]; b' = b * s + t = [0.5 + 0.25, -2 - 4] = [0.75, -6].
builtin.module {
  func.func @conv_mul_add_clip(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %b = "onnx.Constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %c = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
    %s = "onnx.Constant"() {value = dense<[[[[0.5]], [[2.0]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
    %m = "onnx.Mul"(%c, %s) {onnx_node_name = "bn_mul"} : (tensor<1x2x3x3xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x3x3xf32>
    %t = "onnx.Constant"() {value = dense<[[[[0.25]], [[-4.0]]]]> : tensor<1x2x1x1xf32>} : () -> tensor<1x2x1x1xf32>
    %a = "onnx.Add"(%t, %m) {onnx_node_name = "bn_add"} : (tensor<1x2x1x1xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %lo = "onnx.Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %hi = "onnx.Constant"() {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
    %y = "onnx.Clip"(%a, %lo, %hi) {onnx_node_name = "relu6"} : (tensor<1x2x3x3xf32>, tensor<f32>, tensor<f32>) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @conv_mul_add_clip
// CHECK-NEXT:    %[[W:.*]] = "onnx.Constant"() {value = dense<{{\[\[\[\[}}5.000000e-01]]], {{\[\[\[}}6.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-NEXT:    %[[B:.*]] = "onnx.Constant"() {value = dense<[7.500000e-01, -6.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT:    %[[C:.*]] = "onnx.Conv"(%x, %[[W]], %[[B]]) {onnx_node_name = "conv", activation = "Clip", activation_params = [0.000000e+00 : f32, 6.000000e+00 : f32]}
// CHECK-NEXT:    func.return %[[C]]

// -----
// Keras pads before a stride-2 depthwise Conv with an explicit Pad (bottom and right by 1):
// the Conv's own pads [0, 0, 0, 0] become [0, 0, 1, 1]; the Conv reads x directly.
builtin.module {
  func.func @pad_into_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %p = "onnx.Constant"() {value = dense<[0, 0, 0, 0, 0, 0, 1, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
    %none = "onnx.NoValue"() : () -> none
    %xp = "onnx.Pad"(%x, %p, %none, %none) {onnx_node_name = "pad"} : (tensor<1x2x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x2x5x5xf32>
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<2x1x3x3xf32>} : () -> tensor<2x1x3x3xf32>
    %y = "onnx.Conv"(%xp, %w, %none) {group = 2 : i64, strides = [2, 2], onnx_node_name = "dw"} : (tensor<1x2x5x5xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x2x2xf32>
    func.return %y : tensor<1x2x2x2xf32>
  }
}
// CHECK-LABEL: func.func @pad_into_conv
// CHECK-NOT:     "onnx.Pad"
// CHECK:         %[[Y:.*]] = "onnx.Conv"(%x, %{{.*}}, %{{.*}}) {group = 2 : i64, strides = [2 : i64, 2 : i64], onnx_node_name = "dw", pads = [0 : i64, 0 : i64, 1 : i64, 1 : i64]}
// CHECK-SAME:      (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x2x2xf32>
// CHECK-NEXT:    func.return %[[Y]]

// -----
// SiLU as Keras exports it, y * Sigmoid(y): activation Swish with alpha 1 (the weights are a
// graph input here: fusing an activation needs no constant weights).
builtin.module {
  func.func @conv_swish(%x: tensor<1x1x3x3xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %s = "onnx.Sigmoid"(%c) {onnx_node_name = "sig"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %y = "onnx.Mul"(%c, %s) {onnx_node_name = "swish"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @conv_swish
// CHECK:         %[[C:.*]] = "onnx.Conv"(%x, %w, %{{.*}}) {onnx_node_name = "conv", activation = "Swish", activation_params = [1.000000e+00 : f32]}
// CHECK-NEXT:    func.return %[[C]]

// -----
// LeakyRelu keeps its alpha as the one parameter.
builtin.module {
  func.func @conv_leaky_relu(%x: tensor<1x1x3x3xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %y = "onnx.LeakyRelu"(%c) {alpha = 0.25 : f32, onnx_node_name = "leaky"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @conv_leaky_relu
// CHECK:         "onnx.Conv"(%x, %w, %{{.*}}) {onnx_node_name = "conv", activation = "LeakyRelu", activation_params = [2.500000e-01 : f32]}
// CHECK-NOT:     "onnx.LeakyRelu"

// -----
// Nothing fuses where it would change a value someone else reads: the Conv's result is also
// returned (so the Relu stays a node of its own), the Mul's constant varies over the spatial
// axes (not one value per channel), and the Pad reflects instead of padding with zeros.
builtin.module {
  func.func @nothing_to_fuse(%x: tensor<1x1x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) attributes {input_names = ["x"], output_names = ["a", "b", "c", "d"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "shared"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %r = "onnx.Relu"(%c) {onnx_node_name = "relu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %c2 = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "spatial"} : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %s = "onnx.Constant"() {value = dense<2.0> : tensor<1x1x3x3xf32>} : () -> tensor<1x1x3x3xf32>
    %m = "onnx.Mul"(%c2, %s) {onnx_node_name = "mul"} : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
    %p = "onnx.Constant"() {value = dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
    %xp = "onnx.Pad"(%x, %p, %none, %none) {mode = "reflect", onnx_node_name = "reflect"} : (tensor<1x1x3x3xf32>, tensor<8xi64>, none, none) -> tensor<1x1x5x5xf32>
    %w3 = "onnx.Constant"() {value = dense<1.0> : tensor<2x1x3x3xf32>} : () -> tensor<2x1x3x3xf32>
    %c3 = "onnx.Conv"(%xp, %w3, %none) {onnx_node_name = "after_reflect"} : (tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %c, %r, %m, %c3 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @nothing_to_fuse
// CHECK-NOT:     activation
// CHECK:         "onnx.Relu"
// CHECK:         "onnx.Mul"
// CHECK:         "onnx.Pad"{{.*}}mode = "reflect"
// CHECK:         "onnx.Conv"(%xp,
// CHECK-NOT:     activation

// -----
// ResNet's residual sum: Conv -> Add(block input) -> Relu. The Add is marked `fused_conv = k`
// (k: its Conv operand) and keeps its meaning; lowering computes it in the Conv's epilogue.
// The Relu after the Add is fuse-elementwise's (not in this pipeline), so it stays here. The
// shortcut Conv and the main Conv both feed the second Add: the later one (operand 1) takes it.
builtin.module {
  func.func @residual(%x: tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) attributes {input_names = ["x"], output_names = ["y", "z"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "main"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %a = "onnx.Add"(%x, %c) {onnx_node_name = "sum"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %y = "onnx.Relu"(%a) {onnx_node_name = "relu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    %s = "onnx.Conv"(%y, %w, %none) {onnx_node_name = "shortcut"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %m = "onnx.Conv"(%y, %w, %none) {onnx_node_name = "main2"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %z = "onnx.Add"(%s, %m) {onnx_node_name = "sum2"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %y, %z : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @residual
// CHECK:         %[[C:.*]] = "onnx.Conv"(%x, %{{.*}}, %{{.*}}) {onnx_node_name = "main"}
// CHECK-NEXT:    %[[A:.*]] = "onnx.Add"(%x, %[[C]]) {onnx_node_name = "sum", fused_conv = 1 : i64}
// CHECK-NEXT:    %[[Y:.*]] = "onnx.Relu"(%[[A]])
// CHECK-NEXT:    %[[S:.*]] = "onnx.Conv"(%[[Y]], {{.*}}onnx_node_name = "shortcut"}
// CHECK-NEXT:    %[[M:.*]] = "onnx.Conv"(%[[Y]], {{.*}}onnx_node_name = "main2"}
// CHECK-NEXT:    "onnx.Add"(%[[S]], %[[M]]) {onnx_node_name = "sum2", fused_conv = 1 : i64}

// -----
// With `sums` off, no Add is marked.
// RUN: python -m compilerkit.opt --split-input-file -p 'fuse-conv{sums=false}' %s | filecheck %s --check-prefix=OFF
builtin.module {
  func.func @residual_off(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "main"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, none) -> tensor<1x2x3x3xf32>
    %a = "onnx.Add"(%c, %x) {onnx_node_name = "sum"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
    func.return %a : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @residual_off
// CHECK:         "onnx.Add"(%{{.*}}, %x) {onnx_node_name = "sum", fused_conv = 0 : i64}
// OFF-NOT:       fused_conv

// -----
// A Keras Conv3DTranspose's bias comes as an Add of a [1, C, 1, 1, 1] constant after the
// ConvTranspose (W [C_in, C_out, k...]): it folds into the ConvTranspose's bias. By hand:
// b = [1, -1], t = [0.5, 2] -> b' = [1.5, 1]; without b, b' = t.
builtin.module {
  func.func @convt_add(%x: tensor<1x1x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<1x2x2x2x2xf32>} : () -> tensor<1x2x2x2x2xf32>
    %b = "onnx.Constant"() {value = dense<[1.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %c = "onnx.ConvTranspose"(%x, %w, %b) {strides = [2, 2, 2], onnx_node_name = "up"} : (tensor<1x1x2x2x2xf32>, tensor<1x2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4x4xf32>
    %t = "onnx.Constant"() {value = dense<[[[[[0.5]]], [[[2.0]]]]]> : tensor<1x2x1x1x1xf32>} : () -> tensor<1x2x1x1x1xf32>
    %y = "onnx.Add"(%c, %t) {onnx_node_name = "bias_add"} : (tensor<1x2x4x4x4xf32>, tensor<1x2x1x1x1xf32>) -> tensor<1x2x4x4x4xf32>
    func.return %y : tensor<1x2x4x4x4xf32>
  }
}
// CHECK-LABEL: func.func @convt_add
// CHECK-NEXT:    %[[W:.*]] = "onnx.Constant"() {value = dense<1.000000e+00> : tensor<1x2x2x2x2xf32>}
// CHECK-NEXT:    %[[B:.*]] = "onnx.Constant"() {value = dense<[1.500000e+00, 1.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT:    %[[C:.*]] = "onnx.ConvTranspose"(%x, %[[W]], %[[B]]) {strides = [2 : i64, 2 : i64, 2 : i64], onnx_node_name = "up"}
// CHECK-NEXT:    func.return %[[C]]

// -----
// The same without a bias; an Add of a full tensor (not per channel) stays.
builtin.module {
  func.func @convt_add_nobias(%x: tensor<1x1x2x2x2xf32>, %s: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) attributes {input_names = ["x", "s"], output_names = ["y", "z"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<1x2x2x2x2xf32>} : () -> tensor<1x2x2x2x2xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.ConvTranspose"(%x, %w, %none) {strides = [2, 2, 2], onnx_node_name = "up"} : (tensor<1x1x2x2x2xf32>, tensor<1x2x2x2x2xf32>, none) -> tensor<1x2x4x4x4xf32>
    %t = "onnx.Constant"() {value = dense<[[[[[0.5]]], [[[2.0]]]]]> : tensor<1x2x1x1x1xf32>} : () -> tensor<1x2x1x1x1xf32>
    %y = "onnx.Add"(%t, %c) {onnx_node_name = "bias_add"} : (tensor<1x2x1x1x1xf32>, tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
    %d = "onnx.ConvTranspose"(%x, %w, %none) {strides = [2, 2, 2], onnx_node_name = "up2"} : (tensor<1x1x2x2x2xf32>, tensor<1x2x2x2x2xf32>, none) -> tensor<1x2x4x4x4xf32>
    %z = "onnx.Add"(%d, %s) {onnx_node_name = "sum"} : (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
    func.return %y, %z : tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>
  }
}
// CHECK-LABEL: func.func @convt_add_nobias
// CHECK:         %[[B:.*]] = "onnx.Constant"() {value = dense<[5.000000e-01, 2.000000e+00]> : tensor<2xf32>}
// CHECK-NEXT:    %[[C:.*]] = "onnx.ConvTranspose"(%x, %{{.*}}, %[[B]]) {strides = [2 : i64, 2 : i64, 2 : i64], onnx_node_name = "up"}
// CHECK:         %[[D:.*]] = "onnx.ConvTranspose"(%x, %{{.*}}, %{{.*}}) {strides = [2 : i64, 2 : i64, 2 : i64], onnx_node_name = "up2"}
// CHECK-NEXT:    %[[Z:.*]] = "onnx.Add"(%[[D]], %s)
// CHECK-NEXT:    func.return %[[C]], %[[Z]]
