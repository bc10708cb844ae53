// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Classification losses (lowering/loss.py): targets are checked at run time (in [0, C) or
// ignore_index), then clamped; each element is -x[n, t] * w[t], 0 (and weight 0) where t is
// ignore_index; mean divides the sum of losses by the sum of weights.

func.func @nll_mean_weighted(%x: tensor<2x3xf32>, %t: tensor<2xi64>, %w: tensor<3xf32>) -> tensor<f32> attributes {input_names = ["x", "t", "w"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.NegativeLogLikelihoodLoss"(%x, %t, %w) {ignore_index = -1 : i64, reduction = "mean", onnx_node_name = "nll"} : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
  func.return %y : tensor<f32>
}
// CHECK-LABEL: func.func @nll_mean_weighted(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[T:%[0-9]+]]: memref<2xi64>, [[W:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<f32>)
// CHECK:         "krnl.check"({{%[0-9]+}}) {message = "node 'nll' (NegativeLogLikelihoodLoss): a target is out of range; valid targets are [0, 2] or ignore_index -1"
// CHECK:         [[SUMS:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<2xf32>
// CHECK:           [[TV:%[0-9]+]] = "krnl.load"
// CHECK:           [[TC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[WV:%[0-9]+]] = "krnl.load"([[W]], [[TC]])
// CHECK-NEXT:      [[XV:%[0-9]+]] = "krnl.load"({{%[0-9]+}}, {{%[0-9]+}}, [[TC]], {{%[0-9]+}})
// CHECK-NEXT:      [[NX:%[0-9]+]] = arith.negf [[XV]] : f32
// CHECK-NEXT:      [[L:%[0-9]+]] = arith.mulf [[NX]], [[WV]] : f32
// CHECK-NEXT:      [[II:%[0-9]+]] = arith.constant -1 : i64
// CHECK-NEXT:      [[SKIP:%[0-9]+]] = arith.cmpi eq, [[TV]], [[II]] : i64
// CHECK-NEXT:      [[L0:%[0-9]+]] = arith.select [[SKIP]], {{%[0-9]+}}, [[L]] : f32
// CHECK-NEXT:      [[W0:%[0-9]+]] = arith.select [[SKIP]], {{%[0-9]+}}, [[WV]] : f32
// CHECK:         "krnl.iterate"() ({
// CHECK-NEXT:      arith.constant 0 : index
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SUMS]]
// CHECK-NEXT:      arith.constant 1 : index
// CHECK-NEXT:      [[WS:%[0-9]+]] = "krnl.load"([[SUMS]]
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.divf [[S]], [[WS]] : f32
// CHECK-NEXT:      "krnl.store"([[M]], [[Y]])
