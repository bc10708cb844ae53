// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// ReduceL2 / ReduceLogSumExp (lowering/reduction.py): a function of each element summed, a
// function of the sum after; LogSumExp shifts by the max (0 where the max is infinite).

// ReduceL2: sqrt(sum x^2) over axis 1.
func.func @reduce_l2(%x: tensor<2x3xf32>) -> tensor<2x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceL2"(%x, %none) {axes = [1], onnx_node_name = "l2"} : (tensor<2x3xf32>, none) -> tensor<2x1xf32>
  func.return %y : tensor<2x1xf32>
}
// CHECK-LABEL: func.func @reduce_l2(
// CHECK:         [[ACC:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[SQ:%[0-9]+]] = arith.mulf [[V]], [[V]] : f32
// CHECK-NEXT:    arith.addf [[ACC]], [[SQ]] : f32
// CHECK:         math.sqrt
// CHECK-NOT:     math.log

// -----
// ReduceLogSumExp: max pass, shift (0 for an infinite max), sum of exp(x - shift), log + shift.
func.func @reduce_lse(%x: tensor<2x3xf32>) -> tensor<2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.ReduceLogSumExp"(%x, %none) {axes = [1], keepdims = 0 : i64, onnx_node_name = "lse"} : (tensor<2x3xf32>, none) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
// CHECK-LABEL: func.func @reduce_lse(
// CHECK:         arith.maximumf
// CHECK:         [[M:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[A:%[0-9]+]] = math.absf [[M]] : f32
// CHECK-NEXT:    [[INF:%[0-9]+]] = arith.constant 0x7f800000 : f32
// CHECK-NEXT:    [[ISINF:%[0-9]+]] = arith.cmpf oeq, [[A]], [[INF]] : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    arith.select [[ISINF]], [[Z]], [[M]] : f32
// CHECK:         arith.subf
// CHECK-NEXT:    math.exp
// CHECK:         math.log
// CHECK-NEXT:    "krnl.load"
// CHECK-NEXT:    arith.addf
