// RUN: not python -m compilerkit.opt --split-input-file -p lower-to-krnl %s 2>&1 | filecheck %s
// What lower-to-krnl refuses, with a message naming the node, the op and the reason (never a
// traceback, never wrong code): an op with no lowering (the message lists the supported ops),
// a dynamic shape, an unsupported mode or output, training-mode Dropout, and a shape parameter
// that is not a constant. Each piece fails on its own; the exit status is 1.

func.func @unsupported_grid_sample(%x: tensor<1x1x2x2xf32>, %g: tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xf32> attributes {input_names = ["x", "g"], output_names = ["y"], onnx_opset = 22 : i64} {
  %y = "onnx.GridSample"(%x, %g) {onnx_node_name = "gs"} : (tensor<1x1x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}
// CHECK-LABEL: compilerkit-opt: error: node 'gs': op 'GridSample' cannot be lowered to Kernel IR
// CHECK-SAME:    supported ops: Abs, {{.*}}, Add, {{.*}}, Xor

// -----
func.func @dynamic_shape(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  func.return %y : tensor<?x4xf32>
}
// CHECK-LABEL: compilerkit-opt: error: graph input 'x' has the type tensor<?x4xf32>
// CHECK-SAME:    compilerkit compiles static shapes only

// -----
// Reflecting pads must be smaller than the axis (onnxruntime refuses the others too).
func.func @pad_reflect(%x: tensor<3xf32>) -> tensor<9xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %p = "onnx.Constant"() {value = dense<[3, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Pad"(%x, %p, %none, %none) {mode = "reflect", onnx_node_name = "pad"} : (tensor<3xf32>, tensor<2xi64>, none, none) -> tensor<9xf32>
  func.return %y : tensor<9xf32>
}
// CHECK-LABEL: compilerkit-opt: error: node 'pad' (Pad): mode 'reflect' on axis 0 is padding by [3, 3] an extent of 3

// -----
func.func @maxpool_indices(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) attributes {input_names = ["x"], output_names = ["y", "i"], onnx_opset = 13 : i64} {
  %y, %i = "onnx.MaxPool"(%x) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "mp"} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>)
  func.return %y, %i : tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>
}
// CHECK-LABEL: compilerkit-opt: error: node 'mp': op 'MaxPool': MaxPool's Indices output is not supported

// -----
func.func @dropout_training(%x: tensor<4xf32>, %t: tensor<i1>) -> tensor<4xf32> attributes {input_names = ["x", "t"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y, %m = "onnx.Dropout"(%x, %none, %t) {onnx_node_name = "drop"} : (tensor<4xf32>, none, tensor<i1>) -> (tensor<4xf32>, none)
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: compilerkit-opt: error: node 'drop': Dropout in training mode is not supported (inference only)

// -----
func.func @slice_nonconst(%x: tensor<5xf32>, %s: tensor<1xi64>) -> tensor<2xf32> attributes {input_names = ["x", "s"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %e = "onnx.Constant"() {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Slice"(%x, %s, %e, %none, %none) {onnx_node_name = "sl"} : (tensor<5xf32>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
// CHECK-LABEL: compilerkit-opt: error: node 'sl': op 'Slice': Slice with a non-constant starts
// CHECK-NOT:     builtin.module
