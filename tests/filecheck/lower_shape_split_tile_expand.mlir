// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Data movement, part 3: Split, Tile, ConstantOfShape (lowering/shape_ops.py) and Expand
// (lowering/elementwise.py). Split writes one output per piece, reading x at the piece's offset
// on the axis. Tile reads x at i mod d on every tiled axis. Expand is a broadcasting copy
// (numpy rules, as for Add). ConstantOfShape fills its output with the `value` element.

// Split-13 on axis 1 with sizes [2, 3] (a constant input): [2, 5] -> [2, 2] and [2, 3]; the
// second piece reads columns j + 2.
func.func @split_sizes(%x: tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>) attributes {input_names = ["x"], output_names = ["a", "b"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %a, %b = "onnx.Split"(%x, %s) {axis = 1 : i64, onnx_node_name = "split"} : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<2x2xf32>, tensor<2x3xf32>)
  func.return %a, %b : tensor<2x2xf32>, tensor<2x3xf32>
}
// CHECK-LABEL: func.func @split_sizes(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x5xf32>, [[A:%[0-9]+]]: memref<2x2xf32>, [[B:%[0-9]+]]: memref<2x3xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[A]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[JS:%[0-9]+]] = arith.addi [[J2]], [[C2]] : index
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[X]], [[I2]], [[JS]])
// CHECK-NEXT:      "krnl.store"([[V2]], [[B]], [[I2]], [[J2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// Split-13 into three equal pieces (split absent) on axis 0: [6] -> 3 x [2], at offsets 0, 2, 4.
func.func @split_equal(%x: tensor<6xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) attributes {input_names = ["x"], output_names = ["a", "b", "c"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %a, %b, %c = "onnx.Split"(%x, %none) {onnx_node_name = "split"} : (tensor<6xf32>, none) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  func.return %a, %b, %c : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
// CHECK-LABEL: func.func @split_equal(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<6xf32>, [[A:%[0-9]+]]: memref<2xf32>, [[B:%[0-9]+]]: memref<2xf32>, [[C:%[0-9]+]]: memref<2xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]])
// CHECK-NEXT:      "krnl.store"([[V]], [[A]], [[I]])
// CHECK:         ^bb0([[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[P2:%[0-9]+]] = arith.addi [[I2]], [[C2]] : index
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[X]], [[P2]])
// CHECK-NEXT:      "krnl.store"([[V2]], [[B]], [[I2]])
// CHECK:         ^bb0([[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[C4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[P3:%[0-9]+]] = arith.addi [[I3]], [[C4]] : index
// CHECK-NEXT:      [[V3:%[0-9]+]] = "krnl.load"([[X]], [[P3]])
// CHECK-NEXT:      "krnl.store"([[V3]], [[C]], [[I3]])

// -----
// Tile [2, 3] by repeats [2, 2] -> [4, 6]: y[i, j] = x[i mod 2, j mod 3].
func.func @tile_both_axes(%x: tensor<2x3xf32>) -> tensor<4x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %r = "onnx.Constant"() {value = dense<[2, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Tile"(%x, %r) {onnx_node_name = "tile"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
// CHECK-LABEL: func.func @tile_both_axes(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<4x6xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[RI:%[0-9]+]] = arith.remsi [[I]], [[C2]] : index
// CHECK-NEXT:      [[C3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[RJ:%[0-9]+]] = arith.remsi [[J]], [[C3]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[RI]], [[RJ]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 6 : i64]]

// -----
// Tile with repeats [3, 1] -> [6, 3]: an axis repeated once reads its index unchanged.
func.func @tile_one_axis(%x: tensor<2x3xf32>) -> tensor<6x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %r = "onnx.Constant"() {value = dense<[3, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Tile"(%x, %r) {onnx_node_name = "tile"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<6x3xf32>
  func.return %y : tensor<6x3xf32>
}
// CHECK-LABEL: func.func @tile_one_axis(
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[RI:%[0-9]+]] = arith.remsi [[I]], [[C2]] : index
// CHECK-NEXT:      "krnl.load"({{%[0-9]+}}, [[RI]], [[J]])
// CHECK:         bounds = {{\[\[}}0 : i64, 6 : i64], [0 : i64, 3 : i64]]

// -----
// Expand [3, 1] to shape [2, 1, 4] -> [2, 3, 4] (broadcast both ways): y[i, j, k] = x[j, 0].
func.func @expand_broadcast(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[2, 1, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %y = "onnx.Expand"(%x, %s) {onnx_node_name = "expand"} : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @expand_broadcast(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3x1xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[J]], [[Z]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]

// -----
// Expand to a shape of lower rank ([3]): the result keeps x's shape [2, 3], a plain copy.
func.func @expand_smaller_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Expand"(%x, %s) {onnx_node_name = "expand"} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @expand_smaller_shape(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])

// -----
// ConstantOfShape, shape [2, 3], value int32 7: a fill of 7 : i32; without `value`, f32 zeros.
func.func @constant_of_shape(%x: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<4xf32>) attributes {input_names = ["x"], output_names = ["y", "z"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %t = "onnx.Constant"() {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %c = "onnx.ConstantOfShape"(%s) {value = dense<7> : tensor<1xi32>, onnx_node_name = "cos"} : (tensor<2xi64>) -> tensor<2x3xi32>
  %y = "onnx.Add"(%x, %c) {onnx_node_name = "add"} : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  %z = "onnx.ConstantOfShape"(%t) {onnx_node_name = "zeros"} : (tensor<1xi64>) -> tensor<4xf32>
  func.return %y, %z : tensor<2x3xi32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @constant_of_shape(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xi32>, [[Y:%[0-9]+]]: memref<2x3xi32>, [[Z:%[0-9]+]]: memref<4xf32>)
// CHECK:         [[C:%[0-9]+]] = "krnl.alloc"() {onnx_node = "cos"} : () -> memref<2x3xi32>
// CHECK:         [[SEVEN:%[0-9]+]] = arith.constant 7 : i32
// CHECK-NEXT:    "krnl.store"([[SEVEN]], [[C]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         arith.addi
// CHECK:         [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[ZERO]], [[Z]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]
