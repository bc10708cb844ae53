// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Regression (found by this file, fixed in issue #11): ConvTranspose with an `output_shape` attribute (auto_pad
// NOTSET) ignores the padding it implies. ONNX: total_padding = stride * (in - 1) +
// output_padding + (k - 1) * dilation + 1 - output_shape, and (auto_pad not SAME_UPPER)
// pads[start] = total - total / 2; onnxruntime agrees (x = [1, 2, 3], w = [1, 10, 100],
// output_shape [4]: onnxruntime [12, 123, 230, 300], compilerkit [1, 12, 123, 230]).
// conv.conv_geometry (lowering/conv.py) read only `pads`/`auto_pad`, so the begin pad was 0 here instead of 1.

// x [1, 1, 3], w [1, 1, 3], stride 1, output_shape [4]: total = 2 + 3 - 4 = 1, begin = 1:
// output position i + k - 1.
func.func @conv_transpose_output_shape_odd(%x: tensor<1x1x3xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ConvTranspose"(%x, %w, %none) {output_shape = [4], onnx_node_name = "up"} : (tensor<1x1x3xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @conv_transpose_output_shape_odd(
// CHECK:         "krnl.matmul"
// CHECK:         ^bb0({{%[0-9]+}}: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:           [[ROW:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[I]] : index
// CHECK:           [[T:%[0-9]+]] = arith.addi [[ROW]], [[K]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[O:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK:           [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      arith.cmpi slt, [[O]], [[L4]] : index

// -----
// output_shape [3]: total = 2, begin = 1 as well.
func.func @conv_transpose_output_shape_even(%x: tensor<1x1x3xf32>, %w: tensor<1x1x3xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ConvTranspose"(%x, %w, %none) {output_shape = [3], onnx_node_name = "up"} : (tensor<1x1x3xf32>, tensor<1x1x3xf32>, none) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @conv_transpose_output_shape_even(
// CHECK:         "krnl.matmul"
// CHECK:         ^bb0({{%[0-9]+}}: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:           [[ROW:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[I]] : index
// CHECK:           [[T:%[0-9]+]] = arith.addi [[ROW]], [[K]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      arith.addi [[T]], [[M1]] : index
