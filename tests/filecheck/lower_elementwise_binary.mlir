// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Binary and variadic elementwise ops with numpy broadcasting (lowering/elementwise.py,
// builder.broadcast_index): one krnl.iterate over the output shape; an input of lower rank is
// aligned to the right (its leading output dimensions are dropped from its index) and a
// dimension of size 1 is read at index 0.

// Same shapes: both inputs read at the output's indices.
func.func @add_same_shape(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Add"(%a, %b) {onnx_node_name = "add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @add_same_shape(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[I]], [[J]])
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addf [[VA]], [[VB]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// A bias of shape [4] added to [2, 3, 4]: the bias is read at the last index only.
func.func @add_bias_rank1(%a: tensor<2x3x4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Add"(%a, %b) {onnx_node_name = "add"} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @add_bias_rank1(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3x4xf32>, [[B:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]], [[K]])
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[K]]) : (memref<4xf32>, index) -> f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addf [[VA]], [[VB]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]

// -----
// Both sides broadcast: [2, 1, 4] * [3, 1] -> [2, 3, 4]. A is read at (i, 0, k); B, aligned to
// the last two output dims, at (j, 0).
func.func @mul_two_sided(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Mul"(%a, %b) {onnx_node_name = "mul"} : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @mul_two_sided(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x1x4xf32>, [[B:%[0-9]+]]: memref<3x1xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[Z]], [[K]])
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[J]], [[Z2]])
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.mulf [[VA]], [[VB]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]

// -----
// A rank-0 divisor: loaded with no indices.
func.func @div_by_scalar(%a: tensor<2x2xf32>, %b: tensor<f32>) -> tensor<2x2xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Div"(%a, %b) {onnx_node_name = "div"} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @div_by_scalar(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x2xf32>, [[B:%[0-9]+]]: memref<f32>, [[Y:%[0-9]+]]: memref<2x2xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]]) : (memref<f32>) -> f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.divf [[VA]], [[VB]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// Integer Sub and Div: the integer arith ops (Div truncates toward zero, as onnxruntime's
// integer Div does).
func.func @sub_div_i32(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %d = "onnx.Sub"(%a, %b) {onnx_node_name = "sub"} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %y = "onnx.Div"(%d, %b) {onnx_node_name = "div"} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  func.return %y : tensor<3xi32>
}
// CHECK-LABEL: func.func @sub_div_i32(
// CHECK:         [[VA:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[VB:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.subi [[VA]], [[VB]] : i32
// CHECK-NEXT:    "krnl.store"([[D]], {{%[0-9]+}}, [[I:%[0-9]+]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]
// CHECK:         [[VD:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[VB2:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[Q:%[0-9]+]] = arith.divsi [[VD]], [[VB2]] : i32
// CHECK-NEXT:    "krnl.store"([[Q]], {{%[0-9]+}}, [[K:%[0-9]+]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// Sum of three inputs folds left: (a + b) + c.
func.func @sum3(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a", "b", "c"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Sum"(%a, %b, %c) {onnx_node_name = "sum"} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @sum3(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<3xf32>, [[B:%[0-9]+]]: memref<3xf32>, [[C:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK:         [[VA:%[0-9]+]] = "krnl.load"([[A]],
// CHECK-NEXT:    [[VB:%[0-9]+]] = "krnl.load"([[B]],
// CHECK-NEXT:    [[VC:%[0-9]+]] = "krnl.load"([[C]],
// CHECK-NEXT:    [[AB:%[0-9]+]] = arith.addf [[VA]], [[VB]] : f32
// CHECK-NEXT:    [[ABC:%[0-9]+]] = arith.addf [[AB]], [[VC]] : f32
// CHECK-NEXT:    "krnl.store"([[ABC]], [[Y]],

// -----
// Mean of two inputs with broadcasting ([2, 3] and [3]): the sum divided by 2.
func.func @mean2(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Mean"(%a, %b) {onnx_node_name = "mean"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @mean2(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[J]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[VA]], [[VB]] : f32
// CHECK-NEXT:      [[N:%[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.divf [[S]], [[N]] : f32
// CHECK-NEXT:      "krnl.store"([[M]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// Max of a [2] and a [1] (broadcast: index 0); Min on int32.
func.func @max_min(%a: tensor<2xf32>, %b: tensor<1xf32>, %c: tensor<2xi32>, %d: tensor<2xi32>) -> (tensor<2xf32>, tensor<2xi32>) attributes {input_names = ["a", "b", "c", "d"], output_names = ["y", "z"], onnx_opset = 13 : i64} {
  %y = "onnx.Max"(%a, %b) {onnx_node_name = "max"} : (tensor<2xf32>, tensor<1xf32>) -> tensor<2xf32>
  %z = "onnx.Min"(%c, %d) {onnx_node_name = "min"} : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  func.return %y, %z : tensor<2xf32>, tensor<2xi32>
}
// CHECK-LABEL: func.func @max_min(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2xf32>, [[B:%[0-9]+]]: memref<1xf32>, [[C:%[0-9]+]]: memref<2xi32>, [[D:%[0-9]+]]: memref<2xi32>, [[Y:%[0-9]+]]: memref<2xf32>, [[Z:%[0-9]+]]: memref<2xi32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]])
// CHECK-NEXT:      [[ZERO:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[ZERO]])
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.maximumf [[VA]], [[VB]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         ^bb0([[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[VC:%[0-9]+]] = "krnl.load"([[C]], [[K]])
// CHECK-NEXT:      [[VD:%[0-9]+]] = "krnl.load"([[D]], [[K]])
// CHECK-NEXT:      [[R2:%[0-9]+]] = arith.minsi [[VC]], [[VD]] : i32
// CHECK-NEXT:      "krnl.store"([[R2]], [[Z]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
