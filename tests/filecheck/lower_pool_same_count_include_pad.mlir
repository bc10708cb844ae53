// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Regression (found by this file, fixed in issue #11): AveragePool with auto_pad SAME_UPPER / SAME_LOWER and
// count_include_pad = 1 leaves the end padding out of the divisor (pool.window_counts takes
// end pads as 0 unless auto_pad is NOTSET). x [1, 1, 4], kernel 3, stride 1: the total padding
// is (4 - 1) + 3 - 4 = 2, one element at each end, so every window counts 3 taps; the last
// window (x[2], x[3], pad) is divided by 2 instead. onnxruntime, x = [3, 6, 9, 12]:
// [3, 6, 9, 7]; compilerkit: [3, 6, 9, 10.5]. Explicit pads [1, 1] give the right answer.

func.func @avgpool_same_upper_include_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [3], auto_pad = "SAME_UPPER", count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @avgpool_same_upper_include_pad(
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<3.000000e+00> : tensor<4xf32>

// -----
// SAME_UPPER, kernel 2: total padding 1, at the end; the last window (x[3], pad) counts 2.
func.func @avgpool_same_upper_k2_include_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2], auto_pad = "SAME_UPPER", count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @avgpool_same_upper_k2_include_pad(
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<2.000000e+00> : tensor<4xf32>
