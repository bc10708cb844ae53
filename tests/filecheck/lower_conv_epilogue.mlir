// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// The GEMM schedule of Conv with a fused activation (lowering/conv.py): the output is computed
// one panel of rows at a time, and each panel gets its epilogue (the activation, on the panel
// the matmul just wrote, still in cache) before the next panel starts. Panels hold about
// PANEL_BYTES = 2 MiB of column buffer (or, for a plain 1x1 GEMM, of output); the rows are
// split evenly when a count between half and all of what fits divides them, else the last panel
// is shorter.

// A 1x1 Conv, 1600 output channels of 7 x 64: one output row is 1600 * 64 * 4 = 409600 bytes, so
// 5 rows fit; no count in 3..5 divides 7, so a panel of 5 rows (320 columns) and one of 2
// (128 columns). Each: bias fill, matmul on x (no copy), then the ReLU epilogue.
builtin.module {
  func.func @pointwise_relu_panels(%x: tensor<1x2x7x64xf32>, %w: tensor<1600x2x1x1xf32>, %b: tensor<1600xf32>) -> tensor<1x1600x7x64xf32> attributes {input_names = ["x", "w", "b"], output_names = ["y"], onnx_opset = 17 : i64} {
    %y = "onnx.Conv"(%x, %w, %b) {onnx_node_name = "pw", activation = "Relu"} : (tensor<1x2x7x64xf32>, tensor<1600x2x1x1xf32>, tensor<1600xf32>) -> tensor<1x1600x7x64xf32>
    func.return %y : tensor<1x1600x7x64xf32>
  }
}
// CHECK-LABEL: func.func @pointwise_relu_panels(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x7x64xf32>, [[W:%[0-9]+]]: memref<1600x2x1x1xf32>, [[B:%[0-9]+]]: memref<1600xf32>, [[Y:%[0-9]+]]: memref<1x1600x7x64xf32>)
// CHECK:         [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {onnx_node = "pw"} : (memref<1x1600x7x64xf32>) -> memref<1x1600x448xf32>
// CHECK-NOT:     krnl.alloc
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index):
// The 5-row panel (jp in [0, 1)) starts at column jp * 320.
// CHECK:           ^bb0([[JP:%[0-9]+]]: index):
// CHECK-NEXT:        [[C320:%[0-9]+]] = arith.constant 320 : index
// CHECK-NEXT:        [[Q0:%[0-9]+]] = arith.muli [[JP]], [[C320]] : index
// CHECK:               "krnl.load"([[B]],
// CHECK:             }) {bounds = {{\[\[}}0 : i64, 1600 : i64], [0 : i64, 320 : i64]]
// CHECK:               "krnl.matmul"([[W]], [[X]], [[YV]],
// CHECK-SAME:            {sizes = [1600 : i64, 320 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 448 : i64, 448 : i64], simd = 1 : i64}
// The epilogue over the same 1600 x 320 panel: y = max(y, 0) in place.
// CHECK:             ^bb0([[O:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK:               [[COL:%[0-9]+]] = arith.addi [[Q0]], [[Q]] : index
// CHECK-NEXT:          [[V:%[0-9]+]] = "krnl.load"([[YV]], [[N]], [[OC:%[0-9]+]], [[COL]])
// CHECK-NEXT:          [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          [[R:%[0-9]+]] = arith.maximumf [[V]], [[Z]] : f32
// CHECK-NEXT:          "krnl.store"([[R]], [[YV]], [[N]], [[OC]], [[COL]])
// CHECK-NEXT:        }) {bounds = {{\[\[}}0 : i64, 1600 : i64], [0 : i64, 320 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// The 2-row panel starts at column 5 * 64 = 320.
// CHECK:           ^bb0([[JP2:%[0-9]+]]: index):
// CHECK-NEXT:        [[C128:%[0-9]+]] = arith.constant 128 : index
// CHECK-NEXT:        [[T:%[0-9]+]] = arith.muli [[JP2]], [[C128]] : index
// CHECK-NEXT:        [[C320B:%[0-9]+]] = arith.constant 320 : index
// CHECK-NEXT:        [[Q02:%[0-9]+]] = arith.addi [[T]], [[C320B]] : index
// CHECK:               "krnl.matmul"([[W]], [[X]], [[YV]],
// CHECK-SAME:            {sizes = [1600 : i64, 128 : i64, 2 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [2 : i64, 1 : i64, 448 : i64, 448 : i64], simd = 1 : i64}
// CHECK:               arith.maximumf
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 1600 : i64], [0 : i64, 128 : i64]]
// CHECK-NEXT:      }) {bounds = {{\[\[}}0 : i64, 1 : i64]]
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64]]

// -----
// Swish (x * sigmoid(x), Keras SiLU) in the epilogue of a 3x3 Conv: sigmoid as
// 1 / (1 + exp(-x)) (as lowering/elementwise.py computes it: e = exp(-|x|), x < 0 ? e / (1 + e)
// : 1 / (1 + e)), then the product, stored in place.
builtin.module {
  func.func @conv3x3_swish(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> attributes {input_names = ["x", "w"], output_names = ["y"], onnx_opset = 17 : i64} {
    %none = "onnx.NoValue"() : () -> none
    %y = "onnx.Conv"(%x, %w, %none) {onnx_node_name = "c", activation = "Swish", activation_params = [1.0 : f32]} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>, none) -> tensor<1x3x4x4xf32>
    func.return %y : tensor<1x3x4x4xf32>
  }
}
// CHECK-LABEL: func.func @conv3x3_swish(
// CHECK:         "krnl.alloc"() {onnx_node = "c"} : () -> memref<2x3x3x4x4xf32>
// CHECK:               "krnl.matmul"
// CHECK-SAME:            {sizes = [3 : i64, 16 : i64, 18 : i64]
// CHECK:             ^bb0({{%[0-9]+}}: index, {{%[0-9]+}}: index):
// CHECK:               [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:          [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:          [[A:%[0-9]+]] = math.absf [[V]] : f32
// CHECK-NEXT:          [[NEG:%[0-9]+]] = arith.negf [[A]] : f32
// CHECK-NEXT:          [[E:%[0-9]+]] = math.exp [[NEG]] : f32
// CHECK-NEXT:          [[D:%[0-9]+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT:          [[R:%[0-9]+]] = arith.divf [[ONE]], [[D]] : f32
// CHECK-NEXT:          [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          [[LT:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:          [[ER:%[0-9]+]] = arith.mulf [[E]], [[R]] : f32
// CHECK-NEXT:          [[S:%[0-9]+]] = arith.select [[LT]], [[ER]], [[R]] : f32
// CHECK-NEXT:          [[P:%[0-9]+]] = arith.mulf [[V]], [[S]] : f32
// CHECK-NEXT:          "krnl.store"([[P]],
