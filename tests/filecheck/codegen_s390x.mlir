// RUN: python %S/split_cases.py compilerkit %s --emit llvm-ir --target s390x -O0 | filecheck %s
// Code generation for IBM Z (s390x, big-endian), Kernel IR in, LLVM IR out at -O0: the same
// emitter as the host with the SystemZ triple and data layout; the layout string starts with
// `E` (big-endian). A constant is an `[n x i8]` string of its bytes in the target's order, most
// significant first here (see codegen_constant_bytes.mlir for the bytes in the object file).
// LLVM prints a byte that is a printable character as that character: 0x3F is `?`. The
// split_cases.py harness prints `// case @NAME` before each case's output.

func.func @f32_constant_add(%x: memref<2xf32>, %y: memref<2xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %c = "krnl.global"() {sym_name = "w", value = dense<[1.5, -2.0]> : tensor<2xf32>} : () -> memref<2xf32>
  %i = "krnl.define_loops"() {onnx_node = "add"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%x, %a) : (memref<2xf32>, index) -> f32
    %v = "krnl.load"(%c, %a) : (memref<2xf32>, index) -> f32
    %s = arith.addf %u, %v : f32
    "krnl.store"(%s, %y, %a) : (f32, memref<2xf32>, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "add"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: // case @f32_constant_add
// CHECK:       target datalayout = "E-
// CHECK-NEXT:  target triple = "s390x-ibm-linux"
// f32 1.5 = 1.1b * 2^0: sign 0, exponent 127 (0x7F), mantissa 0x400000 -> 0x3FC00000;
// f32 -2.0 = 0xC0000000. Big-endian: 3F C0 00 00, C0 00 00 00.
// CHECK:       @g_w = internal constant [8 x i8] c"?\C0\00\00\C0\00\00\00", align 64
// CHECK:       define i64 @main_graph(ptr %[[ARGS:[^,]*]], i64 %{{.*}}) #{{[0-9]+}} {
// CHECK:         getelementptr ptr, ptr %[[ARGS]], i64 0
// CHECK:         getelementptr ptr, ptr %[[ARGS]], i64 1
// CHECK:         call i64 @main_graph_1_add(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}})
// CHECK:       define internal i64 @main_graph_1_add(ptr noalias
// CHECK:         load float
// CHECK:         fadd float

// -----
func.func @i64_constant_mul(%x: memref<3xi64>, %y: memref<3xi64>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %c = "krnl.global"() {sym_name = "k", value = dense<[1, -1, 4294967296]> : tensor<3xi64>} : () -> memref<3xi64>
  %i = "krnl.define_loops"() {onnx_node = "mul"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%x, %a) : (memref<3xi64>, index) -> i64
    %v = "krnl.load"(%c, %a) : (memref<3xi64>, index) -> i64
    %s = arith.muli %u, %v : i64
    "krnl.store"(%s, %y, %a) : (i64, memref<3xi64>, index) -> ()
  }) {bounds = [[0 : i64, 3 : i64]], n_original = 1 : i64, onnx_node = "mul"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// 4294967296 = 2^32 needs all 64 bits: 00 00 00 01 00 00 00 00 big-endian; 1 is seven 00 then
// 01, -1 is eight FF (two's complement).
// CHECK-LABEL: // case @i64_constant_mul
// CHECK:       target triple = "s390x-ibm-linux"
// CHECK:       @g_k = internal constant [24 x i8] c"\00\00\00\00\00\00\00\01\FF\FF\FF\FF\FF\FF\FF\FF\00\00\00\01\00\00\00\00", align 64
// CHECK:       define internal i64 @main_graph_1_mul(
// CHECK:         load i64
// CHECK:         mul i64

// -----
func.func @exp_from_ir_mathlib(%x: memref<4xf32>, %y: memref<4xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i = "krnl.define_loops"() {onnx_node = "exp"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%x, %a) : (memref<4xf32>, index) -> f32
    %e = math.exp %u : f32
    "krnl.store"(%e, %y, %a) : (f32, memref<4xf32>, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "exp"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// No libm on the emulated target either: exp is compilerkit's IR math library.
// CHECK-LABEL: // case @exp_from_ir_mathlib
// CHECK:       target triple = "s390x-ibm-linux"
// CHECK-NOT:   @expf
// CHECK:       call float @ck_expf(float
// CHECK:       define internal float @ck_expf(float
