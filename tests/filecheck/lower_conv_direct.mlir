// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Grouped and depthwise Conv (groups > 1 and C/g * prod(kernel) <= MAX_TAPS = 64) take the
// direct schedule of lowering/conv.py (`_direct`): one nest over (batch entry n, group g)
// around, per group, one nest over (output channel o of the group, output rows, output
// columns), the columns innermost. Its body sums all C/g * prod(kernel) taps, unrolled in
// (c, kh, kw) order, starting from bias[oc] (or from the first product when there is no
// bias), applies the fused activation and stores once, straight into out[n, oc, ...] with
// oc = g * (OC/g) + o (no view of the output). No column buffer, no krnl.matmul.
// Where some tap falls into the padding (`_scratch`), the taps never read x: one scratch
// buffer [C/g, padded...] with extent max(pad_begin + in, (out - 1) * stride + (k - 1) *
// dilation + 1) per axis is allocated and zeroed whole, once per call, before the (n, g) nest;
// inside it, `_copy_in` writes group g's C/g planes x[n, g * C/g + c] at +pad_begin, and the
// taps read the scratch at o * stride + k * dilation with no guard and no clamp (the border
// the copy never writes stays 0). One scratch serves every (n, g) in turn: not a region per
// group. Without padding reads, the taps read x itself: no alloc at all.
// Stride-1 2-D Convs with output rows narrower than FLAT_WIDTH = 32 run flattened
// (`_direct_flat`): a loop over flat plane positions q, described with the first case.

// Depthwise (group 2 = C = OC, C/g = OC/g = 1), 3x3, pads 1, bias, ReLU6 fused (Clip(0, 6), as
// fuse-conv leaves it): x [1, 2, 4, 4] -> out [1, 2, 4, 4].
// Scratch extent per axis: max(1 + 4, (4 - 1) * 1 + 2 * 1 + 1) = 6, so [1, 6, 6], pitch 6.
// Stride 1, rows 4 < 32: flattened. Tap (kh, kw) of output (oh, ow) is flat position
// q + kh * 6 + kw of the scratch, q = oh * 6 + ow, so one loop over q in
// [0, (4 - 1) * 6 + 4) = [0, 22) computes all 16 outputs (and 2 throw-away values per row)
// into a row buffer [OC/g, 22] = [1, 22]; a copy-out keeps ow < 4 of each row.
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
// The scratch [C/g, 6, 6], zeroed whole, once, outside the (n, g) nest.
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<1x6x6xf32>
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:      [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      "krnl.store"([[ZERO]], [[PAD]], [[Z0]], [[Z1]], [[Z2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 6 : i64], [0 : i64, 6 : i64]]
// The row buffer [1, 22] and the scratch seen as flat planes [1, 6 * 6]; nothing else is
// allocated (no column buffer) and the output is not reshaped.
// CHECK-NEXT:    [[ROWS:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw"} : () -> memref<1x22xf32>
// CHECK-NEXT:    [[FLAT:%[0-9]+]] = "krnl.reshape"([[PAD]]) {onnx_node = "dw"} : (memref<1x6x6xf32>) -> memref<1x36xf32>
// CHECK-NOT:     krnl.alloc
// CHECK-NOT:     krnl.reshape
// CHECK-NOT:     krnl.matmul
// CHECK:         "krnl.define_loops"() {onnx_node = "dw"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Copy-in: x[n, g * 1 + c, i, j] to scratch[c, i + 1, j + 1] (3-D indices; the scratch's
// channel index is c, not g: the same buffer for every group).
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[I0:%[0-9]+]]: index, [[J0:%[0-9]+]]: index):
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[G]], [[C]] : index
// CHECK-NEXT:        [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[I0]], [[J0]])
// CHECK-NEXT:        [[PB0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[I1:%[0-9]+]] = arith.addi [[I0]], [[PB0]] : index
// CHECK-NEXT:        [[PB1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[J1:%[0-9]+]] = arith.addi [[J0]], [[PB1]] : index
// CHECK-NEXT:        "krnl.store"([[XV]], [[PAD]], [[C]], [[I1]], [[J1]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// One nest over (o, q), q in [0, 22); oc = g * 1 + o; the sum starts from bias[oc].
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[G]], [[O]] : index
// CHECK-NEXT:        [[A0:%[0-9]+]] = "krnl.load"([[B]], [[OC]])
// Input channel c = 0 of the group (the scratch's flat row and W's second index).
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Tap (0, 0) at q + 0 (no add), times W[oc, 0, 0, 0].
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[A0]], [[M00]] : f32
// Tap (0, 1) at q + 1.
// CHECK-NEXT:        [[D01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[Q01:%[0-9]+]] = arith.addi [[Q]], [[D01]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M01]] : f32
// Tap (0, 2) at q + 2.
// CHECK-NEXT:        [[D02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[Q]], [[D02]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addf [[A2]], [[M02]] : f32
// Tap (1, 0) at q + 6: one row pitch of the padded plane.
// CHECK-NEXT:        [[D10:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        [[Q10:%[0-9]+]] = arith.addi [[Q]], [[D10]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W10:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// CHECK-NEXT:        [[M10:%[0-9]+]] = arith.mulf [[V10]], [[W10]] : f32
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addf [[A3]], [[M10]] : f32
// Tap (1, 1) at q + 7.
// CHECK-NEXT:        [[D11:%[0-9]+]] = arith.constant 7 : index
// CHECK-NEXT:        [[Q11:%[0-9]+]] = arith.addi [[Q]], [[D11]] : index
// CHECK-NEXT:        [[V11:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q11]])
// CHECK-NEXT:        [[KH11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W11:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH11]], [[KW11]])
// CHECK-NEXT:        [[M11:%[0-9]+]] = arith.mulf [[V11]], [[W11]] : f32
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addf [[A4]], [[M11]] : f32
// Tap (1, 2) at q + 8.
// CHECK-NEXT:        [[D12:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:        [[Q12:%[0-9]+]] = arith.addi [[Q]], [[D12]] : index
// CHECK-NEXT:        [[V12:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q12]])
// CHECK-NEXT:        [[KH12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W12:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH12]], [[KW12]])
// CHECK-NEXT:        [[M12:%[0-9]+]] = arith.mulf [[V12]], [[W12]] : f32
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addf [[A5]], [[M12]] : f32
// Tap (2, 0) at q + 12: two row pitches.
// CHECK-NEXT:        [[D20:%[0-9]+]] = arith.constant 12 : index
// CHECK-NEXT:        [[Q20:%[0-9]+]] = arith.addi [[Q]], [[D20]] : index
// CHECK-NEXT:        [[V20:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q20]])
// CHECK-NEXT:        [[KH20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW20:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W20:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH20]], [[KW20]])
// CHECK-NEXT:        [[M20:%[0-9]+]] = arith.mulf [[V20]], [[W20]] : f32
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addf [[A6]], [[M20]] : f32
// Tap (2, 1) at q + 13.
// CHECK-NEXT:        [[D21:%[0-9]+]] = arith.constant 13 : index
// CHECK-NEXT:        [[Q21:%[0-9]+]] = arith.addi [[Q]], [[D21]] : index
// CHECK-NEXT:        [[V21:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q21]])
// CHECK-NEXT:        [[KH21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W21:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH21]], [[KW21]])
// CHECK-NEXT:        [[M21:%[0-9]+]] = arith.mulf [[V21]], [[W21]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf [[A7]], [[M21]] : f32
// Tap (2, 2) at q + 14.
// CHECK-NEXT:        [[D22:%[0-9]+]] = arith.constant 14 : index
// CHECK-NEXT:        [[Q22:%[0-9]+]] = arith.addi [[Q]], [[D22]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[FLAT]], [[Z]], [[Q22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A9:%[0-9]+]] = arith.addf [[A8]], [[M22]] : f32
// The epilogue: Clip(0, 6) as max then min (what the Clip lowering does), one store, into
// the row buffer at [o, q].
// CHECK-NEXT:        [[LO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[MX:%[0-9]+]] = arith.maximumf [[A9]], [[LO]] : f32
// CHECK-NEXT:        [[HI:%[0-9]+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:        [[MN:%[0-9]+]] = arith.minimumf [[MX]], [[HI]] : f32
// CHECK-NEXT:        "krnl.store"([[MN]], [[ROWS]], [[O]], [[Q]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 22 : i64]]
// The copy-out keeps position i * 6 + j, j < 4, into out[n, g * 1 + o, i, j].
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O2:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[P6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:        [[I6:%[0-9]+]] = arith.muli [[I]], [[P6]] : index
// CHECK-NEXT:        [[AT:%[0-9]+]] = arith.addi [[I6]], [[J]] : index
// CHECK-NEXT:        [[V:%[0-9]+]] = "krnl.load"([[ROWS]], [[O2]], [[AT]])
// CHECK-NEXT:        [[OC2:%[0-9]+]] = arith.addi [[G]], [[O2]] : index
// CHECK-NEXT:        "krnl.store"([[V]], [[Y]], [[N]], [[OC2]], [[I]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return

// -----
// Stride 2, channel multiplier 2 (group 2, C 2, OC 4: C/g = 1, OC/g = 2), no padding:
// x [1, 2, 5, 5], 3x3 -> out 2 x 2 ((5 - 3) / 2 + 1). Every tap is inside x (reach
// (2 - 1) * 2 + 2 + 1 = 5 = the input), so no scratch and no alloc at all; stride 2 is not
// flattened, so this is the row nest over (o, oh, ow) = [0, 2) x [0, 2) x [0, 2), ow innermost.
// Output channel oc = g * 2 + o; tap (kh, kw) reads x[n, g * 1 + 0, oh * 2 + kh, ow * 2 + kw]
// (the row index first, then the column, then the channel; "+ 0" for kh or kw = 0 is not
// emitted); no bias: the sum starts from the first product, 8 additions for 9 taps.
builtin.module {
  func.func @depthwise_stride2_multiplier(%x: tensor<1x2x5x5xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x2x2xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], onnx_node_name = "dw2"} : (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, none) -> tensor<1x4x2x2xf32>
    func.return %y : tensor<1x4x2x2xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_multiplier(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[W:%[0-9]+]]: memref<4x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x4x2x2xf32>)
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw2"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[OCG:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[GO:%[0-9]+]] = arith.muli [[G]], [[OCG]] : index
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[GO]], [[O]] : index
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Tap (0, 0): x[n, g + 0, oh * 2, ow * 2].
// CHECK-NEXT:        [[S00:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R00:%[0-9]+]] = arith.muli [[OH]], [[S00]] : index
// CHECK-NEXT:        [[T00:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C00:%[0-9]+]] = arith.muli [[OW]], [[T00]] : index
// CHECK-NEXT:        [[CH00:%[0-9]+]] = arith.addi [[G]], [[Z]] : index
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH00]], [[R00]], [[C00]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// Tap (0, 1): column ow * 2 + 1.
// CHECK-NEXT:        [[S01:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R01:%[0-9]+]] = arith.muli [[OH]], [[S01]] : index
// CHECK-NEXT:        [[T01:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW2:%[0-9]+]] = arith.muli [[OW]], [[T01]] : index
// CHECK-NEXT:        [[K01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[C01:%[0-9]+]] = arith.addi [[OW2]], [[K01]] : index
// CHECK-NEXT:        [[CH01:%[0-9]+]] = arith.addi [[G]], [[Z]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH01]], [[R01]], [[C01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[M00]], [[M01]] : f32
// Tap (0, 2): column ow * 2 + 2.
// CHECK-NEXT:        [[S02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R02:%[0-9]+]] = arith.muli [[OH]], [[S02]] : index
// CHECK-NEXT:        [[T02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW2B:%[0-9]+]] = arith.muli [[OW]], [[T02]] : index
// CHECK-NEXT:        [[K02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C02:%[0-9]+]] = arith.addi [[OW2B]], [[K02]] : index
// CHECK-NEXT:        [[CH02:%[0-9]+]] = arith.addi [[G]], [[Z]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH02]], [[R02]], [[C02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M02]] : f32
// Tap (1, 0): row oh * 2 + 1, column ow * 2.
// CHECK-NEXT:        [[S10:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH2:%[0-9]+]] = arith.muli [[OH]], [[S10]] : index
// CHECK-NEXT:        [[K10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[R10:%[0-9]+]] = arith.addi [[OH2]], [[K10]] : index
// CHECK-NEXT:        [[T10:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C10:%[0-9]+]] = arith.muli [[OW]], [[T10]] : index
// CHECK-NEXT:        [[CH10:%[0-9]+]] = arith.addi [[G]], [[Z]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH10]], [[R10]], [[C10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// Taps (1, 1), (1, 2), (2, 0), (2, 1): one addition each (plus the one of (1, 0) above) ...
// CHECK-COUNT-5:     arith.addf
// ... then tap (2, 2): row oh * 2 + 2, column ow * 2 + 2, the last of the sum.
// CHECK-NEXT:        [[S22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH2C:%[0-9]+]] = arith.muli [[OH]], [[S22]] : index
// CHECK-NEXT:        [[K22R:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R22:%[0-9]+]] = arith.addi [[OH2C]], [[K22R]] : index
// CHECK-NEXT:        [[T22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW2C:%[0-9]+]] = arith.muli [[OW]], [[T22]] : index
// CHECK-NEXT:        [[K22C:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C22:%[0-9]+]] = arith.addi [[OW2C]], [[K22C]] : index
// CHECK-NEXT:        [[CH22:%[0-9]+]] = arith.addi [[G]], [[Z]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH22]], [[R22]], [[C22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf {{%[0-9]+}}, [[M22]] : f32
// No activation: the sum is stored as it is, into out[n, g * 2 + o, oh, ow].
// CHECK-NEXT:        "krnl.store"([[A8]], [[Y]], [[N]], [[OC]], [[OH]], [[OW]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return

// -----
// Stride 2 with TF's SAME padding (pads only at the end: MobileNet's stride-2 depthwise Convs):
// x [1, 2, 6, 6], 3x3 -> out 3 x 3. Output 2 of each axis reaches position 2 * 2 + 2 = 6, one
// past x: a tap in the padding. So the scratch: extent max(0 + 6, (3 - 1) * 2 + 2 + 1) = 7 per
// axis, [C/g, 7, 7] = [1, 7, 7], zeroed whole once per call; the copy-in writes x's 6 x 6 at
// +pad_begin = +0 (indices as they are, no add), leaving row 6 and column 6 at 0. Stride 2
// is not flattened: one row nest over (o, oh, ow) = [0, 1) x [0, 3) x [0, 3), oc = g + o,
// every tap a plain load of scratch[0, oh * 2 + kh, ow * 2 + kw]: no guard, no clamp, no
// select, and no load of x in the body. No bias, no activation.
builtin.module {
  func.func @depthwise_stride2_same(%x: tensor<1x2x6x6xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {group = 2 : i64, strides = [2, 2], pads = [0, 0, 1, 1], onnx_node_name = "dw3"} : (tensor<1x2x6x6xf32>, tensor<2x1x3x3xf32>, none) -> tensor<1x2x3x3xf32>
    func.return %y : tensor<1x2x3x3xf32>
  }
}
// CHECK-LABEL: func.func @depthwise_stride2_same(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x6x6xf32>, [[W:%[0-9]+]]: memref<2x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x2x3x3xf32>)
// CHECK-NEXT:    [[PAD:%[0-9]+]] = "krnl.alloc"() {onnx_node = "dw3"} : () -> memref<1x7x7xf32>
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw3"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:      [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      "krnl.store"([[ZERO]], [[PAD]], [[Z0]], [[Z1]], [[Z2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 7 : i64], [0 : i64, 7 : i64]]
// CHECK-NEXT:    "krnl.define_loops"() {onnx_node = "dw3"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// Copy-in: x[n, g + c, i, j] to scratch[c, i, j] over the 6 x 6 of x.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[C:%[0-9]+]]: index, [[I0:%[0-9]+]]: index, [[J0:%[0-9]+]]: index):
// CHECK-NEXT:        [[CH:%[0-9]+]] = arith.addi [[G]], [[C]] : index
// CHECK-NEXT:        [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH]], [[I0]], [[J0]])
// CHECK-NEXT:        "krnl.store"([[XV]], [[PAD]], [[C]], [[I0]], [[J0]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 6 : i64], [0 : i64, 6 : i64]]
// The row nest.
// CHECK-NEXT:      "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
// CHECK-NEXT:      "krnl.iterate"
// CHECK-NEXT:      ^bb0([[O:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:        [[OC:%[0-9]+]] = arith.addi [[G]], [[O]] : index
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0 : index
// Every tap below, in (kh, kw) order, is a plain load of the scratch: the CHECK-NEXT chain
// leaves no room for a cmpi, select, maxsi or minsi (no guard, no clamp) or a load of x.
// Tap (0, 0): scratch[0, oh * 2, ow * 2].
// CHECK-NEXT:        [[S00:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R00:%[0-9]+]] = arith.muli [[OH]], [[S00]] : index
// CHECK-NEXT:        [[T00:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C00:%[0-9]+]] = arith.muli [[OW]], [[T00]] : index
// CHECK-NEXT:        [[V00:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R00]], [[C00]])
// CHECK-NEXT:        [[KH00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW00:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W00:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH00]], [[KW00]])
// CHECK-NEXT:        [[M00:%[0-9]+]] = arith.mulf [[V00]], [[W00]] : f32
// Tap (0, 1): scratch[0, oh * 2, ow * 2 + 1].
// CHECK-NEXT:        [[S01:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R01:%[0-9]+]] = arith.muli [[OH]], [[S01]] : index
// CHECK-NEXT:        [[T01:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW2:%[0-9]+]] = arith.muli [[OW]], [[T01]] : index
// CHECK-NEXT:        [[K01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[C01:%[0-9]+]] = arith.addi [[OW2]], [[K01]] : index
// CHECK-NEXT:        [[V01:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R01]], [[C01]])
// CHECK-NEXT:        [[KH01:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW01:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W01:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH01]], [[KW01]])
// CHECK-NEXT:        [[M01:%[0-9]+]] = arith.mulf [[V01]], [[W01]] : f32
// CHECK-NEXT:        [[A1:%[0-9]+]] = arith.addf [[M00]], [[M01]] : f32
// Tap (0, 2): scratch[0, oh * 2, ow * 2 + 2].
// CHECK-NEXT:        [[S02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R02:%[0-9]+]] = arith.muli [[OH]], [[S02]] : index
// CHECK-NEXT:        [[T02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW02:%[0-9]+]] = arith.muli [[OW]], [[T02]] : index
// CHECK-NEXT:        [[KC02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C02:%[0-9]+]] = arith.addi [[OW02]], [[KC02]] : index
// CHECK-NEXT:        [[V02:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R02]], [[C02]])
// CHECK-NEXT:        [[KH02:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[KW02:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W02:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH02]], [[KW02]])
// CHECK-NEXT:        [[M02:%[0-9]+]] = arith.mulf [[V02]], [[W02]] : f32
// CHECK-NEXT:        [[A2:%[0-9]+]] = arith.addf [[A1]], [[M02]] : f32
// Tap (1, 0): scratch[0, oh * 2 + 1, ow * 2].
// CHECK-NEXT:        [[S10:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH10:%[0-9]+]] = arith.muli [[OH]], [[S10]] : index
// CHECK-NEXT:        [[KR10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[R10:%[0-9]+]] = arith.addi [[OH10]], [[KR10]] : index
// CHECK-NEXT:        [[T10:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C10:%[0-9]+]] = arith.muli [[OW]], [[T10]] : index
// CHECK-NEXT:        [[V10:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R10]], [[C10]])
// CHECK-NEXT:        [[KH10:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW10:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W10:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH10]], [[KW10]])
// CHECK-NEXT:        [[M10:%[0-9]+]] = arith.mulf [[V10]], [[W10]] : f32
// CHECK-NEXT:        [[A3:%[0-9]+]] = arith.addf [[A2]], [[M10]] : f32
// Tap (1, 1): scratch[0, oh * 2 + 1, ow * 2 + 1].
// CHECK-NEXT:        [[S11:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH11:%[0-9]+]] = arith.muli [[OH]], [[S11]] : index
// CHECK-NEXT:        [[KR11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[R11:%[0-9]+]] = arith.addi [[OH11]], [[KR11]] : index
// CHECK-NEXT:        [[T11:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW11:%[0-9]+]] = arith.muli [[OW]], [[T11]] : index
// CHECK-NEXT:        [[KC11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[C11:%[0-9]+]] = arith.addi [[OW11]], [[KC11]] : index
// CHECK-NEXT:        [[V11:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R11]], [[C11]])
// CHECK-NEXT:        [[KH11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW11:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W11:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH11]], [[KW11]])
// CHECK-NEXT:        [[M11:%[0-9]+]] = arith.mulf [[V11]], [[W11]] : f32
// CHECK-NEXT:        [[A4:%[0-9]+]] = arith.addf [[A3]], [[M11]] : f32
// Tap (1, 2): scratch[0, oh * 2 + 1, ow * 2 + 2].
// CHECK-NEXT:        [[S12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH12:%[0-9]+]] = arith.muli [[OH]], [[S12]] : index
// CHECK-NEXT:        [[KR12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[R12:%[0-9]+]] = arith.addi [[OH12]], [[KR12]] : index
// CHECK-NEXT:        [[T12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW12:%[0-9]+]] = arith.muli [[OW]], [[T12]] : index
// CHECK-NEXT:        [[KC12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C12:%[0-9]+]] = arith.addi [[OW12]], [[KC12]] : index
// CHECK-NEXT:        [[V12:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R12]], [[C12]])
// CHECK-NEXT:        [[KH12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[KW12:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W12:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH12]], [[KW12]])
// CHECK-NEXT:        [[M12:%[0-9]+]] = arith.mulf [[V12]], [[W12]] : f32
// CHECK-NEXT:        [[A5:%[0-9]+]] = arith.addf [[A4]], [[M12]] : f32
// Tap (2, 0): scratch[0, oh * 2 + 2, ow * 2].
// CHECK-NEXT:        [[S20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH20:%[0-9]+]] = arith.muli [[OH]], [[S20]] : index
// CHECK-NEXT:        [[KR20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R20:%[0-9]+]] = arith.addi [[OH20]], [[KR20]] : index
// CHECK-NEXT:        [[T20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C20:%[0-9]+]] = arith.muli [[OW]], [[T20]] : index
// CHECK-NEXT:        [[V20:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R20]], [[C20]])
// CHECK-NEXT:        [[KH20:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW20:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        [[W20:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH20]], [[KW20]])
// CHECK-NEXT:        [[M20:%[0-9]+]] = arith.mulf [[V20]], [[W20]] : f32
// CHECK-NEXT:        [[A6:%[0-9]+]] = arith.addf [[A5]], [[M20]] : f32
// Tap (2, 1): scratch[0, oh * 2 + 2, ow * 2 + 1].
// CHECK-NEXT:        [[S21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH21:%[0-9]+]] = arith.muli [[OH]], [[S21]] : index
// CHECK-NEXT:        [[KR21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R21:%[0-9]+]] = arith.addi [[OH21]], [[KR21]] : index
// CHECK-NEXT:        [[T21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW21:%[0-9]+]] = arith.muli [[OW]], [[T21]] : index
// CHECK-NEXT:        [[KC21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[C21:%[0-9]+]] = arith.addi [[OW21]], [[KC21]] : index
// CHECK-NEXT:        [[V21:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R21]], [[C21]])
// CHECK-NEXT:        [[KH21:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW21:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[W21:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH21]], [[KW21]])
// CHECK-NEXT:        [[M21:%[0-9]+]] = arith.mulf [[V21]], [[W21]] : f32
// CHECK-NEXT:        [[A7:%[0-9]+]] = arith.addf [[A6]], [[M21]] : f32
// Tap (2, 2): scratch[0, oh * 2 + 2, ow * 2 + 2], which for oh or ow = 2 is row or column 6
// of the scratch, the zero the copy-in never overwrote.
// CHECK-NEXT:        [[S22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OH2:%[0-9]+]] = arith.muli [[OH]], [[S22]] : index
// CHECK-NEXT:        [[K22R:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[R22:%[0-9]+]] = arith.addi [[OH2]], [[K22R]] : index
// CHECK-NEXT:        [[T22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[OW2C:%[0-9]+]] = arith.muli [[OW]], [[T22]] : index
// CHECK-NEXT:        [[K22C:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[C22:%[0-9]+]] = arith.addi [[OW2C]], [[K22C]] : index
// CHECK-NEXT:        [[V22:%[0-9]+]] = "krnl.load"([[PAD]], [[Z]], [[R22]], [[C22]])
// CHECK-NEXT:        [[KH22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[KW22:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[W22:%[0-9]+]] = "krnl.load"([[W]], [[OC]], [[Z]], [[KH22]], [[KW22]])
// CHECK-NEXT:        [[M22:%[0-9]+]] = arith.mulf [[V22]], [[W22]] : f32
// CHECK-NEXT:        [[A8:%[0-9]+]] = arith.addf [[A7]], [[M22]] : f32
// CHECK-NEXT:        "krnl.store"([[A8]], [[Y]], [[N]], [[OC]], [[OH]], [[OW]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return
