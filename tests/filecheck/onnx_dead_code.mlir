// RUN: python -m compilerkit.opt --split-input-file -p dead-code %s | filecheck %s
// dead-code: ONNX ops have no side effects, so an op none of whose results is read goes;
// walking backwards, a whole unused chain goes in one run. What is returned stays.

builtin.module {
  func.func @unused_chain_goes(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %a = "onnx.Constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
    %d1 = "onnx.Add"(%x, %a) {onnx_node_name = "dead_add"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %d2 = "onnx.Exp"(%d1) {onnx_node_name = "dead_exp"} : (tensor<4xf32>) -> tensor<4xf32>
    %d3 = "onnx.Neg"(%d2) {onnx_node_name = "dead_neg"} : (tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// Neg, Exp, Add and the constant only they read all go; only the Relu is left.
// CHECK-LABEL: func.func @unused_chain_goes
// CHECK-NEXT:    %y = "onnx.Relu"(%x)
// CHECK-NEXT:    func.return %y
// CHECK-NEXT:  }

// -----
builtin.module {
  func.func @partly_used_results_keep_the_op(%x: tensor<6xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 18 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %p, %q = "onnx.Split"(%x, %none) {num_outputs = 2 : i64, onnx_node_name = "split"} : (tensor<6xf32>, none) -> (tensor<3xf32>, tensor<3xf32>)
    func.return %q : tensor<3xf32>
  }
}
// Split's first half is unread, its second is returned: the op (and the NoValue it reads)
// must stay.
// CHECK-LABEL: func.func @partly_used_results_keep_the_op
// CHECK-NEXT:    %none = "onnx.NoValue"()
// CHECK-NEXT:    %p, %q = "onnx.Split"(%x, %none)
// CHECK-NEXT:    func.return %q

// -----
builtin.module {
  func.func @shared_value_survives(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %s = "onnx.Sigmoid"(%x) {onnx_node_name = "sig"} : (tensor<4xf32>) -> tensor<4xf32>
    %dead = "onnx.Tanh"(%s) {onnx_node_name = "dead_tanh"} : (tensor<4xf32>) -> tensor<4xf32>
    %y = "onnx.Mul"(%s, %x) {onnx_node_name = "mul"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    func.return %y : tensor<4xf32>
  }
}
// The Sigmoid loses one reader (the dead Tanh) but keeps the Mul: it stays.
// CHECK-LABEL: func.func @shared_value_survives
// CHECK-NEXT:    %s = "onnx.Sigmoid"(%x)
// CHECK-NEXT:    %y = "onnx.Mul"(%s, %x)
// CHECK-NEXT:    func.return %y

// -----
builtin.module {
  func.func @input_returned_directly(%x: tensor<2xf32>, %z: tensor<2xf32>) -> tensor<2xf32> attributes {input_names = ["x", "z"], output_names = ["y"], onnx_opset = 13 : i64} {
    %unused = "onnx.Add"(%x, %z) {onnx_node_name = "add"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    func.return %z : tensor<2xf32>
  }
}
// Arguments are never removed, even when unread; the body becomes just the return.
// CHECK-LABEL: func.func @input_returned_directly(%x: tensor<2xf32>, %z: tensor<2xf32>)
// CHECK-NEXT:    func.return %z
