// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Det (lowering/det.py): LU with partial pivoting, unrolled over the columns. Column 0 of a
// 2 x 2 matrix: the row of largest |a[i, 0]| (the first on ties) is found, swapped into row 0
// (a data-dependent row, clamped), the sign flips when it moved, the factor a[1, 0] / a[0, 0]
// (0 for a zero pivot) times row 0 leaves row 1; the result is the sign times the diagonal.

func.func @det_2x2(%x: tensor<2x2xf32>) -> tensor<f32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 11 : i64} {
  %y = "onnx.Det"(%x) {onnx_node_name = "det"} : (tensor<2x2xf32>) -> tensor<f32>
  func.return %y : tensor<f32>
}
// CHECK-LABEL: func.func @det_2x2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<f32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<1xf32>
// CHECK:         [[A:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x2x2xf32>
// CHECK:         [[SIGN:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1xf32>
// CHECK:         [[BEST:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1xf32>
// CHECK:         [[PIV:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1xi64>
// CHECK:         [[F:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[A]], [[N]], [[I]], [[K0:%[0-9]+]])
// CHECK-NEXT:      [[AV:%[0-9]+]] = math.absf [[V]] : f32
// CHECK:           [[GT:%[0-9]+]] = arith.cmpf ogt, [[AV]], {{%[0-9]+}} : f32
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[P:%[0-9]+]] = "krnl.load"([[PIV]], [[N2]])
// CHECK:           [[PR:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[TOP:%[0-9]+]] = "krnl.load"([[A]], [[N2]], [[K0]], [[J]])
// CHECK-NEXT:      [[OTHER:%[0-9]+]] = "krnl.load"([[A]], [[N2]], [[PR]], [[J]])
// CHECK-NEXT:      "krnl.store"([[OTHER]], [[A]], [[N2]], [[K0]], [[J]])
// CHECK-NEXT:      "krnl.store"([[TOP]], [[A]], [[N2]], [[PR]], [[J]])
// CHECK:           arith.cmpi ne
// CHECK:           arith.negf
// CHECK:         ^bb0([[N3:%[0-9]+]]: index, [[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[PV:%[0-9]+]] = "krnl.load"([[A]], [[N3]], [[K0]], [[K0]])
// CHECK-NEXT:      [[BV:%[0-9]+]] = "krnl.load"([[A]], [[N3]], [[I3]], [[K0]])
// CHECK-NEXT:      [[FV:%[0-9]+]] = arith.divf [[BV]], [[PV]] : f32
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.cmpf oeq, [[PV]], {{%[0-9]+}} : f32
// CHECK-NEXT:      [[FS:%[0-9]+]] = arith.select [[Z]], {{%[0-9]+}}, [[FV]] : f32
// CHECK-NEXT:      "krnl.store"([[FS]], [[F]], [[N3]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [1 : i64, 2 : i64]]
// CHECK:         ^bb0([[N4:%[0-9]+]]: index, [[I4:%[0-9]+]]: index, [[J4:%[0-9]+]]: index):
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[A]], [[N4]], [[I4]], [[J4]])
// CHECK-NEXT:      [[FF:%[0-9]+]] = "krnl.load"([[F]], [[N4]], [[I4]])
// CHECK-NEXT:      [[RK:%[0-9]+]] = "krnl.load"([[A]], [[N4]], [[K0]], [[J4]])
// CHECK-NEXT:      [[PR2:%[0-9]+]] = arith.mulf [[FF]], [[RK]] : f32
// CHECK-NEXT:      [[NEW:%[0-9]+]] = arith.subf [[OLD]], [[PR2]] : f32
// CHECK-NEXT:      "krnl.store"([[NEW]], [[A]], [[N4]], [[I4]], [[J4]])
// CHECK:           "krnl.store"({{%[0-9]+}}, [[YV]], {{%[0-9]+}})
