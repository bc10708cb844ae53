// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Grouped and depthwise Conv (groups > 1, C/g <= DIRECT_CHANNELS = 4 and C/g * prod(kernel)
// <= MAX_TAPS = 64) take the direct schedule of lowering/conv.py (`_direct`): one nest over (batch entry n, group g)
// around, per group, one nest over (output channel o of the group, output rows, output
// columns), the columns innermost. Its body sums all C/g * prod(kernel) taps, unrolled in
// (c, kh, kw) order, starting from bias[oc] (or from the first product when there is no
// bias), applies the fused activation and stores once, into the output seen through a view
// [N, groups, OC/g, spatial...] (`_by_group`) at [n, g, o, ...]: the group itself indexes
// every write, so the (n, g) loop can run on threads. No column buffer, no krnl.matmul.
// Where some tap falls into the padding (`_scratch`), the taps never read x: a scratch buffer
// [groups, C/g, padded...] with extent max(pad_begin + in, (out - 1) * stride + (k - 1) *
// dilation + 1) per axis, one set of planes per group; inside the (n, g) nest, `_copy_in`
// first zeroes group g's planes (scratch[g, ...] = 0, every call: the arena is shared) and then
// writes x[n, g * C/g + c] into scratch[g, c] at +pad_begin; the taps read scratch[g, c] at
// o * stride + k * dilation with no guard and no clamp. Without padding reads, a stride-1
// Conv reads x itself (no scratch). A strided 2-D Conv always copies (`_direct_phases`), into a
// space-to-depth buffer [groups, C/g, sh, sw, Hp, Wp], Hp = ceil(padded rows / sh) + 1 (a spare
// row), Wp = ceil(padded width / sw): padded (r, c) at plane (r % sh, c % sw), position
// (r // sh, c // sw), zeroed per (n, g) and filled by one nest per phase (ph, pw); tap
// (kh, kw) of output (oh, ow) then reads flat position q + off, q = oh * Wp + ow,
// off = ((kh*dh % sh) * sw + kw*dw % sw) * Hp * Wp + (kh*dh // sh) * Wp + kw*dw // sw, one
// loop over q in [0, (OH - 1) * Wp + OW) into a row buffer [groups, OC/g, span], and a
// copy-out keeps ow < OW of each row (as `_direct_flat`).
// Stride-1 2-D Convs with output rows narrower than FLAT_WIDTH = 32 run flattened
// (`_direct_flat`): a loop over flat plane positions q, described with the first case.

// Depthwise (group 2 = C = OC, C/g = OC/g = 1), 3x3, pads 1, bias, ReLU6 fused (Clip(0, 6), as
// fuse-conv leaves it): x [1, 2, 4, 4] -> out [1, 2, 4, 4].
// Scratch extent per axis: max(1 + 4, (4 - 1) * 1 + 2 * 1 + 1) = 6, pitch 6.
// Stride 1, rows 4 < 32: flattened. Tap (kh, kw) of output (oh, ow) is flat position
// q + kh * 6 + kw of the scratch, q = oh * 6 + ow, so one loop over q in
// [0, (4 - 1) * 6 + 4) = [0, 22) computes all 16 outputs (and 2 throw-away values per row)
// into a row buffer [groups, OC/g, 22] = [2, 1, 22]; a copy-out keeps ow < 4 of each row.
// The scratch is [groups, C/g, 6, 6] = [2, 1, 6, 6], seen flat as [2, 1, 36]; the output view
// is [N, groups, OC/g, 4, 4] = [1, 2, 1, 4, 4].
// Tap offsets, in tap order: 0, 1, 2, 6, 7, 8, 12, 13, 14 (the last read, 21 + 14 = 35, is
// the scratch's last element).
builtin.module {
  func.func @depthwise_bias_relu6(%x: tensor<1x2x4x4xf32>, %w: tensor<2x1x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x4x4xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {group = 2 : i64, pads = [1, 1, 1, 1], onnx_node_name = "dw", activation = "Clip", activation_params = [0.0 : f32, 6.0 : f32]} : (tensor<1x2x4x4xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
    func.return %y : tensor<1x2x4x4xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_bias_relu6(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x4x4xf32>, [[W:%[0-9]+]]: memref<2x1x3x3xf32>, [[B:%[0-9]+]]: memref<2xf32>, [[Y:%[0-9]+]]: memref<1x2x4x4xf32>)
// The scratch [groups, C/g, 6, 6] = [2, 1, 6, 6], the row buffer [2, 1, 22], the scratch seen
// as flat planes [2, 1, 6 * 6] and the output view [1, 2, 1, 4, 4]; nothing else is allocated
// (no column buffer) and nothing is written before the (n, g) nest.
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<2x1x6x6xf32>
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<2x1x22xf32>
// CHECK-NEXT:    [[FLAT:%[0-9]+]] = "krnl.reshape"([[PAD]]) {onnx_node = "dw"} : (memref<2x1x6x6xf32>) -> memref<2x1x36xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "dw"} : (memref<1x2x4x4xf32>) -> memref<1x2x1x4x4xf32>
// CHECK-NOT:     krnl.alloc
// CHECK-NOT:     krnl.reshape
// CHECK-NOT:     krnl.matmul
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Group g's planes zeroed, [C/g, 6, 6] = [1, 6, 6] of scratch[g], inside the (n, g) nest.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 6 : i64], [0 : i64, 6 : i64]]
// Copy-in: x[n, g * 1 + c, i, j] to scratch[g, c, i + 1, j + 1] (the group's own planes).
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[I0:%[0-9]+]]: index, [[J0:%[0-9]+]]: index):
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[G]], [[C]] : index
// CHECK-NEXT:        [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[I0]], [[J0]])
// CHECK-NEXT:        [[PB0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[I1:%[0-9]+]] = arith.addi [[I0]], [[PB0]] : index
// CHECK-NEXT:        [[PB1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[J1:%[0-9]+]] = arith.addi [[J0]], [[PB1]] : index
// CHECK-NEXT:        "krnl.store"([[XV]], [[PAD]], [[G]], [[C]], [[I1]], [[J1]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// One nest over (o, q), q in [0, 22); oc = g * 1 + o; the sum starts from bias[oc].
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[G]], [[O]] : index
// CHECK-NEXT:        [[A0:%[0-9]+]] = "krnl.load"([[B]], [[OC]])
// Input channel c = 0 of the group (the scratch's flat plane [g, c] and W's second index).
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Tap (0, 0) at q + 0 (no add), times W[oc, 0, 0, 0].
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[A0]], [[M00]] : f32
// Tap (0, 1) at q + 1.
// CHECK-NEXT:        [[D01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[Q01:%[0-9]+]] = arith.addi [[Q]], [[D01]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M01]] : f32
// Tap (0, 2) at q + 2.
// CHECK-NEXT:        [[D02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[Q]], [[D02]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addf [[A2]], [[M02]] : f32
// Tap (1, 0) at q + 6: one row pitch of the padded plane.
// CHECK-NEXT:        [[D10:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        [[Q10:%[0-9]+]] = arith.addi [[Q]], [[D10]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W10:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// CHECK-NEXT:        [[M10:%[0-9]+]] = arith.mulf [[V10]], [[W10]] : f32
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addf [[A3]], [[M10]] : f32
// Tap (1, 1) at q + 7.
// CHECK-NEXT:        [[D11:%[0-9]+]] = arith.constant 7 : index
// CHECK-NEXT:        [[Q11:%[0-9]+]] = arith.addi [[Q]], [[D11]] : index
// CHECK-NEXT:        [[V11:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q11]])
// CHECK-NEXT:        [[KH11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W11:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH11]], [[KW11]])
// CHECK-NEXT:        [[M11:%[0-9]+]] = arith.mulf [[V11]], [[W11]] : f32
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addf [[A4]], [[M11]] : f32
// Tap (1, 2) at q + 8.
// CHECK-NEXT:        [[D12:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:        [[Q12:%[0-9]+]] = arith.addi [[Q]], [[D12]] : index
// CHECK-NEXT:        [[V12:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q12]])
// CHECK-NEXT:        [[KH12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W12:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH12]], [[KW12]])
// CHECK-NEXT:        [[M12:%[0-9]+]] = arith.mulf [[V12]], [[W12]] : f32
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addf [[A5]], [[M12]] : f32
// Tap (2, 0) at q + 12: two row pitches.
// CHECK-NEXT:        [[D20:%[0-9]+]] = arith.constant 12 : index
// CHECK-NEXT:        [[Q20:%[0-9]+]] = arith.addi [[Q]], [[D20]] : index
// CHECK-NEXT:        [[V20:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q20]])
// CHECK-NEXT:        [[KH20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW20:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W20:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH20]], [[KW20]])
// CHECK-NEXT:        [[M20:%[0-9]+]] = arith.mulf [[V20]], [[W20]] : f32
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addf [[A6]], [[M20]] : f32
// Tap (2, 1) at q + 13.
// CHECK-NEXT:        [[D21:%[0-9]+]] = arith.constant 13 : index
// CHECK-NEXT:        [[Q21:%[0-9]+]] = arith.addi [[Q]], [[D21]] : index
// CHECK-NEXT:        [[V21:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q21]])
// CHECK-NEXT:        [[KH21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W21:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH21]], [[KW21]])
// CHECK-NEXT:        [[M21:%[0-9]+]] = arith.mulf [[V21]], [[W21]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf [[A7]], [[M21]] : f32
// Tap (2, 2) at q + 14.
// CHECK-NEXT:        [[D22:%[0-9]+]] = arith.constant 14 : index
// CHECK-NEXT:        [[Q22:%[0-9]+]] = arith.addi [[Q]], [[D22]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A9:%[0-9]+]] = arith.addf [[A8]], [[M22]] : f32
// The epilogue: Clip(0, 6) as max then min (what the Clip lowering does), one store, into
// the row buffer at [g, o, q].
// CHECK-NEXT:        [[LO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[MX:%[0-9]+]] = arith.maximumf [[A9]], [[LO]] : f32
// CHECK-NEXT:        [[HI:%[0-9]+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:        [[MN:%[0-9]+]] = arith.minimumf [[MX]], [[HI]] : f32
// CHECK-NEXT:        "krnl.store"([[MN]], [[ROWS]], [[G]], [[O]], [[Q]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 22 : i64]]
// The copy-out keeps position i * 6 + j, j < 4, of rows[g, o] into the view at [n, g, o, i, j]
// (= out[n, g * 1 + o, i, j]).
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O2:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[P6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        [[I6:%[0-9]+]] = arith.muli [[I]], [[P6]] : index
// CHECK-NEXT:        [[AT:%[0-9]+]] = arith.addi [[I6]], [[J]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[G]], [[O2]], [[AT]])
// CHECK-NEXT:        "krnl.store"([[V]], [[YV]], [[N]], [[G]], [[O2]], [[I]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return

// -----
// Stride 2, channel multiplier 2 (group 2, C 2, OC 4: C/g = 1, OC/g = 2), no padding:
// x [1, 2, 5, 5], 3x3 -> out 2 x 2 ((5 - 3) / 2 + 1). Every tap is inside x (reach
// (2 - 1) * 2 + 2 + 1 = 5 = the input), but a strided 2-D Conv always copies into the
// space-to-depth buffer (it used to read x directly): extent 5 per axis, Hp = ceil(5 / 2) + 1
// = 4, Wp = ceil(5 / 2) = 3, plane 4 * 3 = 12, buffer [2, 1, 2, 2, 4, 3], seen flat as
// [2, 1, 4 * 12 = 48]. Phase 0 of an axis holds input 0, 2, 4 (3 positions), phase 1 holds
// 1, 3 (2). Row buffer span (2 - 1) * 3 + 2 = 5: [groups, OC/g, 5] = [2, 2, 5]; output view
// [1, 2, 2, 2, 2]. Tap offsets ((kh % 2) * 2 + kw % 2) * 12 + (kh // 2) * 3 + kw // 2, in tap
// order: 0, 12, 1, 24, 36, 25, 3, 15, 4; the last read, q = 4, + 36 = 40 < 48. No bias: the
// sum starts from the first product, 8 additions for 9 taps.
builtin.module {
  func.func @depthwise_stride2_multiplier(%x: tensor<1x2x5x5xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x2x2xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], onnx_node_name = "dw2"} : (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, none) -> tensor<1x4x2x2xf32>
    func.return %y : tensor<1x4x2x2xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_multiplier(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<4x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x4x2x2xf32>)
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw2"} : () -> memref<2x1x2x2x4x3xf32>
// CHECK-NEXT:    [[FLAT:%[0-9]+]] = "krnl.reshape"([[PAD]]) {onnx_node = "dw2"} : (memref<2x1x2x2x4x3xf32>) -> memref<2x1x48xf32>
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw2"} : () -> memref<2x2x5xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "dw2"} : (memref<1x4x2x2xf32>) -> memref<1x2x2x2x2xf32>
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw2"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Group g's planes [1, 2, 2, 4, 3] zeroed, in the (n, g) nest.
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index, [[Z3:%[0-9]+]]: index, [[Z4:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]], [[Z3]], [[Z4]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 3 : i64]]
// Row phase 0 (rows 2 i, i < 3): columns 2 j and 2 j + 1 for j < 2 in one nest (both column
// phases have those positions: an interleaved pair LLVM vectorises), then column 2 j, j = 2,
// which only phase 0 has.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CA:%[0-9]+]]: index, [[IA:%[0-9]+]]: index, [[JA:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHA:%[0-9]+]] = arith.addi [[G]], [[CA]] : index
// CHECK-NEXT:        [[RSA:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMA:%[0-9]+]] = arith.muli [[IA]], [[RSA]] : index
// CHECK-NEXT:        [[CSA0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMA0:%[0-9]+]] = arith.muli [[JA]], [[CSA0]] : index
// CHECK-NEXT:        [[XVA0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHA]], [[RMA]], [[CMA0]])
// CHECK-NEXT:        [[PHA0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[PWA0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVA0]], [[PAD]], [[G]], [[CA]], [[PHA0]], [[PWA0]], [[IA]], [[JA]])
// CHECK-NEXT:        [[CSA1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMA1:%[0-9]+]] = arith.muli [[JA]], [[CSA1]] : index
// CHECK-NEXT:        [[CPA1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[CAA1:%[0-9]+]] = arith.addi [[CMA1]], [[CPA1]] : index
// CHECK-NEXT:        [[XVA1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHA]], [[RMA]], [[CAA1]])
// CHECK-NEXT:        [[PHA1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[PWA1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        "krnl.store"([[XVA1]], [[PAD]], [[G]], [[CA]], [[PHA1]], [[PWA1]], [[IA]], [[JA]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CB:%[0-9]+]]: index, [[IB:%[0-9]+]]: index, [[JB:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHB:%[0-9]+]] = arith.addi [[G]], [[CB]] : index
// CHECK-NEXT:        [[RSB:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMB:%[0-9]+]] = arith.muli [[IB]], [[RSB]] : index
// CHECK-NEXT:        [[CSB0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMB0:%[0-9]+]] = arith.muli [[JB]], [[CSB0]] : index
// CHECK-NEXT:        [[XVB0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHB]], [[RMB]], [[CMB0]])
// CHECK-NEXT:        [[PHB0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[PWB0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVB0]], [[PAD]], [[G]], [[CB]], [[PHB0]], [[PWB0]], [[IB]], [[JB]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [2 : i64, 3 : i64]]
// Row phase 1 (rows 2 i + 1, i < 2): the same column pieces.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CC:%[0-9]+]]: index, [[IC:%[0-9]+]]: index, [[JC:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHC:%[0-9]+]] = arith.addi [[G]], [[CC]] : index
// CHECK-NEXT:        [[RSC:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMC:%[0-9]+]] = arith.muli [[IC]], [[RSC]] : index
// CHECK-NEXT:        [[RPC:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[RAC:%[0-9]+]] = arith.addi [[RMC]], [[RPC]] : index
// CHECK-NEXT:        [[CSC0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMC0:%[0-9]+]] = arith.muli [[JC]], [[CSC0]] : index
// CHECK-NEXT:        [[XVC0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHC]], [[RAC]], [[CMC0]])
// CHECK-NEXT:        [[PHC0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[PWC0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVC0]], [[PAD]], [[G]], [[CC]], [[PHC0]], [[PWC0]], [[IC]], [[JC]])
// CHECK-NEXT:        [[CSC1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMC1:%[0-9]+]] = arith.muli [[JC]], [[CSC1]] : index
// CHECK-NEXT:        [[CPC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[CAC1:%[0-9]+]] = arith.addi [[CMC1]], [[CPC1]] : index
// CHECK-NEXT:        [[XVC1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHC]], [[RAC]], [[CAC1]])
// CHECK-NEXT:        [[PHC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[PWC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        "krnl.store"([[XVC1]], [[PAD]], [[G]], [[CC]], [[PHC1]], [[PWC1]], [[IC]], [[JC]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CD:%[0-9]+]]: index, [[ID:%[0-9]+]]: index, [[JD:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHD:%[0-9]+]] = arith.addi [[G]], [[CD]] : index
// CHECK-NEXT:        [[RSD:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMD:%[0-9]+]] = arith.muli [[ID]], [[RSD]] : index
// CHECK-NEXT:        [[RPD:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[RAD:%[0-9]+]] = arith.addi [[RMD]], [[RPD]] : index
// CHECK-NEXT:        [[CSD0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMD0:%[0-9]+]] = arith.muli [[JD]], [[CSD0]] : index
// CHECK-NEXT:        [[XVD0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHD]], [[RAD]], [[CMD0]])
// CHECK-NEXT:        [[PHD0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[PWD0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVD0]], [[PAD]], [[G]], [[CD]], [[PHD0]], [[PWD0]], [[ID]], [[JD]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [2 : i64, 3 : i64]]
// One nest over (o, q), q in [0, 5); oc = g * 2 + o (W's index).
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK-NEXT:        [[OCG:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GO:%[0-9]+]] = arith.muli [[G]], [[OCG]] : index
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[GO]], [[O]] : index
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Tap (0, 0): plane (0, 0), position (oh + 0, ow + 0): q + 0 * 12 + 0 * 3 + 0 = q + 0.
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// Tap (0, 1): plane (0, 1), position (oh + 0, ow + 0): q + 1 * 12 + 0 * 3 + 0 = q + 12.
// CHECK-NEXT:        [[D01:%[0-9]+]] = arith.constant 12 : index
// CHECK-NEXT:        [[Q01:%[0-9]+]] = arith.addi [[Q]], [[D01]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[M00]], [[M01]] : f32
// Tap (0, 2): plane (0, 0), position (oh + 0, ow + 1): q + 0 * 12 + 0 * 3 + 1 = q + 1.
// CHECK-NEXT:        [[D02:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[Q]], [[D02]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M02]] : f32
// Tap (1, 0): plane (1, 0), position (oh + 0, ow + 0): q + 2 * 12 + 0 * 3 + 0 = q + 24.
// CHECK-NEXT:        [[D10:%[0-9]+]] = arith.constant 24 : index
// CHECK-NEXT:        [[Q10:%[0-9]+]] = arith.addi [[Q]], [[D10]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W10:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// CHECK-NEXT:        [[M10:%[0-9]+]] = arith.mulf [[V10]], [[W10]] : f32
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addf [[A2]], [[M10]] : f32
// Tap (1, 1): plane (1, 1), position (oh + 0, ow + 0): q + 3 * 12 + 0 * 3 + 0 = q + 36.
// CHECK-NEXT:        [[D11:%[0-9]+]] = arith.constant 36 : index
// CHECK-NEXT:        [[Q11:%[0-9]+]] = arith.addi [[Q]], [[D11]] : index
// CHECK-NEXT:        [[V11:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q11]])
// CHECK-NEXT:        [[KH11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W11:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH11]], [[KW11]])
// CHECK-NEXT:        [[M11:%[0-9]+]] = arith.mulf [[V11]], [[W11]] : f32
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addf [[A3]], [[M11]] : f32
// Tap (1, 2): plane (1, 0), position (oh + 0, ow + 1): q + 2 * 12 + 0 * 3 + 1 = q + 25.
// CHECK-NEXT:        [[D12:%[0-9]+]] = arith.constant 25 : index
// CHECK-NEXT:        [[Q12:%[0-9]+]] = arith.addi [[Q]], [[D12]] : index
// CHECK-NEXT:        [[V12:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q12]])
// CHECK-NEXT:        [[KH12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W12:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH12]], [[KW12]])
// CHECK-NEXT:        [[M12:%[0-9]+]] = arith.mulf [[V12]], [[W12]] : f32
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addf [[A4]], [[M12]] : f32
// Tap (2, 0): plane (0, 0), position (oh + 1, ow + 0): q + 0 * 12 + 1 * 3 + 0 = q + 3.
// CHECK-NEXT:        [[D20:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:        [[Q20:%[0-9]+]] = arith.addi [[Q]], [[D20]] : index
// CHECK-NEXT:        [[V20:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q20]])
// CHECK-NEXT:        [[KH20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW20:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W20:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH20]], [[KW20]])
// CHECK-NEXT:        [[M20:%[0-9]+]] = arith.mulf [[V20]], [[W20]] : f32
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addf [[A5]], [[M20]] : f32
// Tap (2, 1): plane (0, 1), position (oh + 1, ow + 0): q + 1 * 12 + 1 * 3 + 0 = q + 15.
// CHECK-NEXT:        [[D21:%[0-9]+]] = arith.constant 15 : index
// CHECK-NEXT:        [[Q21:%[0-9]+]] = arith.addi [[Q]], [[D21]] : index
// CHECK-NEXT:        [[V21:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q21]])
// CHECK-NEXT:        [[KH21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W21:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH21]], [[KW21]])
// CHECK-NEXT:        [[M21:%[0-9]+]] = arith.mulf [[V21]], [[W21]] : f32
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addf [[A6]], [[M21]] : f32
// Tap (2, 2): plane (0, 0), position (oh + 1, ow + 1): q + 0 * 12 + 1 * 3 + 1 = q + 4.
// CHECK-NEXT:        [[D22:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[Q22:%[0-9]+]] = arith.addi [[Q]], [[D22]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf [[A7]], [[M22]] : f32
// No bias, no activation: the sum goes into the row buffer at [g, o, q].
// CHECK-NEXT:        "krnl.store"([[A8]], [[ROWS]], [[G]], [[O]], [[Q]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64]]
// The copy-out keeps position i * 3 + j, j < 2, into the view at [n, g, o, i, j].
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O2:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[P3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:        [[IP:%[0-9]+]] = arith.muli [[I]], [[P3]] : index
// CHECK-NEXT:        [[AT:%[0-9]+]] = arith.addi [[IP]], [[J]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[G]], [[O2]], [[AT]])
// CHECK-NEXT:        "krnl.store"([[V]], [[YV]], [[N]], [[G]], [[O2]], [[I]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return

// -----
// Stride 2 with TF's SAME padding (pads only at the end: MobileNet's stride-2 depthwise Convs):
// x [1, 2, 6, 6], 3x3 -> out 3 x 3. Output 2 of each axis reaches padded position 2 * 2 + 2 = 6,
// one past x: a tap in the padding. Extent max(0 + 6, (3 - 1) * 2 + 2 + 1) = 7 per axis:
// Hp = ceil(7 / 2) + 1 = 5, Wp = ceil(7 / 2) = 4, plane 20, buffer [2, 1, 2, 2, 5, 4] (flat
// [2, 1, 80]), zeroed per (n, g); pad_begin 0, so phase p of an axis holds input p, p + 2,
// p + 4 (3 positions each: no adds for the padding). Padded row or column 6 is phase 0,
// position 3: never written, so 0. Span (3 - 1) * 4 + 3 = 11: row buffer [2, 1, 11]; view
// [1, 2, 1, 3, 3]. Tap offsets ((kh % 2) * 2 + kw % 2) * 20 + (kh // 2) * 4 + kw // 2: 0, 20,
// 1, 40, 60, 41, 4, 24, 5; tap (2, 2) of output (2, 2) (q = 10) reads 15 = plane (0, 0) row 3,
// column 3: padded (6, 6), a zero. Every tap is a plain load: the CHECK-NEXT chain leaves no
// room for a guard, clamp or select. No bias, no activation.
builtin.module {
  func.func @depthwise_stride2_same(%x: tensor<1x2x6x6xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], pads = [0, 0, 1, 1], onnx_node_name = "dw3"} : (tensor<1x2x6x6xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_same(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x6x6xf32>, [[W:%[0-9]+]]: memref<2x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x2x3x3xf32>)
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw3"} : () -> memref<2x1x2x2x5x4xf32>
// CHECK-NEXT:    [[FLAT:%[0-9]+]] = "krnl.reshape"([[PAD]]) {onnx_node = "dw3"} : (memref<2x1x2x2x5x4xf32>) -> memref<2x1x80xf32>
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw3"} : () -> memref<2x1x11xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "dw3"} : (memref<1x2x3x3xf32>) -> memref<1x2x1x3x3xf32>
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw3"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Group g's planes [1, 2, 2, 5, 4] zeroed, in the (n, g) nest.
// CHECK-NEXT:      "krnl.define_loops"
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index, [[Z3:%[0-9]+]]: index, [[Z4:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZERO]], [[PAD]], [[G]], [[Z0]], [[Z1]], [[Z2]], [[Z3]], [[Z4]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 4 : i64]]
// Per row phase (rows 2 i + ph, i < 3), one nest copies columns 2 j and 2 j + 1 for every
// j < 3: both column phases have all three positions, so nothing is left for a nest of its own.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CA:%[0-9]+]]: index, [[IA:%[0-9]+]]: index, [[JA:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHA:%[0-9]+]] = arith.addi [[G]], [[CA]] : index
// CHECK-NEXT:        [[RSA:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMA:%[0-9]+]] = arith.muli [[IA]], [[RSA]] : index
// CHECK-NEXT:        [[CSA0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMA0:%[0-9]+]] = arith.muli [[JA]], [[CSA0]] : index
// CHECK-NEXT:        [[XVA0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHA]], [[RMA]], [[CMA0]])
// CHECK-NEXT:        [[PHA0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[PWA0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVA0]], [[PAD]], [[G]], [[CA]], [[PHA0]], [[PWA0]], [[IA]], [[JA]])
// CHECK-NEXT:        [[CSA1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMA1:%[0-9]+]] = arith.muli [[JA]], [[CSA1]] : index
// CHECK-NEXT:        [[CPA1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[CAA1:%[0-9]+]] = arith.addi [[CMA1]], [[CPA1]] : index
// CHECK-NEXT:        [[XVA1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHA]], [[RMA]], [[CAA1]])
// CHECK-NEXT:        [[PHA1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[PWA1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        "krnl.store"([[XVA1]], [[PAD]], [[G]], [[CA]], [[PHA1]], [[PWA1]], [[IA]], [[JA]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[CC:%[0-9]+]]: index, [[IC:%[0-9]+]]: index, [[JC:%[0-9]+]]: index):
// CHECK-NEXT:        [[CHC:%[0-9]+]] = arith.addi [[G]], [[CC]] : index
// CHECK-NEXT:        [[RSC:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[RMC:%[0-9]+]] = arith.muli [[IC]], [[RSC]] : index
// CHECK-NEXT:        [[RPC:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[RAC:%[0-9]+]] = arith.addi [[RMC]], [[RPC]] : index
// CHECK-NEXT:        [[CSC0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMC0:%[0-9]+]] = arith.muli [[JC]], [[CSC0]] : index
// CHECK-NEXT:        [[XVC0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHC]], [[RAC]], [[CMC0]])
// CHECK-NEXT:        [[PHC0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[PWC0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.store"([[XVC0]], [[PAD]], [[G]], [[CC]], [[PHC0]], [[PWC0]], [[IC]], [[JC]])
// CHECK-NEXT:        [[CSC1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[CMC1:%[0-9]+]] = arith.muli [[JC]], [[CSC1]] : index
// CHECK-NEXT:        [[CPC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[CAC1:%[0-9]+]] = arith.addi [[CMC1]], [[CPC1]] : index
// CHECK-NEXT:        [[XVC1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CHC]], [[RAC]], [[CAC1]])
// CHECK-NEXT:        [[PHC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[PWC1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        "krnl.store"([[XVC1]], [[PAD]], [[G]], [[CC]], [[PHC1]], [[PWC1]], [[IC]], [[JC]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// One nest over (o, q), q in [0, 11); oc = g * 1 + o (W's index).
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[G]], [[O]] : index
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Tap (0, 0): plane (0, 0), position (oh + 0, ow + 0): q + 0 * 20 + 0 * 4 + 0 = q + 0.
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// Tap (0, 1): plane (0, 1), position (oh + 0, ow + 0): q + 1 * 20 + 0 * 4 + 0 = q + 20.
// CHECK-NEXT:        [[D01:%[0-9]+]] = arith.constant 20 : index
// CHECK-NEXT:        [[Q01:%[0-9]+]] = arith.addi [[Q]], [[D01]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[M00]], [[M01]] : f32
// Tap (0, 2): plane (0, 0), position (oh + 0, ow + 1): q + 0 * 20 + 0 * 4 + 1 = q + 1.
// CHECK-NEXT:        [[D02:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[Q]], [[D02]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M02]] : f32
// Tap (1, 0): plane (1, 0), position (oh + 0, ow + 0): q + 2 * 20 + 0 * 4 + 0 = q + 40.
// CHECK-NEXT:        [[D10:%[0-9]+]] = arith.constant 40 : index
// CHECK-NEXT:        [[Q10:%[0-9]+]] = arith.addi [[Q]], [[D10]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W10:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// CHECK-NEXT:        [[M10:%[0-9]+]] = arith.mulf [[V10]], [[W10]] : f32
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addf [[A2]], [[M10]] : f32
// Tap (1, 1): plane (1, 1), position (oh + 0, ow + 0): q + 3 * 20 + 0 * 4 + 0 = q + 60.
// CHECK-NEXT:        [[D11:%[0-9]+]] = arith.constant 60 : index
// CHECK-NEXT:        [[Q11:%[0-9]+]] = arith.addi [[Q]], [[D11]] : index
// CHECK-NEXT:        [[V11:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q11]])
// CHECK-NEXT:        [[KH11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W11:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH11]], [[KW11]])
// CHECK-NEXT:        [[M11:%[0-9]+]] = arith.mulf [[V11]], [[W11]] : f32
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addf [[A3]], [[M11]] : f32
// Tap (1, 2): plane (1, 0), position (oh + 0, ow + 1): q + 2 * 20 + 0 * 4 + 1 = q + 41.
// CHECK-NEXT:        [[D12:%[0-9]+]] = arith.constant 41 : index
// CHECK-NEXT:        [[Q12:%[0-9]+]] = arith.addi [[Q]], [[D12]] : index
// CHECK-NEXT:        [[V12:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q12]])
// CHECK-NEXT:        [[KH12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W12:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH12]], [[KW12]])
// CHECK-NEXT:        [[M12:%[0-9]+]] = arith.mulf [[V12]], [[W12]] : f32
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addf [[A4]], [[M12]] : f32
// Tap (2, 0): plane (0, 0), position (oh + 1, ow + 0): q + 0 * 20 + 1 * 4 + 0 = q + 4.
// CHECK-NEXT:        [[D20:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[Q20:%[0-9]+]] = arith.addi [[Q]], [[D20]] : index
// CHECK-NEXT:        [[V20:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q20]])
// CHECK-NEXT:        [[KH20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW20:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W20:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH20]], [[KW20]])
// CHECK-NEXT:        [[M20:%[0-9]+]] = arith.mulf [[V20]], [[W20]] : f32
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addf [[A5]], [[M20]] : f32
// Tap (2, 1): plane (0, 1), position (oh + 1, ow + 0): q + 1 * 20 + 1 * 4 + 0 = q + 24.
// CHECK-NEXT:        [[D21:%[0-9]+]] = arith.constant 24 : index
// CHECK-NEXT:        [[Q21:%[0-9]+]] = arith.addi [[Q]], [[D21]] : index
// CHECK-NEXT:        [[V21:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q21]])
// CHECK-NEXT:        [[KH21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W21:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH21]], [[KW21]])
// CHECK-NEXT:        [[M21:%[0-9]+]] = arith.mulf [[V21]], [[W21]] : f32
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addf [[A6]], [[M21]] : f32
// Tap (2, 2): plane (0, 0), position (oh + 1, ow + 1): q + 0 * 20 + 1 * 4 + 1 = q + 5.
// CHECK-NEXT:        [[D22:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:        [[Q22:%[0-9]+]] = arith.addi [[Q]], [[D22]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[FLAT]], [[G]], [[Z]], [[Q22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf [[A7]], [[M22]] : f32
// No bias, no activation: the sum goes into the row buffer at [g, o, q].
// CHECK-NEXT:        "krnl.store"([[A8]], [[ROWS]], [[G]], [[O]], [[Q]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 11 : i64]]
// The copy-out keeps position i * 4 + j, j < 3, into the view at [n, g, o, i, j].
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O2:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[P4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:        [[IP:%[0-9]+]] = arith.muli [[I]], [[P4]] : index
// CHECK-NEXT:        [[AT:%[0-9]+]] = arith.addi [[IP]], [[J]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[G]], [[O2]], [[AT]])
// CHECK-NEXT:        "krnl.store"([[V]], [[YV]], [[N]], [[G]], [[O2]], [[I]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return
