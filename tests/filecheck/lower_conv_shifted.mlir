// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Stride-1 2-D Conv over large planes of 16..64 channels (lowering/conv.py, `_shifted_gemm`):
// no im2col. Output (oh, ow) and tap (kh, kw) read the padded input plane at flat position
// q + kh * pitch + kw, q = oh * pitch + ow; so each tap is one GEMM, M = OC, N = positions q,
// K = input channels, whose B is the scratch planes themselves at offset kh * pitch + kw
// (row stride: one plane). The products accumulate into a row buffer [OC, (OH-1)*pitch + OW]
// that starts as the bias; the epilogue copies the OW real values of each row out, through
// the activation.

// x [1, 16, 48, 48], w [4, 16, 3, 3], pads 1, ReLU: scratch [16, 50, 50] (pitch 50, plane
// 2500), row buffer (48 - 1) * 50 + 48 = 2398 wide. Tap t = 3 kh + kw reads W at offset t
// with row stride 16 * 9 = 144 and K stride 9.
builtin.module {
  func.func @shifted_3x3(%x: tensor<1x16x48x48xf32>, %w: tensor<4x16x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x48x48xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {pads = [1, 1, 1, 1], onnx_node_name = "c3", activation = "Relu"} : (tensor<1x16x48x48xf32>, tensor<4x16x3x3xf32>, tensor<4xf32>) -> tensor<1x4x48x48xf32>
    func.return %y : tensor<1x4x48x48xf32>
  }
}
// CHECK-LABEL: func.func @shifted_3x3(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x16x48x48xf32>, [[W:%[0-9]+]]: memref<4x16x3x3xf32>, [[B:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<1x4x48x48xf32>)
// CHECK:         [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c3"} : () -> memref<16x50x50xf32>
// CHECK:         [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c3"} : () -> memref<4x2398xf32>
// CHECK-NOT:     "krnl.alloc"
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK:             "krnl.store"({{%[0-9]+}}, [[PAD]],
// The row buffer starts as the bias.
// CHECK:             "krnl.load"([[B]],
// CHECK-NEXT:        "krnl.store"({{%[0-9]+}}, [[ROWS]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 2398 : i64]]
// Tap (0, 0): A at offset g * 576 + 0, B (the scratch) at offset 0.
// CHECK:           [[A0:%[0-9]+]] = arith.muli [[G]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[B0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[C0:%[0-9]+]] = arith.constant 0 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A0]], [[B0]], [[C0]])
// CHECK-SAME:          {sizes = [4 : i64, 2398 : i64, 16 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [144 : i64, 9 : i64, 2500 : i64, 2398 : i64], simd = 1 : i64}
// The other taps t = 1..8, in (kh, kw) order: A at g * 576 + t, B at kh * 50 + kw.
// CHECK:           {{%[0-9]+}} = arith.constant 1 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B1:%[0-9]+]] = arith.constant 1 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B1]],
// CHECK:           {{%[0-9]+}} = arith.constant 2 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B2:%[0-9]+]] = arith.constant 2 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B2]],
// CHECK:           {{%[0-9]+}} = arith.constant 3 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B50:%[0-9]+]] = arith.constant 50 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B50]],
// CHECK:           {{%[0-9]+}} = arith.constant 4 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B51:%[0-9]+]] = arith.constant 51 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B51]],
// CHECK:           {{%[0-9]+}} = arith.constant 5 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B52:%[0-9]+]] = arith.constant 52 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B52]],
// CHECK:           {{%[0-9]+}} = arith.constant 6 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B100:%[0-9]+]] = arith.constant 100 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B100]],
// CHECK:           {{%[0-9]+}} = arith.constant 7 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B101:%[0-9]+]] = arith.constant 101 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B101]],
// CHECK:           {{%[0-9]+}} = arith.constant 8 : index
// CHECK-NEXT:      {{%[0-9]+}} = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[B102:%[0-9]+]] = arith.constant 102 : index
// CHECK:             "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[B102]],
// CHECK-NOT:         "krnl.matmul"
// The epilogue: y[n, o, i, j] = max(rows[o, i * 50 + j], 0).
// CHECK:           ^bb0([[O:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[C50:%[0-9]+]] = arith.constant 50 : index
// CHECK-NEXT:        [[I50:%[0-9]+]] = arith.muli [[I]], [[C50]] : index
// CHECK-NEXT:        [[AT:%[0-9]+]] = arith.addi [[I50]], [[J]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[O]], [[AT]])
// CHECK:             [[R:%[0-9]+]] = arith.maximumf [[V]], {{%[0-9]+}} : f32
// CHECK-NEXT:        "krnl.store"([[R]], [[Y]], [[N]], {{%[0-9]+}}, [[I]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 48 : i64], [0 : i64, 48 : i64]]
