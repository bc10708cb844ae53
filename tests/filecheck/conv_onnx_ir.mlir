// RUN: python -m compilerkit %s --emit kernel-ir -O0 | filecheck %s
// Conv with padding: im2col into a column buffer (guarded loads read padding as 0), then a
// matmul; buffer planning gives every krnl.alloc an arena offset.
builtin.module {
  func.func @main_graph(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Conv"(%x, %w) {pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], onnx_node_name = "conv"} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32>
    func.return %y : tensor<1x3x5x5xf32>
  }
}
// CHECK: arena_bytes =
// CHECK: "krnl.alloc"() {onnx_node = "conv", offset = 0 : i64} : () -> memref<2x3x3x5x5xf32>
// CHECK: arith.select
// CHECK: "krnl.matmul"{{.*}}sizes = [3 : i64, 25 : i64, 18 : i64]
