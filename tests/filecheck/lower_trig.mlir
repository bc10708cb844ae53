// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Trigonometric and hyperbolic functions and their inverses (lowering/trig.py): one nest, one
// `math` op per element; codegen calls the math library's function for it (mathtrig.py).

func.func @sin(%a: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 22 : i64} {
  %y = "onnx.Sin"(%a) {onnx_node_name = "s"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @sin(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:    [[X:%[0-9]+]] = "krnl.load"([[A]], [[I]], [[J]])
// CHECK-NEXT:    [[R:%[0-9]+]] = math.sin [[X]] : f32
// CHECK-NEXT:    "krnl.store"([[R]], [[Y]], [[I]], [[J]])

// -----
// The inverse and hyperbolic functions alike, in f64 too (codegen computes them through f32).
func.func @atanh_f64(%a: tensor<3xf64>) -> tensor<3xf64> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 22 : i64} {
  %y = "onnx.Atanh"(%a) {onnx_node_name = "t"} : (tensor<3xf64>) -> tensor<3xf64>
  func.return %y : tensor<3xf64>
}
// CHECK-LABEL: func.func @atanh_f64(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    math.atanh [[X]] : f64

// -----
func.func @chain(%a: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 22 : i64} {
  %c = "onnx.Cos"(%a) {onnx_node_name = "c"} : (tensor<4xf32>) -> tensor<4xf32>
  %t = "onnx.Tan"(%c) {onnx_node_name = "t"} : (tensor<4xf32>) -> tensor<4xf32>
  %s = "onnx.Asin"(%t) {onnx_node_name = "as"} : (tensor<4xf32>) -> tensor<4xf32>
  %h = "onnx.Cosh"(%s) {onnx_node_name = "ch"} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "onnx.Acosh"(%h) {onnx_node_name = "ach"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @chain(
// CHECK:         math.cos
// CHECK:         math.tan
// CHECK:         math.asin
// CHECK:         math.cosh
// CHECK:         math.acosh
