// RUN: python -m compilerkit.opt --split-input-file -p decompose %s | filecheck %s
// RUN: not python -m compilerkit.opt --split-input-file -p decompose,lower-to-krnl %s 2>&1 | filecheck %s --check-prefix=LOWER
// Regression (found writing these tests, fixed in issue #11): decompose rewrote a
// BatchNormalization with training_mode = 1 as if it were inference, with the running mean and
// variance. ONNX's training mode normalises with the batch's own statistics, so the numbers
// come out silently wrong: for x = [[1], [2]], [[3], [5]] (N = 2, C = 2) below, onnxruntime
// gives y = [-0.2071, -5.9923, 1.2071, 3.9923] (channel 0: batch mean 2, variance 1,
// (1 - 2) / sqrt(1 + 1) + 0.5); compilerkit.compile gives [0.5, -1, 1.5, 5] (running stats).
// Lowering (norm.lower_batchnorm) ignored training_mode too. Now decompose leaves such a node
// alone and lowering refuses it, naming the node (inference only, as for Dropout).

func.func @training_mode_is_not_inference(%x: tensor<2x2x1x1xf32>) -> tensor<2x2x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 15 : i64} {
  %g = "onnx.Constant"() {value = dense<[1.0, 6.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = "onnx.Constant"() {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "onnx.Constant"() {value = dense<[3.0, 8.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y, %rm, %rv = "onnx.BatchNormalization"(%x, %g, %b, %m, %v) {epsilon = 1.0 : f32, training_mode = 1 : i64, onnx_node_name = "bn"} : (tensor<2x2x1x1xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2x1x1xf32>, tensor<2xf32>, tensor<2xf32>)
  func.return %y : tensor<2x2x1x1xf32>
}
// CHECK-LABEL: func.func @training_mode_is_not_inference
// CHECK-NOT:     "onnx.Mul"
// CHECK:         "onnx.BatchNormalization"(%x, %g, %b, %m, %v) {{.*}}training_mode = 1 : i64
// LOWER: error: node 'bn': BatchNormalization in training mode (batch statistics) is not supported (inference only)
