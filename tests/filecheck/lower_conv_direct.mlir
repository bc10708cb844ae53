// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Grouped and depthwise 2-D Conv (groups > 1, C/g <= DIRECT_CHANNELS = 4 and C/g * prod(kernel)
// <= MAX_TAPS = 64) take lowering/depthwise.py's direct schedule (`direct_2d`). Before the
// threads' loop, a column table col[q] = q mod P (P: the planes' pitch) is written when some
// kernel column reaches into the padding. Then one nest over (batch entry n, chunk jc, block
// of the chunk ji) (a block: GROUP_BLOCK groups on tiny planes; block gb = jc * blocks per
// chunk + ji) writes the block's phase planes into its chunk's slot of a scratch buffer
// [chunks, planes of the block, sh * sw phases, L] (none when no tap reads
// padding: the taps then read x): zeros at [0, start) (a lead of elements and rows above the
// input), the input (stride 1 and rows as wide as P: one contiguous copy at +start; else rows,
// split by row and column phase), zeros from the end of the input rows to L. Then per (group in the
// block, output channel of the group) the weights and bias are loaded, and one loop over flat
// output positions q sums, per kernel column kw, the taps at q + offset into a partial sum,
// dropped by `select(col[q] in range, partial, 0)` where that column is horizontal padding,
// adds the partials to the bias, applies the activation and stores once: into the output
// seen as [N, blocks, channels of a block, OH * OW] when P == OW, else into a row buffer that
// a copy-out reduces to OW columns per row.

// Depthwise (group 2 = C = OC), 3x3, pads 1, bias, ReLU6 fused (Clip(0, 6), as fuse-conv
// leaves it): x [1, 2, 4, 4] -> out [1, 2, 4, 4]. Pitch P = max(4, 4) = 4 = OW: the loop stores
// into the output directly. Rows: kernel row kh reads plane row oh + kh - 1 (top = 1 zero
// row); columns: lead 1. start = 1 + 1 * 4 = 5, input at [5, 21), zeros at [0, 5) and
// [21, 26): L = 26 (the last tap of q = 15 reads 15 + 10 = 25). Both groups in one block
// (planes of 104 bytes): scratch [1, 2, 1, 26], out view [1, 1, 2, 16].
// Tap (kh, kw) of q reads q + 5 + (kh - 1) * 4 + (kw - 1): kw = 0 at q + 0, 4, 8 (masked:
// col >= 1), kw = 1 at q + 1, 5, 9 (never padding), kw = 2 at q + 2, 6, 10 (masked: col < 3).
builtin.module {
  func.func @depthwise_bias_relu6(%x: tensor<1x2x4x4xf32>, %w: tensor<2x1x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x4x4xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {group = 2 : i64, pads = [1, 1, 1, 1], onnx_node_name = "dw", activation = "Clip", activation_params = [0.0 : f32, 6.0 : f32]} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
    func.return %y : tensor<1x2x4x4xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_bias_relu6(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x4x4xf32>, [[W:%[0-9]+]]: memref<2x1x3x3xf32>, [[B:%[0-9]+]]: memref<2xf32>, [[Y:%[0-9]+]]: memref<1x2x4x4xf32>)
// CHECK-NEXT:    [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {onnx_node = "dw"} : (memref<1x2x4x4xf32>) -> memref<1x2x16xf32>
// CHECK-NEXT:    [[PL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<1x2x1x26xf32>
// CHECK-NEXT:    [[COL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<16xf32>
// The column table: col[i * 4 + j] = j.
// CHECK:         [[J64:%[0-9]+]] = arith.index_cast %{{[0-9]+}} : index to i64
// CHECK-NEXT:    [[JF:%[0-9]+]] = arith.sitofp [[J64]] : i64 to f32
// CHECK:         "krnl.store"([[JF]], [[COL]], %{{[0-9]+}}) : (f32, memref<16xf32>, index) -> ()
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:  [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "dw"} : (memref<1x2x4x4xf32>) -> memref<1x1x2x16xf32>
// CHECK-NOT:   krnl.alloc
// CHECK-NOT:   krnl.matmul
// One chunk of one block: block gb = jc + ji; the planes in slot jc.
// CHECK:       ^bb0([[N:%[0-9]+]]: index, [[JC:%[0-9]+]]: index, [[JI:%[0-9]+]]: index):
// CHECK-NEXT:    [[GB:%[0-9]+]] = arith.addi [[JC]], [[JI]] : index
// Zeros at [0, 5) of both planes.
// CHECK:           "krnl.store"(%{{[0-9]+}}, [[PL]], [[JC]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 5 : i64]]
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// The input, one contiguous copy of 16 per plane, at +5.
// CHECK:           [[XL:%[0-9]+]] = "krnl.load"([[XV]], [[N]], %{{[0-9]+}}, [[Q0:%[0-9]+]])
// CHECK-NEXT:      [[C5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      [[AT:%[0-9]+]] = arith.addi [[Q0]], [[C5]] : index
// CHECK-NEXT:      "krnl.store"([[XL]], [[PL]], [[JC]], %{{[0-9]+}}, %{{[0-9]+}}, [[AT]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 16 : i64]]
// Zeros at [21, 26).
// CHECK:           arith.constant 21 : index
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 5 : i64]]
// The compute nest: (group in the block, output channel of the group), bias, nine weights,
// then the flat loop over q in [0, 16).
// CHECK:         ^bb0([[J:%[0-9]+]]: index, [[O:%[0-9]+]]: index):
// CHECK:           [[BIAS:%[0-9]+]] = "krnl.load"([[B]], [[OC:%[0-9]+]])
// CHECK-COUNT-9:   "krnl.load"([[W]], [[OC]],
// CHECK:           ^bb0([[Q:%[0-9]+]]: index):
// CHECK:             "krnl.load"([[PL]], [[JC]], %{{[0-9]+}}, %{{[0-9]+}}, [[Q]])
// CHECK:             arith.constant 4 : index
// CHECK:             arith.constant 8 : index
// CHECK:             [[CQ:%[0-9]+]] = "krnl.load"([[COL]], [[Q]]) : (memref<16xf32>, index) -> f32
// CHECK-NEXT:        [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:        [[GE:%[0-9]+]] = arith.cmpf oge, [[CQ]], [[ONE]] : f32
// CHECK-NEXT:        [[Z0:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[P0:%[0-9]+]] = arith.select [[GE]], %{{[0-9]+}}, [[Z0]] : f32
// CHECK-NEXT:        [[A0:%[0-9]+]] = arith.addf [[BIAS]], [[P0]] : f32
// CHECK:             arith.constant 9 : index
// CHECK:             [[A1:%[0-9]+]] = arith.addf [[A0]], %{{[0-9]+}} : f32
// CHECK:             arith.constant 10 : index
// CHECK:             [[THREE:%[0-9]+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:        [[LT:%[0-9]+]] = arith.cmpf olt, [[CQ]], [[THREE]] : f32
// CHECK-NEXT:        [[Z2:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[P2:%[0-9]+]] = arith.select [[LT]], %{{[0-9]+}}, [[Z2]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[P2]] : f32
// CHECK-NEXT:        [[LO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[MX:%[0-9]+]] = arith.maximumf [[A2]], [[LO]] : f32
// CHECK-NEXT:        [[HI:%[0-9]+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:        [[MN:%[0-9]+]] = arith.minimumf [[MX]], [[HI]] : f32
// CHECK-NEXT:        "krnl.store"([[MN]], [[YV]], [[N]], [[GB]], %{{[0-9]+}}, [[Q]]) : (f32, memref<1x1x2x16xf32>, index, index, index, index) -> ()
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 16 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64]], n_original = 3 : i64, onnx_node = "dw"}

// -----
// Stride 2, channel multiplier 2 (group 2, C 2, OC 4), no padding: x [1, 2, 5, 5], 3x3 -> out
// 2 x 2. Phase planes: input (r, c) to plane (r % 2) * 2 + c % 2; row phase 0 has rows 0, 2, 4
// (3), phase 1 rows 1, 3 (2); likewise columns, so P = max(3, 2) = 3 > OW = 2: a row buffer
// [chunks, 4, span = (2 - 1) * 3 + 2 = 5] and a copy-out. No column is padding: no
// column table, no select. Rows are copied exactly (16-wide
// row copies would read past the 25 input pixels), one nest per row phase for the columns
// both column phases have (0, 1) and one for the column only phase 0 has (2). Scratch
// [1, 2, 4, 22].
builtin.module {
  func.func @depthwise_stride2_multiplier(%x: tensor<1x2x5x5xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x2x2xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], onnx_node_name = "dw2"} : (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, none) -> tensor<1x4x2x2xf32>
    func.return %y : tensor<1x4x2x2xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_multiplier(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<4x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x4x2x2xf32>)
// CHECK-NEXT:    "krnl.reshape"([[X]])
// CHECK-NEXT:    [[PL:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw2"} : () -> memref<1x2x4x22xf32>
// No column is padding: no column table.
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw2"} : () -> memref<1x4x5xf32>
// CHECK-NEXT:    [[OG:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "dw2"} : (memref<1x4x2x2xf32>) -> memref<1x1x4x2x2xf32>
// Row phase 0: rows 0, 2, 4, columns 2 j and 2 j + 1 for j < 2 in one nest.
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [2 : i64, 3 : i64]]
// Row phase 1: rows 1, 3.
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64], [2 : i64, 3 : i64]]
// No bias: the sum starts from kernel column 0's partial; no column is padding, no select.
// CHECK-NOT:     arith.select
// CHECK:         "krnl.store"(%{{[0-9]+}}, [[ROWS]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (f32, memref<1x4x5xf32>, index, index, index) -> ()
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 5 : i64]]
// The copy-out keeps position i * 3 + j, j < 2.
// CHECK:         "krnl.load"([[ROWS]],
// CHECK:         "krnl.store"(%{{[0-9]+}}, [[OG]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// Stride 2 with TF's SAME padding (pads only at the end): x [1, 2, 6, 6], 3x3 -> out 3 x 3.
// Every phase has 3 rows and 3 columns: P = 3 = OW, the loop stores into the output. Kernel
// column 2 of output column 2 reads input column 6, padding: masked with col < 2. No lead, no
// rows above (start 0).
builtin.module {
  func.func @depthwise_stride2_same(%x: tensor<1x2x6x6xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], pads = [0, 0, 1, 1], onnx_node_name = "dw3"} : (tensor<1x2x6x6xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_same(
// CHECK-NEXT:    "krnl.reshape"
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "dw3"} : () -> memref<1x2x4x22xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "dw3"} : () -> memref<9xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         [[TWO:%[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    [[LT:%[0-9]+]] = arith.cmpf olt, %{{[0-9]+}}, [[TWO]] : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    arith.select [[LT]], %{{[0-9]+}}, [[Z]] : f32
// CHECK-NOT:     arith.select
// CHECK:         "krnl.store"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (f32, memref<1x1x2x9xf32>, index, index, index, index) -> ()
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 9 : i64]]
