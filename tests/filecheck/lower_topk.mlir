// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// TopK (lowering/topk.py), k = 3 of 5 along axis 1: each element's rank is the count of
// elements before it in the order (x_i above x_j, NaN above every number, or equal and i < j);
// the element is stored at its rank (clamped into the slice) in a scratch slice, and the first
// k of it are copied to the values and indices outputs.

func.func @topk_largest(%x: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>) attributes {input_names = ["x"], output_names = ["v", "i"], onnx_opset = 11 : i64} {
  %k = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %i = "onnx.TopK"(%x, %k) {axis = 1 : i64, onnx_node_name = "topk"} : (tensor<2x5xf32>, tensor<1xi64>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  func.return %v, %i : tensor<2x3xf32>, tensor<2x3xi64>
}
// CHECK-LABEL: func.func @topk_largest(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x5xf32>, [[V:%[0-9]+]]: memref<2x3xf32>, [[I:%[0-9]+]]: memref<2x3xi64>)
// CHECK:         [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<2x5x1xf32>
// CHECK:         [[RK:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<2x5x1xi64>
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[II:%[0-9]+]]: index, [[T:%[0-9]+]]: index):
// CHECK-NEXT:      [[XI:%[0-9]+]] = "krnl.load"([[XV]], [[O]], [[II]], [[T]])
// CHECK-NEXT:      [[XJ:%[0-9]+]] = "krnl.load"([[XV]], [[O]], [[J]], [[T]])
// CHECK-NEXT:      [[NI:%[0-9]+]] = arith.cmpf uno, [[XI]], [[XI]] : f32
// CHECK-NEXT:      [[OJ:%[0-9]+]] = arith.cmpf ord, [[XJ]], [[XJ]] : f32
// CHECK-NEXT:      [[NAN:%[0-9]+]] = arith.andi [[NI]], [[OJ]] : i1
// CHECK-NEXT:      [[GT:%[0-9]+]] = arith.cmpf ogt, [[XI]], [[XJ]] : f32
// CHECK-NEXT:      [[ABOVE:%[0-9]+]] = arith.ori [[GT]], [[NAN]] : i1
// CHECK:           [[EQ:%[0-9]+]] = arith.cmpf oeq, [[XI]], [[XJ]] : f32
// CHECK:           [[LOW:%[0-9]+]] = arith.cmpi slt, [[II]], [[J]] : index
// CHECK:           [[BEFORE:%[0-9]+]] = arith.ori [[ABOVE]], {{%[0-9]+}} : i1
// CHECK-NEXT:      [[C:%[0-9]+]] = "krnl.load"([[RK]], [[O]], [[J]], [[T]])
// CHECK:           "krnl.store"({{%[0-9]+}}, [[RK]], [[O]], [[J]], [[T]])
// CHECK:         [[SX:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<2x5x1xf32>
// CHECK:         [[SI:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<2x5x1xi64>
// CHECK:         ^bb0([[O2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index, [[T2:%[0-9]+]]: index):
// CHECK-NEXT:      [[R:%[0-9]+]] = "krnl.load"([[RK]], [[O2]], [[J2]], [[T2]])
// CHECK-NEXT:      [[RI:%[0-9]+]] = arith.index_cast [[R]] : i64 to index
// CHECK:           [[AT:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[XX:%[0-9]+]] = "krnl.load"([[XV]], [[O2]], [[J2]], [[T2]])
// CHECK-NEXT:      "krnl.store"([[XX]], [[SX]], [[O2]], [[AT]], [[T2]])
// CHECK-NEXT:      [[JI:%[0-9]+]] = arith.index_cast [[J2]] : index to i64
// CHECK-NEXT:      "krnl.store"([[JI]], [[SI]], [[O2]], [[AT]], [[T2]])
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 1 : i64]]
