// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Reductions (lowering/reduction.py): the output starts at the reduction's identity (Sum and
// Mean 0, Prod 1, Max -inf, Min +inf; for integers the type's extremes), then one krnl.iterate
// over the whole input folds x into the output at the input's indices with the reduced axes
// replaced by 0 (keepdims = 1) or dropped (keepdims = 0). Mean divides by the number of
// reduced elements afterwards. Opset-13 axes attributes are written with the axes operand
// absent (NoValue), as the schema-typed dialect has it.

// ReduceSum-13, axes as a constant input [1], keepdims: [2, 3, 4] -> [2, 1, 4].
func.func @reduce_sum_axes_input(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %axes = "onnx.Constant"() {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.ReduceSum"(%x, %axes) {onnx_node_name = "rs"} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  func.return %y : tensor<2x1x4xf32>
}
// CHECK-LABEL: func.func @reduce_sum_axes_input(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[Y:%[0-9]+]]: memref<2x1x4xf32>)
// CHECK:         ^bb0([[F0:%[0-9]+]]: index, [[F1:%[0-9]+]]: index, [[F2:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      "krnl.store"([[Z]], [[Y]], [[F0]], [[F1]], [[F2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[I]], [[Z0]], [[K]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]], [[K]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[I]], [[Z0]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK-NOT:     arith.divf
// CHECK:         func.return

// -----
// ReduceMean-13, axes [0, 2] (attribute), keepdims 0: [2, 3, 4] -> [3], divided by 2 * 4 = 8.
func.func @reduce_mean_drop_dims(%x: tensor<2x3x4xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceMean"(%x, %none) {axes = [0, 2], keepdims = 0 : i64, onnx_node_name = "rm"} : (tensor<2x3x4xf32>, none) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @reduce_mean_drop_dims(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[J]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]], [[K]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[P:%[0-9]+]]: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = "krnl.load"([[Y]], [[P]])
// CHECK-NEXT:      [[N:%[0-9]+]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.divf [[T]], [[N]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[P]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// ReduceMax, axes [-1] (the last axis), keepdims: [2, 3] -> [2, 1], from -inf.
func.func @reduce_max_neg_axis(%x: tensor<2x3xf32>) -> tensor<2x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceMax"(%x, %none) {axes = [-1], onnx_node_name = "rmax"} : (tensor<2x3xf32>, none) -> tensor<2x1xf32>
  func.return %y : tensor<2x1xf32>
}
// CHECK-LABEL: func.func @reduce_max_neg_axis(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x1xf32>)
// CHECK:         [[INIT:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    "krnl.store"([[INIT]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[I]], [[Z0]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.maximumf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[M]], [[Y]], [[I]], [[Z0]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// ReduceMin over all axes (no axes), keepdims 0: [2, 2] -> a scalar, from +inf.
func.func @reduce_min_all(%x: tensor<2x2xf32>) -> tensor<f32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceMin"(%x, %none) {keepdims = 0 : i64, onnx_node_name = "rmin"} : (tensor<2x2xf32>, none) -> tensor<f32>
  func.return %y : tensor<f32>
}
// CHECK-LABEL: func.func @reduce_min_all(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<f32>)
// CHECK:         [[INIT:%[0-9]+]] = arith.constant 0x7f800000 : f32
// CHECK-NEXT:    "krnl.store"([[INIT]], [[Y]]) : (f32, memref<f32>) -> ()
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]]) : (memref<f32>) -> f32
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.minimumf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[M]], [[Y]]) : (f32, memref<f32>) -> ()
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// ReduceProd, axes [0], keepdims: from 1, multiplying.
func.func @reduce_prod(%x: tensor<3x2xf32>) -> tensor<1x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceProd"(%x, %none) {axes = [0], onnx_node_name = "rp"} : (tensor<3x2xf32>, none) -> tensor<1x2xf32>
  func.return %y : tensor<1x2xf32>
}
// CHECK-LABEL: func.func @reduce_prod(
// CHECK:         [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[ONE]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, [[Z0]], [[J]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, [[I]], [[J]])
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.mulf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[P]], {{%[0-9]+}}, [[Z0]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 2 : i64]]

// -----
// Integer identities: ReduceMax on int32 starts at -2^31, ReduceMin at 2^31 - 1.
func.func @reduce_max_min_i32(%x: tensor<4xi32>) -> (tensor<1xi32>, tensor<1xi32>) attributes {input_names = ["x"], output_names = ["hi", "lo"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %hi = "onnx.ReduceMax"(%x, %none) {onnx_node_name = "rmax"} : (tensor<4xi32>, none) -> tensor<1xi32>
  %lo = "onnx.ReduceMin"(%x, %none) {onnx_node_name = "rmin"} : (tensor<4xi32>, none) -> tensor<1xi32>
  func.return %hi, %lo : tensor<1xi32>, tensor<1xi32>
}
// CHECK-LABEL: func.func @reduce_max_min_i32(
// CHECK:         arith.constant -2147483648 : i32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:         arith.maxsi
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 4 : i64]]
// CHECK:         arith.constant 2147483647 : i32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:         arith.minsi
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// ReduceSum-13 with no axes and noop_with_empty_axes = 1: nothing is reduced; y[i, j] = x[i, j].
func.func @reduce_sum_noop(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceSum"(%x, %none) {noop_with_empty_axes = 1 : i64, onnx_node_name = "noop"} : (tensor<2x3xf32>, none) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @reduce_sum_noop(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:           [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[I]], [[J]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
