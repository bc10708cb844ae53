// RUN: python -m compilerkit %s --emit obj --target host -O0 -o %t.host.o
// RUN: od -An -tx1 -v %t.host.o | tr -d '\n' | filecheck %s --check-prefix=LE
// RUN: python -m compilerkit %s --emit obj --target s390x -O0 -o %t.s390x.o
// RUN: od -An -tx1 -v %t.s390x.o | tr -d '\n' | filecheck %s --check-prefix=BE
// RUN: python -m compilerkit %s --emit llvm-ir --target host -O0 | filecheck %s --check-prefix=IRLE
// RUN: python -m compilerkit %s --emit llvm-ir --target s390x -O0 | filecheck %s --check-prefix=IRBE
// The bytes of constants in the object file (krnl.global -> read-only data): least significant
// byte first on the host (x86-64 and arm64 are little-endian), most significant first on
// s390x. The object file is dumped as hex bytes on one line (od | tr). Values and their
// IEEE-754 / two's-complement encodings, by hand:
//   f32  1.5  = 0x3FC00000      f32 -2.0 = 0xC0000000
//   f64 -2.5  = 0xC004000000000000
//   i64 0x0102030405060708 = 72623859790382856
// In the LLVM IR every constant is already those bytes, `[n x i8] c"..."` in the target's order
// (LLVM prints a printable byte as its character: 0x3F is `?`).

func.func @constant_bytes(%x: memref<2xf32>, %y: memref<2xf32>, %z: memref<1xf64>, %w: memref<1xi64>) attributes {input_names = ["x"], output_names = ["y", "z", "w"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %a = "krnl.global"() {sym_name = "a", value = dense<[1.5, -2.0]> : tensor<2xf32>} : () -> memref<2xf32>
  %b = "krnl.global"() {sym_name = "b", value = dense<[-2.5]> : tensor<1xf64>} : () -> memref<1xf64>
  %c = "krnl.global"() {sym_name = "c", value = dense<[72623859790382856]> : tensor<1xi64>} : () -> memref<1xi64>
  %i = "krnl.define_loops"() {onnx_node = "copy"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%k: index):
    %u = "krnl.load"(%x, %k) : (memref<2xf32>, index) -> f32
    %v = "krnl.load"(%a, %k) : (memref<2xf32>, index) -> f32
    %s = arith.addf %u, %v : f32
    "krnl.store"(%s, %y, %k) : (f32, memref<2xf32>, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop) -> ()
  %j = "krnl.define_loops"() {onnx_node = "copy2"} : () -> !krnl.loop
  "krnl.iterate"(%j, %j) ({
  ^bb0(%k: index):
    %p = "krnl.load"(%b, %k) : (memref<1xf64>, index) -> f64
    "krnl.store"(%p, %z, %k) : (f64, memref<1xf64>, index) -> ()
    %q = "krnl.load"(%c, %k) : (memref<1xi64>, index) -> i64
    "krnl.store"(%q, %w, %k) : (i64, memref<1xi64>, index) -> ()
  }) {bounds = [[0 : i64, 1 : i64]], n_original = 1 : i64, onnx_node = "copy2"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// LE-LABEL: 7f 45 4c 46
// LE-DAG:    00 00 c0 3f 00 00 00 c0
// LE-DAG:    00 00 00 00 00 00 04 c0
// LE-DAG:    08 07 06 05 04 03 02 01
// LE-NOT:    3f c0 00 00 c0 00 00 00
// BE-LABEL: 7f 45 4c 46
// BE-DAG:    3f c0 00 00 c0 00 00 00
// BE-DAG:    c0 04 00 00 00 00 00 00
// BE-DAG:    01 02 03 04 05 06 07 08
// BE-NOT:    00 00 c0 3f 00 00 00 c0
// IRLE-DAG:  @g_a = internal constant [8 x i8] c"\00\00\C0?\00\00\00\C0", align 64
// IRLE-DAG:  @g_b = internal constant [8 x i8] c"\00\00\00\00\00\00\04\C0", align 64
// IRLE-DAG:  @g_c = internal constant [8 x i8] c"\08\07\06\05\04\03\02\01", align 64
// IRBE-DAG:  @g_a = internal constant [8 x i8] c"?\C0\00\00\C0\00\00\00", align 64
// IRBE-DAG:  @g_b = internal constant [8 x i8] c"\C0\04\00\00\00\00\00\00", align 64
// IRBE-DAG:  @g_c = internal constant [8 x i8] c"\01\02\03\04\05\06\07\08", align 64
