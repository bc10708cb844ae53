// RUN: python -m compilerkit %s --emit kernel-ir -O2 | filecheck %s
// RUN: python -m compilerkit %s --emit kernel-ir -O1 | filecheck %s --check-prefix=O1
// -O2 marks the short innermost loops (the 2x2 window) for full unrolling; -O1 does not.
// ceil_mode with pads: the window that would start in the right padding is dropped (4x4).
builtin.module {
  func.func @main_graph(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
    %y = "onnx.MaxPool"(%x) {kernel_shape = [2 : i64, 2 : i64], strides = [2 : i64, 2 : i64], pads = [1 : i64, 1 : i64, 1 : i64, 1 : i64], ceil_mode = 1 : i64, onnx_node_name = "pool"} : (tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32>
    func.return %y : tensor<1x2x4x4xf32>
  }
}
// CHECK: func.func @main_graph(%{{.*}}: memref<1x2x7x7xf32>, %{{.*}}: memref<1x2x4x4xf32>)
// CHECK: "krnl.unroll"
// CHECK: "krnl.iterate"
// CHECK: "krnl.unroll"
// CHECK-NEXT: "krnl.unroll"
// CHECK-NEXT: "krnl.unroll"
// CHECK-NEXT: "krnl.iterate"
// CHECK: bounds = [{{.*}}[0 : i64, 4 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]], n_original = 6
// O1-NOT: "krnl.unroll"
