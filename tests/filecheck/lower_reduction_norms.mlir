// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// ReduceL2 / ReduceLogSumExp / ArgMax (lowering/reduction.py): a function of each element
// summed, a function of the sum after; LogSumExp shifts by the max (0 where the max is
// infinite); ArgMax keeps the best value and its index.

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

// -----
// ArgMax with select_last_index: the first element starts as the best; a later one replaces
// it where an ordered compare says >= (so NaN never does); its index is cast to i64.
func.func @argmax_last(%x: tensor<2x3xf32>) -> tensor<2x1xi64> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.ArgMax"(%x) {axis = 1 : i64, select_last_index = 1 : i64, onnx_node_name = "am"} : (tensor<2x3xf32>) -> tensor<2x1xi64>
  func.return %y : tensor<2x1xi64>
}
// CHECK-LABEL: func.func @argmax_last(
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[OLD:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[BETTER:%[0-9]+]] = arith.cmpf oge, [[V]], [[OLD]] : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[FIRST:%[0-9]+]] = arith.cmpi eq, [[K]], [[Z]] : index
// CHECK-NEXT:    [[TAKE:%[0-9]+]] = arith.ori [[FIRST]], [[BETTER]] : i1
// CHECK:         arith.index_cast [[K]] : index to i64

// -----
// CumSum, exclusive and reverse, along axis 1: position 2 - k, the running sum in an
// accumulator over the other dims, the output the sum before the add.
func.func @cumsum_excl_rev(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 14 : i64} {
  %axis = "onnx.Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %y = "onnx.CumSum"(%x, %axis) {exclusive = 1 : i64, reverse = 1 : i64, onnx_node_name = "cs"} : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @cumsum_excl_rev(
// CHECK:         [[ACC:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK:         [[POS:%[0-9]+]] = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:    [[BEFORE:%[0-9]+]] = "krnl.load"([[ACC]], [[I]])
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, [[I]], [[POS]])
// CHECK-NEXT:    [[AFTER:%[0-9]+]] = arith.addf [[BEFORE]], [[V]] : f32
// CHECK-NEXT:    "krnl.store"([[AFTER]], [[ACC]], [[I]])
// CHECK-NEXT:    "krnl.store"([[BEFORE]], {{%[0-9]+}}, [[I]], [[POS]])

// -----
// Hardmax: a first pass records the index of the first maximum (NaN counts as the maximum),
// a second writes 1 there and 0 elsewhere.
func.func @hardmax(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Hardmax"(%x) {onnx_node_name = "hm"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @hardmax(
// CHECK:         [[WHERE:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x1xi64>
// CHECK:         arith.cmpf uno
// CHECK:         arith.cmpf ogt
// CHECK:         "krnl.store"({{%[0-9]+}}, [[WHERE]]
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:    [[KI:%[0-9]+]] = arith.index_cast [[K]] : index to i64
// CHECK-NEXT:    [[W:%[0-9]+]] = "krnl.load"([[WHERE]], [[O]], [[I]])
// CHECK-NEXT:    arith.cmpi eq, [[KI]], [[W]] : i64
