// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Quantisation ops (lowering/quant.py): integer arithmetic in the nests, unsigned values widened
// by sign extension and a mask (codegen has no zero extension), QuantizeLinear rounding half to
// even and saturating in float before the one conversion to the integer type.

// QuantizeLinear to uint8: x / scale (a division, as onnxruntime), round half to even, + zero
// point, clamped to [0, 255], then fptosi and trunci to ui8. The ui8 zero point is widened
// with extsi + andi 255.
func.func @quantize_u8(%x: tensor<4xf32>) -> tensor<4xui8> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %z = "onnx.Constant"() {value = dense<128> : tensor<ui8>} : () -> tensor<ui8>
  %y = "onnx.QuantizeLinear"(%x, %s, %z) {onnx_node_name = "q"} : (tensor<4xf32>, tensor<f32>, tensor<ui8>) -> tensor<4xui8>
  func.return %y : tensor<4xui8>
}
// CHECK-LABEL: func.func @quantize_u8(
// CHECK:         [[X:%[0-9]+]] = "krnl.load"(%0, {{%[0-9]+}}) : (memref<4xf32>, index) -> f32
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.load"(%2) : (memref<f32>) -> f32
// CHECK-NEXT:    [[V:%[0-9]+]] = arith.divf [[X]], [[S]] : f32
// CHECK:         [[ZW:%[0-9]+]] = arith.extsi {{%[0-9]+}} : ui8 to i32
// CHECK-NEXT:    [[MASK:%[0-9]+]] = arith.constant 255 : i32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.andi [[ZW]], [[MASK]] : i32
// CHECK-NEXT:    [[ZF:%[0-9]+]] = arith.sitofp [[Z]] : i32 to f32
// CHECK:         math.floor
// CHECK:         [[R:%[0-9]+]] = arith.select {{%[0-9]+}}, [[V]], {{%[0-9]+}} : f32
// CHECK-NEXT:    [[RZ:%[0-9]+]] = arith.addf [[R]], [[ZF]] : f32
// CHECK-NEXT:    [[LO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.maximumf [[RZ]], [[LO]] : f32
// CHECK-NEXT:    [[HI:%[0-9]+]] = arith.constant 2.550000e+02 : f32
// CHECK-NEXT:    [[B:%[0-9]+]] = arith.minimumf [[A]], [[HI]] : f32
// CHECK-NEXT:    [[I:%[0-9]+]] = arith.fptosi [[B]] : f32 to i32
// CHECK-NEXT:    [[Q:%[0-9]+]] = arith.trunci [[I]] : i32 to ui8
// CHECK-NEXT:    "krnl.store"([[Q]], %1, {{%[0-9]+}}) : (ui8, memref<4xui8>, index) -> ()

// -----
// DequantizeLinear per axis: scale and zero point indexed by the axis' loop variable; int8
// widened by extsi alone; (x - zero point) in i32, then one conversion and one multiply.
func.func @dequantize_axis(%x: tensor<2x3xi8>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Constant"() {value = dense<[1.0, 2.0, 4.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %z = "onnx.Constant"() {value = dense<[-128, 0, 127]> : tensor<3xi8>} : () -> tensor<3xi8>
  %y = "onnx.DequantizeLinear"(%x, %s, %z) {axis = 1 : i64, onnx_node_name = "dq"} : (tensor<2x3xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @dequantize_axis(
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:    [[X:%[0-9]+]] = "krnl.load"(%0, [[I]], [[J]]) : (memref<2x3xi8>, index, index) -> i8
// CHECK-NEXT:    [[XW:%[0-9]+]] = arith.extsi [[X]] : i8 to i32
// CHECK-NEXT:    [[Z:%[0-9]+]] = "krnl.load"(%3, [[J]]) : (memref<3xi8>, index) -> i8
// CHECK-NEXT:    [[ZW:%[0-9]+]] = arith.extsi [[Z]] : i8 to i32
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.subi [[XW]], [[ZW]] : i32
// CHECK-NEXT:    [[F:%[0-9]+]] = arith.sitofp [[D]] : i32 to f32
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.load"(%2, [[J]]) : (memref<3xf32>, index) -> f32
// CHECK-NEXT:    arith.mulf [[F]], [[S]] : f32

// -----
// MatMulInteger: A and B shifted by their zero points into i32 buffers (uint8 masked), then
// an i32 multiply-add nest (no float anywhere).
func.func @matmul_integer(%a: tensor<2x3xui8>, %b: tensor<3x4xi8>) -> tensor<2x4xi32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 13 : i64} {
  %za = "onnx.Constant"() {value = dense<7> : tensor<ui8>} : () -> tensor<ui8>
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MatMulInteger"(%a, %b, %za, %none) {onnx_node_name = "mmi"} : (tensor<2x3xui8>, tensor<3x4xi8>, tensor<ui8>, none) -> tensor<2x4xi32>
  func.return %y : tensor<2x4xi32>
}
// CHECK-LABEL: func.func @matmul_integer(
// CHECK:         [[A32:%[0-9]+]] = "krnl.alloc"() {onnx_node = "mmi"} : () -> memref<2x3xi32>
// CHECK:         arith.andi {{%[0-9]+}}, {{%[0-9]+}} : i32
// CHECK:         arith.subi {{%[0-9]+}}, {{%[0-9]+}} : i32
// CHECK:         [[B32:%[0-9]+]] = "krnl.alloc"() {onnx_node = "mmi"} : () -> memref<3x4xi32>
// CHECK:         [[P:%[0-9]+]] = arith.muli {{%[0-9]+}}, {{%[0-9]+}} : i32
// CHECK-NEXT:    [[S:%[0-9]+]] = arith.addi {{%[0-9]+}}, [[P]] : i32
// CHECK-NEXT:    "krnl.store"([[S]], %2, {{.*}}) : (i32, memref<2x4xi32>, index, index) -> ()
// CHECK-NOT:     arith.mulf

// -----
// QLinearConv: an i32 Conv (x shifted into a zero-bordered 5x5 buffer: pads read 0 after the
// shift, and the product nest reads without guards), then the requantising nest:
// float(acc) * (x_scale * w_scale / y_scale), rounded, + zero point, saturated to i8.
func.func @qlinear_conv(%x: tensor<1x1x3x3xi8>) -> tensor<1x1x3x3xi8> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %xs = "onnx.Constant"() {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %xz = "onnx.Constant"() {value = dense<1> : tensor<i8>} : () -> tensor<i8>
  %w = "onnx.Constant"() {value = dense<1> : tensor<1x1x3x3xi8>} : () -> tensor<1x1x3x3xi8>
  %ws = "onnx.Constant"() {value = dense<2.500000e-01> : tensor<f32>} : () -> tensor<f32>
  %wz = "onnx.Constant"() {value = dense<0> : tensor<i8>} : () -> tensor<i8>
  %ys = "onnx.Constant"() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %yz = "onnx.Constant"() {value = dense<-1> : tensor<i8>} : () -> tensor<i8>
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.QLinearConv"(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %none) {pads = [1, 1, 1, 1], onnx_node_name = "qc"} : (tensor<1x1x3x3xi8>, tensor<f32>, tensor<i8>, tensor<1x1x3x3xi8>, tensor<f32>, tensor<i8>, tensor<f32>, tensor<i8>, none) -> tensor<1x1x3x3xi8>
  func.return %y : tensor<1x1x3x3xi8>
}
// CHECK-LABEL: func.func @qlinear_conv(
// CHECK:         "krnl.alloc"() {onnx_node = "qc"} : () -> memref<1x1x3x3xi32>
// CHECK:         [[ACC:%[0-9]+]] = "krnl.alloc"() {onnx_node = "qc"} : () -> memref<1x1x3x3xi32>
// CHECK:         [[XP:%[0-9]+]] = "krnl.alloc"() {onnx_node = "qc"} : () -> memref<1x1x5x5xi32>
// CHECK-NOT:     arith.select
// CHECK:         [[XV:%[0-9]+]] = "krnl.load"([[XP]], {{.*}}) : (memref<1x1x5x5xi32>, index, index, index, index) -> i32
// CHECK:         arith.muli [[XV]], {{%[0-9]+}} : i32
// CHECK:         [[A:%[0-9]+]] = "krnl.load"([[ACC]], {{.*}}) : (memref<1x1x3x3xi32>, index, index, index, index) -> i32
// CHECK-NEXT:    [[AF:%[0-9]+]] = arith.sitofp [[A]] : i32 to f32
// CHECK:         [[XW:%[0-9]+]] = arith.mulf {{%[0-9]+}}, {{%[0-9]+}} : f32
// CHECK:         [[M:%[0-9]+]] = arith.divf [[XW]], {{%[0-9]+}} : f32
// CHECK-NEXT:    arith.mulf [[AF]], [[M]] : f32
// CHECK:         arith.constant -1.280000e+02 : f32
// CHECK:         arith.constant 1.270000e+02 : f32
// CHECK:         arith.trunci {{%[0-9]+}} : i32 to i8
