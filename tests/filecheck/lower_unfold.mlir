// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Ops that put values back into an image (lowering/unfold.py). Col2Im views the columns as
// [N, C, block..., grid...] and adds block element (i, j) of grid position (p, q) into the
// scratch image at (2p + i, 2q + j) (strides 2), then copies the image out (no pads here: no
// guard). MaxUnpool checks every index at run time, then stores each value at its clamped
// flat index. CenterCropPad reads input row i + 1 (crop 5 -> 2) and column j - 1 (pad 2 -> 5),
// 0 outside the input.

func.func @col2im_stride2(%x: tensor<1x4x4xf32>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 18 : i64} {
  %s = "onnx.Constant"() {value = dense<[4, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %b = "onnx.Constant"() {value = dense<[2, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.Col2Im"(%x, %s, %b) {strides = [2, 2], onnx_node_name = "c2i"} : (tensor<1x4x4xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @col2im_stride2(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x4x4xf32>, [[Y:%[0-9]+]]: memref<1x1x4x4xf32>)
// CHECK:         [[SC:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x1x4x4xf32>
// CHECK:         [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<1x1x2x2x2x2xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[P:%[0-9]+]]: index, [[Q:%[0-9]+]]: index):
// CHECK-NEXT:      [[T2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[P2:%[0-9]+]] = arith.muli [[P]], [[T2]] : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[P2]], [[I]] : index
// CHECK-NEXT:      [[T2B:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[Q2:%[0-9]+]] = arith.muli [[Q]], [[T2B]] : index
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addi [[Q2]], [[J]] : index
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[SC]], [[N]], [[C]], [[R]], [[S]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[XV]], [[N]], [[C]], [[I]], [[J]], [[P]], [[Q]])
// CHECK-NEXT:      [[SUM:%[0-9]+]] = arith.addf [[OLD]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[SUM]], [[SC]], [[N]], [[C]], [[R]], [[S]])
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[C2:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[W:%[0-9]+]]: index):
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[SC]], [[N2]], [[C2]], [[H]], [[W]])
// CHECK-NEXT:      "krnl.store"([[V2]], [[Y]], [[N2]], [[C2]], [[H]], [[W]])


// -----
func.func @max_unpool(%x: tensor<1x1x2x2xf32>, %i: tensor<1x1x2x2xi64>) -> tensor<1x1x4x4xf32> attributes {input_names = ["x", "i"], output_names = ["y"], onnx_opset = 11 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.MaxUnpool"(%x, %i, %none) {kernel_shape = [2, 2], strides = [2, 2], onnx_node_name = "unpool"} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>, none) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL: func.func @max_unpool(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x1x2x2xf32>, [[I:%[0-9]+]]: memref<1x1x2x2xi64>, [[Y:%[0-9]+]]: memref<1x1x4x4xf32>)
// CHECK:         [[FLAT:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<16xf32>
// CHECK:           "krnl.check"({{%[0-9]+}}) {message = "node 'unpool' (MaxUnpool): an index in I is out of range; valid indices are [0, 15]"
// CHECK:         ^bb0([[A:%[0-9]+]]: index, [[B:%[0-9]+]]: index, [[C:%[0-9]+]]: index, [[D:%[0-9]+]]: index):
// CHECK-NEXT:      [[RAW:%[0-9]+]] = "krnl.load"([[I]], [[A]], [[B]], [[C]], [[D]])
// CHECK-NEXT:      [[IX:%[0-9]+]] = arith.index_cast [[RAW]] : i64 to index
// CHECK:           [[AT:%[0-9]+]] = arith.minsi {{%[0-9]+}}, {{%[0-9]+}} : index
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[A]], [[B]], [[C]], [[D]])
// CHECK-NEXT:      "krnl.store"([[V]], [[FLAT]], [[AT]])


// -----
func.func @center_crop_pad(%x: tensor<5x2xf32>) -> tensor<2x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 18 : i64} {
  %s = "onnx.Constant"() {value = dense<[2, 5]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y = "onnx.CenterCropPad"(%x, %s) {onnx_node_name = "ccp"} : (tensor<5x2xf32>, tensor<2xi64>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}
// CHECK-LABEL: func.func @center_crop_pad(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<5x2xf32>, [[Y:%[0-9]+]]: memref<2x5xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.addi [[I]], [[ONE]] : index
// CHECK-NEXT:      [[M1:%[0-9]+]] = arith.constant -1 : index
// CHECK-NEXT:      [[C:%[0-9]+]] = arith.addi [[J]], [[M1]] : index
// CHECK:           [[V:%[0-9]+]] = "krnl.load"([[X]], {{%[0-9]+}}, {{%[0-9]+}})
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[G:%[0-9]+]] = arith.select {{%[0-9]+}}, [[V]], [[Z]] : f32
// CHECK-NEXT:      "krnl.store"([[G]], [[Y]], [[I]], [[J]])
