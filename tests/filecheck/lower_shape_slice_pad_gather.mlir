// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Data movement, part 2 (lowering/shape_ops.py). Slice reads x at first + i * step on each
// sliced axis (first clamped as numpy's slice.indices does). Pad reads x at i - pad_begin:
// mode constant through a guarded load that yields the pad value outside x, mode edge at the
// index clamped into x, mode reflect at the index reflected about both ends (period 2 (d - 1)),
// mode wrap at the index modulo d. Gather first checks every index once (krnl.check, wrapping negative
// indices by the axis size), then copies data with the indices' value on the axis, clamped so a
// failed check never reads outside data.

// Slice-13 on [10]: starts -8, ends 9, steps 3 -> elements 2, 5, 8, i.e. y[i] = x[3 * i + 2].
func.func @slice_step(%x: tensor<10xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[-8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = "onnx.Constant"() {value = dense<[9]> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Slice"(%x, %s, %e, %a, %t) {onnx_node_name = "sl"} : (tensor<10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @slice_step(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<10xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[C3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[I]], [[C3]] : index
// CHECK-NEXT:      [[C2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.addi [[T]], [[C2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[P]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// Slice-13 on [4, 5], axes [-1] (the last), starts 1, ends 100 (clamped to 5): [4, 4],
// y[i, j] = x[i, j + 1]; steps absent.
func.func @slice_axis_clamped_end(%x: tensor<4x5xf32>) -> tensor<4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %s = "onnx.Constant"() {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = "onnx.Constant"() {value = dense<[100]> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = "onnx.Constant"() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Slice"(%x, %s, %e, %a, %none) {onnx_node_name = "sl"} : (tensor<4x5xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK-LABEL: func.func @slice_axis_clamped_end(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4x5xf32>, [[Y:%[0-9]+]]: memref<4x4xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[J1:%[0-9]+]] = arith.addi [[J]], [[C1]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J1]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 4 : i64]]

// -----
// Slice-13 backwards on [5]: starts 3, ends 0, steps -1 -> elements 3, 2, 1: y[i] = x[3 - i].
func.func @slice_negative_step(%x: tensor<5xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = "onnx.Constant"() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Slice"(%x, %s, %e, %a, %t) {onnx_node_name = "rev"} : (tensor<5xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @slice_negative_step(
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[CM1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[T:%[0-9]+]] = arith.muli [[I]], [[CM1]] : index
// CHECK-NEXT:      [[C3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.addi [[T]], [[C3]] : index
// CHECK-NEXT:      "krnl.load"({{%[0-9]+}}, [[P]])
// CHECK:         bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// Pad-13, constant 1.5, pads [1, 0, 0, 2] (begins then ends): [2, 3] -> [3, 5];
// y[i, j] = x[i - 1, j] where that is inside x, else 1.5.
func.func @pad_constant(%x: tensor<2x3xf32>) -> tensor<3x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %p = "onnx.Constant"() {value = dense<[1, 0, 0, 2]> : tensor<4xi64>} : () -> tensor<4xi64>
  %v = "onnx.Constant"() {value = dense<1.5> : tensor<f32>} : () -> tensor<f32>
  %y = "onnx.Pad"(%x, %p, %v, %none) {onnx_node_name = "pad"} : (tensor<2x3xf32>, tensor<4xi64>, tensor<f32>, none) -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}
// CHECK-LABEL: func.func @pad_constant(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<3x5xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[I]], [[M1]] : index
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      arith.cmpi sge, [[R]], [[Z]] : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      arith.cmpi slt, [[R]], [[L2]] : index
// CHECK-NEXT:      arith.andi
// CHECK-NEXT:      arith.cmpi sge, [[J]], [[Z]] : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      arith.cmpi slt, [[J]], [[L3]] : index
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]],
// CHECK-NEXT:      [[FILL:%[0-9]+]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.select {{%[0-9]+}}, [[V]], [[FILL]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 5 : i64]]

// -----
// Pad-13, mode edge, pads [2, 1] on [3] -> [6]: y[i] = x[clamp(i - 2, 0, 2)], no select.
func.func @pad_edge(%x: tensor<3xf32>) -> tensor<6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %p = "onnx.Constant"() {value = dense<[2, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Pad"(%x, %p, %none, %none) {mode = "edge", onnx_node_name = "pad"} : (tensor<3xf32>, tensor<2xi64>, none, none) -> tensor<6xf32>
  func.return %y : tensor<6xf32>
}
// CHECK-LABEL: func.func @pad_edge(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<6xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M2:%[0-9]+]] = arith.constant -2 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[I]], [[M2]] : index
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[LO:%[0-9]+]] = arith.maxsi [[R]], [[Z]] : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[C:%[0-9]+]] = arith.minsi [[LO]], [[L2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[C]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 6 : i64]]

// -----
// Gather on axis 0 of data [5, 4] with int64 indices [2]: the check nest wraps an index
// k < 0 to k + 5 and requires 0 <= k < 5 (valid: -5 .. 4); the copy nest reads
// data[clamp(k, 0, 4), j].
func.func @gather_axis0(%d: tensor<5x4xf32>, %i: tensor<2xi64>) -> tensor<2x4xf32> attributes {input_names = ["d", "i"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Gather"(%d, %i) {axis = 0 : i64, onnx_node_name = "g"} : (tensor<5x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @gather_axis0(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<5x4xf32>, [[IDX:%[0-9]+]]: memref<2xi64>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK:         ^bb0([[Q:%[0-9]+]]: index):
// CHECK-NEXT:      [[K:%[0-9]+]] = "krnl.load"([[IDX]], [[Q]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.cmpi slt, [[K]], [[Z]] : i64
// CHECK-NEXT:      [[N5:%[0-9]+]] = arith.constant 5 : i64
// CHECK-NEXT:      [[KW:%[0-9]+]] = arith.addi [[K]], [[N5]] : i64
// CHECK-NEXT:      [[KS:%[0-9]+]] = arith.select [[NEG]], [[KW]], [[K]] : i64
// CHECK-NEXT:      [[KI:%[0-9]+]] = arith.index_cast [[KS]] : i64 to index
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[GE:%[0-9]+]] = arith.cmpi sge, [[KI]], [[Z0]] : index
// CHECK-NEXT:      [[L5:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:      [[LT:%[0-9]+]] = arith.cmpi slt, [[KI]], [[L5]] : index
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.andi [[GE]], [[LT]] : i1
// CHECK-NEXT:      "krnl.check"([[OK]]) {message = "node 'g' (Gather): an index on axis 0 is out of range; valid indices are [-5, 4]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[K2:%[0-9]+]] = "krnl.load"([[IDX]], [[I]])
// CHECK-NEXT:      [[ZK:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:      [[NEG2:%[0-9]+]] = arith.cmpi slt, [[K2]], [[ZK]] : i64
// CHECK-NEXT:      [[N5B:%[0-9]+]] = arith.constant 5 : i64
// CHECK-NEXT:      [[KW2:%[0-9]+]] = arith.addi [[K2]], [[N5B]] : i64
// CHECK-NEXT:      [[KS2:%[0-9]+]] = arith.select [[NEG2]], [[KW2]], [[K2]] : i64
// CHECK-NEXT:      [[KI2:%[0-9]+]] = arith.index_cast [[KS2]] : i64 to index
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[LO:%[0-9]+]] = arith.maxsi [[KI2]], [[Z2]] : index
// CHECK-NEXT:      [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[KC:%[0-9]+]] = arith.minsi [[LO]], [[L4]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[D]], [[KC]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]

// -----
// Gather on axis 1 of data [3, 4] with int32 indices [2, 2]: y is [3, 2, 2],
// y[i, j, k] = data[i, idx[j, k]]; the indices are widened to i64 first; valid -4 .. 3.
func.func @gather_axis1_2d_indices(%d: tensor<3x4xf32>, %i: tensor<2x2xi32>) -> tensor<3x2x2xf32> attributes {input_names = ["d", "i"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Gather"(%d, %i) {axis = 1 : i64, onnx_node_name = "g1"} : (tensor<3x4xf32>, tensor<2x2xi32>) -> tensor<3x2x2xf32>
  func.return %y : tensor<3x2x2xf32>
}
// CHECK-LABEL: func.func @gather_axis1_2d_indices(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<3x4xf32>, [[IDX:%[0-9]+]]: memref<2x2xi32>, [[Y:%[0-9]+]]: memref<3x2x2xf32>)
// CHECK:         [[K:%[0-9]+]] = "krnl.load"([[IDX]],
// CHECK-NEXT:    [[K64:%[0-9]+]] = arith.extsi [[K]] : i32 to i64
// CHECK-NEXT:    [[ZK:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:    [[NEG:%[0-9]+]] = arith.cmpi slt, [[K64]], [[ZK]] : i64
// CHECK-NEXT:    [[N4:%[0-9]+]] = arith.constant 4 : i64
// CHECK-NEXT:    arith.addi [[K64]], [[N4]] : i64
// CHECK:         [[L4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:    arith.cmpi slt, {{%[0-9]+}}, [[L4]] : index
// CHECK:         "krnl.check"({{%[0-9]+}}) {message = "node 'g1' (Gather): an index on axis 1 is out of range; valid indices are [-4, 3]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[L:%[0-9]+]]: index):
// CHECK-NEXT:      [[KK:%[0-9]+]] = "krnl.load"([[IDX]], [[J]], [[L]])
// CHECK-NEXT:      [[KK64:%[0-9]+]] = arith.extsi [[KK]] : i32 to i64
// CHECK:           [[N4B:%[0-9]+]] = arith.constant 4 : i64
// CHECK-NEXT:      arith.addi [[KK64]], [[N4B]] : i64
// CHECK:           [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[KC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L3]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[D]], [[I]], [[KC]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]], [[L]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// Pad-13, mode reflect, pads [2, 2] on [3] -> [7]: r = i - 2, m = |r| mod 4 (period 2 (3 - 1)),
// y[i] = x[m < 3 ? m : 4 - m], i.e. x2 x1 x0 x1 x2 x1 x0 (the edge is not repeated). The final
// clamp changes nothing; it shows the verifier the bound.
func.func @pad_reflect(%x: tensor<3xf32>) -> tensor<7xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %p = "onnx.Constant"() {value = dense<[2, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Pad"(%x, %p, %none, %none) {mode = "reflect", onnx_node_name = "pad"} : (tensor<3xf32>, tensor<2xi64>, none, none) -> tensor<7xf32>
  func.return %y : tensor<7xf32>
}
// CHECK-LABEL: func.func @pad_reflect(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<7xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M2:%[0-9]+]] = arith.constant -2 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[I]], [[M2]] : index
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.cmpi slt, [[R]], [[Z]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[NR:%[0-9]+]] = arith.muli [[R]], [[M1]] : index
// CHECK-NEXT:      [[ABS:%[0-9]+]] = arith.select [[NEG]], [[NR]], [[R]] : index
// CHECK-NEXT:      [[P4:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.remsi [[ABS]], [[P4]] : index
// CHECK-NEXT:      [[M1B:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[NM:%[0-9]+]] = arith.muli [[M]], [[M1B]] : index
// CHECK-NEXT:      [[P4B:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:      [[BACK:%[0-9]+]] = arith.addi [[NM]], [[P4B]] : index
// CHECK-NEXT:      [[D3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[PAST:%[0-9]+]] = arith.cmpi sge, [[M]], [[D3]] : index
// CHECK-NEXT:      [[SRC:%[0-9]+]] = arith.select [[PAST]], [[BACK]], [[M]] : index
// CHECK:           [[SAFE:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[SAFE]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 7 : i64]]

// -----
// Pad-13, mode wrap, pads [4, 2] on [3] -> [9]: y[i] = x[(i - 4 + 6) mod 3], the 6 (a multiple
// of 3 at least the pad) keeping the remainder's operand non-negative: x2 x0 x1 x2 x0 x1 x2 x0 x1.
func.func @pad_wrap(%x: tensor<3xf32>) -> tensor<9xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %p = "onnx.Constant"() {value = dense<[4, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Pad"(%x, %p, %none, %none) {mode = "wrap", onnx_node_name = "pad"} : (tensor<3xf32>, tensor<2xi64>, none, none) -> tensor<9xf32>
  func.return %y : tensor<9xf32>
}
// CHECK-LABEL: func.func @pad_wrap(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<9xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M4:%[0-9]+]] = arith.constant -4 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[I]], [[M4]] : index
// CHECK-NEXT:      [[C6:%[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:      [[RS:%[0-9]+]] = arith.addi [[R]], [[C6]] : index
// CHECK-NEXT:      [[D3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[M:%[0-9]+]] = arith.remsi [[RS]], [[D3]] : index
// CHECK:           [[SAFE:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[SAFE]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 9 : i64]]
