// RUN: python -m compilerkit.opt -p lower-to-krnl %s | filecheck %s --check-prefix=DEFAULT
// RUN: python -m compilerkit.opt -p 'lower-to-krnl{conv_algorithm=winograd-f2}' %s | filecheck %s --check-prefix=WINO
// RUN: python -m compilerkit.opt -p 'lower-to-krnl{conv_algorithm=winograd-f2 lanes=4}' %s | filecheck %s --check-prefix=LANES4
// RUN: not python -m compilerkit.opt -p 'lower-to-krnl{lanes=3}' %s 2>&1 | filecheck %s --check-prefix=BADLANES
// RUN: not python -m compilerkit.opt -p 'lower-to-krnl{conv_algorithm=fast}' %s 2>&1 | filecheck %s --check-prefix=BADALGO
// The lowering's compile choices are the options of `lower-to-krnl`: the Conv algorithm
// (lowering/conv_algorithm.py; default "classic") and the target's f32 lanes, which set the
// width of the strips constant matrices are stored in (two vectors: 32 columns at the default
// 16 lanes, 8 at 4 lanes). A compile sets both from its options and target.
// Here a 3x3 Conv with K = 8 output channels: classic keeps the weights as given; Winograd
// F(2,3) stores U [16, C = 2, K = 8] whole at 16 lanes (8 columns are no whole strip of 32)
// and in one strip of 8 at 4 lanes: [16, 1, 2, 8].
builtin.module {
  func.func @plain(%x: tensor<1x2x6x6xf32>) -> tensor<1x8x6x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w = "onnx.Constant"() {value = dense<0.5> : tensor<8x2x3x3xf32>} : () -> tensor<8x2x3x3xf32>
    %none = "onnx.NoValue"() {value} : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {pads = [1, 1, 1, 1], onnx_node_name = "c"} : (tensor<1x2x6x6xf32>, tensor<8x2x3x3xf32>, none) -> tensor<1x8x6x6xf32>
    func.return %y : tensor<1x8x6x6xf32>
  }
}
// DEFAULT-LABEL: func.func @plain(
// DEFAULT:         "krnl.global"() {sym_name = "const_0", value = dense<5.000000e-01> : tensor<8x2x3x3xf32>}
// DEFAULT-NOT:     winograd
// WINO:            "krnl.global"() {sym_name = "winograd_f2_c", value = dense_resource<winograd_f2_c> : tensor<16x2x8xf32>, onnx_node = "c"} : () -> memref<16x2x8xf32>
// LANES4:          "krnl.global"() {sym_name = "winograd_f2_c", value = dense_resource<winograd_f2_c> : tensor<16x1x2x8xf32>, onnx_node = "c"} : () -> memref<16x1x2x8xf32>
// BADLANES:        error: lower-to-krnl: lanes=3 is not a power of two from 1 to 64
// BADALGO:         error: unknown conv_algorithm 'fast'; choose one of auto, auto-f4, classic,
