// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Pooling (lowering/pool.py): x is read in place, per (n, c) plane, the output cut into regions
// whose windows hold the same taps inside x (per axis, runs of output positions: a padded
// border position, the rest). A nest per run of the leading axes (the rows) holds, per run of
// the last axis, a nest whose body folds that region's taps, unrolled in kernel order, into
// one value stored once (a border run of at most 2 positions: a nest per position). Nothing
// is copied and no padding is stored or read: skipping a padding tap changes no bit.
// AveragePool sums from 0 and divides by the window's count (a krnl.global: taps inside x,
// or inside the padded x with count_include_pad). A float MaxPool folds v = t if t > v else v
// (cmpf ogt + select: one vmaxps) from the first tap, adding each value it stores into the
// plane's running sums (numbered by the innermost loop around the value); where their sum is
// NaN (the fold's only departure from maxNum: a NaN first tap), an scf.if redoes the plane
// with maxnumf from NaN (maxNum's identity: a window of no number stays NaN).

// MaxPool 2x2, stride 2 on [1, 1, 4, 4] -> [1, 1, 2, 2] (the Indices output absent: none):
// nothing padded, one region. The running sums are [1, 1, 2] (by output column), zeroed per
// plane; the nest over ow inside the one over oh reads x at (2 oh + kh, 2 ow + kw): the
// first tap, then select the later tap where it is greater (a tie keeps the earlier one).
func.func @maxpool_2x2_s2(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "mp"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, none)
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @maxpool_2x2_s2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x2xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:           ^bb0([[J:%[0-9]+]]: index):
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[Z]], [[S]], [[N]], [[C]], [[J]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:           ^bb0([[OH:%[0-9]+]]: index):
// CHECK:             ^bb0([[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[S0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[H:%[0-9]+]] = arith.muli [[OH]], [[S0]] : index
// CHECK-NEXT:          [[S1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[W:%[0-9]+]] = arith.muli [[OW]], [[S1]] : index
// CHECK-NEXT:          [[T0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// Tap (0, 1): column 2 ow + 1.
// CHECK:               [[W1:%[0-9]+]] = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:          [[T1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], {{%[0-9]+}}, [[W1]])
// CHECK-NEXT:          [[GT:%[0-9]+]] = arith.cmpf ogt, [[T1]], [[T0]] : f32
// CHECK-NEXT:          [[M1:%[0-9]+]] = arith.select [[GT]], [[T1]], [[T0]] : f32
// CHECK-COUNT-2:       arith.select
// CHECK-NEXT:          "krnl.store"([[V:%[0-9]+]], [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:          [[OLD:%[0-9]+]] = "krnl.load"([[S]], [[N]], [[C]], [[OW]])
// CHECK-NEXT:          [[NEW:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:          "krnl.store"([[NEW]], [[S]], [[N]], [[C]], [[OW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK-NOT:       arith.maxnumf
// The two sums added, NaN tested; the plane redone the plain way under the scf.if: one nest,
// every tap folded by maxnumf from NaN (nothing padded here, so no load is guarded).
// CHECK:           [[A:%[0-9]+]] = "krnl.load"([[S]], [[N]], [[C]], {{%[0-9]+}})
// CHECK:           [[B:%[0-9]+]] = "krnl.load"([[S]], [[N]], [[C]], {{%[0-9]+}})
// CHECK-NEXT:      [[SUM:%[0-9]+]] = arith.addf [[A]], [[B]] : f32
// CHECK-NEXT:      [[BAD:%[0-9]+]] = arith.cmpf uno, [[SUM]], [[SUM]] : f32
// CHECK-NEXT:      scf.if [[BAD]] {
// CHECK-NEXT:        [[NAN:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK:             ^bb0([[EH:%[0-9]+]]: index, [[EW:%[0-9]+]]: index):
// CHECK:               [[E0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:          [[M:%[0-9]+]] = arith.maxnumf [[NAN]], [[E0]] : f32
// CHECK-COUNT-3:       arith.maxnumf
// CHECK-NEXT:          "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[EH]], [[EW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:      }
// CHECK:         func.return

// -----
// MaxPool 3x3, pads 1, stride 1 on [1, 1, 3, 3] -> [1, 1, 3, 3]: per axis, output 0 reads
// taps 1, 2 (tap 0 is padding), output 1 all three, output 2 taps 0, 1: three row runs of
// one position, and in each row three column runs of one position. Position (0, 0) folds
// the 4 taps (kh, kw) in {1, 2}^2 at (oh + kh - 1, ow + kw - 1); (1, 1) all 9. A value in a
// run of the last axis that short is summed by its row. No scratch, no NaN-filled border.
func.func @maxpool_pads(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], onnx_node_name = "mp"} : (tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, none)
  func.return %y : tensor<1x1x3x3xf32>
}
// CHECK-LABEL: func.func @maxpool_pads(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x3x3xf32>)
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x3xf32>
// CHECK-NOT:     krnl.alloc
// CHECK-NOT:     0x7fc00000
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:           "krnl.store"({{%[0-9]+}}, [[S]], [[N]], [[C]], {{%[0-9]+}})
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 3 : i64]]
// CHECK:           ^bb0([[OH:%[0-9]+]]: index):
// CHECK:             ^bb0([[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[T0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-COUNT-3:       arith.select
// CHECK-NEXT:          "krnl.store"([[V:%[0-9]+]], [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:          "krnl.load"([[S]], [[N]], [[C]], [[OH]])
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:             }) {bounds = {{\[\[}}2 : i64, 3 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// The middle row: its middle position reads tap (0, 0) at (oh - 1, ow - 1), then 8 selects.
// CHECK:           ^bb0([[MH:%[0-9]+]]: index):
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:             ^bb0([[MW:%[0-9]+]]: index):
// CHECK-NEXT:          [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:          [[H:%[0-9]+]] = arith.addi [[MH]], [[M1]] : index
// CHECK-NEXT:          [[M2:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:          [[W:%[0-9]+]] = arith.addi [[MW]], [[M2]] : index
// CHECK-NEXT:          "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// CHECK-COUNT-8:       arith.select
// CHECK-NEXT:          "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[MH]], [[MW]])
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:             }) {bounds = {{\[\[}}2 : i64, 3 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:           }) {bounds = {{\[\[}}2 : i64, 3 : i64]]
// The repair: one nest over the plane; tap (0, 0) at (oh - 1, ow - 1), guarded on both axes
// (clamped into x, read as NaN outside it; each index made once, shared by its taps).
// CHECK:           scf.if
// CHECK:             ^bb0([[RH:%[0-9]+]]: index, [[RW:%[0-9]+]]: index):
// CHECK:               arith.maxsi
// CHECK:               arith.minsi
// CHECK:               arith.cmpi slt
// CHECK:               "krnl.load"([[X]], [[N]], [[C]],
// CHECK-NEXT:          arith.select
// CHECK-NEXT:          arith.select
// CHECK-NEXT:          arith.maxnumf
// CHECK-COUNT-8:       arith.maxnumf
// CHECK-NEXT:          "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[RH]], [[RW]])

// -----
// MaxPool 3x3, stride 2, pads 1 on [1, 1, 5, 5] -> [1, 1, 3, 3] (ResNet's stem pool): per axis
// output 0 reads taps 1, 2 (at 2 o + k - 1), output 1 all three, output 2 taps 0, 1 (tap 2
// would be column 5, the end padding). The region with every tap reads x at stride 2.
func.func @maxpool_s2_pads(%x: tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], onnx_node_name = "mp"} : (tensor<1x1x5x5xf32>) -> (tensor<1x1x3x3xf32>, none)
  func.return %y : tensor<1x1x3x3xf32>
}
// CHECK-LABEL: func.func @maxpool_s2_pads(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x5x5xf32>, [[Y:%[0-9]+]]: memref<1x1x3x3xf32>)
// CHECK-NEXT:    "krnl.alloc"() {{.*}} -> memref<1x1x3xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 3 : i64]]
// Row 0, column 0: taps (1, 1), (1, 2), (2, 1), (2, 2), the first at (2 oh, 2 ow).
// CHECK:           ^bb0([[OH:%[0-9]+]]: index):
// CHECK:             ^bb0([[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[S0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[H:%[0-9]+]] = arith.muli [[OH]], [[S0]] : index
// CHECK-NEXT:          [[S1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[W:%[0-9]+]] = arith.muli [[OW]], [[S1]] : index
// CHECK-NEXT:          "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// CHECK-COUNT-3:       arith.select
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:             }) {bounds = {{\[\[}}2 : i64, 3 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// Row 1, column 1, every tap: tap (0, 0) at (2 oh - 1, 2 ow - 1), 9 taps.
// CHECK:           ^bb0([[MH:%[0-9]+]]: index):
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:             ^bb0([[MW:%[0-9]+]]: index):
// CHECK-NEXT:          [[T2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:          [[H2:%[0-9]+]] = arith.muli [[MH]], [[T2]] : index
// CHECK-NEXT:          [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:          [[H1:%[0-9]+]] = arith.addi [[H2]], [[M1]] : index
// CHECK:               "krnl.load"([[X]], [[N]], [[C]], [[H1]], {{%[0-9]+}})
// CHECK-COUNT-8:       arith.select
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:           scf.if

// -----
// AveragePool 2x2, stride 2, pads 1 on [1, 1, 3, 3]: out = (3 + 2 - 2) / 2 + 1 = 2 per axis.
// Per axis, window 0 covers rows -1, 0 (1 inside x), window 1 rows 1, 2 (2 inside); with
// count_include_pad = 0 the divisors are the products [[1, 2], [2, 4]]. Two row runs of one
// position, two column runs in each: no running sums, no scf.if, no scratch; each sum starts
// at 0 and takes its taps in kernel order.
func.func @avgpool_exclude_pad(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], onnx_node_name = "ap"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @avgpool_exclude_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK-NEXT:    [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-SAME:      -> memref<2x2xf32>
// CHECK-NOT:     krnl.alloc
// CHECK-NOT:     0x7fc00000
// Output (0, 0): the one tap (1, 1) at (2 oh, 2 ow).
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:           ^bb0([[OH:%[0-9]+]]: index):
// CHECK:             ^bb0([[OW:%[0-9]+]]: index):
// CHECK-NEXT:          [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:               [[T0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:          [[S0:%[0-9]+]] = arith.addf [[ZERO]], [[T0]] : f32
// CHECK-NEXT:          [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[OH]], [[OW]])
// CHECK-NEXT:          [[Q:%[0-9]+]] = arith.divf [[S0]], [[D]] : f32
// CHECK-NEXT:          "krnl.store"([[Q]], [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// Output (0, 1): taps (1, 0), (1, 1).
// CHECK:             ^bb0({{.*}}):
// CHECK-COUNT-2:       arith.addf
// CHECK-NEXT:          "krnl.load"([[CNT]],
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// Row 1: output (1, 0), then (1, 1) with all 4 taps.
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:             ^bb0({{.*}}):
// CHECK-COUNT-4:       arith.addf
// CHECK-NEXT:          "krnl.load"([[CNT]],
// CHECK:             }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK-NOT:     scf.if
// CHECK:         func.return

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
// [3, 3, 2] without count_include_pad. Two runs: outputs 0, 1 sum taps 0, 1, 2 (at o + k),
// output 2 taps 0, 1 only; both runs are short (at most 2 positions), so each position gets
// a nest of its own.
func.func @avgpool_1d_end_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [3], pads = [0, 1], ceil_mode = 1 : i64, onnx_node_name = "ap1"} : (tensor<1x1x4xf32>) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @avgpool_1d_end_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4xf32>, [[Y:%[0-9]+]]: memref<1x1x3xf32>)
// CHECK-NEXT:    [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<[3.000000e+00, 3.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:           ^bb0([[O:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[T0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[O]])
// CHECK-NEXT:        [[S0:%[0-9]+]] = arith.addf [[ZERO]], [[T0]] : f32
// CHECK-NEXT:        [[K1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[O1:%[0-9]+]] = arith.addi [[O]], [[K1]] : index
// CHECK-NEXT:        [[T1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[O1]])
// CHECK-NEXT:        [[S1:%[0-9]+]] = arith.addf [[S0]], [[T1]] : f32
// CHECK-NEXT:        [[K2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:        [[O2:%[0-9]+]] = arith.addi [[O]], [[K2]] : index
// CHECK-NEXT:        [[T2:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[O2]])
// CHECK-NEXT:        [[S2:%[0-9]+]] = arith.addf [[S1]], [[T2]] : f32
// CHECK-NEXT:        [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[O]])
// CHECK-NEXT:        [[Q:%[0-9]+]] = arith.divf [[S2]], [[D]] : f32
// CHECK-NEXT:        "krnl.store"([[Q]], [[Y]], [[N]], [[C]], [[O]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:           }) {bounds = {{\[\[}}1 : i64, 2 : i64]]
// CHECK:           ^bb0({{.*}}):
// CHECK-COUNT-2:     arith.addf
// CHECK-NEXT:        "krnl.load"([[CNT]],
// CHECK:           }) {bounds = {{\[\[}}2 : i64, 3 : i64]]

// -----
// AveragePool, auto_pad SAME_LOWER, kernel 2, count_include_pad on [1, 1, 4] -> [1, 1, 4]: the
// total padding (4 - 1) + 2 - 4 = 1 goes at the beginning; window 0 is (pad, x[0]), 2 taps
// counted with count_include_pad, so all counts are 2. Output 0 sums tap 1 (x[o]) alone;
// outputs 1..3 both taps (x[o - 1], x[o]).
func.func @avgpool_same_lower_include_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2], auto_pad = "SAME_LOWER", count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @avgpool_same_lower_include_pad(
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<2.000000e+00> : tensor<4xf32>
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK:           ^bb0([[I:%[0-9]+]]: index):
// CHECK:             [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:        arith.addi [[I]], [[M1]] : index
// CHECK:           }) {bounds = {{\[\[}}1 : i64, 4 : i64]]

// -----
// GlobalAveragePool on [1, 2, 3, 4]: each plane, read flat (12 elements), summed unrolled in
// order from 0 in a value, divided by 3 * 4 = 12, stored once.
func.func @global_avgpool(%x: tensor<1x2x3x4xf32>) -> tensor<1x2x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalAveragePool"(%x) {onnx_node_name = "gap"} : (tensor<1x2x3x4xf32>) -> tensor<1x2x1x1xf32>
  func.return %y : tensor<1x2x1x1xf32>
}
// CHECK-LABEL: func.func @global_avgpool(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x3x4xf32>, [[Y:%[0-9]+]]: memref<1x2x1x1xf32>)
// CHECK-NEXT:    [[XF:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<1x2x12xf32>
// CHECK-NEXT:    [[YF:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<1x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[I0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[V0:%[0-9]+]] = "krnl.load"([[XF]], [[N]], [[C]], [[I0]])
// CHECK-NEXT:      [[S0:%[0-9]+]] = arith.addf [[Z]], [[V0]] : f32
// CHECK-NEXT:      [[I1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[V1:%[0-9]+]] = "krnl.load"([[XF]], [[N]], [[C]], [[I1]])
// CHECK-NEXT:      [[S1:%[0-9]+]] = arith.addf [[S0]], [[V1]] : f32
// CHECK-COUNT-10:  arith.addf
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.constant 1.200000e+01 : f32
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf {{%[0-9]+}}, [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[Q]], [[YF]], [[N]], [[C]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]

// -----
// GlobalMaxPool on a 1-D [2, 3, 5]: max from -inf over the 5 elements; no division.
func.func @global_maxpool_1d(%x: tensor<2x3x5xf32>) -> tensor<2x3x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalMaxPool"(%x) {onnx_node_name = "gmp"} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  func.return %y : tensor<2x3x1xf32>
}
// CHECK-LABEL: func.func @global_maxpool_1d(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x5xf32>, [[Y:%[0-9]+]]: memref<2x3x1xf32>)
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK-NEXT:      [[I:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[Z0]])
// CHECK-NEXT:      arith.maximumf [[I]], [[V]] : f32
// CHECK-COUNT-4:   arith.maximumf
// CHECK-NOT:       arith.divf
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         func.return

// -----
// GlobalAveragePool on [1, 1, 9, 9]: 81 elements, more than MAX_TAPS: 16 running values, the
// nest (n, c, row, lane) over 81 // 16 = 5 rows, element 80 into lane 0, then the fold over
// the lanes divided by 81.
func.func @global_avgpool_lanes(%x: tensor<1x1x9x9xf32>) -> tensor<1x1x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalAveragePool"(%x) {onnx_node_name = "gap"} : (tensor<1x1x9x9xf32>) -> tensor<1x1x1x1xf32>
  func.return %y : tensor<1x1x1x1xf32>
}
// CHECK-LABEL: func.func @global_avgpool_lanes(
// CHECK:         [[ACC:%[0-9]+]] = "krnl.alloc"() {onnx_node = "gap"} : () -> memref<1x1x16xf32>
// CHECK:         arith.constant 0.000000e+00 : f32
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[R:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:           arith.addf
// CHECK:           "krnl.store"({{%[0-9]+}}, [[ACC]], [[N]], [[C]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 16 : i64]]
// CHECK:           arith.constant 80 : index
// CHECK-NOT:       arith.constant 81 : index
// CHECK:           arith.constant 8.100000e+01 : f32
// CHECK-NEXT:      arith.divf

// -----
// GlobalMaxPool on [1, 2, 259] (more than MAX_TAPS = 64 elements): 16 running values, acc
// [1, 2, 16], start at -inf; the nest (n, c, row, lane) over 259 // 16 = 16 rows folds
// x[n, c, row * 16 + lane] into acc[n, c, lane] (lane innermost: it vectorises); then per
// (n, c) the 259 - 256 = 3 leftover elements 256, 257, 258 go into lanes 0, 1, 2 and the 16
// lanes are folded in order, lane 0 first. Max: no division.
func.func @global_maxpool_lanes(%x: tensor<1x2x259xf32>) -> tensor<1x2x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalMaxPool"(%x) {onnx_node_name = "gmp"} : (tensor<1x2x259xf32>) -> tensor<1x2x1xf32>
  func.return %y : tensor<1x2x1xf32>
}
// CHECK-LABEL: func.func @global_maxpool_lanes(
// CHECK:         [[ACC:%[0-9]+]] = "krnl.alloc"() {onnx_node = "gmp"} : () -> memref<1x2x16xf32>
// CHECK:         arith.constant 0xff800000 : f32
// CHECK:         "krnl.store"({{%[0-9]+}}, [[ACC]],
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[R:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[SIXTEEN:%[0-9]+]] = arith.constant 16 : index
// CHECK-NEXT:      [[ROW:%[0-9]+]] = arith.muli [[R]], [[SIXTEEN]] : index
// CHECK-NEXT:      [[AT:%[0-9]+]] = arith.addi [[ROW]], [[J]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, [[N]], [[C]], [[AT]])
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[ACC]], [[N]], [[C]], [[J]])
// CHECK:           "krnl.store"({{%[0-9]+}}, [[ACC]], [[N]], [[C]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 16 : i64], [0 : i64, 16 : i64]]
// Lane 0 takes element 256 before the fold over the lanes starts.
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[C2:%[0-9]+]]: index):
// CHECK-NEXT:      [[L0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      "krnl.load"([[ACC]], [[N2]], [[C2]], [[L0]])
// CHECK-NEXT:      [[E256:%[0-9]+]] = arith.constant 256 : index
// CHECK-NEXT:      "krnl.load"({{%[0-9]+}}, [[N2]], [[C2]], [[E256]])
// CHECK:           arith.constant 258 : index
// CHECK:           arith.constant 15 : index
// CHECK-NOT:       arith.constant 259 : index
// CHECK:           "krnl.store"({{%[0-9]+}}, {{%[0-9]+}}, [[N2]], [[C2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64]]
