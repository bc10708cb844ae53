// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// The GEMM schedule of Conv with a fused activation (lowering/conv_panels.py): the output is
// computed one panel of rows at a time, and each panel gets its epilogue (the activation, on
// the panel the matmul just wrote, still in cache) before the next panel starts. A Relu or a
// Clip is no epilogue: the product clamps its tiles as it stores them (krnl.matmul clamp_lo /
// clamp_hi, @pointwise_relu_clamped and @conv3x3_clip_clamped at the end). Panels hold about
// PANEL_BYTES = 2 MiB of column buffer (or, for a plain 1x1 GEMM, of output) and at least
// MIN_PANEL = 64 columns (`_panel_rows`). When a height in [ceil(64 / row width), what fits]
// divides the rows (`_even_panels`: an even count up to PAR_PANELS = 8 preferred, then more
// panels) the panels are threads' work; else the largest count between half and all of what
// fits that divides the rows, else what fits, with a shorter last panel.

// A 1x1 Conv, 1600 output channels of 7 x 64: one output row is 1600 * 64 * 4 = 409600 bytes, so
// fit = 2 MiB // 409600 = 5 rows; the narrowest panel is ceil(64 / 64) = 1 row. `_even_panels(7,
// 1, 5)`: only height 1 divides 7 (7 panels, odd, but the only one), so 7 panels of 1 row
// (64 columns), shared by threads. (This case used to expect a 5-row and a 2-row panel: the
// ragged split now needs rows that no height in range divides, @pointwise_leaky_ragged below.)
// Each panel: matmul on x (no copy) starting from the bias (its `start`), then the LeakyRelu
// epilogue.
builtin.module {
  func.func @pointwise_leaky_panels(%x: tensor<1x2x7x64xf32>, %w: tensor<1600x2x1x1xf32>, %b: tensor<1600xf32>) -> tensor<1x1600x7x64xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw", activation = "LeakyRelu", activation_params = [1.000000e-01 : f32]} : (tensor<1x2x7x64xf32>, tensor<1600x2x1x1xf32>, tensor<1600xf32>) -> tensor<1x1600x7x64xf32>
    func.return %y : tensor<1x1600x7x64xf32>
  }
}
// CHECK-LABEL: func.func @pointwise_leaky_panels(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x7x64xf32>, [[W:%[0-9]+]]: memref<1600x2x1x1xf32>, [[B:%[0-9]+]]: memref<1600xf32>, [[Y:%[0-9]+]]: memref<1x1600x7x64xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "pw"} : (memref<1x1600x7x64xf32>) -> memref<1x1600x448xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Panel jp in [0, 7) starts at column jp * 64.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C64:%[0-9]+]] = arith.constant 64 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C64]] : index
// B = x at n * 2 * 448 + g * 2 * 448 + q0 = 896 * n + 896 * g + q0; C = y at
// n * 1600 * 448 + g * 1600 * 448 + q0 = 716800 * (n + g) + q0.
// CHECK:             [[C896:%[0-9]+]] = arith.constant 896 : index
// CHECK:             [[C716800:%[0-9]+]] = arith.constant 716800 : index
// CHECK:               "krnl.matmul"([[W]], [[X]], [[YV]],
// CHECK-SAME:            {sizes = [1600 : i64, 64 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 448 : i64, 448 : i64], simd = 1 : i64, start = "bias"}
// The epilogue over the same 1600 x 64 panel: y = y < 0 ? 0.1 * y : y in place.
// CHECK:             ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK:               [[COL:%[0-9]+]] = arith.addi [[Q0]], [[Q]] : index
// CHECK-NEXT:          [[V:%[0-9]+]] = "krnl.load"([[YV]], [[N]], [[OC:%[0-9]+]], [[COL]])
// CHECK-NEXT:          [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          [[NEG:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:          [[A:%[0-9]+]] = arith.constant 1.000000e-01 : f32
// CHECK-NEXT:          [[S:%[0-9]+]] = arith.mulf [[A]], [[V]] : f32
// CHECK-NEXT:          [[R:%[0-9]+]] = arith.select [[NEG]], [[S]], [[V]] : f32
// CHECK-NEXT:          "krnl.store"([[R]], [[YV]], [[N]], [[OC]], [[COL]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 1600 : i64], [0 : i64, 64 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 7 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// The ragged split: a 1x1 Conv, 6400 output channels of 7 x 16: one output row is
// 6400 * 16 * 4 = 409600 bytes, so fit = 5 rows; the narrowest panel is ceil(64 / 16) = 4 rows.
// _even_panels(7, 4, 5): neither 4 nor 5 divides 7, so no shared panels; fit 5 < 7 rows and
// no count in 5..3 divides 7, so one serial loop: a panel of 5 rows (80 columns) and one of
// 2 (32 columns), the rows 7 * 16 = 112 columns apart. Each: matmul on x (no copy) from the
// bias, then the LeakyRelu epilogue.
builtin.module {
  func.func @pointwise_leaky_ragged(%x: tensor<1x2x7x16xf32>, %w: tensor<6400x2x1x1xf32>, %b: tensor<6400xf32>) -> tensor<1x6400x7x16xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw", activation = "LeakyRelu", activation_params = [1.000000e-01 : f32]} : (tensor<1x2x7x16xf32>, tensor<6400x2x1x1xf32>, tensor<6400xf32>) -> tensor<1x6400x7x16xf32>
    func.return %y : tensor<1x6400x7x16xf32>
  }
}
// CHECK-LABEL: func.func @pointwise_leaky_ragged(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x7x16xf32>, [[W:%[0-9]+]]: memref<6400x2x1x1xf32>, [[B:%[0-9]+]]: memref<6400xf32>, [[Y:%[0-9]+]]: memref<1x6400x7x16xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "pw"} : (memref<1x6400x7x16xf32>) -> memref<1x6400x112xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// The 5-row panel (jp in [0, 1)) starts at column jp * 80.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C80:%[0-9]+]] = arith.constant 80 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C80]] : index
// CHECK:               "krnl.matmul"([[W]], [[X]], [[YV]],
// CHECK-SAME:            {sizes = [6400 : i64, 80 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 112 : i64, 112 : i64], simd = 1 : i64, start = "bias"}
// The epilogue over the same 6400 x 80 panel.
// CHECK:             ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK:               [[COL:%[0-9]+]] = arith.addi [[Q0]], [[Q]] : index
// CHECK-NEXT:          [[V:%[0-9]+]] = "krnl.load"([[YV]], [[N]], [[OC:%[0-9]+]], [[COL]])
// CHECK:               arith.select
// CHECK-NEXT:          "krnl.store"({{%[0-9]+}}, [[YV]], [[N]], [[OC]], [[COL]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 6400 : i64], [0 : i64, 80 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// The 2-row panel starts at column 5 * 16 = 80.
// CHECK:           ^bb0([[JP2:%[0-9]+]]: index):
// CHECK-NEXT:        [[C32:%[0-9]+]] = arith.constant 32 : index
// CHECK-NEXT:        [[T:%[0-9]+]] = arith.muli [[JP2]], [[C32]] : index
// CHECK-NEXT:        [[C80B:%[0-9]+]] = arith.constant 80 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[T]], [[C80B]] : index
// CHECK:               "krnl.matmul"([[W]], [[X]], [[YV]],
// CHECK-SAME:            {sizes = [6400 : i64, 32 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 112 : i64, 112 : i64], simd = 1 : i64, start = "bias"}
// CHECK:               arith.select
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 6400 : i64], [0 : i64, 32 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// Swish (x * sigmoid(x), Keras SiLU) in the epilogue of a 3x3 Conv: sigmoid as
// 1 / (1 + exp(-x)) (as lowering/elementwise.py computes it: e = exp(-|x|), x < 0 ? e / (1 + e)
// : 1 / (1 + e)), then the product, stored in place.
builtin.module {
  func.func @conv3x3_swish(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "c", activation = "Swish", activation_params = [1.0 : f32]} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x4x4xf32>
    func.return %y : tensor<1x3x4x4xf32>
  }
}
// CHECK-LABEL: func.func @conv3x3_swish(
// col: 4 rows of 4, per row 18 * 4 * 4 = 288 bytes, fit = max(1, 2 MiB // 288, ceil(64 / 4) = 16)
// = 7281 >= 4 and `_even_panels(4, 16, 7281)` has no height (16 > 4), so one unshared panel:
// [1 slot, C/g, 3, 3, 4, 4] (the slot dimension is new: 1 when the panel loop is serial).
// CHECK:         "krnl.alloc"() {onnx_node = "c"} : () -> memref<1x2x3x3x4x4xf32>
// CHECK:               "krnl.matmul"
// CHECK-SAME:            {sizes = [3 : i64, 16 : i64, 18 : i64]
// CHECK:             ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index):
// CHECK:               [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:          [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:          [[A:%[0-9]+]] = math.absf [[V]] : f32
// CHECK-NEXT:          [[NEG:%[0-9]+]] = arith.negf [[A]] : f32
// CHECK-NEXT:          [[E:%[0-9]+]] = math.exp [[NEG]] : f32
// CHECK-NEXT:          [[D:%[0-9]+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT:          [[R:%[0-9]+]] = arith.divf [[ONE]], [[D]] : f32
// CHECK-NEXT:          [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          [[LT:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:          [[ER:%[0-9]+]] = arith.mulf [[E]], [[R]] : f32
// CHECK-NEXT:          [[S:%[0-9]+]] = arith.select [[LT]], [[ER]], [[R]] : f32
// CHECK-NEXT:          [[P:%[0-9]+]] = arith.mulf [[V]], [[S]] : f32
// CHECK-NEXT:          "krnl.store"([[P]],

// -----
// A Relu is the product's clamp: a 1x1 Conv with a Relu is one product over all its columns
// (no panels: there is no epilogue to keep in cache), from the bias, clamped at 0 as the
// micro-kernel stores its registers; nothing reads the output back.
builtin.module {
  func.func @pointwise_relu_clamped(%x: tensor<1x2x7x64xf32>, %w: tensor<1600x2x1x1xf32>, %b: tensor<1600xf32>) -> tensor<1x1600x7x64xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw", activation = "Relu"} : (tensor<1x2x7x64xf32>, tensor<1600x2x1x1xf32>, tensor<1600xf32>) -> tensor<1x1600x7x64xf32>
    func.return %y : tensor<1x1600x7x64xf32>
  }
}
// CHECK-LABEL: func.func @pointwise_relu_clamped(
// CHECK:               "krnl.matmul"
// CHECK-SAME:            {sizes = [1600 : i64, 448 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 448 : i64, 448 : i64], simd = 1 : i64, start = "bias", clamp_lo = 0.000000e+00 : f32}
// CHECK-NOT:     arith.maximumf
// CHECK:         func.return

// -----
// A Clip(0, 6) (ReLU6) on a 3x3 Conv's im2col panels: both bounds on the product; no epilogue.
builtin.module {
  func.func @conv3x3_clip_clamped(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "c", activation = "Clip", activation_params = [0.000000e+00 : f32, 6.000000e+00 : f32]} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x4x4xf32>
    func.return %y : tensor<1x3x4x4xf32>
  }
}
// CHECK-LABEL: func.func @conv3x3_clip_clamped(
// CHECK:               "krnl.matmul"
// CHECK-SAME:            {sizes = [3 : i64, 16 : i64, 18 : i64]
// CHECK-SAME:            start = "zero", clamp_lo = 0.000000e+00 : f32, clamp_hi = 6.000000e+00 : f32}
// CHECK-NOT:     arith.minimumf
// CHECK:         func.return
