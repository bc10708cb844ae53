// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Scans along an axis (lowering/scan.py). CumProd keeps running products in an accumulator
// over the other dims (starting at 1); reverse walks the axis from its end (3 - j), exclusive
// stores the product before multiplying in x. ReverseSequence checks every length at run time
// (krnl.check, [0, T]) and reads x[len - 1 - t] for t < len, x[t] after, clamped.

func.func @cumprod_reverse_exclusive(%x: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 26 : i64} {
  %a = "onnx.Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %y = "onnx.CumProd"(%x, %a) {exclusive = 1 : i64, reverse = 1 : i64, onnx_node_name = "cp"} : (tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @cumprod_reverse_exclusive(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK:         [[ACC:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<2xf32>
// CHECK:           arith.constant 1.000000e+00 : f32
// CHECK:         ^bb0([[R:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[NJ:%[0-9]+]] = arith.muli [[J]], [[M]] : index
// CHECK-NEXT:      [[C3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.addi [[NJ]], [[C3]] : index
// CHECK-NEXT:      [[BEFORE:%[0-9]+]] = "krnl.load"([[ACC]], [[R]])
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"([[X]], [[R]], [[P]])
// CHECK-NEXT:      [[AFTER:%[0-9]+]] = arith.mulf [[BEFORE]], [[XV]] : f32
// CHECK-NEXT:      "krnl.store"([[AFTER]], [[ACC]], [[R]])
// CHECK-NEXT:      "krnl.store"([[BEFORE]], [[Y]], [[R]], [[P]])


// -----
func.func @reverse_sequence(%x: tensor<4x2xf32>, %l: tensor<2xi64>) -> tensor<4x2xf32> attributes {input_names = ["x", "l"], output_names = ["y"], onnx_opset = 10 : i64} {
  %y = "onnx.ReverseSequence"(%x, %l) {batch_axis = 1 : i64, time_axis = 0 : i64, onnx_node_name = "rev"} : (tensor<4x2xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}
// CHECK-LABEL: func.func @reverse_sequence(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4x2xf32>, [[L:%[0-9]+]]: memref<2xi64>, [[Y:%[0-9]+]]: memref<4x2xf32>)
// CHECK:           [[LV:%[0-9]+]] = "krnl.load"([[L]], {{%[0-9]+}})
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'rev' (ReverseSequence): a sequence length is out of range; valid lengths are [0, 4]"
// CHECK:         ^bb0([[T:%[0-9]+]]: index, [[B:%[0-9]+]]: index):
// CHECK-NEXT:      [[N:%[0-9]+]] = "krnl.load"([[L]], [[B]])
// CHECK:           [[TI:%[0-9]+]] = arith.index_cast [[T]] : index to i64
// CHECK:           [[IN:%[0-9]+]] = arith.cmpi slt, [[TI]], {{%[0-9]+}} : i64
// CHECK-NEXT:      [[SRC:%[0-9]+]] = arith.select [[IN]], {{%[0-9]+}}, [[TI]] : i64
// CHECK:           [[S:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[S]], [[B]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[T]], [[B]])
