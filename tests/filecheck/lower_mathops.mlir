// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Elementwise math and activations (lowering/mathops.py): Round, PRelu, Gelu (both modes),
// Shrink. One nest each; the scalar code below is what makes them agree with onnxruntime.

// Round, half to even: floor(x + 0.5), minus one at an exact tie whose floor is odd; a zero
// result takes x's sign (x * 0); |x| >= 2^23, inf and NaN (unordered uge) are returned as is.
func.func @round_f32(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Round"(%a) {onnx_node_name = "r"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @round_f32(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK:         [[R:%[0-9]+]] = math.floor
// CHECK:         [[D:%[0-9]+]] = arith.subf [[R]], [[X]] : f32
// CHECK-NEXT:    [[TIE:%[0-9]+]] = arith.cmpf oeq, [[D]]
// CHECK:         [[ODD:%[0-9]+]] = arith.cmpf one
// CHECK-NEXT:    [[BOTH:%[0-9]+]] = arith.andi [[TIE]], [[ODD]] : i1
// CHECK:         arith.mulf [[X]], {{%[0-9]+}} : f32
// CHECK:         [[BIG:%[0-9]+]] = arith.constant 0x4B000000 : f32
// CHECK-NEXT:    [[ISBIG:%[0-9]+]] = arith.cmpf uge, {{%[0-9]+}}, [[BIG]] : f32
// CHECK-NEXT:    arith.select [[ISBIG]], [[X]], {{%[0-9]+}} : f32

// -----
// PRelu: the slope [3] broadcast to [2, 3], read at the last index only.
func.func @prelu(%a: tensor<2x3xf32>, %s: tensor<3xf32>) -> tensor<2x3xf32> attributes {input_names = ["a", "s"], output_names = ["y"], onnx_opset = 16 : i64} {
  %y = "onnx.PRelu"(%a, %s) {onnx_node_name = "p"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @prelu(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[S:%[0-9]+]]: memref<3xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:    [[X:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:    [[SL:%[0-9]+]] = "krnl.load"([[S]], [[J]])
// CHECK:         [[NEG:%[0-9]+]] = arith.cmpf olt, [[X]]
// CHECK-NEXT:    [[M:%[0-9]+]] = arith.mulf [[SL]], [[X]] : f32
// CHECK-NEXT:    arith.select [[NEG]], [[M]], [[X]] : f32

// -----
// Gelu (approximate = none): 0.5 x (1 + erf(x / sqrt 2)), erf from the math library.
func.func @gelu(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 20 : i64} {
  %y = "onnx.Gelu"(%a) {onnx_node_name = "g"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @gelu(
// CHECK:         arith.constant 0.707106769 : f32
// CHECK:         math.erf
// CHECK-NOT:     math.tanh
// CHECK:         "krnl.store"

// -----
// Gelu (approximate = tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func.func @gelu_tanh(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 20 : i64} {
  %y = "onnx.Gelu"(%a) {approximate = "tanh", onnx_node_name = "g"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @gelu_tanh(
// CHECK:         arith.constant 0.797884583 : f32
// CHECK:         arith.constant 4.471500e-02 : f32
// CHECK-NOT:     math.erf
// CHECK:         math.tanh

// -----
// Shrink: x + bias below -lambd, x - bias above lambd, else 0 (NaN too: both compares are
// ordered).
func.func @shrink(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Shrink"(%a) {lambd = 1.5 : f32, bias = 0.5 : f32, onnx_node_name = "s"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @shrink(
// CHECK:         arith.constant -1.500000e+00 : f32
// CHECK-NEXT:    arith.cmpf olt
// CHECK:         arith.constant 1.500000e+00 : f32
// CHECK-NEXT:    arith.cmpf ogt

// -----
// Pow with a constant one-element exponent 3 (Keras's Gelu): x * x * x, as onnxruntime.
func.func @pow_cube(%a: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 15 : i64} {
  %c = "onnx.Constant"() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %y = "onnx.Pow"(%a, %c) {onnx_node_name = "p"} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @pow_cube(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[SQ:%[0-9]+]] = arith.mulf [[X]], [[X]] : f32
// CHECK-NEXT:    arith.mulf [[SQ]], [[X]] : f32
// CHECK-NOT:     math.powf

// -----
// Pow f32 ^ i64: both widened to f64 (every integer exponent exact), math.powf, one rounding.
func.func @pow_i64(%a: tensor<3xf32>, %b: tensor<3xi64>) -> tensor<3xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 15 : i64} {
  %y = "onnx.Pow"(%a, %b) {onnx_node_name = "p"} : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @pow_i64(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[E:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[XW:%[0-9]+]] = arith.extf [[X]] : f32 to f64
// CHECK-NEXT:    [[EW:%[0-9]+]] = arith.sitofp [[E]] : i64 to f64
// CHECK-NEXT:    [[P:%[0-9]+]] = math.powf [[XW]], [[EW]] : f64
// CHECK-NEXT:    arith.truncf [[P]] : f64 to f32

// -----
// Pow i32 ^ i32: by squaring over the exponent's bits; a negative exponent divides 1 by x
// (only there: the divisor is 1 elsewhere, so only 0^-n reaches the division's check).
func.func @pow_int(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 15 : i64} {
  %y = "onnx.Pow"(%a, %b) {onnx_node_name = "p"} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  func.return %y : tensor<3xi32>
}
// CHECK-LABEL: func.func @pow_int(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK:         [[NEG:%[0-9]+]] = arith.cmpi slt
// CHECK:         [[DEN:%[0-9]+]] = arith.select [[NEG]], [[X]], {{%[0-9]+}} : i32
// CHECK-NEXT:    [[INV:%[0-9]+]] = arith.divsi {{%[0-9]+}}, [[DEN]] : i32
// CHECK-NEXT:    arith.select [[NEG]], [[INV]], [[X]] : i32
// CHECK:         arith.muli
// CHECK-NOT:     math.powf
