// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Winograd convolution (lowering/winograd.py), chosen per node here by the `conv_algorithm`
// attribute (compile(..., conv_algorithm=...) sets it for a whole model; see
// lowering/conv_algorithm.py). A Conv becomes: the transformed weights U [alpha^2, C, K] (in
// strips [alpha^2, K / 32, C, 32] when K is a multiple of 32) as a
// constant (krnl.global named winograd_f<m>_<node>), the input copied channels-last into a
// buffer [tiles * m + 2 per axis, C] whose border alone is zeroed, then per group of tiles: the input
// transform (one nest per axis, C innermost) into V [alpha^2, tiles, C], one krnl.matmul
// nest per transformed position t (tiles x K x C) starting from zero, the output transform (one
// nest per axis, K innermost) with the bias and activation, into out (or a whole-tile buffer
// copied out when tiles hang over the output's end).

// F(2,3) (alpha = 4), 3x3, pads 1, bias, ReLU: x [1, 2, 5, 5] -> y [1, 3, 5, 5].
// Tiles: ceil(5 / 2) = 3 per axis, so 9 tiles and a whole-tile output [3, 6, 6] (6 != 5:
// copied out at the end); padded input extent 3 * 2 + 2 = 8: [8, 8, C = 2].
// V: 16 * 9 * 2 = 288 values, M: 16 * 9 * 3 = 432; temps [4, 4, 2] (input) and [4, 2, 3]
// (output, after the first pass of A^T).
builtin.module {
  func.func @f2_pads_bias_relu(%x: tensor<1x2x5x5xf32>, %b: tensor<3xf32>) -> tensor<1x3x5x5xf32> attributes {input_names = ["x", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x3x3xf32>} : () -> tensor<3x2x3x3xf32>
    %y = "onnx.Conv"(%x, %w, %b) {pads = [1, 1, 1, 1], onnx_node_name = "c", activation = "Relu", conv_algorithm = "winograd-f2"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x5x5xf32>
    func.return %y : tensor<1x3x5x5xf32>
  }
}
// CHECK-LABEL: func.func @f2_pads_bias_relu(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5x5xf32>, [[B:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<1x3x5x5xf32>)
// CHECK:         [[U:%[0-9]+]] = "krnl.global"() {sym_name = "winograd_f2_c", value = dense_resource<winograd_f2_c> : tensor<16x2x3xf32>, onnx_node = "c"} : () -> memref<16x2x3xf32>
// CHECK-NEXT:    [[WHOLE:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<3x6x6xf32>
// CHECK-NEXT:    [[XP:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<8x8x2xf32>
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<288xf32>
// CHECK-NEXT:    [[M:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<432xf32>
// The temps between passes, one slot (one chunk of tile-row groups).
// CHECK-NEXT:    [[TIN:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<1x4x4x2xf32>
// CHECK-NEXT:    [[TOUT:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<1x4x2x3xf32>
// The padded buffer's border zeroed, once per call, before the batch loop: rows 0 and 6-7,
// then columns 0 and 6-7 (the input fills rows and columns 1-5).
// CHECK:         "krnl.store"({{%[0-9]+}}, [[XP]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 8 : i64], [0 : i64, 2 : i64]]
// CHECK:         }) {bounds = {{\[\[}}6 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 2 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 8 : i64], [0 : i64, 1 : i64], [0 : i64, 2 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 8 : i64], [6 : i64, 8 : i64], [0 : i64, 2 : i64]]
// Batch entry n; x[n, c, h, w] goes to XP[h + 1, w + 1, c] (channels last, C innermost).
// CHECK:         ^bb0([[N:%[0-9]+]]: index):
// CHECK:           ^bb0([[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK:             [[XV:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:        "krnl.store"([[XV]], [[XP]], {{%[0-9]+}}, {{%[0-9]+}}, [[C]])
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 5 : i64], [0 : i64, 5 : i64], [0 : i64, 2 : i64]]
// The input transform's first pass, along the tile's columns: for tile row i and channel c,
// the four inputs d0..d3 become B^T d = (d0 - d2, d1 + d2, d2 - d1, d3 - d1) (wincnn's F(2,3):
// Lavin & Gray's with the last row negated), stored in TIN[i, 0..3, c].
// CHECK:             [[D0:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D1:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D2:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D3:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK-NEXT:        [[E0:%[0-9]+]] = arith.subf [[D0]], [[D2]] : f32
// CHECK:             "krnl.store"([[E0]], [[TIN]]
// CHECK-NEXT:        [[E1:%[0-9]+]] = arith.addf [[D1]], [[D2]] : f32
// CHECK:             "krnl.store"([[E1]], [[TIN]]
// CHECK-NEXT:        [[E2:%[0-9]+]] = arith.subf [[D2]], [[D1]] : f32
// CHECK:             "krnl.store"([[E2]], [[TIN]]
// CHECK-NEXT:        [[E3:%[0-9]+]] = arith.subf [[D3]], [[D1]] : f32
// CHECK:             "krnl.store"([[E3]], [[TIN]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 2 : i64]]
// The second pass, along the rows, writes V (flat [16, 9, 2]).
// CHECK:             "krnl.store"({{%[0-9]+}}, [[V]], {{%[0-9]+}})
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 3 : i64]]
// 16 products M[t] (9 x 3) = V[t] (9 x 2) . U[t] (2 x 3), each starting from zero (no pass
// zeroes M first).
// CHECK-NOT:     bounds = {{\[\[}}0 : i64, 432 : i64]]
// CHECK:         "krnl.matmul"([[V]], [[U]], [[M]], {{.*}}) {sizes = [9 : i64, 3 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 3 : i64, 3 : i64], simd = 1 : i64, start = "zero"}
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 16 : i64]]
// The output transform's last pass adds bias[k], loaded once, and applies the ReLU before
// each store into the whole-tile buffer.
// CHECK:           [[BK:%[0-9]+]] = "krnl.load"([[B]], [[K:%[0-9]+]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf {{%[0-9]+}}, [[BK]] : f32
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.maximumf [[S]], [[Z]] : f32
// CHECK:           "krnl.store"([[R]], [[WHOLE]], [[K]]
// CHECK-NOT:       "krnl.load"([[B]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// Copy-out of the 5 x 5 real outputs per channel.
// CHECK:         "krnl.store"({{%[0-9]+}}, [[Y]], [[N]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 5 : i64], [0 : i64, 5 : i64]]
// CHECK:         func.return

// -----

// L3-fused F(4,3) (alpha = 6), ResNet's 64 channels at 56 x 56, no bias: 14 x 14 tiles, a
// tile row's V and M take 14 * 36 * (64 + 64) * 4 bytes = 252 KiB, so FUSED_BYTES = 256 KiB
// holds 1 tile row, but a group has at least MIN_GROUP_TILES = 24 tiles: 2 tile rows, so 7
// groups of 28 tiles. 7 groups would be one chunk (7 chunks of one group would each fill a
// slot of their own, cold; BAND_REUSE = 2), so 6 go to 2 chunks of 3 and the 7th is a loop
// of its own: V and M have 2 slots of 36 * 28 * 64 = 64512 values each. 56 is a multiple of 4, so
// the output transform stores straight into y (no whole-tile buffer). K = 64 is two whole
// strips of 32 (matmul.STRIP), so U is stored in strips, [36, 2, C, 32], and each position's
// product runs strip by strip: sizes [28 tiles, 32 columns, 64 deep], B's rows 32 apart.
builtin.module {
  func.func @f4_fused(%x: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<64x64x3x3xf32>} : () -> tensor<64x64x3x3xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], onnx_node_name = "c", conv_algorithm = "winograd-fused"} : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>, none) -> tensor<1x64x56x56xf32>
    func.return %y : tensor<1x64x56x56xf32>
  }
}
// CHECK-LABEL: func.func @f4_fused(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x64x56x56xf32>, [[Y:%[0-9]+]]: memref<1x64x56x56xf32>)
// CHECK:         [[U:%[0-9]+]] = "krnl.global"() {sym_name = "winograd_f4_c", {{.*}}} : () -> memref<36x2x64x32xf32>
// CHECK-NEXT:    [[XP:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<58x58x64xf32>
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<129024xf32>
// CHECK-NEXT:    [[M:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<129024xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "c"} : () -> memref<2x6x6x64xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "c"} : () -> memref<2x6x4x64xf32>
// CHECK:         "krnl.matmul"([[V]], [[U]], [[M]], {{.*}}) {sizes = [28 : i64, 32 : i64, 64 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [64 : i64, 1 : i64, 32 : i64, 64 : i64]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 28 : i64], [0 : i64, 32 : i64], [0 : i64, 64 : i64]]
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 36 : i64]]
// CHECK:         "krnl.store"({{%[0-9]+}}, [[Y]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 14 : i64]]
// Then the group's tiles whose 6 x 6 input window holds NaN, inf or an outsized value (the
// screen's per-position max against the batch entry's threshold) are recomputed by a direct
// sum over (c, taps) under an scf.if, into Y.
// CHECK:         arith.cmpf ugt
// CHECK-NEXT:    scf.if
// CHECK:         "krnl.store"({{%[0-9]+}}, [[Y]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 14 : i64]]
// The group loops, inside the batch loop: 2 chunks of 3 groups of 2 tile rows, then the 7th
// group.
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         "krnl.matmul"([[V]], [[U]], [[M]], {{.*}}) {sizes = [28 : i64, 32 : i64, 64 : i64]
// CHECK:         arith.cmpf ugt
// CHECK-NEXT:    scf.if
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 14 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]
// CHECK-NEXT:  }) {bounds = {{\[\[}}0 : i64, 1 : i64]], n_original = 1 : i64, onnx_node = "c"}

// -----

// A strided 3x3 is not Winograd's (stride 1 only): "winograd" falls back to conv.py's own
// choice, here im2col + GEMM, with no transformed weights.
builtin.module {
  func.func @strided_falls_back(%x: tensor<1x2x9x9xf32>) -> tensor<1x3x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x3x3xf32>} : () -> tensor<3x2x3x3xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {strides = [2, 2], onnx_node_name = "s", conv_algorithm = "winograd"} : (tensor<1x2x9x9xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x4x4xf32>
    func.return %y : tensor<1x3x4x4xf32>
  }
}
// CHECK-LABEL: func.func @strided_falls_back(
// CHECK-NOT:     winograd
// CHECK:         "krnl.alloc"() {onnx_node = "s"} : () -> memref<1x2x3x3x4x4xf32>
// CHECK-NOT:     winograd
// CHECK:         "krnl.matmul"
// CHECK-NOT:     winograd
// CHECK:         func.return

// -----

// 3-D 1x3x3 with F(2,3): the depth axis (kernel 1) has m = alpha = 1 and no transform pass,
// so U is [1 * 4 * 4, C, K] = [16, 2, 3]; 3 x 2 x 2 tiles, the padded input [3, 6, 6, 2],
// and each transform takes two passes (one temp each, [1, 4, 4, 2] and [1, 4, 2, 3], in
// one slot).
builtin.module {
  func.func @f2_1x3x3(%x: tensor<1x2x3x4x4xf32>) -> tensor<1x3x3x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x1x3x3xf32>} : () -> tensor<3x2x1x3x3xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {pads = [0, 1, 1, 0, 1, 1], onnx_node_name = "v", conv_algorithm = "winograd-f2"} : (tensor<1x2x3x4x4xf32>, tensor<3x2x1x3x3xf32>, none) -> tensor<1x3x3x4x4xf32>
    func.return %y : tensor<1x3x3x4x4xf32>
  }
}
// CHECK-LABEL: func.func @f2_1x3x3(
// CHECK:         "krnl.global"() {sym_name = "winograd_f2_v", {{.*}}} : () -> memref<16x2x3xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<3x6x6x2xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<384xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<576xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<1x1x4x4x2xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<1x1x4x2x3xf32>
// The screen's overflow bound: a constant buffer (it depends on the weights), so that layers of
// one shape share their code.
// CHECK-NEXT:    "krnl.global"() {sym_name = "screen_bound_v", value = dense<{{.*}}> : tensor<1xf32>, onnx_node = "v"} : () -> memref<1xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<3x6x6xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<1xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<2xf32>
// CHECK-NOT:     "krnl.alloc"
// CHECK:         "krnl.matmul"({{.*}}) {sizes = [12 : i64, 3 : i64, 2 : i64]
// CHECK:         func.return
