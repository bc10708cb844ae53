// RUN: python -m compilerkit %s --emit kernel-ir -O3 | filecheck %s
// RUN: python -m compilerkit %s --emit kernel-ir -O0 | filecheck %s --check-prefix=O0
// At -O3 the (i, j, k) nest is blocked, permuted to (j_o, k_o, i_o) and the micro-kernel
// works on whole tiles with vectors; at -O0 it is one multiply-add per iteration.
builtin.module {
  func.func @main_graph(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.MatMul"(%a, %b) {onnx_node_name = "mm"} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    func.return %y : tensor<16x16xf32>
  }
}
// CHECK-COUNT-3: "krnl.block"
// CHECK: "krnl.permute"{{.*}}map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]
// CHECK: "krnl.matmul"{{.*}}tile = [16 : i64, 16 : i64, 16 : i64]
// O0-NOT: "krnl.block"
// O0: "krnl.matmul"{{.*}}tile = [1 : i64, 1 : i64, 1 : i64]
