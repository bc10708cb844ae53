// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Resize and Upsample (lowering/resize.py). The scales, sizes and roi are constants, so each
// resized axis gets tables computed at compile time: for every output position the input
// indices it reads (one for nearest, two for linear, four for cubic) and, for linear and cubic,
// their weights; tf_crop_and_resize adds a table of the positions outside the input. The nest
// over the output loads the tables, clamps each index into its axis (a no-op that shows the
// verifier the bound), and sums x at the taps times their weights; an axis that is not resized
// reads the output's own index.

// Nearest, asymmetric, floor, scales [1, 1, 2, 2] on [1, 1, 2, 3]: the H table is
// floor(h / 2) = 0 0 1 1, the W table 0 0 1 1 2 2; N and C have none.
func.func @nearest_2x(%x: tensor<1x1x2x3xf32>) -> tensor<1x1x4x6xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %s = "onnx.Constant"() {value = dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %y = "onnx.Resize"(%x, %none, %s, %none) {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", onnx_node_name = "up"} : (tensor<1x1x2x3xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x6xf32>
  func.return %y : tensor<1x1x4x6xf32>
}
// CHECK-LABEL: func.func @nearest_2x(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x2x3xf32>, [[Y:%[0-9]+]]: memref<1x1x4x6xf32>)
// CHECK:         [[TH:%[0-9]+]] = "krnl.global"() {sym_name = "up_idx2", value = dense<{{\[\[}}0], [0], [1], [1]]> : tensor<4x1xi64>
// CHECK-NEXT:    [[TW:%[0-9]+]] = "krnl.global"() {sym_name = "up_idx3", value = dense<{{\[\[}}0], [0], [1], [1], [2], [2]]> : tensor<6x1xi64>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      [[IH:%[0-9]+]] = "krnl.load"([[TH]], [[H]], [[Z]])
// CHECK-NEXT:      arith.index_cast [[IH]] : i64 to index
// CHECK:           [[L1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[SH:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L1]] : index
// CHECK:           [[IW:%[0-9]+]] = "krnl.load"([[TW]], [[W]], {{%[0-9]+}})
// CHECK:           [[L2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[SW:%[0-9]+]] = arith.minsi {{%[0-9]+}}, [[L2]] : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[N]], [[C]], [[SH]], [[SW]])
// CHECK-NEXT:      "krnl.store"([[V]], [[Y]], [[N]], [[C]], [[H]], [[W]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 6 : i64]]

// -----
// Linear, half_pixel, scales [1, 2] on [2, 2]: output positions 0..3 sit at -0.25, 0.25, 0.75,
// 1.25 of the input, clamped into [0, 1]: taps (0, 1) with weights (1, 0), (0.75, 0.25),
// (0.25, 0.75), and (1, 1) with (0.5, 0.5) as onnxruntime weights a clamped edge;
// y[r, c] = w0 * x[r, i0] + w1 * x[r, i1] (onnxruntime's order: weights first).
func.func @linear_half_pixel(%x: tensor<2x2xf32>) -> tensor<2x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %s = "onnx.Constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "onnx.Resize"(%x, %none, %s, %none) {mode = "linear", onnx_node_name = "lin"} : (tensor<2x2xf32>, none, tensor<2xf32>, none) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @linear_half_pixel(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK:         [[TI:%[0-9]+]] = "krnl.global"() {sym_name = "lin_idx1", value = dense<{{\[\[}}0, 1], [0, 1], [0, 1], [1, 1]]> : tensor<4x2xi64>
// CHECK-NEXT:    [[TWT:%[0-9]+]] = "krnl.global"() {sym_name = "lin_w1", value = dense<{{\[\[}}1.000000e+00, 0.000000e+00], [7.500000e-01, 2.500000e-01], [2.500000e-01, 7.500000e-01], [5.000000e-01, 5.000000e-01]]> : tensor<4x2xf32>
// CHECK:         ^bb0([[R:%[0-9]+]]: index, [[C:%[0-9]+]]: index):
// CHECK-NEXT:      [[T0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:      "krnl.load"([[TI]], [[C]], [[T0]])
// CHECK:           [[I0:%[0-9]+]] = arith.minsi
// CHECK-NEXT:      [[W0:%[0-9]+]] = "krnl.load"([[TWT]], [[C]], [[T0]])
// CHECK-NEXT:      [[T1:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      "krnl.load"([[TI]], [[C]], [[T1]])
// CHECK:           [[I1:%[0-9]+]] = arith.minsi
// CHECK-NEXT:      [[W1:%[0-9]+]] = "krnl.load"([[TWT]], [[C]], [[T1]])
// CHECK-NEXT:      [[A:%[0-9]+]] = "krnl.load"([[X]], [[R]], [[I0]])
// CHECK-NEXT:      [[AW:%[0-9]+]] = arith.mulf [[W0]], [[A]] : f32
// CHECK-NEXT:      [[B:%[0-9]+]] = "krnl.load"([[X]], [[R]], [[I1]])
// CHECK-NEXT:      [[BW:%[0-9]+]] = arith.mulf [[W1]], [[B]] : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[AW]], [[BW]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[R]], [[C]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]

// -----
// tf_crop_and_resize, nearest, roi [0.5, 1.5] on [4], sizes [3]: positions 1.5, 3, 4.5 of the
// input; round_prefer_floor reads 1 and 3, and 4.5 lies past the last element (3), so the
// third output is the extrapolation value -1.
func.func @crop_extrapolate(%x: tensor<4xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 19 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %roi = "onnx.Constant"() {value = dense<[0.5, 1.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %sz = "onnx.Constant"() {value = dense<[3]> : tensor<1xi64>} : () -> tensor<1xi64>
  %y = "onnx.Resize"(%x, %roi, %none, %sz) {mode = "nearest", coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = -1.0 : f32, onnx_node_name = "crop"} : (tensor<4xf32>, tensor<2xf32>, none, tensor<1xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @crop_extrapolate(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK:         [[TI:%[0-9]+]] = "krnl.global"() {sym_name = "crop_idx0", value = dense<{{\[\[}}1], [3], [3]]> : tensor<3x1xi64>
// CHECK-NEXT:    [[TO:%[0-9]+]] = "krnl.global"() {sym_name = "crop_out0", value = dense<[0, 0, 1]> : tensor<3xi64>
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]], {{%[0-9]+}})
// CHECK-NEXT:      [[OUT:%[0-9]+]] = "krnl.load"([[TO]], [[I]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:      [[OFF:%[0-9]+]] = arith.cmpi ne, [[OUT]], [[Z]] : i64
// CHECK-NEXT:      [[E:%[0-9]+]] = arith.constant -1.000000e+00 : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.select [[OFF]], [[E]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]])
