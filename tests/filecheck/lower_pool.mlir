// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Pooling (lowering/pool.py): the output starts at the reduction's identity (-inf for max, 0
// for average); one krnl.iterate over (output position, kernel tap) folds x at
// o * stride + k * dilation - pad_begin into it, a tap in the padding reading the identity
// through a guarded load. AveragePool then divides by a constant buffer of window counts
// (krnl.global): taps inside x, or inside the padded x with count_include_pad.

// MaxPool 2x2, stride 2 on [1, 1, 4, 4] -> [1, 1, 2, 2] (the Indices output absent: none);
// -inf is 0xff800000 in f32.
func.func @maxpool_2x2_s2(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "mp"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, none)
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @maxpool_2x2_s2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK:         [[NINF:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    "krnl.store"([[NINF]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index):
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[OH]], [[S]] : index
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.addi [[T]], [[KH]] : index
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T2:%[0-9]+]] = arith.muli [[OW]], [[S2]] : index
// CHECK-NEXT:      [[W:%[0-9]+]] = arith.addi [[T2]], [[KW]] : index
// The guard (n < 1, c < 1, row and column < 4) and the clamped address (n, c to 0; row and
// column into [0, 3]): a stride-2 window never leaves x here, but the guard is emitted anyway.
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      arith.cmpi sge, [[N]], [[Z]] : index
// CHECK-NEXT:      [[L1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      arith.cmpi slt, [[N]], [[L1]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[C]], [[Z]] : index
// CHECK-NEXT:      [[L1B:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      arith.cmpi slt, [[C]], [[L1B]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[H]], [[Z]] : index
// CHECK-NEXT:      [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      arith.cmpi slt, [[H]], [[L4]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[W]], [[Z]] : index
// CHECK-NEXT:      [[L4B:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      arith.cmpi slt, [[W]], [[L4B]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.andi
// CHECK-NEXT:      [[Z1:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[NLO:%[0-9]+]] = arith.maxsi [[N]], [[Z1]] : index
// CHECK-NEXT:      [[N0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[NC:%[0-9]+]] = arith.minsi [[NLO]], [[N0]] : index
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[CLO:%[0-9]+]] = arith.maxsi [[C]], [[Z2]] : index
// CHECK-NEXT:      [[C0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[CC:%[0-9]+]] = arith.minsi [[CLO]], [[C0]] : index
// CHECK-NEXT:      [[Z3:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[HLO:%[0-9]+]] = arith.maxsi [[H]], [[Z3]] : index
// CHECK-NEXT:      [[H3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[HC:%[0-9]+]] = arith.minsi [[HLO]], [[H3]] : index
// CHECK-NEXT:      [[Z4:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[WLO:%[0-9]+]] = arith.maxsi [[W]], [[Z4]] : index
// CHECK-NEXT:      [[W3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[WC:%[0-9]+]] = arith.minsi [[WLO]], [[W3]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[NC]], [[CC]], [[HC]], [[WC]])
// CHECK-NEXT:      [[PAD:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select [[OK]], [[V]], [[PAD]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.maximumf [[OLD]], [[G]] : f32
// CHECK-NEXT:      "krnl.store"([[M]], [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NOT:     krnl.global
// CHECK:         func.return

// -----
// MaxPool 3x3, pads 1, stride 1 on [1, 1, 3, 3] -> [1, 1, 3, 3]: row oh + kh - 1, guarded to
// [0, 3); a padded tap reads -inf.
func.func @maxpool_pads(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], onnx_node_name = "mp"} : (tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, none)
  func.return %y : tensor<1x1x3x3xf32>
}
// CHECK-LABEL: func.func @maxpool_pads(
// CHECK:         arith.constant 0xff800000 : f32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index, [[OH:%[0-9]+]]: index, {{%[0-9]+}}: index, [[KH:%[0-9]+]]: index, {{%[0-9]+}}: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.addi [[OH]], [[KH]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.addi [[T]], [[M1]] : index
// CHECK:           arith.cmpi sge, [[H]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      arith.cmpi slt, [[H]], [[L3]] : index
// CHECK:           [[PAD:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      arith.select {{%[0-9]+}}, {{%[0-9]+}}, [[PAD]] : f32
// CHECK:         bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]

// -----
// AveragePool 2x2, stride 2, pads 1 on [1, 1, 3, 3]: out = (3 + 2 - 2) / 2 + 1 = 2 per axis.
// Per axis, window 0 covers rows -1, 0 (1 inside x), window 1 rows 1, 2 (2 inside); with
// count_include_pad = 0 the divisors are the products [[1, 2], [2, 4]]. Padding reads 0.
func.func @avgpool_exclude_pad(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], onnx_node_name = "ap"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @avgpool_exclude_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index, [[OH:%[0-9]+]]: index, {{%[0-9]+}}: index, [[KH:%[0-9]+]]: index, {{%[0-9]+}}: index):
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[OH]], [[S2]] : index
// CHECK-NEXT:      [[T1:%[0-9]+]] = arith.addi [[T]], [[KH]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.addi [[T1]], [[M1]] : index
// CHECK:           arith.cmpi sge, [[H]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      arith.cmpi slt, [[H]], [[L3]] : index
// CHECK:           [[PAD:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select {{%[0-9]+}}, {{%[0-9]+}}, [[PAD]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]],
// CHECK-NEXT:      arith.addf [[OLD]], [[G]] : f32
// CHECK:         [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-SAME:      -> memref<2x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[I]], [[J]])
// CHECK-NEXT:      [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[I]], [[J]])
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf [[S]], [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[Q]], [[Y]], [[N]], [[C]], [[I]], [[J]])

// -----
// The same pool with count_include_pad = 1: every window lies inside the padded input
// [-1, 4) and counts 2 * 2 = 4.
func.func @avgpool_include_pad(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @avgpool_include_pad(
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<4.000000e+00> : tensor<2x2xf32>

// -----
// AveragePool 3 (1-D), stride 1, ceil_mode, pads [0, 1] on [1, 1, 4]: windows start at 0, 1, 2
// (out = ceil((4 + 1 - 3) / 1) + 1 = 3); the last one covers 2, 3, 4 and 4 is padding: counts
// [3, 3, 2] without count_include_pad.
func.func @avgpool_1d_end_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [3], pads = [0, 1], ceil_mode = 1 : i64, onnx_node_name = "ap1"} : (tensor<1x1x4xf32>) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @avgpool_1d_end_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4xf32>, [[Y:%[0-9]+]]: memref<1x1x3xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.addi [[O]], [[K]] : index
// CHECK:           arith.cmpi sge, [[P]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      arith.cmpi slt, [[P]], [[L4]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.andi
// CHECK:           arith.maxsi [[P]], {{%[0-9]+}} : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[PC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L3]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], {{%[0-9]+}}, {{%[0-9]+}}, [[PC]])
// CHECK-NEXT:      [[PAD:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select [[OK]], [[V]], [[PAD]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[O]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[G]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[N]], [[C]], [[O]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// CHECK-NEXT:    [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<[3.000000e+00, 3.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[C2:%[0-9]+]]: index, [[O2:%[0-9]+]]: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = "krnl.load"([[Y]], [[N2]], [[C2]], [[O2]])
// CHECK-NEXT:      [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[O2]])
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf [[T]], [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[Q]], [[Y]], [[N2]], [[C2]], [[O2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64]]

// -----
// AveragePool, auto_pad SAME_LOWER, kernel 2, count_include_pad on [1, 1, 4] -> [1, 1, 4]: the
// total padding (4 - 1) + 2 - 4 = 1 goes at the beginning; window 0 is (pad, x[0]), 2 taps
// counted with count_include_pad, so all counts are 2; the position is o + k - 1.
func.func @avgpool_same_lower_include_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2], auto_pad = "SAME_LOWER", count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @avgpool_same_lower_include_pad(
// CHECK:         ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index, [[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.addi [[O]], [[K]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      arith.addi [[T]], [[M1]] : index
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<2.000000e+00> : tensor<4xf32>

// -----
// GlobalAveragePool on [1, 2, 3, 4]: sums into y[n, c, 0, 0], then divides by 3 * 4 = 12.
func.func @global_avgpool(%x: tensor<1x2x3x4xf32>) -> tensor<1x2x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalAveragePool"(%x) {onnx_node_name = "gap"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x1x1xf32>
  func.return %y : tensor<1x2x1x1xf32>
}
// CHECK-LABEL: func.func @global_avgpool(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x3x4xf32>, [[Y:%[0-9]+]]: memref<1x2x1x1xf32>)
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64]]
// CHECK:         [[Z0:%[0-9]+]] = arith.constant {{.*}}0 : index
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[Z0]], [[Z0]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[N]], [[C]], [[Z0]], [[Z0]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK:           [[T:%[0-9]+]] = "krnl.load"([[Y]],
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.constant 1.200000e+01 : f32
// CHECK-NEXT:      arith.divf [[T]], [[D]] : f32
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// GlobalMaxPool on a 1-D [2, 3, 5]: max into y[n, c, 0] from -inf; no division.
func.func @global_maxpool_1d(%x: tensor<2x3x5xf32>) -> tensor<2x3x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalMaxPool"(%x) {onnx_node_name = "gmp"} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  func.return %y : tensor<2x3x1xf32>
}
// CHECK-LABEL: func.func @global_maxpool_1d(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x5xf32>, [[Y:%[0-9]+]]: memref<2x3x1xf32>)
// CHECK:         arith.constant 0xff800000 : f32
// CHECK:         [[Z0:%[0-9]+]] = arith.constant {{.*}}0 : index
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[Z0]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[W]])
// CHECK-NEXT:      arith.maximumf [[OLD]], [[V]] : f32
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 5 : i64]]
// CHECK-NOT:     arith.divf
// CHECK:         func.return
