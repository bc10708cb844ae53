// RUN: python -m compilerkit.opt -p lower-to-krnl %s | filecheck %s --check-prefix=NOFOLD
// RUN: python -m compilerkit.opt -p lower-to-krnl,fold-layout %s | filecheck %s
// fold-layout (krnl_passes/fold_layout.py) drops the NCDHW8c transforms between two chained
// blocked (pznet) Convs. Lowered alone, each Conv changes the layout on its way in and on its
// way out (four transform nests, and c1's NCDHW output buffer between them); folded, only
// the chain's input transform (c1) and output transform (c2) are left, c2 reads c1's blocked
// buffer, and c1's NCDHW buffer is gone. lower_conv_pznet.mlir checks the blocked Conv itself.
builtin.module {
  func.func @chain(%x: tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w1 = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x1x1x1xf32>} : () -> tensor<3x2x1x1x1xf32>
    %w2 = "onnx.Constant"() {value = dense<0.25> : tensor<2x3x1x1x1xf32>} : () -> tensor<2x3x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %h = "onnx.Conv"(%x, %w1, %none) {onnx_node_name = "c1", conv_algorithm = "pznet"} : (tensor<1x2x2x2x3xf32>, tensor<3x2x1x1x1xf32>, none) -> tensor<1x3x2x2x3xf32>
    %y = "onnx.Conv"(%h, %w2, %none) {onnx_node_name = "c2", conv_algorithm = "pznet"} : (tensor<1x3x2x2x3xf32>, tensor<2x3x1x1x1xf32>, none) -> tensor<1x2x2x2x3xf32>
    func.return %y : tensor<1x2x2x2x3xf32>
  }
}
// NOFOLD-LABEL: func.func @chain(
// NOFOLD:         layout = "to_nchw8c", onnx_node = "c1"
// NOFOLD:         "krnl.alloc"() {onnx_node = "c1"} : () -> memref<1x3x2x2x3xf32>
// NOFOLD:         layout = "from_nchw8c", onnx_node = "c1"
// NOFOLD:         layout = "to_nchw8c", onnx_node = "c2"
// NOFOLD:         layout = "from_nchw8c", onnx_node = "c2"
// NOFOLD-NEXT:    func.return

// CHECK-LABEL: func.func @chain(
// CHECK:         layout = "to_nchw8c", onnx_node = "c1"
// CHECK:         [[H:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c1"} : () -> memref<1x1x2x2x3x8xf32>
// CHECK-NOT:     memref<1x3x2x2x3xf32>
// CHECK-NOT:     layout =
// CHECK:         "krnl.load"([[H]]
// CHECK-NOT:     layout = "to_nchw8c"
// CHECK:         layout = "from_nchw8c", onnx_node = "c2"
// CHECK-NEXT:    func.return
