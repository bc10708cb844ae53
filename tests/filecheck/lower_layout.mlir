// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Layout and index-pattern ops (lowering/layout.py). DepthToSpace and SpaceToDepth are one
// copy nest over the spatial tensor viewed as [N, C, H, b, W, b] (a krnl.reshape, no copy):
// block position (i, j) of channel c lives in the deep tensor's channel (i*b + j)*C + c (DCR)
// or c*b*b + i*b + j (CRD), every index affine. Trilu keeps x where column - row compares with
// k (read at run time), 0 elsewhere. Range computes start + i * delta.

// DepthToSpace DCR, blocksize 2: [1, 8, 2, 3] -> [1, 2, 4, 6];
// y[n, c, 2h + i, 2w + j] = x[n, 4i + 2j + c, h, w] (C = 2 output channels).
func.func @depth_to_space_dcr(%x: tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.DepthToSpace"(%x) {blocksize = 2 : i64, mode = "DCR", onnx_node_name = "d2s"} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>
  func.return %y : tensor<1x2x4x6xf32>
}
// CHECK-LABEL: func.func @depth_to_space_dcr(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x8x2x3xf32>, [[Y:%[0-9]+]]: memref<1x2x4x6xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<1x2x2x2x3x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[I4:%[0-9]+]] = arith.muli [[I]], [[C4]] : index
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[J2:%[0-9]+]] = arith.muli [[J]], [[C2]] : index
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addi [[I4]], [[J2]] : index
// CHECK-NEXT:      [[CH:%[0-9]+]] = arith.addi [[S]], [[C]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[H]], [[W]])
// CHECK-NEXT:      "krnl.store"([[V]], [[YV]], [[N]], [[C]], [[H]], [[I]], [[W]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64]]

// -----
// DepthToSpace CRD, blocksize 2: the channel is 4c + 2i + j.
func.func @depth_to_space_crd(%x: tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.DepthToSpace"(%x) {blocksize = 2 : i64, mode = "CRD", onnx_node_name = "d2s"} : (tensor<1x8x2x3xf32>) -> tensor<1x2x4x6xf32>
  func.return %y : tensor<1x2x4x6xf32>
}
// CHECK-LABEL: func.func @depth_to_space_crd(
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[CC:%[0-9]+]] = arith.muli [[C]], [[C4]] : index
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[I2:%[0-9]+]] = arith.muli [[I]], [[C2]] : index
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addi [[CC]], [[I2]] : index
// CHECK-NEXT:      [[CH:%[0-9]+]] = arith.addi [[S]], [[J]] : index
// CHECK-NEXT:      "krnl.load"({{%[0-9]+}}, [[N]], [[CH]], [[H]], [[W]])

// -----
// SpaceToDepth, blocksize 2: [1, 2, 4, 6] -> [1, 8, 2, 3]; the input is the viewed side,
// y[n, 4i + 2j + c, h, w] = x[n, c, 2h + i, 2w + j].
func.func @space_to_depth(%x: tensor<1x2x4x6xf32>) -> tensor<1x8x2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.SpaceToDepth"(%x) {blocksize = 2 : i64, onnx_node_name = "s2d"} : (tensor<1x2x4x6xf32>) -> tensor<1x8x2x3xf32>
  func.return %y : tensor<1x8x2x3xf32>
}
// CHECK-LABEL: func.func @space_to_depth(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x4x6xf32>, [[Y:%[0-9]+]]: memref<1x8x2x3xf32>)
// CHECK:         [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<1x2x2x2x3x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:           [[CH:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[C]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[XV]], [[N]], [[C]], [[H]], [[I]], [[W]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[N]], [[CH]], [[H]], [[W]])

// -----
// Trilu lower, k = 1 (a constant, still read at run time): keep x[r, c] where c - r <= 1.
func.func @trilu_lower(%x: tensor<3x4xf32>) -> tensor<3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 14 : i64} {
  %k = "onnx.Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %y = "onnx.Trilu"(%x, %k) {upper = 0 : i64, onnx_node_name = "tr"} : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
// CHECK-LABEL: func.func @trilu_lower(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3x4xf32>, [[Y:%[0-9]+]]: memref<3x4xf32>)
// CHECK:         [[KG:%[0-9]+]] = "krnl.global"() {{.*}}dense<1> : tensor<i64>
// CHECK-NEXT:    [[K:%[0-9]+]] = "krnl.load"([[KG]])
// CHECK-NEXT:    [[ZERO:%[0-9]+]] = arith.constant {onnx_node = "tr"} 0.000000e+00 : f32
// CHECK:         ^bb0([[R:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[NR:%[0-9]+]] = arith.muli [[R]], [[M1]] : index
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.addi [[C]], [[NR]] : index
// CHECK-NEXT:      [[D64:%[0-9]+]] = arith.index_cast [[D]] : index to i64
// CHECK-NEXT:      [[KEEP:%[0-9]+]] = arith.cmpi sle, [[D64]], [[K]] : i64
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[R]], [[C]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.select [[KEEP]], [[V]], [[ZERO]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[R]], [[C]])

// -----
// Range on f32 scalars, length 4 known from shape inference: y[i] = start + float(i) * delta.
func.func @range_f32(%s: tensor<f32>, %l: tensor<f32>, %d: tensor<f32>) -> tensor<4xf32> attributes {input_names = ["s", "l", "d"], output_names = ["y"], onnx_opset = 11 : i64} {
  %y = "onnx.Range"(%s, %l, %d) {onnx_node_name = "rg"} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @range_f32(
// CHECK-SAME:    [[S:%[0-9]+]]: memref<f32>, {{%[0-9]+}}: memref<f32>, [[D:%[0-9]+]]: memref<f32>, [[Y:%[0-9]+]]: memref<4xf32>)
// CHECK:         [[START:%[0-9]+]] = "krnl.load"([[S]])
// CHECK-NEXT:    [[DELTA:%[0-9]+]] = "krnl.load"([[D]])
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[I64:%[0-9]+]] = arith.index_cast [[I]] : index to i64
// CHECK-NEXT:      [[IF:%[0-9]+]] = arith.sitofp [[I64]] : i64 to f32
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.mulf [[IF]], [[DELTA]] : f32
// CHECK-NEXT:      [[V:%[0-9]+]] = arith.addf [[START]], [[T]] : f32
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]
