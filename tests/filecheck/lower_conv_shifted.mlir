// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Stride-1 2-D Conv over large planes of 32..64 channels (lowering/conv.py, `_shifted_gemm`):
// no im2col. Output (oh, ow) and tap (kh, kw) read the padded input plane at flat position
// q + kh * pitch + kw, q = oh * pitch + ow; so each tap is one GEMM, M = OC, N = positions q,
// K = input channels, whose B is the scratch planes themselves at offset kh * pitch + kw
// (row stride: one plane). The input is always copied into the scratch [groups, C/g, padded
// rows + 1, pitch] (one extra row, so the last panel's throw-away columns read inside the
// plane), zeroed and filled per (n, g). Output rows go in panels of `_even_panels(OH, 1, OH // 2)`
// rows (threads take whole panels): per panel jp, a row buffer slice rows[jp] of
// [count, OC/g, height * pitch] starts as the bias, takes one GEMM per tap (C at
// jp * OC/g * height * pitch, B at g * C/g * plane + jp * height * pitch + kh * pitch + kw),
// and the epilogue copies the OW real values of each of its rows out, through the activation,
// into the output view [N, groups, OC/g, OH, OW] at row jp * height + i.

// x [1, 32, 48, 48], w [4, 32, 3, 3], pads 1, ReLU: padded extent max(1 + 48, 47 + 2 + 1) = 50,
// plus the spare row: scratch [1, 32, 51, 50] (pitch 50, plane 51 * 50 = 2550; it used to be
// [32, 50, 50], plane 2500). Panels: oh = 48, `_even_panels(48, 1, 24)`: heights 1, 2, 3, 4,
// 6, 8, 12, 16, 24 give 48, 24, 16, 12, 8, 6, 4, 3, 2 panels; key (even count, min(count, 8),
// -count) is best for 8 panels (48, 24, 16, 12 tie on min 8 but have more panels), so height
// 6: 8 panels of width 6 * 50 = 300 (the row buffer used to be one [4, 2398] for all rows). Row
// buffer [8, 4, 300]; per panel C at jp * 4 * 300 = jp * 1200, ldc 300. Tap t = 3 kh + kw
// reads W at g * 4 * 32 * 9 + t = g * 1152 + t with row stride 32 * 9 = 288 and K stride 9, and
// B at g * 32 * 2550 + jp * 300 + kh * 50 + kw = g * 81600 + jp * 300 + (0, 1, 2, 50, 51, 52,
// 100, 101, 102), row stride 2550. The last panel's last read is 7 * 300 + 102 + 299 = 2501:
// past the 2500 of the padded plane, inside the spare row. Output view
// [1, 1, 4, 48, 48].
builtin.module {
  func.func @shifted_3x3(%x: tensor<1x32x48x48xf32>, %w: tensor<4x32x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x48x48xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {pads = [1, 1, 1, 1], onnx_node_name = "c3", activation = "Relu"} : (tensor<1x32x48x48xf32>, tensor<4x32x3x3xf32>, tensor<4xf32>) -> tensor<1x4x48x48xf32>
    func.return %y : tensor<1x4x48x48xf32>
  }
}
// CHECK-LABEL: func.func @shifted_3x3(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x32x48x48xf32>, [[W:%[0-9]+]]: memref<4x32x3x3xf32>, [[B:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<1x4x48x48xf32>)
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c3"} : () -> memref<1x32x51x50xf32>
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c3"} : () -> memref<8x4x300xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "c3"} : (memref<1x4x48x48xf32>) -> memref<1x1x4x48x48xf32>
// CHECK-NOT:     "krnl.alloc"
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Group g's planes zeroed whole (51 rows, the spare one included), then x copied in at +1.
// CHECK:             "krnl.store"({{%[0-9]+}}, [[PAD]], [[G]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 32 : i64], [0 : i64, 51 : i64], [0 : i64, 50 : i64]]
// CHECK:             "krnl.store"({{%[0-9]+}}, [[PAD]], [[G]],
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 32 : i64], [0 : i64, 48 : i64], [0 : i64, 48 : i64]]
// The panel loop; its row buffer slice starts as the bias.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK:               "krnl.load"([[B]],
// CHECK-NEXT:          "krnl.store"({{%[0-9]+}}, [[ROWS]], [[JP]],
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64]]
// C offset jp * 1200, once for the 9 taps.
// CHECK-NEXT:        [[C1200:%[0-9]+]] = arith.constant 1200 : index
// CHECK-NEXT:        [[COFF:%[0-9]+]] = arith.muli [[JP]], [[C1200]] : index
// Tap (0, 0): A at g * 1152, B at g * 81600 + jp * 300.
// CHECK-NEXT:        [[A1152_0:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG0:%[0-9]+]] = arith.muli [[G]], [[A1152_0]] : index
// CHECK-NEXT:        [[BP0:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG0:%[0-9]+]] = arith.muli [[G]], [[BP0]] : index
// CHECK-NEXT:        [[BW0:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ0:%[0-9]+]] = arith.muli [[JP]], [[BW0]] : index
// CHECK-NEXT:        [[BS0:%[0-9]+]] = arith.addi [[BG0]], [[BJ0]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[AG0]], [[BS0]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (0, 1): A at g * 1152 + 1, B at g * 81600 + jp * 300 + 1.
// CHECK-NEXT:        [[A1152_1:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG1:%[0-9]+]] = arith.muli [[G]], [[A1152_1]] : index
// CHECK-NEXT:        [[AT1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addi [[AG1]], [[AT1]] : index
// CHECK-NEXT:        [[BP1:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG1:%[0-9]+]] = arith.muli [[G]], [[BP1]] : index
// CHECK-NEXT:        [[BW1:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ1:%[0-9]+]] = arith.muli [[JP]], [[BW1]] : index
// CHECK-NEXT:        [[BS1:%[0-9]+]] = arith.addi [[BG1]], [[BJ1]] : index
// CHECK-NEXT:        [[BO1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[B1:%[0-9]+]] = arith.addi [[BS1]], [[BO1]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A1]], [[B1]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (0, 2): A at g * 1152 + 2, B at g * 81600 + jp * 300 + 2.
// CHECK-NEXT:        [[A1152_2:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG2:%[0-9]+]] = arith.muli [[G]], [[A1152_2]] : index
// CHECK-NEXT:        [[AT2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addi [[AG2]], [[AT2]] : index
// CHECK-NEXT:        [[BP2:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG2:%[0-9]+]] = arith.muli [[G]], [[BP2]] : index
// CHECK-NEXT:        [[BW2:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ2:%[0-9]+]] = arith.muli [[JP]], [[BW2]] : index
// CHECK-NEXT:        [[BS2:%[0-9]+]] = arith.addi [[BG2]], [[BJ2]] : index
// CHECK-NEXT:        [[BO2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[B2:%[0-9]+]] = arith.addi [[BS2]], [[BO2]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A2]], [[B2]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (1, 0): A at g * 1152 + 3, B at g * 81600 + jp * 300 + 50.
// CHECK-NEXT:        [[A1152_3:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG3:%[0-9]+]] = arith.muli [[G]], [[A1152_3]] : index
// CHECK-NEXT:        [[AT3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addi [[AG3]], [[AT3]] : index
// CHECK-NEXT:        [[BP3:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG3:%[0-9]+]] = arith.muli [[G]], [[BP3]] : index
// CHECK-NEXT:        [[BW3:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ3:%[0-9]+]] = arith.muli [[JP]], [[BW3]] : index
// CHECK-NEXT:        [[BS3:%[0-9]+]] = arith.addi [[BG3]], [[BJ3]] : index
// CHECK-NEXT:        [[BO3:%[0-9]+]] = arith.constant 50 : index
// CHECK-NEXT:        [[B3:%[0-9]+]] = arith.addi [[BS3]], [[BO3]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A3]], [[B3]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (1, 1): A at g * 1152 + 4, B at g * 81600 + jp * 300 + 51.
// CHECK-NEXT:        [[A1152_4:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG4:%[0-9]+]] = arith.muli [[G]], [[A1152_4]] : index
// CHECK-NEXT:        [[AT4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addi [[AG4]], [[AT4]] : index
// CHECK-NEXT:        [[BP4:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG4:%[0-9]+]] = arith.muli [[G]], [[BP4]] : index
// CHECK-NEXT:        [[BW4:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ4:%[0-9]+]] = arith.muli [[JP]], [[BW4]] : index
// CHECK-NEXT:        [[BS4:%[0-9]+]] = arith.addi [[BG4]], [[BJ4]] : index
// CHECK-NEXT:        [[BO4:%[0-9]+]] = arith.constant 51 : index
// CHECK-NEXT:        [[B4:%[0-9]+]] = arith.addi [[BS4]], [[BO4]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A4]], [[B4]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (1, 2): A at g * 1152 + 5, B at g * 81600 + jp * 300 + 52.
// CHECK-NEXT:        [[A1152_5:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG5:%[0-9]+]] = arith.muli [[G]], [[A1152_5]] : index
// CHECK-NEXT:        [[AT5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addi [[AG5]], [[AT5]] : index
// CHECK-NEXT:        [[BP5:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG5:%[0-9]+]] = arith.muli [[G]], [[BP5]] : index
// CHECK-NEXT:        [[BW5:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ5:%[0-9]+]] = arith.muli [[JP]], [[BW5]] : index
// CHECK-NEXT:        [[BS5:%[0-9]+]] = arith.addi [[BG5]], [[BJ5]] : index
// CHECK-NEXT:        [[BO5:%[0-9]+]] = arith.constant 52 : index
// CHECK-NEXT:        [[B5:%[0-9]+]] = arith.addi [[BS5]], [[BO5]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A5]], [[B5]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (2, 0): A at g * 1152 + 6, B at g * 81600 + jp * 300 + 100.
// CHECK-NEXT:        [[A1152_6:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG6:%[0-9]+]] = arith.muli [[G]], [[A1152_6]] : index
// CHECK-NEXT:        [[AT6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addi [[AG6]], [[AT6]] : index
// CHECK-NEXT:        [[BP6:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG6:%[0-9]+]] = arith.muli [[G]], [[BP6]] : index
// CHECK-NEXT:        [[BW6:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ6:%[0-9]+]] = arith.muli [[JP]], [[BW6]] : index
// CHECK-NEXT:        [[BS6:%[0-9]+]] = arith.addi [[BG6]], [[BJ6]] : index
// CHECK-NEXT:        [[BO6:%[0-9]+]] = arith.constant 100 : index
// CHECK-NEXT:        [[B6:%[0-9]+]] = arith.addi [[BS6]], [[BO6]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A6]], [[B6]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (2, 1): A at g * 1152 + 7, B at g * 81600 + jp * 300 + 101.
// CHECK-NEXT:        [[A1152_7:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG7:%[0-9]+]] = arith.muli [[G]], [[A1152_7]] : index
// CHECK-NEXT:        [[AT7:%[0-9]+]] = arith.constant 7 : index
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addi [[AG7]], [[AT7]] : index
// CHECK-NEXT:        [[BP7:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG7:%[0-9]+]] = arith.muli [[G]], [[BP7]] : index
// CHECK-NEXT:        [[BW7:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ7:%[0-9]+]] = arith.muli [[JP]], [[BW7]] : index
// CHECK-NEXT:        [[BS7:%[0-9]+]] = arith.addi [[BG7]], [[BJ7]] : index
// CHECK-NEXT:        [[BO7:%[0-9]+]] = arith.constant 101 : index
// CHECK-NEXT:        [[B7:%[0-9]+]] = arith.addi [[BS7]], [[BO7]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A7]], [[B7]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// Tap (2, 2): A at g * 1152 + 8, B at g * 81600 + jp * 300 + 102.
// CHECK-NEXT:        [[A1152_8:%[0-9]+]] = arith.constant 1152 : index
// CHECK-NEXT:        [[AG8:%[0-9]+]] = arith.muli [[G]], [[A1152_8]] : index
// CHECK-NEXT:        [[AT8:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addi [[AG8]], [[AT8]] : index
// CHECK-NEXT:        [[BP8:%[0-9]+]] = arith.constant 81600 : index
// CHECK-NEXT:        [[BG8:%[0-9]+]] = arith.muli [[G]], [[BP8]] : index
// CHECK-NEXT:        [[BW8:%[0-9]+]] = arith.constant 300 : index
// CHECK-NEXT:        [[BJ8:%[0-9]+]] = arith.muli [[JP]], [[BW8]] : index
// CHECK-NEXT:        [[BS8:%[0-9]+]] = arith.addi [[BG8]], [[BJ8]] : index
// CHECK-NEXT:        [[BO8:%[0-9]+]] = arith.constant 102 : index
// CHECK-NEXT:        [[B8:%[0-9]+]] = arith.addi [[BS8]], [[BO8]] : index
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0(
// CHECK-NEXT:          "krnl.matmul"([[W]], [[PAD]], [[ROWS]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, [[A8]], [[B8]], [[COFF]])
// CHECK-SAME:          {sizes = [4 : i64, 300 : i64, 32 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [288 : i64, 9 : i64, 2550 : i64, 300 : i64], simd = 1 : i64}
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 300 : i64], [0 : i64, 32 : i64]]
// CHECK-NOT:         "krnl.matmul"
// The panel's epilogue: view[n, g, o, jp * 6 + i, j] = max(rows[jp, o, i * 50 + j], 0), for
// its 6 rows.
// CHECK-NEXT:        "krnl.define_loops"
// CHECK-NEXT:        "krnl.iterate"
// CHECK-NEXT:        ^bb0([[O:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:          [[C50:%[0-9]+]] = arith.constant 50 : index
// CHECK-NEXT:          [[I50:%[0-9]+]] = arith.muli [[I]], [[C50]] : index
// CHECK-NEXT:          [[AT:%[0-9]+]] = arith.addi [[I50]], [[J]] : index
// CHECK-NEXT:          [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[JP]], [[O]], [[AT]])
// CHECK-NEXT:          [[C6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:          [[R6:%[0-9]+]] = arith.muli [[JP]], [[C6]] : index
// CHECK-NEXT:          [[ROW:%[0-9]+]] = arith.addi [[R6]], [[I]] : index
// CHECK-NEXT:          [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          [[R:%[0-9]+]] = arith.maximumf [[V]], [[Z]] : f32
// CHECK-NEXT:          "krnl.store"([[R]], [[YV]], [[N]], [[G]], [[O]], [[ROW]], [[J]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 6 : i64], [0 : i64, 48 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 8 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]
