// RUN: not python -m compilerkit.opt --split-input-file %s 2>&1 | filecheck %s
// The krnl dialect's verifiers, run by the opt driver on what it parses (and after every
// pass): each malformed piece is refused with one error line saying what is wrong, before any
// pass or code generator could read it. The well-formed piece comes last (errors are
// reported as they happen, modules printed at the end).

func.func @block_tile_zero() {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  %o, %t = "krnl.block"(%i) {tile = 0 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 1) does not verify:
// CHECK-SAME:    krnl.block tile must be at least 1, got 0

// -----
func.func @permute_not_a_permutation() {
  %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.permute"(%i, %j) {map = [0 : i64, 0 : i64]} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 2) does not verify:
// CHECK-SAME:    krnl.permute map must be a permutation of the loop depths

// -----
func.func @iterate_bound_missing(%y: memref<4x4xf32>) {
  %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %v = arith.constant 1.0 : f32
    "krnl.store"(%v, %y, %a, %b) : (f32, memref<4x4xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// Two loops, one bound.
// CHECK-LABEL: error: {{.*}}(piece 3) does not verify:
// CHECK-SAME:    krnl.iterate needs one bound and one block argument per loop

// -----
func.func @iterate_bound_backwards(%y: memref<8xf32>) {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %v = arith.constant 1.0 : f32
    "krnl.store"(%v, %y, %a) : (f32, memref<8xf32>, index) -> ()
  }) {bounds = [[5 : i64, 2 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 4) does not verify:
// CHECK-SAME:    krnl.iterate bound [5, 2) is empty backwards

// -----
func.func @load_missing_index(%x: memref<4x4xf32>) {
  %i = arith.constant 0 : index
  %v = "krnl.load"(%x, %i) : (memref<4x4xf32>, index) -> f32
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 5) does not verify:
// CHECK-SAME:    krnl.load needs one index per memref dimension

// -----
func.func @store_wrong_element_type(%y: memref<4xf32>) {
  %i = arith.constant 0 : index
  %v = arith.constant 1.0 : f64
  "krnl.store"(%v, %y, %i) : (f64, memref<4xf32>, index) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 6) does not verify:
// CHECK-SAME:    krnl.store of a f64 value into a memref<4xf32>

// -----
func.func @global_value_shape_differs() {
  %w = "krnl.global"() {sym_name = "w", value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> memref<4xf32>
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 7) does not verify:
// CHECK-SAME:    krnl.global 'w': its value is a tensor<3xf32>, its buffer a memref<4xf32>

// -----
func.func @reshape_changes_count() {
  %a = "krnl.alloc"() : () -> memref<6xf32>
  %v = "krnl.reshape"(%a) : (memref<6xf32>) -> memref<4x2xf32>
  func.return
}
// 6 elements cannot be viewed as 4 x 2 = 8.
// CHECK-LABEL: error: {{.*}}(piece 8) does not verify:
// CHECK-SAME:    krnl.reshape views a memref<6xf32> as a memref<4x2xf32>

// -----
func.func @check_needs_i1() {
  %c = arith.constant 1 : i32
  "krnl.check"(%c) {message = "never"} : (i32) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 9) does not verify:
// CHECK-SAME:    krnl.check takes an i1 condition

// -----
func.func @gpu_map_block_too_large(%y: memref<4096xf32>) {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %v = arith.constant 1.0 : f32
    "krnl.store"(%v, %y, %a) : (f32, memref<4096xf32>, index) -> ()
  }) {bounds = [[0 : i64, 4096 : i64]], n_original = 1 : i64, gpu_map = #krnl.gpu_map<flat, loops = [0], block = 2048>} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CUDA allows at most 1024 threads per block.
// CHECK-LABEL: error: {{.*}}piece 10
// CHECK-SAME:    block must be 1..1024 threads, got 2048

// -----
func.func @store_past_the_end(%x: memref<8xf32>, %y: memref<8xf32>) {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %one = arith.constant 1 : index
    %b = arith.addi %a, %one : index
    %e = "krnl.load"(%x, %a) : (memref<8xf32>, index) -> f32
    "krnl.store"(%e, %y, %b) : (f32, memref<8xf32>, index) -> ()
  }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// The loops' ranges bound every index: %a + 1 reaches 8, one element past %y.
// CHECK-LABEL: error: {{.*}}piece 11
// CHECK-SAME:    krnl.store of argument 1 (memref<8xf32>): index 0 ranges over [1, 8], outside dimension 0 of size 8

// -----
func.func @well_formed(%x: memref<2x3xf32>, %y: memref<6xf32>) {
  %v = "krnl.reshape"(%x) : (memref<2x3xf32>) -> memref<6xf32>
  %i = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %e = "krnl.load"(%v, %a) : (memref<6xf32>, index) -> f32
    "krnl.store"(%e, %y, %a) : (f32, memref<6xf32>, index) -> ()
  }) {bounds = [[0 : i64, 6 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: func.func @well_formed
// CHECK-NEXT:    %v = "krnl.reshape"(%x) : (memref<2x3xf32>) -> memref<6xf32>
// CHECK:         "krnl.iterate"(%i, %i)
// CHECK-NOT:     error
