// RUN: python -m compilerkit %s --emit llvm-ir -O3 | filecheck %s
// Each ONNX node's loop nests become one internal, noinline function named after the node,
// with noalias buffer parameters; both Convs call the one shared matmul micro-kernel.
builtin.module {
  func.func @main_graph(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x8x8xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %w1 = "onnx.Constant"() {value = dense<0.5> : tensor<8x4x3x3xf32>} : () -> tensor<8x4x3x3xf32>
    %w2 = "onnx.Constant"() {value = dense<0.25> : tensor<8x8x1x1xf32>} : () -> tensor<8x8x1x1xf32>
    %h = "onnx.Conv"(%x, %w1) {pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], onnx_node_name = "conv_a"} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
    %y = "onnx.Conv"(%h, %w2) {onnx_node_name = "conv_b"} : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
    func.return %y : tensor<1x8x8x8xf32>
  }
}
// CHECK: define {{.*}}i64 @main_graph(
// CHECK: call fastcc void @main_graph_1_conv_a(
// CHECK: call fastcc void @main_graph_2_conv_b(
// CHECK: define internal fastcc void @main_graph_1_conv_a(ptr noalias
// CHECK: call fastcc void @ck_matmul_f32_v{{[0-9]+}}(
// CHECK: define internal fastcc void @ck_matmul_f32_v{{[0-9]+}}(
// CHECK: fmuladd.v{{[0-9]+}}f32
// CHECK: define internal fastcc void @main_graph_2_conv_b(ptr noalias
// CHECK: call fastcc void @ck_matmul_f32_v{{[0-9]+}}(
// CHECK-NOT: define {{.*}}@ck_matmul
