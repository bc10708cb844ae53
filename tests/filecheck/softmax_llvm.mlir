// RUN: python -m compilerkit %s --emit llvm-ir -O0 | filecheck %s
// exp comes from compilerkit's own IR math library, never from libm.
builtin.module {
  func.func @main_graph(%x: tensor<2x5xf32>) -> tensor<2x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Softmax"(%x) {onnx_node_name = "sm"} : (tensor<2x5xf32>) -> tensor<2x5xf32>
    func.return %y : tensor<2x5xf32>
  }
}
// CHECK-NOT: declare float @expf
// CHECK: define i64 @main_graph(ptr
// CHECK: call float @ck_expf
// CHECK: define internal float @ck_expf(float
// CHECK: define i64 @main_graph_arena_bytes()
