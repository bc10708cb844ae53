// RUN: python -m compilerkit.opt -p lower-to-krnl,fold-layout %s | filecheck %s
// PZnet-style blocked 3-D Conv (lowering/blocked3d.py), chosen per node by the
// `conv_algorithm` attribute, and the fold-layout pass (krnl_passes/fold_layout.py). Two
// chained 1x1x1 Convs, 2 -> 3 -> 2 channels on 2x2x3 voxels: one to_nchw8c nest at the
// chain's input (x [1, 2, 2, 2, 3] -> [1, 1, 2, 2, 3, 8], channels 2..7 zero), one
// from_nchw8c nest at its output; c2 reads c1's blocked output buffer directly (no transform
// between them). The weights are re-laid at compile time as [K/8, C/8, kd, kh, kw, 8 in,
// 8 out]: W1 = 0.5 everywhere, so input lane 0 holds 0.5 (0x3F000000, little-endian bytes
// 0000003F) for output lanes 0..2 and zero for the 5 padded output lanes, and the same for
// input lane 1; input lanes 2..7 are all zero.
builtin.module {
  func.func @chain(%x: tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 17 : i64} {
    %w1 = "onnx.Constant"() {value = dense<0.5> : tensor<3x2x1x1x1xf32>} : () -> tensor<3x2x1x1x1xf32>
    %w2 = "onnx.Constant"() {value = dense<0.25> : tensor<2x3x1x1x1xf32>} : () -> tensor<2x3x1x1x1xf32>
    %none = "onnx.NoValue"() : () -> none
    %h = "onnx.Conv"(%x, %w1, %none) {onnx_node_name = "c1", activation = "Relu", conv_algorithm = "pznet"} : (tensor<1x2x2x2x3xf32>, tensor<3x2x1x1x1xf32>, none) -> tensor<1x3x2x2x3xf32>
    %y = "onnx.Conv"(%h, %w2, %none) {onnx_node_name = "c2", conv_algorithm = "pznet"} : (tensor<1x3x2x2x3xf32>, tensor<2x3x1x1x1xf32>, none) -> tensor<1x2x2x2x3xf32>
    func.return %y : tensor<1x2x2x2x3xf32>
  }
}
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x2x2x3xf32>, [[Y:%[0-9]+]]: memref<1x2x2x2x3xf32>)
// CHECK:         [[XB:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c1"} : () -> memref<1x1x2x2x3x8xf32>
// The input transform: a guarded load of x (channels past 2 read as zero) into XB.
// CHECK:         "krnl.load"([[X]]
// CHECK:         "krnl.store"({{%[0-9]+}}, [[XB]]
// CHECK:         layout = "to_nchw8c", onnx_node = "c1"
// CHECK:         "krnl.global"() {sym_name = "pznet_w_c1", value = dense_resource<pznet_w_c1> : tensor<1x1x1x1x1x8x8xf32>
// CHECK:         [[H:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c1"} : () -> memref<1x1x2x2x3x8xf32>
// CHECK:         [[ROW1:%[0-9]+]] = "krnl.alloc"() {onnx_node = "c1"} : () -> memref<3x8xf32>
// The row of 3 positions x 8 output lanes: bias (zero) in, one tile of 3 accumulators, the
// channel loop a tile of its whole length 8 (not unrolled: vectorised), ReLU on the way out.
// CHECK:         "krnl.block"({{%[0-9]+}}) {tile = 8 : i64}
// CHECK:         "krnl.load"({{%[0-9]+}}, {{.*}}) : (memref<1x1x1x1x1x8x8xf32>
// CHECK-NEXT:    "krnl.load"([[XB]]
// CHECK:         arith.maximumf
// CHECK-NEXT:    "krnl.store"({{%[0-9]+}}, [[H]]
// No transform between c1 and c2: c2's taps read H itself.
// CHECK-NOT:     layout =
// CHECK:         "krnl.global"() {sym_name = "pznet_w_c2"
// CHECK-NOT:     layout =
// CHECK:         "krnl.load"([[H]]
// CHECK-NOT:     layout = "to_nchw8c"
// CHECK:         "krnl.store"({{%[0-9]+}}, [[Y]]
// CHECK:         layout = "from_nchw8c", onnx_node = "c2"
// CHECK-NOT:     layout =
// CHECK:         func.return
// CHECK:         pznet_w_c1: "0x040000000000003F0000003F0000003F00000000000000000000000000000000000000000000003F0000003F0000003F00000000000000000000000000000000000000000000000000000000
