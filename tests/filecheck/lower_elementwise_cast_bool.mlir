// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Regression (found by this file, fixed in issue #11): Cast to and from bool used signed
// conversions. ONNX
// Cast: a bool is 0 or 1 (true -> 1.0, 1); a number is true when it is nonzero (0.5 -> true,
// 2 -> true, NaN -> true). Today the lowering emits sitofp / extsi from i1 (true -> -1.0, -1)
// and fptosi / trunci to i1 (0.5 -> false, 2 -> false); onnxruntime gives the ONNX answers.
// Now: a select from i1, and cmpf une / cmpi ne against 0 to make one.

// bool -> float (to = 1): true must become 1.0, an unsigned conversion (or a select).
func.func @cast_bool_to_f32(%x: tensor<3xi1>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Cast"(%x) {to = 1 : i64, onnx_node_name = "c"} : (tensor<3xi1>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @cast_bool_to_f32(
// CHECK-NOT:     arith.sitofp
// CHECK:         {{arith.uitofp|arith.select}}
// CHECK:         func.return

// -----
// float -> bool (to = 9): x != 0 (unordered, so NaN is true).
func.func @cast_f32_to_bool(%x: tensor<3xf32>) -> tensor<3xi1> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Cast"(%x) {to = 9 : i64, onnx_node_name = "c"} : (tensor<3xf32>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}
// CHECK-LABEL: func.func @cast_f32_to_bool(
// CHECK-NOT:     arith.fptosi
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:         arith.cmpf une, {{%[0-9]+}}, [[Z]] : f32
// CHECK:         func.return

// -----
// int32 -> bool (to = 9): x != 0.
func.func @cast_i32_to_bool(%x: tensor<3xi32>) -> tensor<3xi1> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Cast"(%x) {to = 9 : i64, onnx_node_name = "c"} : (tensor<3xi32>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}
// CHECK-LABEL: func.func @cast_i32_to_bool(
// CHECK-NOT:     arith.trunci
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0 : i32
// CHECK:         arith.cmpi ne, {{%[0-9]+}}, [[Z]] : i32
// CHECK:         func.return

// -----
// bool -> int32 (to = 6): true must become 1, a zero extension.
func.func @cast_bool_to_i32(%x: tensor<3xi1>) -> tensor<3xi32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Cast"(%x) {to = 6 : i64, onnx_node_name = "c"} : (tensor<3xi1>) -> tensor<3xi32>
  func.return %y : tensor<3xi32>
}
// CHECK-LABEL: func.func @cast_bool_to_i32(
// CHECK-NOT:     arith.extsi
// CHECK:         {{arith.extui|arith.select}}
// CHECK:         func.return
