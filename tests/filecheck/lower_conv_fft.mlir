// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// FFT convolution on tiles (lowering/fft.py), chosen per node here by the `conv_algorithm`
// attribute (compile(..., conv_algorithm="fft...") sets it for a whole model). A Conv becomes:
// U [P, 2C, 2K] (conj of the kernels' DFT / t^r as [[Wr, Wi], [-Wi, Wr]] blocks) as a
// constant (krnl.global fft_t<t>_<node>), the input copied channels-last into a zero-bordered
// buffer, then per group of tiles: the forward FFT (one nest per axis, C innermost, the
// radix-2 butterflies unrolled) into V [P, tiles, re | im, C], one krnl.matmul nest per
// complex position p (tiles x 2K x 2C) starting from zero, the inverse FFT (K innermost) with the bias and
// activation into out.

// 1-D, 5 inputs, kernel 3, pads 1, bias, ReLU: out + k - 1 = 7 fits one 8-point tile (m = 6),
// so P = 8 / 2 + 1 = 5 and U is [5, 4, 6]; the padded buffer holds pads + data = 6 positions,
// V 5 * 2 * 2 = 20 values, M 5 * 2 * 3 = 30. ZNNi's pruning: the tile's positions 0 (the pad)
// and 6, 7 (the FFT's padding) are known zeros, so the forward FFT loads only positions 1..5,
// and the DC term is their sum (4 adds, no butterfly on a zero); the imaginary part of the
// DC is stored as a constant 0. The inverse computes only the 5 needed outputs of 8.
builtin.module {
  func.func @fft_1d_one_tile(%x: tensor<1x2x5xf32>, %b: tensor<3xf32>) -> tensor<1x3x5xf32> attributes {input_names = ["x", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x3xf32>} : () -> tensor<3x2x3xf32>
    %y = "onnx.Conv"(%x, %w, %b) {pads = [1, 1], onnx_node_name = "c", activation = "Relu", conv_algorithm = "fft-t8"} : (tensor<1x2x5xf32>, tensor<3x2x3xf32>, tensor<3xf32>) -> tensor<1x3x5xf32>
    func.return %y : tensor<1x3x5xf32>
  }
}
// CHECK-LABEL: func.func @fft_1d_one_tile(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x5xf32>, [[B:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<1x3x5xf32>)
// CHECK:         [[U:%[0-9]+]] = "krnl.global"() {sym_name = "fft_t8_c", value = dense_resource<fft_t8_c> : tensor<5x4x6xf32>, onnx_node = "c"} : () -> memref<5x4x6xf32>
// CHECK-NEXT:    [[XP:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<6x2xf32>
// CHECK-NEXT:    [[V:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<20xf32>
// CHECK-NEXT:    [[M:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c"} : () -> memref<30xf32>
// The special-value screen (winograd.Screen): the overflow bound (a constant buffer: it
// depends on the weights), max |x| per padded position, the threshold, two accumulators.
// CHECK-NEXT:    "krnl.global"() {sym_name = "screen_bound_c", value = dense<{{.*}}> : tensor<1xf32>, onnx_node = "c"} : () -> memref<1xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "c"} : () -> memref<6xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "c"} : () -> memref<1xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "c"} : () -> memref<2xf32>
// CHECK-NOT:     "krnl.alloc"
// The forward pass over channels: five loads of the tile, positions origin + 1 .. origin + 5.
// CHECK:           "krnl.load"([[X]]
// CHECK-NEXT:      "krnl.store"({{%[0-9]+}}, [[XP]]
// The screen: max over the channels of |x| per padded position, then the threshold (the
// geometric mean of those maxima times SCREEN_RANGE).
// CHECK:             math.absf
// CHECK:             arith.cmpf ole
// CHECK:           math.exp
// CHECK:             [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:        [[P1:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[ONE]] : index
// CHECK-NEXT:        [[D1:%[0-9]+]] = "krnl.load"([[XP]], [[P1]], {{%[0-9]+}})
// CHECK:             [[D2:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D3:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D4:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK:             [[D5:%[0-9]+]] = "krnl.load"([[XP]]
// CHECK-NOT:         "krnl.load"([[XP]]
// X[0] = d1 + ... + d5, as the even and odd halves' butterflies leave it.
// CHECK-NEXT:        [[E0:%[0-9]+]] = arith.addf [[D4]], [[D2]] : f32
// CHECK-NEXT:        [[O0:%[0-9]+]] = arith.addf [[D1]], [[D5]] : f32
// CHECK-NEXT:        [[O1:%[0-9]+]] = arith.addf [[O0]], [[D3]] : f32
// CHECK-NEXT:        [[DC:%[0-9]+]] = arith.addf [[E0]], [[O1]] : f32
// CHECK:             "krnl.store"([[DC]], [[V]]
// CHECK:             [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:             "krnl.store"([[ZERO]], [[V]]
// The twiddle e^(-i pi / 4) inlined as a constant.
// CHECK:             arith.constant 0.707106769 : f32
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// 5 complex products M[p] (1 x 6) = V[p] (1 x 4) . U[p] (4 x 6), each starting from zero.
// CHECK-NOT:     bounds = {{\[\[}}0 : i64, 30 : i64]]
// CHECK:         "krnl.matmul"([[V]], [[U]], [[M]], {{.*}}) {sizes = [1 : i64, 6 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 6 : i64, 6 : i64], simd = 1 : i64, start = "zero"}
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 5 : i64]]
// The inverse over output channels: 10 loads (re and im of 5 frequencies), bias loaded
// once, then ReLU and a store into y for each of the 5 outputs, and no more.
// CHECK-COUNT-10:    "krnl.load"([[M]]
// CHECK:             [[BK:%[0-9]+]] = "krnl.load"([[B]], [[K:%[0-9]+]])
// CHECK-NEXT:        [[S:%[0-9]+]] = arith.addf {{%[0-9]+}}, [[BK]] : f32
// CHECK-NEXT:        [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        [[R:%[0-9]+]] = arith.maximumf [[S]], [[Z]] : f32
// CHECK-NEXT:        "krnl.store"([[R]], [[Y]], {{%[0-9]+}}, [[K]], {{%[0-9]+}})
// CHECK-COUNT-4:     "krnl.store"({{%[0-9]+}}, [[Y]]
// CHECK-NOT:         "krnl.store"
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 3 : i64]]
// CHECK:         func.return

// -----

// 3-D 7^3 kernel, 9^3 input, pads 3, 16 channels ("fft": the tile chosen by conv_tiles.choose_fft_tile
// is 16; 9 + 6 <= 16, so one tile per axis). P = 16 * 16 * 9 = 2304, U [2304, 32, 32] stored
// as one strip of 2K = 32 columns (matmul.STRIP), [2304, 1, 32, 32]. The
// forward's first pass (along the last axis) loops only over the data slabs [3, 12) of the
// two other axes (ZNNi: the 7 zero slabs of 16 are never transformed), the second over
// [3, 12) of the first axis and all 9 frequencies of the last; the inverse keeps 9 outputs
// of each axis it has inverted: temps [9, 16, 9, re | im, 16] and [9, 9, 9, re | im, 16]
// (the forward temps are [16, 16, 9, re | im, 16] after each of its first two passes).
builtin.module {
  func.func @fft_3d_pruned(%x: tensor<1x16x9x9x9xf32>) -> tensor<1x16x9x9x9xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<16x16x7x7x7xf32>} : () -> tensor<16x16x7x7x7xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {pads = [3, 3, 3, 3, 3, 3], onnx_node_name = "v", conv_algorithm = "fft"} : (tensor<1x16x9x9x9xf32>, tensor<16x16x7x7x7xf32>, none) -> tensor<1x16x9x9x9xf32>
    func.return %y : tensor<1x16x9x9x9xf32>
  }
}
// CHECK-LABEL: func.func @fft_3d_pruned(
// CHECK:         "krnl.global"() {sym_name = "fft_t16_v", {{.*}}} : () -> memref<2304x1x32x32xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<12x12x12x16xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<73728xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<73728xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<16x16x9x2x16xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<16x16x9x2x16xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<9x16x9x2x16xf32>
// CHECK-NEXT:    "krnl.alloc"() {onnx_node = "v"} : () -> memref<9x9x9x2x16xf32>
// CHECK:         }) {bounds = {{\[\[}}3 : i64, 12 : i64], [3 : i64, 12 : i64], [0 : i64, 16 : i64]]
// CHECK:         }) {bounds = {{\[\[}}3 : i64, 12 : i64], [0 : i64, 9 : i64], [0 : i64, 16 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 16 : i64], [0 : i64, 9 : i64], [0 : i64, 16 : i64]]
// CHECK:         "krnl.matmul"({{.*}}) {sizes = [1 : i64, 32 : i64, 32 : i64]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2304 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 16 : i64], [0 : i64, 9 : i64], [0 : i64, 16 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 9 : i64], [0 : i64, 9 : i64], [0 : i64, 16 : i64]]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 9 : i64], [0 : i64, 9 : i64], [0 : i64, 16 : i64]]
// CHECK:         func.return

// -----

// A strided 5x5 is not the FFT's (stride 1 only): "fft" falls back to conv.py's own choice,
// here im2col + GEMM, with no transformed weights.
builtin.module {
  func.func @strided_falls_back(%x: tensor<1x2x9x9xf32>) -> tensor<1x3x3x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x5x5xf32>} : () -> tensor<3x2x5x5xf32>
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {strides = [2, 2], onnx_node_name = "s", conv_algorithm = "fft"} : (tensor<1x2x9x9xf32>, tensor<3x2x5x5xf32>, none) -> tensor<1x3x3x3xf32>
    func.return %y : tensor<1x3x3x3xf32>
  }
}
// CHECK-LABEL: func.func @strided_falls_back(
// CHECK-NOT:     fft_t
// CHECK:         "krnl.matmul"
// CHECK-NOT:     fft_t
// CHECK:         func.return
