// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Data-indexed ops (lowering/indexing.py). Every index read from data is checked once, in a
// nest of its own, as Gather's are: wrapped (k < 0 becomes k + d) and required in [0, d)
// (krnl.check, reported as RunError after the call); the nest that then reads or writes clamps
// the wrapped index into [0, d - 1], so a failed check never touches memory outside the buffer.
// Scatter copies data into the output first and then writes the updates in index order,
// combining with the old value for a reduction. OneHot compares each wrapped index with the
// position on its axis; an index out of range matches nothing (no check: ONNX gives all `off`).

// GatherElements axis 1 on [2, 3] with indices [2, 2]: y[i, j] = d[i, idx[i, j]], valid -3 .. 2.
func.func @gather_elements_axis1(%d: tensor<2x3xf32>, %i: tensor<2x2xi64>) -> tensor<2x2xf32> attributes {input_names = ["d", "i"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GatherElements"(%d, %i) {axis = 1 : i64, onnx_node_name = "ge"} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @gather_elements_axis1(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<2x3xf32>, [[IDX:%[0-9]+]]: memref<2x2xi64>, [[Y:%[0-9]+]]: memref<2x2xf32>)
// CHECK:         ^bb0([[A:%[0-9]+]]: index, [[B:%[0-9]+]]: index):
// CHECK-NEXT:      [[K:%[0-9]+]] = "krnl.load"([[IDX]], [[A]], [[B]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.cmpi slt, [[K]], [[Z]] : i64
// CHECK-NEXT:      [[N3:%[0-9]+]] = arith.constant 3 : i64
// CHECK-NEXT:      [[KW:%[0-9]+]] = arith.addi [[K]], [[N3]] : i64
// CHECK-NEXT:      [[KS:%[0-9]+]] = arith.select [[NEG]], [[KW]], [[K]] : i64
// CHECK-NEXT:      [[KI:%[0-9]+]] = arith.index_cast [[KS]] : i64 to index
// CHECK-NEXT:      [[Z0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[GE:%[0-9]+]] = arith.cmpi sge, [[KI]], [[Z0]] : index
// CHECK-NEXT:      [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[LT:%[0-9]+]] = arith.cmpi slt, [[KI]], [[L3]] : index
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.andi [[GE]], [[LT]] : i1
// CHECK-NEXT:      "krnl.check"([[OK]]) {message = "node 'ge' (GatherElements): an index on axis 1 is out of range; valid indices are [-3, 2]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[K2:%[0-9]+]] = "krnl.load"([[IDX]], [[I]], [[J]])
// CHECK:           [[KI2:%[0-9]+]] = arith.index_cast {{%[0-9]+}} : i64 to index
// CHECK-NEXT:      [[Z2:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[LO:%[0-9]+]] = arith.maxsi [[KI2]], [[Z2]] : index
// CHECK-NEXT:      [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[KC:%[0-9]+]] = arith.minsi [[LO]], [[L2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[D]], [[I]], [[KC]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]

// -----
// GatherND on data [2, 3, 4] with indices [5, 2]: each pair picks (axis 0, axis 1), y is [5, 4],
// y[q, j] = d[idx[q, 0], idx[q, 1], j]. The two components have their own ranges (-2 .. 1 and
// -3 .. 2), so the check nest runs over the 5 pairs and checks each component separately.
func.func @gather_nd_pairs(%d: tensor<2x3x4xf32>, %i: tensor<5x2xi64>) -> tensor<5x4xf32> attributes {input_names = ["d", "i"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.GatherND"(%d, %i) {onnx_node_name = "gnd"} : (tensor<2x3x4xf32>, tensor<5x2xi64>) -> tensor<5x4xf32>
  func.return %y : tensor<5x4xf32>
}
// CHECK-LABEL: func.func @gather_nd_pairs(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<2x3x4xf32>, [[IDX:%[0-9]+]]: memref<5x2xi64>, [[Y:%[0-9]+]]: memref<5x4xf32>)
// CHECK:         ^bb0([[Q:%[0-9]+]]: index):
// CHECK-NEXT:      [[C0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      "krnl.load"([[IDX]], [[Q]], [[C0]])
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'gnd' (GatherND): an index for data axis 0 is out of range; valid indices are [-2, 1]"}
// CHECK-NEXT:      [[C1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      "krnl.load"([[IDX]], [[Q]], [[C1]])
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'gnd' (GatherND): an index for data axis 1 is out of range; valid indices are [-3, 2]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 5 : i64]]
// CHECK:         ^bb0([[P:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:           [[L1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[A0:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L1]] : index
// CHECK:           [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[A1:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[D]], [[A0]], [[A1]], [[J]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[P]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 5 : i64], [0 : i64, 4 : i64]]

// -----
// ScatterElements axis 0, reduction add, data [4, 3], indices and updates [2, 3]:
// y = d; then y[idx[i, j], j] += u[i, j], the old value read at the clamped index.
func.func @scatter_elements_add(%d: tensor<4x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) -> tensor<4x3xf32> attributes {input_names = ["d", "i", "u"], output_names = ["y"], onnx_opset = 18 : i64} {
  %y = "onnx.ScatterElements"(%d, %i, %u) {axis = 0 : i64, reduction = "add", onnx_node_name = "se"} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}
// CHECK-LABEL: func.func @scatter_elements_add(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<4x3xf32>, [[IDX:%[0-9]+]]: memref<2x3xi64>, [[U:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<4x3xf32>)
// CHECK:         ^bb0([[R:%[0-9]+]]: index, [[S:%[0-9]+]]: index):
// CHECK-NEXT:      [[DV:%[0-9]+]] = "krnl.load"([[D]], [[R]], [[S]])
// CHECK-NEXT:      "krnl.store"([[DV]], [[Y]], [[R]], [[S]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 3 : i64]]
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'se' (ScatterElements): an index on axis 0 is out of range; valid indices are [-4, 3]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      "krnl.load"([[IDX]], [[I]], [[J]])
// CHECK:           [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[KC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L3]] : index
// CHECK-NEXT:      [[UV:%[0-9]+]] = "krnl.load"([[U]], [[I]], [[J]])
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[KC]], [[J]])
// CHECK-NEXT:      [[SUM:%[0-9]+]] = arith.addf [[OLD]], [[UV]] : f32
// CHECK-NEXT:      "krnl.store"([[SUM]], [[Y]], [[KC]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// ScatterND without reduction, data [4, 3], indices [2, 1] (two rows), updates [2, 3]:
// y = d; y[idx[q, 0], j] = u[q, j]. No reduction: the old value is not read.
func.func @scatter_nd_rows(%d: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> tensor<4x3xf32> attributes {input_names = ["d", "i", "u"], output_names = ["y"], onnx_opset = 18 : i64} {
  %y = "onnx.ScatterND"(%d, %i, %u) {onnx_node_name = "snd"} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}
// CHECK-LABEL: func.func @scatter_nd_rows(
// CHECK-SAME:    [[D:%[0-9]+]]: memref<4x3xf32>, [[IDX:%[0-9]+]]: memref<2x1xi64>, [[U:%[0-9]+]]: memref<2x3xf32>, [[Y:%[0-9]+]]: memref<4x3xf32>)
// CHECK:           "krnl.store"({{%[0-9]+}}, [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 3 : i64]]
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'snd' (ScatterND): an index for data axis 0 is out of range; valid indices are [-4, 3]"}
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         ^bb0([[Q:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      "krnl.load"([[IDX]], [[Q]], [[C0]])
// CHECK:           [[L3:%[0-9]+]] = arith.constant 3 : index
// CHECK-NEXT:      [[KC:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L3]] : index
// CHECK-NEXT:      [[UV:%[0-9]+]] = "krnl.load"([[U]], [[Q]], [[J]])
// CHECK-NEXT:      "krnl.store"([[UV]], [[Y]], [[KC]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// OneHot, depth 5 (a constant), axis -1: y[q, j] = (idx[q] wrapped by 5) == j ? on : off, with
// off = v[0] and on = v[1] read in the nest (LLVM hoists them; a load before the nest would be
// a value the loopnest code generator's outlined nests do not capture).
func.func @one_hot_last_axis(%i: tensor<3xi64>, %v: tensor<2xf32>) -> tensor<3x5xf32> attributes {input_names = ["i", "v"], output_names = ["y"], onnx_opset = 13 : i64} {
  %depth = "onnx.Constant"() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
  %y = "onnx.OneHot"(%i, %depth, %v) {axis = -1 : i64, onnx_node_name = "oh"} : (tensor<3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}
// CHECK-LABEL: func.func @one_hot_last_axis(
// CHECK-SAME:    [[IDX:%[0-9]+]]: memref<3xi64>, [[VAL:%[0-9]+]]: memref<2xf32>, [[Y:%[0-9]+]]: memref<3x5xf32>)
// CHECK:         ^bb0([[Q:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[C0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[OFF:%[0-9]+]] = "krnl.load"([[VAL]], [[C0]])
// CHECK-NEXT:      [[C1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[ON:%[0-9]+]] = "krnl.load"([[VAL]], [[C1]])
// CHECK-NEXT:      [[K:%[0-9]+]] = "krnl.load"([[IDX]], [[Q]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.cmpi slt, [[K]], [[Z]] : i64
// CHECK-NEXT:      [[N5:%[0-9]+]] = arith.constant 5 : i64
// CHECK-NEXT:      [[KW:%[0-9]+]] = arith.addi [[K]], [[N5]] : i64
// CHECK-NEXT:      [[KS:%[0-9]+]] = arith.select [[NEG]], [[KW]], [[K]] : i64
// CHECK-NEXT:      [[J64:%[0-9]+]] = arith.index_cast [[J]] : index to i64
// CHECK-NEXT:      [[HIT:%[0-9]+]] = arith.cmpi eq, [[KS]], [[J64]] : i64
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.select [[HIT]], [[ON]], [[OFF]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[Q]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 5 : i64]]
