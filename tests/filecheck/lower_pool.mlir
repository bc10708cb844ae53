// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Pooling (lowering/pool.py): one nest over the output positions (per batch entry, after a
// copy, when the pool is padded), the last output axis innermost; its body folds the window's taps, unrolled in kernel order, into
// one value starting at the reduction's identity (NaN for max, whose maxnumf skips a NaN, so a
// window of padding and NaNs only stays NaN; 0 for average), divides it by
// the window's count (AveragePool: a krnl.global of counts, taps inside x or inside the padded x
// with count_include_pad) and stores it once. A padded pool first copies x[n] into a scratch
// buffer [1, C, padded spatial] (conv.py's [groups, C/g, ...] with one group, index 0) whose
// border holds the padding value (NaN for max, 0 for average), written whole inside the batch
// loop by conv._copy_in (border first, then x inside), so no tap is guarded; a padded strided
// MaxPool splits the scratch's last axis by column phase instead (conv._phase_scratch,
// conv._copy_phases).

// MaxPool 2x2, stride 2 on [1, 1, 4, 4] -> [1, 1, 2, 2] (the Indices output absent: none):
// nothing padded, so one nest over the output reads x at (2 oh + kh, 2 ow + kw) directly; NaN
// is 0x7fc00000.
func.func @maxpool_2x2_s2(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "mp"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, none)
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @maxpool_2x2_s2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         "krnl.define_loops"() {{.*}} -> (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop)
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:      [[NAN:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.muli [[OH]], [[S]] : index
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[W:%[0-9]+]] = arith.muli [[OW]], [[S2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.maxnumf [[NAN]], [[V]] : f32
// Tap (0, 1): column 2 ow + 1.
// CHECK:           [[W1:%[0-9]+]] = arith.addi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[V1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], {{%[0-9]+}}, [[W1]])
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.maxnumf [[M]], [[V1]] : f32
// CHECK-COUNT-2:   arith.maxnumf
// CHECK-NEXT:      "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NOT:     arith.select
// CHECK:         func.return

// -----
// MaxPool 3x3, pads 1, stride 1 on [1, 1, 3, 3] -> [1, 1, 3, 3]: a [1, 1, 5, 5] scratch
// (extent max(1 + 3, 2 + 2 + 1) = 5; it used to be [1, 5, 5], zeroed and then set to the identity
// outside the batch loop), set to NaN (no zero pass) inside the batch loop at group index 0;
// x lands at (h + 1, w + 1); tap (kh, kw) reads scratch[0, c, oh + kh, ow + kw]: nine
// unguarded loads.
func.func @maxpool_pads(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], onnx_node_name = "mp"} : (tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, none)
  func.return %y : tensor<1x1x3x3xf32>
}
// CHECK-LABEL: func.func @maxpool_pads(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x3x3xf32>)
// CHECK:         [[P:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x5x5xf32>
// CHECK-NOT:     arith.constant 0.000000e+00 : f32
// CHECK:         ^bb0([[N:%[0-9]+]]: index):
// CHECK-NEXT:      [[G0:%[0-9]+]] = arith.constant 0 : index
// CHECK:           ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index):
// CHECK-NEXT:        [[NAN:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:        "krnl.store"([[NAN]], [[P]], [[G0]], [[Z0]], [[Z1]], [[Z2]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 5 : i64]]
// CHECK:         ^bb0([[CC:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], {{%[0-9]+}}, [[H]], [[W]])
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[H1:%[0-9]+]] = arith.addi [[H]], [[ONE]] : index
// CHECK-NEXT:      [[ONE2:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[W1:%[0-9]+]] = arith.addi [[W]], [[ONE2]] : index
// CHECK-NEXT:      "krnl.store"([[V]], [[P]], [[G0]], [[CC]], [[H1]], [[W1]])
// CHECK:         ^bb0([[C:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:      [[I:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:      [[GA:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = "krnl.load"([[P]], [[GA]], [[C]], [[OH]], [[OW]])
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.maxnumf [[I]], [[T]] : f32
// CHECK-NEXT:      [[K1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[OW1:%[0-9]+]] = arith.addi [[OW]], [[K1]] : index
// CHECK-NEXT:      [[GB:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T1:%[0-9]+]] = "krnl.load"([[P]], [[GB]], [[C]], [[OH]], [[OW1]])
// CHECK-NEXT:      arith.maxnumf [[M]], [[T1]] : f32
// CHECK-COUNT-7:   arith.maxnumf
// CHECK-NEXT:      "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[OH]], [[OW]])
// CHECK-NOT:     arith.select

// -----
// MaxPool 3x3, stride 2, pads 1 on [1, 1, 5, 5] -> [1, 1, 3, 3] (ResNet's stem pool): the
// padded row is 7 long, split into 2 phases of ceil(7 / 2) = 4 ([1, 1, 7, 2, 4]: one group,
// C = 1, 7 padded rows; set to NaN inside the batch loop); input column w sits
// at padded column w + 1: phase (w + 1) % 2, position (w + 1) // 2. Tap (kh, kw) reads row
// 2 oh + kh, phase kw % 2, position ow + kw // 2: consecutive along the output row.
func.func @maxpool_s2_pads_phases(%x: tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y, %idx = "onnx.MaxPool"(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], onnx_node_name = "mp"} : (tensor<1x1x5x5xf32>) -> (tensor<1x1x3x3xf32>, none)
  func.return %y : tensor<1x1x3x3xf32>
}
// CHECK-LABEL: func.func @maxpool_s2_pads_phases(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x5x5xf32>, [[Y:%[0-9]+]]: memref<1x1x3x3xf32>)
// CHECK:         [[P:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x7x2x4xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index):
// CHECK-NEXT:      [[G0:%[0-9]+]] = arith.constant 0 : index
// CHECK:           ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index, [[Z2:%[0-9]+]]: index, [[Z3:%[0-9]+]]: index):
// CHECK-NEXT:        [[NAN:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:        "krnl.store"([[NAN]], [[P]], [[G0]], [[Z0]], [[Z1]], [[Z2]], [[Z3]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 7 : i64], [0 : i64, 2 : i64], [0 : i64, 4 : i64]]
// Input columns 2j (phase 1, position j) and 2j + 1 (phase 0, position j + 1) for j < 2 in one
// nest: both column phases have j = 0 and 1, so it reads neighbouring columns (an interleaved
// pair LLVM vectorises).
// CHECK:         ^bb0([[C0:%[0-9]+]]: index, [[H0:%[0-9]+]]: index, [[J0:%[0-9]+]]: index):
// CHECK-NEXT:      [[CH0:%[0-9]+]] = arith.addi [[G0]], [[C0]] : index
// CHECK-NEXT:      [[R1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[HP:%[0-9]+]] = arith.addi [[H0]], [[R1]] : index
// CHECK-NEXT:      [[S0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[W0:%[0-9]+]] = arith.muli [[J0]], [[S0]] : index
// CHECK-NEXT:      [[V0:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH0]], [[H0]], [[W0]])
// CHECK-NEXT:      [[PH1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      "krnl.store"([[V0]], [[P]], [[G0]], [[C0]], [[HP]], [[PH1]], [[J0]])
// CHECK-NEXT:      [[S1:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[W1A:%[0-9]+]] = arith.muli [[J0]], [[S1]] : index
// CHECK-NEXT:      [[O1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[W1:%[0-9]+]] = arith.addi [[W1A]], [[O1]] : index
// CHECK-NEXT:      [[V1:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[CH0]], [[H0]], [[W1]])
// CHECK-NEXT:      [[PH0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[Q1:%[0-9]+]] = arith.addi [[J0]], [[ONE]] : index
// CHECK-NEXT:      "krnl.store"([[V1]], [[P]], [[G0]], [[C0]], [[HP]], [[PH0]], [[Q1]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [0 : i64, 2 : i64]]
// Then column 4 = 2 * 2, which only the even phase has: phase 1, position 2.
// CHECK:         ^bb0([[C2:%[0-9]+]]: index, [[H2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK:           "krnl.store"({{%[0-9]+}}, [[P]], [[G0]], [[C2]], {{%[0-9]+}}, {{%[0-9]+}}, [[J2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64], [2 : i64, 3 : i64]]
// CHECK:         ^bb0([[C:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:      [[I:%[0-9]+]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.muli [[OH]], [[S]] : index
// CHECK-NEXT:      [[F0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[GA:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T0:%[0-9]+]] = "krnl.load"([[P]], [[GA]], [[C]], [[R]], [[F0]], [[OW]])
// CHECK-NEXT:      [[M0:%[0-9]+]] = arith.maxnumf [[I]], [[T0]] : f32
// CHECK:           [[F1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[GB:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T1:%[0-9]+]] = "krnl.load"([[P]], [[GB]], [[C]], {{%[0-9]+}}, [[F1]], [[OW]])
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.maxnumf [[M0]], [[T1]] : f32
// CHECK:           [[F2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[K:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[OW1:%[0-9]+]] = arith.addi [[OW]], [[K]] : index
// CHECK-NEXT:      [[GC:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T2:%[0-9]+]] = "krnl.load"([[P]], [[GC]], [[C]], {{%[0-9]+}}, [[F2]], [[OW1]])
// CHECK-NEXT:      arith.maxnumf [[M1]], [[T2]] : f32
// CHECK-COUNT-6:   arith.maxnumf
// CHECK-NEXT:      "krnl.store"({{%[0-9]+}}, [[Y]], [[N]], [[C]], [[OH]], [[OW]])

// -----
// AveragePool 2x2, stride 2, pads 1 on [1, 1, 3, 3]: out = (3 + 2 - 2) / 2 + 1 = 2 per axis.
// Per axis, window 0 covers rows -1, 0 (1 inside x), window 1 rows 1, 2 (2 inside); with
// count_include_pad = 0 the divisors are the products [[1, 2], [2, 4]]. The scratch is
// [1, 1, 4, 4] (one group, C = 1, extent max(1 + 3, 2 + 1 + 1) = 4), zero-bordered inside the
// batch loop (never NaN); the sum starts at 0 and takes the taps in kernel order.
func.func @avgpool_exclude_pad(%x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], onnx_node_name = "ap"} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: func.func @avgpool_exclude_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x3x3xf32>, [[Y:%[0-9]+]]: memref<1x1x2x2xf32>)
// CHECK:         [[P:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x4x4xf32>
// CHECK-NEXT:    [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-SAME:      -> memref<2x2xf32>
// CHECK-NOT:     0x7fc00000
// CHECK:         ^bb0([[N:%[0-9]+]]: index):
// CHECK-NEXT:      [[G0:%[0-9]+]] = arith.constant 0 : index
// CHECK:             [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[Z]], [[P]], [[G0]],
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]]
// CHECK:         "krnl.store"({{%[0-9]+}}, [[P]], [[G0]],
// CHECK:         ^bb0([[C:%[0-9]+]]: index, [[OH:%[0-9]+]]: index, [[OW:%[0-9]+]]: index):
// CHECK-NEXT:      [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:           [[T0:%[0-9]+]] = "krnl.load"([[P]], {{%[0-9]+}}, [[C]],
// CHECK-NEXT:      [[S0:%[0-9]+]] = arith.addf [[ZERO]], [[T0]] : f32
// CHECK:           [[T1:%[0-9]+]] = "krnl.load"([[P]], {{%[0-9]+}}, [[C]],
// CHECK-NEXT:      [[S1:%[0-9]+]] = arith.addf [[S0]], [[T1]] : f32
// CHECK-COUNT-2:   arith.addf
// CHECK-NEXT:      [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[OH]], [[OW]])
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf {{%[0-9]+}}, [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[Q]], [[Y]], [[N]], [[C]], [[OH]], [[OW]])

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
// [3, 3, 2] without count_include_pad. The scratch is [1, 1, 5] (one group, C = 1, a row of
// max(0 + 4, 2 + 2 + 1) = 5: x at 0..3, a 0 at 4), zeroed in the batch loop before the copy.
func.func @avgpool_1d_end_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [3], pads = [0, 1], ceil_mode = 1 : i64, onnx_node_name = "ap1"} : (tensor<1x1x4xf32>) -> tensor<1x1x3xf32>
  func.return %y : tensor<1x1x3xf32>
}
// CHECK-LABEL: func.func @avgpool_1d_end_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4xf32>, [[Y:%[0-9]+]]: memref<1x1x3xf32>)
// CHECK:         [[P:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x5xf32>
// CHECK:         [[CNT:%[0-9]+]] = "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<[3.000000e+00, 3.000000e+00, 2.000000e+00]> : tensor<3xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index):
// CHECK-NEXT:      [[G0:%[0-9]+]] = arith.constant 0 : index
// CHECK:           ^bb0([[Z0:%[0-9]+]]: index, [[Z1:%[0-9]+]]: index):
// CHECK-NEXT:        [[ZF:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        "krnl.store"([[ZF]], [[P]], [[G0]], [[Z0]], [[Z1]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64]]
// CHECK:         ^bb0([[CC:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], {{%[0-9]+}}, [[I]])
// CHECK-NEXT:      "krnl.store"([[V]], [[P]], [[G0]], [[CC]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[C:%[0-9]+]]: index, [[O:%[0-9]+]]: index):
// CHECK-NEXT:      [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[GA:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T0:%[0-9]+]] = "krnl.load"([[P]], [[GA]], [[C]], [[O]])
// CHECK-NEXT:      [[S0:%[0-9]+]] = arith.addf [[ZERO]], [[T0]] : f32
// CHECK-NEXT:      [[K1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[O1:%[0-9]+]] = arith.addi [[O]], [[K1]] : index
// CHECK-NEXT:      [[GB:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T1:%[0-9]+]] = "krnl.load"([[P]], [[GB]], [[C]], [[O1]])
// CHECK-NEXT:      [[S1:%[0-9]+]] = arith.addf [[S0]], [[T1]] : f32
// CHECK-NEXT:      [[K2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[O2:%[0-9]+]] = arith.addi [[O]], [[K2]] : index
// CHECK-NEXT:      [[GC:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[T2:%[0-9]+]] = "krnl.load"([[P]], [[GC]], [[C]], [[O2]])
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.addf [[S1]], [[T2]] : f32
// CHECK-NEXT:      [[D:%[0-9]+]] = "krnl.load"([[CNT]], [[O]])
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf [[S2]], [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[Q]], [[Y]], [[N]], [[C]], [[O]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64]]

// -----
// AveragePool, auto_pad SAME_LOWER, kernel 2, count_include_pad on [1, 1, 4] -> [1, 1, 4]: the
// total padding (4 - 1) + 2 - 4 = 1 goes at the beginning (x at scratch position 1); window 0
// is (pad, x[0]), 2 taps counted with count_include_pad, so all counts are 2.
func.func @avgpool_same_lower_include_pad(%x: tensor<1x1x4xf32>) -> tensor<1x1x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.AveragePool"(%x) {kernel_shape = [2], auto_pad = "SAME_LOWER", count_include_pad = 1 : i64, onnx_node_name = "ap"} : (tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  func.return %y : tensor<1x1x4xf32>
}
// CHECK-LABEL: func.func @avgpool_same_lower_include_pad(
// The scratch [1, 1, 5] (one group; 1 + 4 = 5 long), zeroed inside the batch loop, then x copied
// in at position i + 1.
// CHECK:         "krnl.alloc"() {{.*}} -> memref<1x1x5xf32>
// CHECK:         "krnl.global"() {sym_name = "pool_count_{{[0-9]+}}", value = dense<2.000000e+00> : tensor<4xf32>
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 5 : i64]]
// CHECK:         ^bb0({{%[0-9]+}}: index, [[I:%[0-9]+]]: index):
// CHECK:           [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      arith.addi [[I]], [[ONE]] : index

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
// GlobalAveragePool on [1, 1, 9, 9]: 81 elements, more than MAX_TAPS, in chunks of 27 (the
// largest divisor up to 64), each summed unrolled onto the running value in y, in order.
func.func @global_avgpool_chunks(%x: tensor<1x1x9x9xf32>) -> tensor<1x1x1x1xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GlobalAveragePool"(%x) {onnx_node_name = "gap"} : (tensor<1x1x9x9xf32>) -> tensor<1x1x1x1xf32>
  func.return %y : tensor<1x1x1x1xf32>
}
// CHECK-LABEL: func.func @global_avgpool_chunks(
// CHECK:         [[YF:%[0-9]+]] = "krnl.reshape"({{%[0-9]+}}) {{.*}} -> memref<1x1xf32>
// CHECK:         arith.constant 0.000000e+00 : f32
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[YF]], [[N]], [[C]])
// CHECK-NEXT:      [[W:%[0-9]+]] = arith.constant 27 : index
// CHECK-NEXT:      [[AT:%[0-9]+]] = arith.muli [[K]], [[W]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, [[N]], [[C]], [[AT]])
// CHECK-NEXT:      arith.addf [[OLD]], [[V]] : f32
// CHECK-COUNT-26:  arith.addf
// CHECK-NEXT:      "krnl.store"({{%[0-9]+}}, [[YF]], [[N]], [[C]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 3 : i64]]
// CHECK:           arith.constant 8.100000e+01 : f32

// -----
// GlobalMaxPool on [1, 2, 259] (259 >= LANE_MIN = 256 elements): 16 running values, acc
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
