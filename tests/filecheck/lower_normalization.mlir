// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// LayerNormalization, InstanceNormalization (lowering/normalization.py): mean and variance
// per group in separate passes, on x shifted by the group's first element (x - x0), then
// (x - x0 - mean') * 1 / sqrt(var + eps) * scale (+ bias). LpNormalization: x / norm.

// LayerNormalization over the last axis, no bias, Mean and InvStdDev unused.
func.func @layer_norm(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> attributes {input_names = ["x", "s"], output_names = ["y"], onnx_opset = 17 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y, %m, %i = "onnx.LayerNormalization"(%x, %s, %none) {onnx_node_name = "ln"} : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, none, none)
  func.return %y : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x8xf32>, [[S:%[0-9]+]]: memref<8xf32>, [[Y:%[0-9]+]]: memref<2x8xf32>
// CHECK:         [[MEAN:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2xf32>
// CHECK-NEXT:    [[VAR:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2xf32>
// The sum of x - x0:
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:         [[X0:%[0-9]+]] = "krnl.load"([[X]], [[I]], {{%[0-9]+}})
// CHECK-NEXT:    [[XI:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.subf [[XI]], [[X0]] : f32
// CHECK-NEXT:    arith.addf {{%[0-9]+}}, [[D]] : f32
// The variance from the centred values (two passes, not E[x^2] - E[x]^2):
// CHECK:         arith.mulf [[C:%[0-9]+]], [[C]] : f32
// CHECK:         arith.constant 1.000000e-05 : f32
// CHECK:         math.sqrt
// The output: scale read at the normalised index, stored straight into the result.
// CHECK:         ^bb0([[I2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK:         "krnl.load"([[S]], [[J2]])
// CHECK:         "krnl.store"({{%[0-9]+}}, [[Y]], [[I2]], [[J2]])
// CHECK-NEXT:    })
// No pass for the Mean output, which is not used:
// CHECK-NEXT:    func.return

// -----
// InstanceNormalization: per (n, c) over the spatial dims, viewed as [N, C, H * W].
func.func @instance_norm(%x: tensor<1x2x3x3xf32>, %s: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<1x2x3x3xf32> attributes {input_names = ["x", "s", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.InstanceNormalization"(%x, %s, %b) {onnx_node_name = "in"} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}
// CHECK-LABEL: func.func @instance_norm(
// CHECK:         "krnl.reshape"({{%[0-9]+}}) {{.*}} -> memref<1x2x9xf32>
// CHECK:         "krnl.alloc"() {{.*}} memref<1x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[K:%[0-9]+]]: index):

// -----
// LpNormalization (p = 2, axis 1 of [2, 3, 4]): viewed [2, 3, 4], the norm per (outer, inner),
// a zero norm giving 0.
func.func @lp_norm(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.LpNormalization"(%x) {axis = 1 : i64, onnx_node_name = "lp"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @lp_norm(
// CHECK:         [[NORM:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x4xf32>
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[SQ:%[0-9]+]] = arith.mulf [[V]], [[V]] : f32
// CHECK:         math.sqrt
// CHECK:         [[N:%[0-9]+]] = "krnl.load"([[NORM]]
// CHECK:         [[ZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:         [[IS0:%[0-9]+]] = arith.cmpf oeq, [[N]], [[ZERO]] : f32
// CHECK-NEXT:    arith.select [[IS0]], [[ZERO]], {{%[0-9]+}} : f32

// -----
// GroupNormalization: [1, 4, 3] in 2 groups viewed [1, 2, 2, 3]; statistics per (n, g); the
// scale and bias read at channel g * 2 + c.
func.func @group_norm(%a: tensor<1x4x3xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1x4x3xf32> attributes {input_names = ["a", "s", "b"], output_names = ["y"], onnx_opset = 21 : i64} {
  %y = "onnx.GroupNormalization"(%a, %s, %b) {onnx_node_name = "g", num_groups = 2 : i64} : (tensor<1x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3xf32>
  func.return %y : tensor<1x4x3xf32>
}
// CHECK-LABEL: func.func @group_norm(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x4x3xf32>, [[S:%[0-9]+]]: memref<4xf32>, [[B:%[0-9]+]]: memref<4xf32>
// CHECK:         "krnl.reshape"([[X]]) {{.*}} -> memref<1x2x2x3xf32>
// CHECK:         "krnl.alloc"() {{.*}} -> memref<1x2xf32>
// CHECK:         arith.constant {{.*}} 6.000000e+00 : f32
// CHECK:         math.sqrt
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[P:%[0-9]+]]: index):
// CHECK:         [[TWO:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:    [[GC:%[0-9]+]] = arith.muli [[G]], [[TWO]] : index
// CHECK-NEXT:    [[CH:%[0-9]+]] = arith.addi [[GC]], [[C]] : index
// CHECK-NEXT:    "krnl.load"([[S]], [[CH]])
// CHECK:         "krnl.load"([[B]], [[CH]])

// -----
// MeanVarianceNormalization over the default axes [0, 2, 3]: statistics of shape [1, 3, 1, 1],
// read with index 0 on the normalised axes; (x - mean) / (std + 1e-9), ONNX's function body.
func.func @mvn(%a: tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32> attributes {input_names = ["a"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.MeanVarianceNormalization"(%a) {onnx_node_name = "m"} : (tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
  func.return %y : tensor<2x3x2x2xf32>
}
// CHECK-LABEL: func.func @mvn(
// CHECK:         [[MEAN:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x3x1x1xf32>
// CHECK:         [[STD:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x3x1x1xf32>
// CHECK:         "krnl.store"({{%[0-9]+}}, [[STD]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:    "krnl.load"([[MEAN]], [[Z]], [[C]], [[Z]], [[Z]])
// CHECK-NEXT:    "krnl.load"({{%[0-9]+}}, [[I]], [[C]], [[H]], [[W]])
// CHECK:         [[R:%[0-9]+]] = math.sqrt
// CHECK-NEXT:    [[EPS:%[0-9]+]] = arith.constant 1.000000e-09 : f32
// CHECK-NEXT:    arith.addf [[R]], [[EPS]] : f32
// CHECK:         "krnl.load"([[MEAN]]
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.subf
// CHECK-NEXT:    [[SD:%[0-9]+]] = "krnl.load"([[STD]]
// CHECK-NEXT:    arith.divf [[D]], [[SD]] : f32
