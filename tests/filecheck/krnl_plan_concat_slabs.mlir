// RUN: python -m compilerkit.opt --split-input-file -p plan-buffers %s | filecheck %s
// RUN: python -m compilerkit.opt --split-input-file -p 'plan-buffers{slabs=false}' %s | filecheck %s --check-prefix=COPY
// plan-buffers places a Concat's inputs in its output: a nest tagged concat_slab = e that only
// copies one krnl.alloc into another is dropped, and its source gets the bytes of the
// destination from element e on. The buffers of a chain are planned as their root, live from
// the first member's alloc to the last use of any member. A source placed once stays a copy in
// a second Concat; a nest that computes (not a plain copy) or copies a function argument stays.
// With slabs=false (how hand-edited Kernel IR is planned) every nest stays.

builtin.module {
  func.func @two_slabs(%x: memref<16xf32>, %y: memref<24xf32>) {
    %a = "krnl.alloc"() : () -> memref<16xf32>
    %la = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%la, %la) ({
    ^bb0(%i: index):
      %v = "krnl.load"(%x, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%v, %a, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    %b = "krnl.alloc"() : () -> memref<8xf32>
    %lb = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%lb, %lb) ({
    ^bb0(%i: index):
      %v = "krnl.load"(%x, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%v, %b, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    %c = "krnl.alloc"() : () -> memref<24xf32>
    %l0 = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%l0, %l0) ({
    ^bb0(%i: index):
      %v = "krnl.load"(%a, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%v, %c, %i) : (f32, memref<24xf32>, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64]], n_original = 1 : i64, concat_slab = 0 : i64} : (!krnl.loop, !krnl.loop) -> ()
    %l1 = "krnl.define_loops"() : () -> !krnl.loop
    %o, %t = "krnl.block"(%l1) {tile = 4 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%l1, %o, %t) ({
    ^bb0(%i: index):
      %k = arith.constant 16 : index
      %j = arith.addi %i, %k : index
      %v = "krnl.load"(%b, %i) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v, %c, %j) : (f32, memref<24xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, concat_slab = 16 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %l2 = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%l2, %l2) ({
    ^bb0(%i: index):
      %v = "krnl.load"(%c, %i) : (memref<24xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<24xf32>, index) -> ()
    }) {bounds = [[0 : i64, 24 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// c (96 -> 128 B) holds a at element 0 and b at element 16 (byte 64); all three are one
// buffer, at 0. Both copy nests and their loops (define_loops, block) are gone.
// CHECK-LABEL: func.func @two_slabs
// CHECK-SAME:    arena_bytes = 128 : i64
// CHECK-SAME:    naive_bytes = 256 : i64
// CHECK-NEXT:    %a = "krnl.alloc"() {offset = 0 : i64} : () -> memref<16xf32>
// CHECK:         %b = "krnl.alloc"() {offset = 64 : i64} : () -> memref<8xf32>
// CHECK:         %c = "krnl.alloc"() {offset = 0 : i64} : () -> memref<24xf32>
// CHECK-NEXT:    %l2 = "krnl.define_loops"
// CHECK-NOT:     concat_slab
// CHECK-NOT:     krnl.block
// CHECK:         func.return
// COPY-LABEL: func.func @two_slabs
// COPY-SAME:    arena_bytes = 256 : i64
// COPY-COUNT-2: concat_slab

// -----
builtin.module {
  func.func @chain_and_leftovers(%x: memref<4xf32>, %y: memref<12xf32>) {
    %a = "krnl.alloc"() : () -> memref<4xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%x, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %a, %i) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %c = "krnl.alloc"() : () -> memref<8xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%a, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %c, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %j = arith.constant 4 : index
      %v = "krnl.load"(%x, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %c, %j) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 4 : i64} : () -> ()
    %d = "krnl.alloc"() : () -> memref<12xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%c, %i) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v, %d, %i) : (f32, memref<12xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %j = arith.constant 8 : index
      %v = "krnl.load"(%a, %i) : (memref<4xf32>, index) -> f32
      %w = arith.addf %v, %v : f32
      "krnl.store"(%w, %d, %j) : (f32, memref<12xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 8 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%d, %i) : (memref<12xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<12xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// a sits in c at 0, c in d at 0: one buffer of 48 -> 64 B at 0. The copy of the argument %x,
// the one that doubles its values and the second copy's source (a, already placed) stay.
// CHECK-LABEL: func.func @chain_and_leftovers
// CHECK-SAME:    arena_bytes = 64 : i64
// CHECK-NEXT:    %a = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4xf32>
// CHECK:         %c = "krnl.alloc"() {offset = 0 : i64} : () -> memref<8xf32>
// CHECK-NEXT:    "krnl.iterate"
// CHECK:         concat_slab = 4 : i64
// CHECK:         %d = "krnl.alloc"() {offset = 0 : i64} : () -> memref<12xf32>
// CHECK-NEXT:    "krnl.iterate"
// CHECK:         arith.addf
// CHECK:         concat_slab = 8 : i64
// COPY-LABEL: func.func @chain_and_leftovers
// COPY-COUNT-4: concat_slab

// -----
builtin.module {
  func.func @source_written_after_its_copy(%x: memref<4xf32>, %y: memref<8xf32>) {
    %a = "krnl.alloc"() : () -> memref<4xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%x, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %a, %i) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %c = "krnl.alloc"() : () -> memref<8xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%a, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %c, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %z = arith.constant 0.0 : f32
      "krnl.store"(%z, %a, %i) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%c, %i) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// a is written again after the copy: the copy stays and a keeps its own bytes.
// CHECK-LABEL: func.func @source_written_after_its_copy
// CHECK:         concat_slab = 0 : i64
// COPY-LABEL: func.func @source_written_after_its_copy
// COPY:         concat_slab = 0 : i64

// -----
builtin.module {
  func.func @output_written_before_the_copy(%x: memref<4xf32>, %y: memref<8xf32>) {
    %a = "krnl.alloc"() : () -> memref<4xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%x, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %a, %i) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %c = "krnl.alloc"() : () -> memref<8xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %z = arith.constant 0.0 : f32
      "krnl.store"(%z, %c, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%a, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %c, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64, concat_slab = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%c, %i) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// c is written (a fill) before the copy: placing a in c would let the fill overwrite a.
// CHECK-LABEL: func.func @output_written_before_the_copy
// CHECK:         concat_slab = 0 : i64
// COPY-LABEL: func.func @output_written_before_the_copy
// COPY:         concat_slab = 0 : i64
