// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Clip, Cast, Identity and Dropout (lowering/elementwise.py). Clip's bounds are constant inputs
// from opset 11 (attributes before); an absent bound emits no comparison at all. Cast picks
// the arith conversion from the source and target element types. Identity and inference-mode
// Dropout compute nothing: each is a copy nest.

// Clip-13 with both bounds as constants: max(x, -1), then min(., 2).
func.func @clip_both(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %lo = "onnx.Constant"() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
  %hi = "onnx.Constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %y = "onnx.Clip"(%x, %lo, %hi) {onnx_node_name = "clip"} : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @clip_both(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<2x3xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      [[LO:%[0-9]+]] = arith.constant -1.000000e+00 : f32
// CHECK-NEXT:      [[A:%[0-9]+]] = arith.maximumf [[V]], [[LO]] : f32
// CHECK-NEXT:      [[HI:%[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      [[B:%[0-9]+]] = arith.minimumf [[A]], [[HI]] : f32
// CHECK-NEXT:      "krnl.store"([[B]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// Clip-13 with min absent (an explicit NoValue): only the upper bound, 6.
func.func @clip_max_only(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %hi = "onnx.Constant"() {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
  %y = "onnx.Clip"(%x, %none, %hi) {onnx_node_name = "relu6"} : (tensor<4xf32>, none, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @clip_max_only(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]])
// CHECK-NEXT:      [[HI:%[0-9]+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:      [[B:%[0-9]+]] = arith.minimumf [[V]], [[HI]] : f32
// CHECK-NEXT:      "krnl.store"([[B]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// Clip-6: the bounds are attributes (min = 0, max = 6); the operand slots for Clip-11's inputs
// are NoValue.
func.func @clip_opset6(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 6 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.Clip"(%x, %none, %none) {min = 0.0 : f32, max = 6.0 : f32, onnx_node_name = "clip"} : (tensor<4xf32>, none, none) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @clip_opset6(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[LO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.maximumf [[V]], [[LO]] : f32
// CHECK-NEXT:    [[HI:%[0-9]+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:    [[B:%[0-9]+]] = arith.minimumf [[A]], [[HI]] : f32
// CHECK-NEXT:    "krnl.store"([[B]], {{%[0-9]+}}, [[I:%[0-9]+]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// Cast float -> int32 (to = 6) truncates toward zero: fptosi; int32 -> float (to = 1): sitofp.
func.func @cast_f32_i32_f32(%x: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %i = "onnx.Cast"(%x) {to = 6 : i64, onnx_node_name = "to_int"} : (tensor<3xf32>) -> tensor<3xi32>
  %y = "onnx.Cast"(%i) {to = 1 : i64, onnx_node_name = "to_float"} : (tensor<3xi32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @cast_f32_i32_f32(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK-NEXT:    [[I:%[0-9]+]] = "krnl.alloc"() {onnx_node = "to_int"} : () -> memref<3xi32>
// CHECK:         [[V:%[0-9]+]] = "krnl.load"([[X]],
// CHECK-NEXT:    [[C:%[0-9]+]] = arith.fptosi [[V]] : f32 to i32
// CHECK-NEXT:    "krnl.store"([[C]], [[I]],
// CHECK:         [[W:%[0-9]+]] = "krnl.load"([[I]],
// CHECK-NEXT:    [[F:%[0-9]+]] = arith.sitofp [[W]] : i32 to f32
// CHECK-NEXT:    "krnl.store"([[F]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// Widening and narrowing: float -> double (to = 11) is extf; int64 -> int32 (to = 6) trunci;
// int32 -> int64 (to = 7) extsi; double -> float (to = 1) truncf.
func.func @cast_widths(%x: tensor<2xf32>, %n: tensor<2xi64>) -> (tensor<2xf32>, tensor<2xi64>) attributes {input_names = ["x", "n"], output_names = ["y", "m"], onnx_opset = 13 : i64} {
  %d = "onnx.Cast"(%x) {to = 11 : i64, onnx_node_name = "to_f64"} : (tensor<2xf32>) -> tensor<2xf64>
  %y = "onnx.Cast"(%d) {to = 1 : i64, onnx_node_name = "to_f32"} : (tensor<2xf64>) -> tensor<2xf32>
  %i = "onnx.Cast"(%n) {to = 6 : i64, onnx_node_name = "to_i32"} : (tensor<2xi64>) -> tensor<2xi32>
  %m = "onnx.Cast"(%i) {to = 7 : i64, onnx_node_name = "to_i64"} : (tensor<2xi32>) -> tensor<2xi64>
  func.return %y, %m : tensor<2xf32>, tensor<2xi64>
}
// CHECK-LABEL: func.func @cast_widths(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2xf32>, [[N:%[0-9]+]]: memref<2xi64>, [[Y:%[0-9]+]]: memref<2xf32>, [[M:%[0-9]+]]: memref<2xi64>)
// CHECK-NEXT:    [[D:%[0-9]+]] = "krnl.alloc"() {onnx_node = "to_f64"} : () -> memref<2xf64>
// CHECK:         ^bb0([[I1:%[0-9]+]]: index):
// CHECK-NEXT:      [[V1:%[0-9]+]] = "krnl.load"([[X]], [[I1]])
// CHECK-NEXT:      [[C1:%[0-9]+]] = arith.extf [[V1]] : f32 to f64
// CHECK-NEXT:      "krnl.store"([[C1]], [[D]], [[I1]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[D]], [[I2]])
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.truncf [[V2]] : f64 to f32
// CHECK-NEXT:      "krnl.store"([[C2]], [[Y]], [[I2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK-NEXT:    [[T:%[0-9]+]] = "krnl.alloc"() {onnx_node = "to_i32"} : () -> memref<2xi32>
// CHECK:         ^bb0([[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[V3:%[0-9]+]] = "krnl.load"([[N]], [[I3]])
// CHECK-NEXT:      [[C3:%[0-9]+]] = arith.trunci [[V3]] : i64 to i32
// CHECK-NEXT:      "krnl.store"([[C3]], [[T]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I4:%[0-9]+]]: index):
// CHECK-NEXT:      [[V4:%[0-9]+]] = "krnl.load"([[T]], [[I4]])
// CHECK-NEXT:      [[C4:%[0-9]+]] = arith.extsi [[V4]] : i32 to i64
// CHECK-NEXT:      "krnl.store"([[C4]], [[M]], [[I4]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]

// -----
// Identity and Dropout (inference: ratio and training_mode absent, mask absent) compute
// nothing: each is a copy nest, so y = x through Identity's buffer.
func.func @identity_dropout(%x: tensor<2x2xf32>) -> tensor<2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %i = "onnx.Identity"(%x) {onnx_node_name = "id"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %y, %mask = "onnx.Dropout"(%i, %none, %none) {onnx_node_name = "drop"} : (tensor<2x2xf32>, none, none) -> (tensor<2x2xf32>, none)
  func.return %y : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @identity_dropout(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<2x2xf32>)
// CHECK-NEXT:    [[T:%[0-9]+]] = "krnl.alloc"() {onnx_node = "id"} : () -> memref<2x2xf32>
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[T]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[K:%[0-9]+]]: index, [[L:%[0-9]+]]: index):
// CHECK-NEXT:      [[W:%[0-9]+]] = "krnl.load"([[T]], [[K]], [[L]])
// CHECK-NEXT:      "krnl.store"([[W]], [[Y]], [[K]], [[L]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK-NEXT:    func.return
