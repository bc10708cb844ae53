// RUN: not python -m compilerkit.opt --split-input-file -p validate-onnx %s 2>&1 | filecheck %s
// validate-onnx: refuse, naming the node, what the ONNX spec or onnxruntime refuses but ONNX's
// shape inference lets through, before folding or lowering could compute with it. Each case is
// its own module; an accepted module prints unchanged, a refused one prints one error line
// (to stderr, before the modules: the accepted cases, at the boundary of what is allowed,
// come last).

builtin.module {
  func.func @sqrt_of_int64(%x: tensor<4xi64>) -> tensor<4xi64> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Sqrt"(%x) {onnx_node_name = "bad_sqrt"} : (tensor<4xi64>) -> tensor<4xi64>
    func.return %y : tensor<4xi64>
  }
}
// Sqrt's schema allows float types only (the typed dialect's verifier already refuses it).
// CHECK-LABEL: error: {{.*}}node 'bad_sqrt' (Sqrt): operand X has element type tensor(int64)
// CHECK-SAME:    which the ONNX schema does not allow

// -----
builtin.module {
  func.func @conv_channels_disagree(%x: tensor<1x4x5x5xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "bad_conv"} : (tensor<1x4x5x5xf32>, tensor<2x3x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// group = 1: the weight's input channels (3) must equal the input's (4).
// CHECK-LABEL: error: node 'bad_conv' (Conv):
// CHECK-SAME:    input channels x group is 3 x 1; expected the input's 4 channels

// -----
builtin.module {
  func.func @maxpool_pads_reach_kernel(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x5x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2 : i64, 2 : i64], pads = [2 : i64, 2 : i64, 2 : i64, 2 : i64], onnx_node_name = "bad_pool"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x5x5xf32>, none)
    func.return %y : tensor<1x1x5x5xf32>
  }
}
// A pad of 2 with a 2-wide window: onnxruntime refuses pads at or above the kernel.
// CHECK-LABEL: error: node 'bad_pool' (MaxPool):
// CHECK-SAME:    pads is [2, 2, 2, 2]; expected each pad smaller than the kernel [2, 2]

// -----
builtin.module {
  func.func @dropout_ratio_one(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %r = "onnx.Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %none = "onnx.NoValue"() : () -> none
    %y, %mask = "onnx.Dropout"(%x, %r, %none) {onnx_node_name = "bad_drop"} : (tensor<4xf32>, tensor<f32>, none) -> (tensor<4xf32>, none)
    func.return %y : tensor<4xf32>
  }
}
// CHECK-LABEL: error: node 'bad_drop' (Dropout):
// CHECK-SAME:    ratio is 1.0; expected a value in [0, 1)

// -----
builtin.module {
  func.func @gather_index_out_of_range(%x: tensor<3x2xf32>) -> tensor<1x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %i = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
    %y = "onnx.Gather"(%x, %i) {axis = 0 : i64, onnx_node_name = "bad_gather"} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
    func.return %y : tensor<1x2xf32>
  }
}
// Axis 0 has 3 rows: valid indices are -3 .. 2, so 3 is out of range.
// CHECK-LABEL: error: node 'bad_gather' (Gather):
// CHECK-SAME:    index is 3; expected one in [-3, 2]

// -----
builtin.module {
  func.func @lrn_even_size(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.LRN"(%x) {size = 2 : i64, onnx_node_name = "bad_lrn"} : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
    func.return %y : tensor<1x4x2x2xf32>
  }
}
// CHECK-LABEL: error: node 'bad_lrn' (LRN):
// CHECK-SAME:    size is 2; expected a positive odd integer

// -----
builtin.module {
  func.func @reshape_count_differs(%x: tensor<2x3xf32>) -> tensor<4x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %s = "onnx.Constant"() {value = dense<[4, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
    %y = "onnx.Reshape"(%x, %s) {onnx_node_name = "bad_reshape"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x2xf32>
    func.return %y : tensor<4x2xf32>
  }
}
// 2 x 3 = 6 elements cannot be viewed as 4 x 2 = 8.
// CHECK-LABEL: error: node 'bad_reshape' (Reshape):
// CHECK-SAME:    (8 elements); expected as many elements as the input [2, 3] (6)

// -----
builtin.module {
  func.func @valid_model_passes(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x2x2xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "conv"} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x2x2xf32>
    func.return %y : tensor<1x3x2x2xf32>
  }
}
// CHECK-LABEL: func.func @valid_model_passes
// CHECK-NEXT:    %none = "onnx.NoValue"()
// CHECK-NEXT:    %y = "onnx.Conv"(%x, %w, %none)
// CHECK-NEXT:    func.return %y
// CHECK-NOT:     error

// -----
func.func @depthwise(%x: tensor<1x4x5x5xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Conv"(%x, %w, %none) {group = 4 : i64, onnx_node_name = "dw"} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>, none) -> tensor<1x4x3x3xf32>
  func.return %y : tensor<1x4x3x3xf32>
}
// Depthwise: 4 groups of 1 input channel each, 1 x 4 = the input's 4 channels.
// CHECK-LABEL: func.func @depthwise
// CHECK:         "onnx.Conv"(%x, %w, %none) {group = 4 : i64

// -----
func.func @gather_negative(%x: tensor<3x2xf32>) -> tensor<1x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %i = "onnx.Constant"() {value = dense<[-3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Gather"(%x, %i) {axis = 0 : i64, onnx_node_name = "g"} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  func.return %y : tensor<1x2xf32>
}
// -3 is the lowest valid index on an axis of 3 (it means row 0).
// CHECK-LABEL: func.func @gather_negative
// CHECK:         "onnx.Gather"(%x, %i)

// -----
func.func @pool_pad_below_kernel(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3 : i64, 3 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], onnx_node_name = "p"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x4x4xf32>, none)
  func.return %y : tensor<1x1x4x4xf32>
}
// A pad of 1 under a 3-wide window is allowed (only pads >= kernel are refused).
// CHECK-LABEL: func.func @pool_pad_below_kernel
// CHECK:         "onnx.MaxPool"(%x)

// -----
func.func @dropout_ratio_zero(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %r = "onnx.Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %none = "onnx.NoValue"() : () -> none
  %y, %mask = "onnx.Dropout"(%x, %r, %none) {onnx_node_name = "d"} : (tensor<4xf32>, tensor<f32>, none) -> (tensor<4xf32>, none)
  func.return %y : tensor<4xf32>
}
// ratio 0 is inside [0, 1).
// CHECK-LABEL: func.func @dropout_ratio_zero
// CHECK:         "onnx.Dropout"(%x, %r, %none)
// CHECK-NOT:     error
