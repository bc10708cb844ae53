// RUN: python -m compilerkit.opt --list-passes | filecheck %s --check-prefix=LIST
// RUN: python -m compilerkit.opt -p constant-folding,dead-code %s -o %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: python -m compilerkit.opt -p lower-to-krnl < %t.mlir | filecheck %s --check-prefix=BACK
// RUN: not python -m compilerkit.opt -p constant-folding,no-such-pass %s 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not python -m compilerkit.opt -p 'tile-matmul{unroll=3}' %s 2>&1 | filecheck %s --check-prefix=BADOPT
// The opt driver itself (python -m compilerkit.opt, as mlir-opt / xdsl-opt): it lists its
// passes, runs a comma-separated pipeline in order, prints constants above 16 elements as
// dense_resource handles with their bytes in a trailing {-# dialect_resources #-} section that
// parses back (from stdin here) to the same values, and refuses an unknown pass or pass
// option by name.

// LIST-LABEL: constant-folding
// LIST-NEXT:  dead-code
// LIST-NEXT:  decompose
// LIST-NEXT:  fold-layout
// LIST-NEXT:  fold-pool-pad
// LIST-NEXT:  fuse-conv
// LIST-NEXT:  fuse-elementwise
// LIST-NEXT:  fuse-gelu
// LIST-NEXT:  fuse-nests
// LIST-NEXT:  gpu-map
// LIST-NEXT:  guard-indices
// LIST-NEXT:  lower-to-krnl
// LIST-NEXT:  parallelize
// LIST-NEXT:  plan-buffers
// LIST-NEXT:  shape-inference
// LIST-NEXT:  tile-matmul
// LIST-NEXT:  unroll-small
// LIST-NEXT:  validate-onnx

func.func @fold_to_resource() -> tensor<5x4xi32> attributes {input_names = [], output_names = ["y"], onnx_opset = 13 : i64} {
  %a = "onnx.Constant"() {value = dense<[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]> : tensor<4x5xi32>} : () -> tensor<4x5xi32>
  %y = "onnx.Transpose"(%a) {perm = [1 : i64, 0 : i64], onnx_node_name = "t"} : (tensor<4x5xi32>) -> tensor<5x4xi32>
  func.return %y : tensor<5x4xi32>
}
// The Transpose folds (then dead-code drops the input constant): 20 elements > 16, so a
// dense_resource named after the node. MLIR's blob encoding: a little-endian u32 alignment (4),
// then the int32 values little-endian, row by row of the 5x4 transpose:
// [0, 5, 10, 15], [1, 6, 11, 16], [2, 7, 12, 17], [3, 8, 13, 18], [4, 9, 14, 19].
// CHECK-LABEL: func.func @fold_to_resource
// CHECK-NEXT:    %y = "onnx.Constant"() {value = dense_resource<t> : tensor<5x4xi32>}
// CHECK-NEXT:    func.return %y
// CHECK:       {-#
// CHECK-NEXT:    dialect_resources: {
// CHECK-NEXT:      builtin: {
// CHECK-NEXT:        t: "0x0400000000000000050000000A0000000F00000001000000060000000B0000001000000002000000070000000C0000001100000003000000080000000D0000001200000004000000090000000E00000013000000"
// CHECK:       #-}
// Read back from that text and lowered, the constant is a krnl.global with the same bytes.
// BACK-LABEL: func.func @fold_to_resource
// BACK:         "krnl.global"() {sym_name = "{{.*}}", value = dense_resource<[[H:.*]]> : tensor<5x4xi32>} : () -> memref<5x4xi32>
// BACK:         [[H]]: "0x0400000000000000050000000A0000000F00000001000000060000000B0000001000000002000000070000000C0000001100000003000000080000000D0000001200000004000000090000000E00000013000000"

// An unknown pass, or an option a pass does not take, is one error line naming it; nothing
// is printed on stdout.
// ERR: compilerkit-opt: error: pass pipeline 'constant-folding,no-such-pass': Unrecognized passes: ['no-such-pass']
// ERR-NOT: builtin.module
// BADOPT: compilerkit-opt: error: {{.*}}["unroll"] not found in expected arguments ["simd"]
