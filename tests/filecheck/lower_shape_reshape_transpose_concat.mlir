// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Data movement, part 1 (lowering/shape_ops.py). Reshape, Flatten, Squeeze and Unsqueeze are a
// krnl.reshape view of the same buffer, no copy (a view that is the graph's output is then
// copied into the output argument). Transpose reads x at the permuted indices:
// out[i_0, ..., i_{r-1}] = x[j] with j[perm[k]] = i_k. Concat copies each input into the
// output with its index on the axis shifted by the sizes of the inputs before it.

// Reshape [2, 6] -> [3, 4] (shape a constant input), then Relu: the Relu reads the view.
func.func @reshape_view(%x: tensor<2x6xf32>) -> tensor<3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 14 : i64} {
  %s = "onnx.Constant"() {value = dense<[3, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = "onnx.Reshape"(%x, %s) {onnx_node_name = "reshape"} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  %y = "onnx.Relu"(%r) {onnx_node_name = "relu"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
// CHECK-LABEL: func.func @reshape_view(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x6xf32>, [[Y:%[0-9]+]]: memref<3x4xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         [[V:%[0-9]+]] = "krnl.reshape"([[X]]) {onnx_node = "reshape"} : (memref<2x6xf32>) -> memref<3x4xf32>
// CHECK-NOT:     "krnl.iterate"
// CHECK:         "krnl.define_loops"() {onnx_node = "relu"}
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.load"([[V]], [[I]], [[J]])
// CHECK:         bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64]]

// -----
// Flatten at axis 2: [2, 3, 4, 5] -> [6, 20]; the graph's output is the view itself, so it is
// copied into y.
func.func @flatten_output(%x: tensor<2x3x4x5xf32>) -> tensor<6x20xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Flatten"(%x) {axis = 2 : i64, onnx_node_name = "flat"} : (tensor<2x3x4x5xf32>) -> tensor<6x20xf32>
  func.return %y : tensor<6x20xf32>
}
// CHECK-LABEL: func.func @flatten_output(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4x5xf32>, [[Y:%[0-9]+]]: memref<6x20xf32>)
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.reshape"([[X]]) {onnx_node = "flat"} : (memref<2x3x4x5xf32>) -> memref<6x20xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[E:%[0-9]+]] = "krnl.load"([[V]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[E]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 6 : i64], [0 : i64, 20 : i64]]

// -----
// Unsqueeze-13 (axes [0, 3], a constant input) then Squeeze-13 (axes [0]): [2, 3] -> [1, 2, 3, 1]
// -> [2, 3, 1]; each is a view of the previous one.
func.func @unsqueeze_squeeze(%x: tensor<2x3xf32>) -> tensor<2x3x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %a = "onnx.Constant"() {value = dense<[0, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %b = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %u = "onnx.Unsqueeze"(%x, %a) {onnx_node_name = "unsq"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<1x2x3x1xf32>
  %y = "onnx.Squeeze"(%u, %b) {onnx_node_name = "sq"} : (tensor<1x2x3x1xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  func.return %y : tensor<2x3x1xf32>
}
// CHECK-LABEL: func.func @unsqueeze_squeeze(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3x1xf32>)
// CHECK:         [[U:%[0-9]+]] = "krnl.reshape"([[X]]) {onnx_node = "unsq"} : (memref<2x3xf32>) -> memref<1x2x3x1xf32>
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.reshape"([[U]]) {onnx_node = "sq"} : (memref<1x2x3x1xf32>) -> memref<2x3x1xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[S]], [[I]], [[J]], [[K]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 1 : i64]]

// -----
// Transpose [2, 3, 4] with perm [1, 2, 0] -> [3, 4, 2]: y[i, j, k] = x[k, i, j].
func.func @transpose_perm(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Transpose"(%x) {perm = [1, 2, 0], onnx_node_name = "tp"} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  func.return %y : tensor<3x4x2xf32>
}
// CHECK-LABEL: func.func @transpose_perm(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[Y:%[0-9]+]]: memref<3x4x2xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[K]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64], [0 : i64, 2 : i64]]

// -----
// Transpose without perm reverses the axes: [2, 3] -> [3, 2], y[i, j] = x[j, i].
func.func @transpose_default(%x: tensor<2x3xf32>) -> tensor<3x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Transpose"(%x) {onnx_node_name = "tp"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}
// CHECK-LABEL: func.func @transpose_default(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<3x2xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[J]], [[I]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 2 : i64]]

// -----
// Concat on axis 1: a [2, 1], b [2, 3], c [2, 2] -> [2, 6]; a goes to column 0, b to columns
// 1..3 (j + 1), c to columns 4..5 (j + 4).
func.func @concat_axis1(%a: tensor<2x1xf32>, %b: tensor<2x3xf32>, %c: tensor<2x2xf32>) -> tensor<2x6xf32> attributes {input_names = ["a", "b", "c"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Concat"(%a, %b, %c) {axis = 1 : i64, onnx_node_name = "cat"} : (tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  func.return %y : tensor<2x6xf32>
}
// CHECK-LABEL: func.func @concat_axis1(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x1xf32>, [[B:%[0-9]+]]: memref<2x3xf32>, [[C:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<2x6xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[VA]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[I2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[JB:%[0-9]+]] = arith.addi [[J2]], [[ONE]] : index
// CHECK-NEXT:      [[VB:%[0-9]+]] = "krnl.load"([[B]], [[I2]], [[J2]])
// CHECK-NEXT:      "krnl.store"([[VB]], [[Y]], [[I2]], [[JB]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0([[I3:%[0-9]+]]: index, [[J3:%[0-9]+]]: index):
// CHECK-NEXT:      [[FOUR:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[JC:%[0-9]+]] = arith.addi [[J3]], [[FOUR]] : index
// CHECK-NEXT:      [[VC:%[0-9]+]] = "krnl.load"([[C]], [[I3]], [[J3]])
// CHECK-NEXT:      "krnl.store"([[VC]], [[Y]], [[I3]], [[JC]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// Concat on axis -1 of rank-1 inputs (axis 0): [2] and [3] -> [5], the second at i + 2.
func.func @concat_negative_axis(%a: tensor<2xi64>, %b: tensor<3xi64>) -> tensor<5xi64> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Concat"(%a, %b) {axis = -1 : i64, onnx_node_name = "cat"} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  func.return %y : tensor<5xi64>
}
// CHECK-LABEL: func.func @concat_negative_axis(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2xi64>, [[B:%[0-9]+]]: memref<3xi64>, [[Y:%[0-9]+]]: memref<5xi64>)
// CHECK:         ^bb0([[I0:%[0-9]+]]: index):
// CHECK-NEXT:      [[VA:%[0-9]+]] = "krnl.load"([[A]], [[I0]])
// CHECK-NEXT:      "krnl.store"([[VA]], [[Y]], [[I0]])
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[TWO:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[IB:%[0-9]+]] = arith.addi [[I]], [[TWO]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[B]], [[I]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[IB]])
