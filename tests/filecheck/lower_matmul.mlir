// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// MatMul and Gemm (lowering/matmul.py): an (M, N, K) loop nest whose body is one krnl.matmul
// with tile [1, 1, 1]; its `start = "zero"` starts the output from zeros at k = 0 (no fill
// pass of its own; Gemm with a C fills the output with it first and has no start). The
// krnl.matmul operands are A, B, C, the (i, j, k) indices, and the element offsets of this
// product in A, B and C; `sizes` = [M, N, K] and `strides` = [A's row stride, A's column
// stride, ldb, ldc].

// [2, 3] x [3, 4]: M = 2, N = 4, K = 3; row-major A has strides (3, 1); ldb = ldc = N = 4.
func.func @matmul_2d(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "mm"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @matmul_2d(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<3x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK-NOT:     "krnl.store"
// CHECK:         [[O0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[O1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[O2:%[0-9]+]] = arith.constant 0 : index
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.matmul"([[A]], [[B]], [[Y]], [[I]], [[J]], [[K]], [[O0]], [[O1]], [[O2]])
// CHECK-SAME:        sizes = [2 : i64, 4 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64, start = "zero"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]

// -----
// Batch broadcasting: [2, 1, 2, 3] x [3, 3, 4] -> [2, 3, 2, 4]; batch dims [2, 1] and [3]
// broadcast to [2, 3]. Per batch entry (p, q): A's offset p * (2*3) (its batch dim of size 1
// is shared), B's q * (3*4), C's p * (3 * 2*4) + q * (2*4).
func.func @matmul_batch_broadcast(%a: tensor<2x1x2x3xf32>, %b: tensor<3x3x4xf32>) -> tensor<2x3x2x4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "bmm"} : (tensor<2x1x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x3x2x4xf32>
  func.return %y : tensor<2x3x2x4xf32>
}
// CHECK-LABEL: func.func @matmul_batch_broadcast(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x1x2x3xf32>, [[B:%[0-9]+]]: memref<3x3x4xf32>, [[Y:%[0-9]+]]: memref<2x3x2x4xf32>)
// CHECK:         ^bb0([[P:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK:           [[C6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:      [[AOFF:%[0-9]+]] = arith.muli [[P]], [[C6]] : index
// CHECK-NEXT:      [[C12:%[0-9]+]] = arith.constant 12 : index
// CHECK-NEXT:      [[BOFF:%[0-9]+]] = arith.muli [[Q]], [[C12]] : index
// CHECK-NEXT:      [[C24:%[0-9]+]] = arith.constant 24 : index
// CHECK-NEXT:      [[PC:%[0-9]+]] = arith.muli [[P]], [[C24]] : index
// CHECK-NEXT:      [[C8:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:      [[QC:%[0-9]+]] = arith.muli [[Q]], [[C8]] : index
// CHECK-NEXT:      [[COFF:%[0-9]+]] = arith.addi [[PC]], [[QC]] : index
// CHECK:           "krnl.matmul"([[A]], [[B]], [[Y]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[AOFF]], [[BOFF]], [[COFF]])
// CHECK-SAME:        sizes = [2 : i64, 4 : i64, 3 : i64]
// CHECK-SAME:        strides = [3 : i64, 1 : i64, 4 : i64, 4 : i64]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// A 1-D first operand is a row vector: [3] x [3, 4] -> [4], M = 1.
func.func @matmul_vector_matrix(%a: tensor<3xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "vm"} : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @matmul_vector_matrix(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<3xf32>, [[B:%[0-9]+]]: memref<3x4xf32>, [[Y:%[0-9]+]]: memref<4xf32>)
// CHECK:         [[O0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[O1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    [[O2:%[0-9]+]] = arith.constant 0 : index
// CHECK:         "krnl.matmul"([[A]], [[B]], [[Y]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[O0]], [[O1]], [[O2]])
// CHECK-SAME:      {sizes = [1 : i64, 4 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64, start = "zero"}
// CHECK:         bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]

// -----
// Gemm with transB = 1 and a bias C of shape [4]: B [4, 3] is copied transposed into a [3, 4]
// buffer (bt[k, j] = B[j, k]), the output starts as C broadcast over rows (C[j]), then
// M = 2, N = 4, K = 3 accumulate.
func.func @gemm_trans_b_bias(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>) -> tensor<2x4xf32> attributes {input_names = ["a", "b", "c"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Gemm"(%a, %b, %c) {transB = 1 : i64, onnx_node_name = "gemm"} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @gemm_trans_b_bias(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<4x3xf32>, [[C:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK-NEXT:    [[BT:%[0-9]+]] = "krnl.alloc"() {onnx_node = "gemm"} : () -> memref<3x4xf32>
// CHECK:         ^bb0([[K:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[B]], [[J]], [[K]])
// CHECK-NEXT:      "krnl.store"([[V]], [[BT]], [[K]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[I2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK-NEXT:      [[CV:%[0-9]+]] = "krnl.load"([[C]], [[J2]])
// CHECK-NEXT:      "krnl.store"([[CV]], [[Y]], [[I2]], [[J2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant {{.*}}0 : index
// CHECK:         "krnl.matmul"([[A]], [[BT]], [[Y]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[Z]], [[Z]], [[Z]])
// CHECK-SAME:      {sizes = [2 : i64, 4 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]

// -----
// Gemm with transA = 1, alpha = 2, beta = 0.5, C [1, 4]: A is [K, M] = [3, 2], read with
// strides (1, M = 2); the product starts from zeros (its start) and is scaled afterwards:
// y = 2 * (A^T B) + 0.5 * C[0, j].
func.func @gemm_trans_a_alpha_beta(%a: tensor<3x2xf32>, %b: tensor<3x4xf32>, %c: tensor<1x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["a", "b", "c"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Gemm"(%a, %b, %c) {transA = 1 : i64, alpha = 2.0 : f32, beta = 0.5 : f32, onnx_node_name = "gemm"} : (tensor<3x2xf32>, tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @gemm_trans_a_alpha_beta(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<3x2xf32>, [[B:%[0-9]+]]: memref<3x4xf32>, [[C:%[0-9]+]]: memref<1x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         "krnl.matmul"([[A]], [[B]], [[Y]],
// CHECK-SAME:      sizes = [2 : i64, 4 : i64, 3 : i64]
// CHECK-SAME:      strides = [1 : i64, 2 : i64, 4 : i64, 4 : i64], simd = 1 : i64, start = "zero"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[P:%[0-9]+]] = "krnl.load"([[Y]], [[I]], [[J]])
// CHECK-NEXT:      [[AL:%[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      [[PS:%[0-9]+]] = arith.mulf [[P]], [[AL]] : f32
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[CV:%[0-9]+]] = "krnl.load"([[C]], [[Z0]], [[J]])
// CHECK-NEXT:      [[BE:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      [[CS:%[0-9]+]] = arith.mulf [[CV]], [[BE]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addf [[PS]], [[CS]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]

// -----
// Gemm with beta = 0.5 only (alpha = 1): the output starts as 0.5 * C, then accumulates.
func.func @gemm_beta(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["a", "b", "c"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Gemm"(%a, %b, %c) {beta = 0.5 : f32, onnx_node_name = "gemm"} : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @gemm_beta(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<3x4xf32>, [[C:%[0-9]+]]: memref<2x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[CV:%[0-9]+]] = "krnl.load"([[C]], [[I]], [[J]])
// CHECK-NEXT:      [[BE:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      [[CS:%[0-9]+]] = arith.mulf [[CV]], [[BE]] : f32
// CHECK-NEXT:      "krnl.store"([[CS]], [[Y]], [[I]], [[J]])
// CHECK:         "krnl.matmul"([[A]], [[B]], [[Y]],
// CHECK-NOT:     arith.mulf
// CHECK:         func.return

// -----
// Gemm without C (an explicit NoValue): the output starts at zero (the matmul's start).
func.func @gemm_no_c(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Gemm"(%a, %b, %none) {onnx_node_name = "gemm"} : (tensor<2x3xf32>, tensor<3x4xf32>, none) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @gemm_no_c(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3xf32>, [[B:%[0-9]+]]: memref<3x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK-NOT:     "krnl.store"
// CHECK:         "krnl.matmul"([[A]], [[B]], [[Y]],
// CHECK-SAME:      {sizes = [2 : i64, 4 : i64, 3 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [3 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64, start = "zero"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]
