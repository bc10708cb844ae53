// RUN: python -m compilerkit %s --emit kernel-ir | filecheck %s
// Elementwise ops become one krnl.iterate: load, scalar math, store into the output argument.
builtin.module {
  func.func @main_graph(%x: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %y = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    func.return %y : tensor<2x4xf32>
  }
}
// CHECK: func.func @main_graph(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x4xf32>)
// CHECK: "krnl.define_loops"() {onnx_node = "relu"} : () -> (!krnl.loop, !krnl.loop)
// CHECK: "krnl.iterate"
// CHECK: "krnl.load"
// CHECK: arith.maximumf
// CHECK: "krnl.store"
// CHECK: bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]
