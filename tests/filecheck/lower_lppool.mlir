// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// LpPool (lowering/lppool.py): one nest over output positions and kernel
// offsets adds |x|^p (p multiplications) into the output through a guarded load (0 outside
// the input: pads [0, 1, 1, 0] here, column 2w + kw - 1); a second nest takes the root,
// exp(log(s) / p) for p = 3.

func.func @lp_pool_p3_pads(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 18 : i64} {
  %y = "onnx.LpPool"(%x) {kernel_shape = [2, 2], p = 3 : i64, pads = [0, 1, 1, 0], strides = [1, 2], onnx_node_name = "lp"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x2xf32>
  func.return %y : tensor<1x1x4x2xf32>
}
// CHECK-LABEL: func.func @lp_pool_p3_pads(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x4x4xf32>, [[Y:%[0-9]+]]: memref<1x1x4x2xf32>)
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index, [[KH:%[0-9]+]]: index, [[KW:%[0-9]+]]: index):
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[H]], [[KH]] : index
// CHECK-NEXT:      [[TWO:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[W2:%[0-9]+]] = arith.muli [[W]], [[TWO]] : index
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addi [[W2]], [[KW]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[COL:%[0-9]+]] = arith.addi [[S]], [[M1]] : index
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]], {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select {{%[0-9]+}}, [[V]], [[Z]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:      [[A:%[0-9]+]] = math.absf [[G]] : f32
// CHECK-NEXT:      [[A2:%[0-9]+]] = arith.mulf [[A]], [[A]] : f32
// CHECK-NEXT:      [[A3:%[0-9]+]] = arith.mulf [[A2]], [[A]] : f32
// CHECK-NEXT:      [[SUM:%[0-9]+]] = arith.addf [[OLD]], [[A3]] : f32
// CHECK-NEXT:      "krnl.store"([[SUM]], [[Y]], [[N]], [[C]], [[H]], [[W]])
// CHECK:           [[T:%[0-9]+]] = "krnl.load"([[Y]]
// CHECK-NEXT:      [[LG:%[0-9]+]] = math.log [[T]] : f32
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:      [[Q:%[0-9]+]] = arith.divf [[LG]], [[P]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = math.exp [[Q]] : f32
// CHECK-NEXT:      "krnl.store"([[E]], [[Y]]
