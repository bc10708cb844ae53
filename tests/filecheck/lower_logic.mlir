// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Comparison, logic, Where, IsNaN/IsInf, Sign, Mod and Bitwise ops (lowering/logic.py): one
// elementwise nest each, with the predicates and selects that make them agree with onnxruntime
// on NaN, -0, bool and negative operands.

// Less on floats is an ordered compare: NaN < x is false.
func.func @less_f32(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xi1> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Less"(%a, %b) {onnx_node_name = "lt"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}
// CHECK-LABEL: func.func @less_f32(
// CHECK:         [[VA:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[VB:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.cmpf olt, [[VA]], [[VB]] : f32
// CHECK-NEXT:    "krnl.store"([[R]]

// -----
// Equal on bool: an integer compare of the 0/1 bytes.
func.func @equal_bool(%a: tensor<3xi1>, %b: tensor<3xi1>) -> tensor<3xi1> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Equal"(%a, %b) {onnx_node_name = "eq"} : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}
// CHECK-LABEL: func.func @equal_bool(
// CHECK:         arith.cmpi eq, {{%[0-9]+}}, {{%[0-9]+}} : i1

// -----
// Mod (fmod = 0) on integers: the divisor -1 becomes 1 (x % -1 is 0, INT_MIN / -1 never
// runs), then a non-zero remainder whose sign differs from the divisor's moves by it.
func.func @mod_i32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Mod"(%a, %b) {onnx_node_name = "m"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  func.return %y : tensor<4xi32>
}
// CHECK-LABEL: func.func @mod_i32(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[Y:%[0-9]+]] = "krnl.load"
// CHECK:         [[ONE:%[0-9]+]] = arith.constant 1 : i32
// CHECK:         [[M1:%[0-9]+]] = arith.constant -1 : i32
// CHECK-NEXT:    [[ISM1:%[0-9]+]] = arith.cmpi eq, [[Y]], [[M1]] : i32
// CHECK-NEXT:    [[Y1:%[0-9]+]] = arith.select [[ISM1]], [[ONE]], [[Y]] : i32
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.remsi [[X]], [[Y1]] : i32
// CHECK:         [[FIX:%[0-9]+]] = arith.andi
// CHECK-NEXT:    [[RY:%[0-9]+]] = arith.addi [[R]], [[Y]] : i32
// CHECK-NEXT:    arith.select [[FIX]], [[RY]], [[R]] : i32

// -----
// Mod with fmod = 1: C's remainder, no sign fix.
func.func @mod_fmod(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Mod"(%a, %b) {fmod = 1 : i64, onnx_node_name = "m"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %y : tensor<4xi64>
}
// CHECK-LABEL: func.func @mod_fmod(
// CHECK:         [[R:%[0-9]+]] = arith.remsi
// CHECK-NEXT:    "krnl.store"([[R]]

// -----
// Sign keeps NaN (an unordered self-compare picks x) and gives +0 for -0.
func.func @sign_f32(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Sign"(%a) {onnx_node_name = "s"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @sign_f32(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK:         [[NAN:%[0-9]+]] = arith.cmpf uno, [[X]], [[X]] : f32
// CHECK-NEXT:    arith.select [[NAN]], [[X]], {{%[0-9]+}} : f32
// CHECK:         arith.cmpf ogt, [[X]]
// CHECK:         arith.cmpf olt, [[X]]

// -----
// IsInf with detect_negative = 0: only the compare with +inf.
func.func @isinf_pos(%a: tensor<3xf32>) -> tensor<3xi1> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 20 : i64} {
  %y = "onnx.IsInf"(%a) {detect_negative = 0 : i64, onnx_node_name = "i"} : (tensor<3xf32>) -> tensor<3xi1>
  func.return %y : tensor<3xi1>
}
// CHECK-LABEL: func.func @isinf_pos(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[INF:%[0-9]+]] = arith.constant 0x7f800000 : f32
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.cmpf oeq, [[X]], [[INF]] : f32
// CHECK-NEXT:    "krnl.store"([[R]]

// -----
// Where broadcasts all three inputs: the condition [2, 1] is read at (i, 0).
func.func @where_bcast(%c: tensor<2x1xi1>, %a: tensor<3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["c", "a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Where"(%c, %a, %b) {onnx_node_name = "w"} : (tensor<2x1xi1>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @where_bcast(
// CHECK-SAME:    [[C:%[0-9]+]]: memref<2x1xi1>, [[A:%[0-9]+]]: memref<3xf32>, [[B:%[0-9]+]]: memref<2x3xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[VC:%[0-9]+]] = "krnl.load"([[C]], [[I]], [[Z]])
// CHECK-NEXT:    [[VA:%[0-9]+]] = "krnl.load"([[A]], [[J]])
// CHECK-NEXT:    [[VB:%[0-9]+]] = "krnl.load"([[B]], [[I]], [[J]])
// CHECK-NEXT:    arith.select [[VC]], [[VA]], [[VB]] : f32

// -----
// BitwiseXor: arith.xori.
func.func @bitwise_xor(%a: tensor<3xi8>, %b: tensor<3xi8>) -> tensor<3xi8> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 18 : i64} {
  %y = "onnx.BitwiseXor"(%a, %b) {onnx_node_name = "x"} : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi8>
  func.return %y : tensor<3xi8>
}
// CHECK-LABEL: func.func @bitwise_xor(
// CHECK:         [[VA:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[VB:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    arith.xori [[VA]], [[VB]] : i8

// -----
// BitShift RIGHT (signed, opset 28): an amount outside [0, 32) becomes 31, the sign extension
// alone, so arith.shrsi never sees an amount LLVM leaves undefined.
func.func @shift_right(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 28 : i64} {
  %y = "onnx.BitShift"(%a, %b) {onnx_node_name = "r", direction = "RIGHT"} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  func.return %y : tensor<3xi32>
}
// CHECK-LABEL: func.func @shift_right(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.load"
// CHECK:         [[GE:%[0-9]+]] = arith.cmpi sge, [[S]]
// CHECK:         [[LT:%[0-9]+]] = arith.cmpi slt, [[S]]
// CHECK-NEXT:    [[OK:%[0-9]+]] = arith.andi [[GE]], [[LT]] : i1
// CHECK-NEXT:    [[W1:%[0-9]+]] = arith.constant 31 : i32
// CHECK-NEXT:    [[AMT:%[0-9]+]] = arith.select [[OK]], [[S]], [[W1]] : i32
// CHECK-NEXT:    arith.shrsi [[X]], [[AMT]] : i32

// -----
// BitShift LEFT: an amount outside [0, 8) gives 0.
func.func @shift_left(%a: tensor<3xi8>, %b: tensor<3xi8>) -> tensor<3xi8> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 28 : i64} {
  %y = "onnx.BitShift"(%a, %b) {onnx_node_name = "l", direction = "LEFT"} : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi8>
  func.return %y : tensor<3xi8>
}
// CHECK-LABEL: func.func @shift_left(
// CHECK:         [[OK:%[0-9]+]] = arith.andi
// CHECK:         [[SH:%[0-9]+]] = arith.shli
// CHECK:         arith.select [[OK]], [[SH]], {{%[0-9]+}} : i8

// -----
// Mod on f32 (fmod = 1), exact: the mantissas as integers (bitcast), remainders in i64, the
// result scaled back in f64 and given x's sign.
func.func @fmod_f32(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Mod"(%a, %b) {onnx_node_name = "m", fmod = 1 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @fmod_f32(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK:         arith.bitcast [[X]] : f32 to i32
// CHECK:         arith.remsi {{%[0-9]+}}, {{%[0-9]+}} : i64
// CHECK:         arith.bitcast {{%[0-9]+}} : i64 to f64
// CHECK:         math.copysign {{%[0-9]+}}, [[X]] : f32
// CHECK-NOT:     arith.cmpf one
