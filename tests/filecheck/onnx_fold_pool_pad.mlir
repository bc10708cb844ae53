// RUN: python -m compilerkit.opt --split-input-file -p fold-pool-pad,dead-code %s | filecheck %s
// fold-pool-pad (onnx_passes/fold_pool_pad.py): a zero Pad of the spatial axes between a
// never-negative tensor (a Relu, a Conv with a Relu-like fused activation) and a MaxPool
// becomes the MaxPool's pads, when each side's pads stay shorter than the window and the
// MaxPool's Indices are unused. By hand, max(0, 1, 2) over a window of a Relu output that
// reaches into the padding is 2 whether the padding holds 0 or -inf.

// ResNet-50's stem as tf2onnx writes it: Relu, Pad by 1, MaxPool 3x3 stride 2 unpadded.
builtin.module {
  func.func @stem(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %r = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
    %p = "onnx.Constant"() {value = dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
    %none = "onnx.NoValue"() : () -> none
    %rp = "onnx.Pad"(%r, %p, %none, %none) {onnx_node_name = "pad"} : (tensor<1x2x8x8xf32>, tensor<8xi64>, none, none) -> tensor<1x2x10x10xf32>
    %y, %y_idx = "onnx.MaxPool"(%rp) {kernel_shape = [3, 3], strides = [2, 2], onnx_node_name = "pool"} : (tensor<1x2x10x10xf32>) -> (tensor<1x2x4x4xf32>, none)
    func.return %y : tensor<1x2x4x4xf32>
  }
}
// CHECK-LABEL: func.func @stem
// CHECK-NEXT:    %r = "onnx.Relu"(%x)
// CHECK-NOT:     "onnx.Pad"
// CHECK-NEXT:    %y, %y_idx = "onnx.MaxPool"(%r) {kernel_shape = [3 : i64, 3 : i64], strides = [2 : i64, 2 : i64], onnx_node_name = "pool", pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64]}
// CHECK-NEXT:    func.return %y

// -----
// A Conv with a fused ReLU6 (Clip 0..6) is never negative either; the MaxPool's own pad on
// the left adds to the Pad's (1 + 1 = 2 < the window's 3).
builtin.module {
  func.func @conv_clip(%x: tensor<1x1x6x6xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<1.0> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %c = "onnx.Conv"(%x, %w, %none) {activation = "Clip", activation_params = [0.0 : f32, 6.0 : f32], onnx_node_name = "conv"} : (tensor<1x1x6x6xf32>, tensor<1x1x1x1xf32>, none) -> tensor<1x1x6x6xf32>
    %p = "onnx.Constant"() {value = dense<[0, 0, 1, 0, 0, 0, 0, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
    %cp = "onnx.Pad"(%c, %p, %none, %none) {onnx_node_name = "pad"} : (tensor<1x1x6x6xf32>, tensor<8xi64>, none, none) -> tensor<1x1x7x7xf32>
    %y, %y_idx = "onnx.MaxPool"(%cp) {kernel_shape = [3, 3], pads = [1, 0, 0, 0], strides = [2, 2], onnx_node_name = "pool"} : (tensor<1x1x7x7xf32>) -> (tensor<1x1x4x4xf32>, none)
    func.return %y : tensor<1x1x4x4xf32>
  }
}
// CHECK-LABEL: func.func @conv_clip
// CHECK-NOT:     "onnx.Pad"
// CHECK:         %y, %y_idx = "onnx.MaxPool"(%c) {kernel_shape = [3 : i64, 3 : i64], pads = [2 : i64, 0 : i64, 0 : i64, 1 : i64], strides = [2 : i64, 2 : i64], onnx_node_name = "pool"}

// -----
// What must stay: x itself may be negative (max(-3, 0) = 0 would replace -3); the Pad pads
// with 1, not 0; the pads (2) reach a whole window (2, a 2-wide window) that would hold only
// padding; ceil_mode; and a MaxPool whose Indices are used.
builtin.module {
  func.func @keep(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) attributes {input_names = ["x"], output_names = ["a", "b", "c", "d", "e", "i"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %p = "onnx.Constant"() {value = dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
    %xp = "onnx.Pad"(%x, %p, %none, %none) {onnx_node_name = "pad_x"} : (tensor<1x1x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x1x6x6xf32>
    %a, %a_idx = "onnx.MaxPool"(%xp) {kernel_shape = [3, 3], strides = [2, 2], onnx_node_name = "signed"} : (tensor<1x1x6x6xf32>) -> (tensor<1x1x2x2xf32>, none)
    %r = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
    %one = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %r1 = "onnx.Pad"(%r, %p, %one, %none) {onnx_node_name = "pad_one"} : (tensor<1x1x4x4xf32>, tensor<8xi64>, tensor<f32>, none) -> tensor<1x1x6x6xf32>
    %b, %b_idx = "onnx.MaxPool"(%r1) {kernel_shape = [3, 3], strides = [2, 2], onnx_node_name = "ones"} : (tensor<1x1x6x6xf32>) -> (tensor<1x1x2x2xf32>, none)
    %p2 = "onnx.Constant"() {value = dense<[0, 0, 2, 2, 0, 0, 2, 2]> : tensor<8xi64>} : () -> tensor<8xi64>
    %r2 = "onnx.Relu"(%x) {onnx_node_name = "relu2"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
    %rp2 = "onnx.Pad"(%r2, %p2, %none, %none) {onnx_node_name = "pad_wide"} : (tensor<1x1x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x1x8x8xf32>
    %c, %c_idx = "onnx.MaxPool"(%rp2) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "wide"} : (tensor<1x1x8x8xf32>) -> (tensor<1x1x4x4xf32>, none)
    %r3 = "onnx.Relu"(%x) {onnx_node_name = "relu3"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
    %rp3 = "onnx.Pad"(%r3, %p, %none, %none) {onnx_node_name = "pad_ceil"} : (tensor<1x1x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x1x6x6xf32>
    %d, %d_idx = "onnx.MaxPool"(%rp3) {kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1 : i64, onnx_node_name = "ceil"} : (tensor<1x1x6x6xf32>) -> (tensor<1x1x3x3xf32>, none)
    %r4 = "onnx.Relu"(%x) {onnx_node_name = "relu4"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
    %rp4 = "onnx.Pad"(%r4, %p, %none, %none) {onnx_node_name = "pad_idx"} : (tensor<1x1x4x4xf32>, tensor<8xi64>, none, none) -> tensor<1x1x6x6xf32>
    %e, %i = "onnx.MaxPool"(%rp4) {kernel_shape = [3, 3], strides = [2, 2], onnx_node_name = "indices"} : (tensor<1x1x6x6xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>)
    func.return %a, %b, %c, %d, %e, %i : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>
  }
}
// CHECK-LABEL: func.func @keep
// CHECK:         "onnx.Pad"{{.*}}pad_x
// CHECK:         "onnx.MaxPool"(%xp)
// CHECK:         "onnx.Pad"{{.*}}pad_one
// CHECK:         "onnx.MaxPool"(%r1)
// CHECK:         "onnx.Pad"{{.*}}pad_wide
// CHECK:         "onnx.MaxPool"(%rp2)
// CHECK:         "onnx.Pad"{{.*}}pad_ceil
// CHECK:         "onnx.MaxPool"(%rp3)
// CHECK:         "onnx.Pad"{{.*}}pad_idx
// CHECK:         "onnx.MaxPool"(%rp4)
