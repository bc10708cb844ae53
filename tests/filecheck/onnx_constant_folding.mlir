// RUN: python -m compilerkit.opt --split-input-file -p constant-folding %s | filecheck %s
// constant-folding: an op whose operands are all constants becomes an onnx.Constant holding
// the value ONNX's reference evaluator computes; Shape and Size of a statically shaped value
// fold although the value is not constant. Expected values below are worked out by hand.

builtin.module {
  func.func @fold_add_broadcast(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %b = "onnx.Constant"() {value = dense<[10.0, 20.0, 30.0]> : tensor<3xf32>} : () -> tensor<3xf32>
    %c = "onnx.Add"(%a, %b) {onnx_node_name = "add"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %y = "onnx.Mul"(%x, %c) {onnx_node_name = "mul"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %y : tensor<2x3xf32>
  }
}
// [[1,2,3],[4,5,6]] + [10,20,30] broadcast over rows; the Mul reads the graph input: kept.
// CHECK-LABEL: func.func @fold_add_broadcast
// CHECK-NOT:     "onnx.Add"
// CHECK:         %[[SUM:.*]] = "onnx.Constant"() {value = dense<{{\[\[}}1.100000e+01, 2.200000e+01, 3.300000e+01], [1.400000e+01, 2.500000e+01, 3.600000e+01]]> : tensor<2x3xf32>}
// CHECK-NEXT:    %[[Y:.*]] = "onnx.Mul"(%x, %[[SUM]])
// CHECK-NEXT:    func.return %[[Y]]

// -----
builtin.module {
  func.func @fold_chain_transpose_sqrt() -> tensor<3x2xf32> attributes {input_names = [], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[[1.0, 4.0, 9.0], [16.0, 25.0, 36.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %t = "onnx.Transpose"(%a) {perm = [1 : i64, 0 : i64], onnx_node_name = "t"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %y = "onnx.Sqrt"(%t) {onnx_node_name = "sqrt"} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    func.return %y : tensor<3x2xf32>
  }
}
// A chain folds to its end: sqrt(transpose(a)) = [[1,4],[2,5],[3,6]].
// CHECK-LABEL: func.func @fold_chain_transpose_sqrt
// CHECK-NOT:     "onnx.Transpose"
// CHECK-NOT:     "onnx.Sqrt"
// CHECK:         %[[R:.*]] = "onnx.Constant"() {value = dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>}
// CHECK-NEXT:    func.return %[[R]] : tensor<3x2xf32>

// -----
builtin.module {
  func.func @fold_shape_of_input(%x: tensor<2x3x4xf32>, %v: tensor<24xf32>) -> tensor<*xf32> attributes {input_names = ["x", "v"], output_names = ["y"], onnx_opset = 13 : i64} {
    %s = "onnx.Shape"(%x) {onnx_node_name = "shape"} : (tensor<2x3x4xf32>) -> tensor<3xi64>
    %y = "onnx.Reshape"(%v, %s) {onnx_node_name = "reshape"} : (tensor<24xf32>, tensor<3xi64>) -> tensor<*xf32>
    func.return %y : tensor<*xf32>
  }
}
// Shape of a static (non-constant) input folds to its dims; shape inference then types the
// Reshape (and the function's result) 2x3x4. The Reshape of the input itself stays.
// CHECK-LABEL: func.func @fold_shape_of_input
// CHECK-SAME:    -> tensor<2x3x4xf32>
// CHECK-NOT:     "onnx.Shape"
// CHECK:         %[[S:.*]] = "onnx.Constant"() {value = dense<[2, 3, 4]> : tensor<3xi64>}
// CHECK-NEXT:    "onnx.Reshape"(%v, %[[S]]) {{.*}} : (tensor<24xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>

// -----
builtin.module {
  func.func @fold_size_then_add(%x: tensor<2x3x4xf32>) -> tensor<i64> attributes {input_names = ["x"], output_names = ["n"], onnx_opset = 13 : i64} {
    %n = "onnx.Size"(%x) {onnx_node_name = "size"} : (tensor<2x3x4xf32>) -> tensor<i64>
    %one = "onnx.Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %m = "onnx.Add"(%n, %one) {onnx_node_name = "inc"} : (tensor<i64>, tensor<i64>) -> tensor<i64>
    func.return %m : tensor<i64>
  }
}
// Size(2x3x4) = 24 folds, which makes the Add all-constant on the next sweep: 24 + 1 = 25.
// CHECK-LABEL: func.func @fold_size_then_add
// CHECK-NOT:     "onnx.Size"
// CHECK-NOT:     "onnx.Add"
// CHECK:         %[[M:.*]] = "onnx.Constant"() {value = dense<25> : tensor<i64>}
// CHECK-NEXT:    func.return %[[M]] : tensor<i64>

// -----
builtin.module {
  func.func @fold_cast_truncates() -> tensor<4xi32> attributes {input_names = [], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[1.75, -1.75, 2.5, -0.5]> : tensor<4xf32>} : () -> tensor<4xf32>
    %y = "onnx.Cast"(%a) {to = 6 : i64, onnx_node_name = "cast"} : (tensor<4xf32>) -> tensor<4xi32>
    func.return %y : tensor<4xi32>
  }
}
// Cast float -> int32 (to = 6) truncates toward zero, as the ONNX reference does.
// CHECK-LABEL: func.func @fold_cast_truncates
// CHECK:         "onnx.Constant"() {value = dense<[1, -1, 2, 0]> : tensor<4xi32>}
// CHECK-NOT:     "onnx.Cast"

// -----
builtin.module {
  func.func @fold_constant_of_shape() -> tensor<2x3xf32> attributes {input_names = [], output_names = ["y"], onnx_opset = 13 : i64} {
    %s = "onnx.Constant"() {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
    %y = "onnx.ConstantOfShape"(%s) {value = dense<1.5> : tensor<1xf32>, onnx_node_name = "fill"} : (tensor<2xi64>) -> tensor<2x3xf32>
    func.return %y : tensor<2x3xf32>
  }
}
// ConstantOfShape becomes a splat of its fill value.
// CHECK-LABEL: func.func @fold_constant_of_shape
// CHECK:         "onnx.Constant"() {value = dense<1.500000e+00> : tensor<2x3xf32>}
// CHECK-NOT:     "onnx.ConstantOfShape"

// -----
builtin.module {
  func.func @keep_non_constant(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
    %r = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Add"(%r, %a) {onnx_node_name = "add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// Nothing here is all-constant: the module comes back unchanged.
// CHECK-LABEL: func.func @keep_non_constant
// CHECK-NEXT:    %a = "onnx.Constant"() {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>}
// CHECK-NEXT:    %r = "onnx.Relu"(%x)
// CHECK-NEXT:    %y = "onnx.Add"(%r, %a)
// CHECK-NEXT:    func.return %y

// -----
builtin.module {
  func.func @unused_op_is_not_folded(%x: tensor<2xf32>) -> tensor<2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %unused = "onnx.Neg"(%a) {onnx_node_name = "neg"} : (tensor<2xf32>) -> tensor<2xf32>
    func.return %x : tensor<2xf32>
  }
}
// Folding leaves ops whose results nobody reads to dead-code (it does not compute them).
// CHECK-LABEL: func.func @unused_op_is_not_folded
// CHECK:         %unused = "onnx.Neg"(%a)
// CHECK-NEXT:    func.return %x

// -----
builtin.module {
  func.func @int_div_truncates(%x: tensor<4xi32>) -> tensor<4xi32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[7, -7, 7, -7]> : tensor<4xi32>} : () -> tensor<4xi32>
    %b = "onnx.Constant"() {value = dense<[2, 2, -2, -2]> : tensor<4xi32>} : () -> tensor<4xi32>
    %q = "onnx.Div"(%a, %b) {onnx_node_name = "div"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %r = "onnx.Mod"(%a, %b) {onnx_node_name = "mod"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %s = "onnx.Add"(%q, %r) {onnx_node_name = "sum"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %y = "onnx.Mul"(%x, %s) {onnx_node_name = "mul"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    func.return %y : tensor<4xi32>
  }
}
// Integer Div truncates toward zero (as onnxruntime does): 7/2 = 3, -7/2 = -3, 7/-2 = -3,
// -7/-2 = 3, never numpy's floor (-4). Mod with fmod = 0 takes the divisor's sign:
// [1, 1, -1, -1]. Their sum [4, -2, -4, 2] folds too; the Mul reads x and stays.
// CHECK-LABEL: func.func @int_div_truncates
// CHECK:         %q = "onnx.Constant"() {value = dense<[3, -3, -3, 3]> : tensor<4xi32>}
// CHECK:         %r = "onnx.Constant"() {value = dense<[1, 1, -1, -1]> : tensor<4xi32>}
// CHECK:         %[[S:.*]] = "onnx.Constant"() {value = dense<[4, -2, -4, 2]> : tensor<4xi32>}
// CHECK-NEXT:    %y = "onnx.Mul"(%x, %[[S]])
