// RUN: python -m compilerkit.opt --split-input-file -p plan-buffers %s | filecheck %s
// plan-buffers: every krnl.alloc of the function's top block gets an `offset` in one arena.
// A buffer is live from its alloc to the last top-level op using it (or a krnl.reshape view
// of it); sizes are rounded up to 64 bytes; buffers are placed largest first (ties: earliest
// alloc first), each at the lowest offset that does not overlap a placed buffer whose lifetime
// meets its own (first fit). The function gets arena_bytes (the plan's extent) and naive_bytes
// (the sum of all rounded sizes). Offsets below are worked out by hand from that rule; top-level
// ops are numbered from 0.

builtin.module {
  func.func @chain_of_four(%x: memref<16xf32>, %y: memref<100xf32>) {
    %a = "krnl.alloc"() : () -> memref<16xf32>
    %b = "krnl.alloc"() : () -> memref<40xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%x, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%v, %a, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%a, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%v, %b, %i) : (f32, memref<40xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %c = "krnl.alloc"() : () -> memref<10xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%b, %i) : (memref<40xf32>, index) -> f32
      "krnl.store"(%v, %c, %i) : (f32, memref<10xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %d = "krnl.alloc"() : () -> memref<100xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%c, %i) : (memref<10xf32>, index) -> f32
      "krnl.store"(%v, %d, %i) : (f32, memref<100xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%d, %i) : (memref<100xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<100xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// a: 64 B, live [0, 3]; b: 160 -> 192 B, [1, 5]; c: 40 -> 64 B, [4, 7]; d: 400 -> 448 B, [6, 8].
// Order d, b, a, c. d -> 0. b meets only a, c (not placed yet) -> 0. a meets b [0, 192) -> 192.
// c meets b [0, 192) and d [0, 448), not a -> 448. Arena 448 + 64 = 512; naive 768.
// CHECK-LABEL: func.func @chain_of_four
// CHECK-SAME:    arena_bytes = 512 : i64
// CHECK-SAME:    naive_bytes = 768 : i64
// CHECK-NEXT:    %a = "krnl.alloc"() {offset = 192 : i64} : () -> memref<16xf32>
// CHECK-NEXT:    %b = "krnl.alloc"() {offset = 0 : i64} : () -> memref<40xf32>
// CHECK:         %c = "krnl.alloc"() {offset = 448 : i64} : () -> memref<10xf32>
// CHECK:         %d = "krnl.alloc"() {offset = 0 : i64} : () -> memref<100xf32>

// -----
builtin.module {
  func.func @first_fit_uses_the_gap(%y: memref<48xf32>) {
    %p = "krnl.alloc"() : () -> memref<64xf32>
    %q = "krnl.alloc"() : () -> memref<32xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      "krnl.store"(%f, %p, %i) : (f32, memref<64xf32>, index) -> ()
      "krnl.store"(%f, %q, %i) : (f32, memref<32xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %r = "krnl.alloc"() : () -> memref<48xf32>
    %s = "krnl.alloc"() : () -> memref<16xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%q, %i) : (memref<32xf32>, index) -> f32
      "krnl.store"(%v, %r, %i) : (f32, memref<48xf32>, index) -> ()
      "krnl.store"(%v, %s, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%r, %i) : (memref<48xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<48xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// p: 256 B [0, 2]; q: 128 B [1, 5]; r: 192 B [3, 6]; s: 64 B [4, 5]. Order p, r, q, s.
// p -> 0; r (p dead by then) -> 0; q meets p [0, 256) and r [0, 192) -> 256;
// s meets r [0, 192) and q [256, 384): the 64-byte gap at 192 fits it exactly -> 192.
// Arena 384; naive 256 + 128 + 192 + 64 = 640.
// CHECK-LABEL: func.func @first_fit_uses_the_gap
// CHECK-SAME:    arena_bytes = 384 : i64
// CHECK-SAME:    naive_bytes = 640 : i64
// CHECK-NEXT:    %p = "krnl.alloc"() {offset = 0 : i64}
// CHECK-NEXT:    %q = "krnl.alloc"() {offset = 256 : i64}
// CHECK:         %r = "krnl.alloc"() {offset = 0 : i64}
// CHECK-NEXT:    %s = "krnl.alloc"() {offset = 192 : i64}

// -----
builtin.module {
  func.func @view_keeps_buffer_alive(%y: memref<16xf32>) {
    %a = "krnl.alloc"() : () -> memref<16xf32>
    %v = "krnl.reshape"(%a) : (memref<16xf32>) -> memref<4x4xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      "krnl.store"(%f, %a, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    %b = "krnl.alloc"() : () -> memref<16xf32>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %e = "krnl.load"(%v, %i, %i) : (memref<4x4xf32>, index, index) -> f32
      "krnl.store"(%e, %b, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %e = "krnl.load"(%b, %i) : (memref<16xf32>, index) -> f32
      "krnl.store"(%e, %y, %i) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// %a itself is last used at op 2, but its view %v is read at op 4, while %b (alloc'd at op 3)
// is live: they must not share memory. Both 64 B; a (earlier) -> 0, b -> 64.
// CHECK-LABEL: func.func @view_keeps_buffer_alive
// CHECK-SAME:    arena_bytes = 128 : i64
// CHECK-NEXT:    %a = "krnl.alloc"() {offset = 0 : i64}
// CHECK:         %b = "krnl.alloc"() {offset = 64 : i64}

// -----
builtin.module {
  func.func @sizes_round_to_64(%y: memref<i8>) {
    %d = "krnl.alloc"() : () -> memref<3x3xf64>
    %e = "krnl.alloc"() : () -> memref<65xi8>
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %f = arith.constant 1.0 : f64
      %g = arith.constant 1 : i8
      "krnl.store"(%f, %d, %i, %i) : (f64, memref<3x3xf64>, index, index) -> ()
      "krnl.store"(%g, %e, %i) : (i8, memref<65xi8>, index) -> ()
      "krnl.store"(%g, %y) : (i8, memref<i8>) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// 3 x 3 x 8 = 72 B -> 128; 65 x 1 = 65 B -> 128. Same size, both live at op 2: d (first) at
// 0, e at 128; arena 256 = naive.
// CHECK-LABEL: func.func @sizes_round_to_64
// CHECK-SAME:    arena_bytes = 256 : i64
// CHECK-SAME:    naive_bytes = 256 : i64
// CHECK-NEXT:    %d = "krnl.alloc"() {offset = 0 : i64} : () -> memref<3x3xf64>
// CHECK-NEXT:    %e = "krnl.alloc"() {offset = 128 : i64} : () -> memref<65xi8>

// -----
builtin.module {
  func.func @no_buffers(%x: memref<4xf32>, %y: memref<4xf32>) {
    "krnl.iterate"() ({
      %i = arith.constant 0 : index
      %v = "krnl.load"(%x, %i) : (memref<4xf32>, index) -> f32
      "krnl.store"(%v, %y, %i) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [], n_original = 0 : i64} : () -> ()
    func.return
  }
}
// CHECK-LABEL: func.func @no_buffers
// CHECK-SAME:    arena_bytes = 0 : i64
// CHECK-SAME:    naive_bytes = 0 : i64
