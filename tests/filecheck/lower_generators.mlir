// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Ops whose output follows from shapes and attributes (lowering/generators.py). A window's
// values are computed at compile time (Hann, periodic, 4 points: sin^2(pi n / 4)) into a
// constant, after a run-time check that the size input holds the compiled length. EyeLike is 1
// where column - row == k. Shape (start = 1) and Size of a static input are constants.

func.func @hann_window(%n: tensor<i64>) -> tensor<4xf32> attributes {input_names = ["n"], output_names = ["y"], onnx_opset = 17 : i64} {
  %y = "onnx.HannWindow"(%n) {onnx_node_name = "hann"} : (tensor<i64>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @hann_window(
// CHECK-SAME:    [[N:%[0-9]+]]: memref<i64>, [[Y:%[0-9]+]]: memref<4xf32>)
// CHECK:         [[V:%[0-9]+]] = "krnl.load"([[N]])
// CHECK-NEXT:    [[C4:%[0-9]+]] = arith.constant {{.*}} 4 : i64
// CHECK-NEXT:    [[OK:%[0-9]+]] = arith.cmpi eq, [[V]], [[C4]] : i64
// CHECK-NEXT:    "krnl.check"([[OK]]) {message = "node 'hann' (HannWindow): the size input differs from the compiled window length 4"
// CHECK-NEXT:    [[G:%[0-9]+]] = "krnl.global"() {sym_name = "hannwindow_{{[0-9]+}}", value = dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 5.000000e-01]> : tensor<4xf32>
// CHECK:           "krnl.load"([[G]]


// -----
func.func @eye_like(%x: tensor<2x3xf32>) -> tensor<2x3xi32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 22 : i64} {
  %y = "onnx.EyeLike"(%x) {dtype = 6 : i64, k = 1 : i64, onnx_node_name = "eye"} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  func.return %y : tensor<2x3xi32>
}
// CHECK-LABEL: func.func @eye_like(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xi32>)
// CHECK:         [[ONE:%[0-9]+]] = arith.constant {{.*}} 1 : i32
// CHECK-NEXT:    [[ZERO:%[0-9]+]] = arith.constant {{.*}} 0 : i32
// CHECK:         ^bb0([[R:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[NR:%[0-9]+]] = arith.muli [[R]], [[M]] : index
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.addi [[C]], [[NR]] : index
// CHECK-NEXT:      [[DI:%[0-9]+]] = arith.index_cast [[D]] : index to i64
// CHECK-NEXT:      [[K:%[0-9]+]] = arith.constant 1 : i64
// CHECK-NEXT:      [[ON:%[0-9]+]] = arith.cmpi eq, [[DI]], [[K]] : i64
// CHECK-NEXT:      [[V:%[0-9]+]] = arith.select [[ON]], [[ONE]], [[ZERO]] : i32
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[R]], [[C]])


// -----
func.func @shape_size(%x: tensor<2x3x4xf32>) -> (tensor<2xi64>, tensor<i64>) attributes {input_names = ["x"], output_names = ["s", "n"], onnx_opset = 15 : i64} {
  %s = "onnx.Shape"(%x) {start = 1 : i64, onnx_node_name = "shape"} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  %n = "onnx.Size"(%x) {onnx_node_name = "size"} : (tensor<2x3x4xf32>) -> tensor<i64>
  func.return %s, %n : tensor<2xi64>, tensor<i64>
}
// CHECK-LABEL: func.func @shape_size(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[S:%[0-9]+]]: memref<2xi64>, [[N:%[0-9]+]]: memref<i64>)
// CHECK:         "krnl.global"() {sym_name = "shape_{{[0-9]+}}", value = dense<[3, 4]> : tensor<2xi64>
// CHECK:         "krnl.global"() {sym_name = "size_{{[0-9]+}}", value = dense<24> : tensor<i64>
