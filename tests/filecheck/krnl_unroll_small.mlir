// RUN: python -m compilerkit.opt --split-input-file -p unroll-small %s | filecheck %s
// RUN: python -m compilerkit.opt --split-input-file -p 'unroll-small{max_trip=2 max_body=4}' %s | filecheck %s --check-prefix=SMALL
// unroll-small (-O2/-O3): in every innermost loop nest, walk the emitted loops from the
// innermost outwards and mark each for full unrolling (krnl.unroll) while its trip count is at
// most max_trip (8) and the trips marked so far multiply to at most max_body (16); stop at the
// first loop that fails, or at a blocked loop. Nests around a krnl.matmul are left alone.
// One exception: an innermost loop of at least 4 iterations that moves every access it moves
// by one element of the last subscript stays rolled when the loop around it moves an access
// by a stride (unrolled, LLVM would vectorise the strided loop with gathers).

builtin.module {
  func.func @pool_window(%x: memref<1x2x8x8xf32>, %y: memref<1x2x4x4xf32>) {
    %n, %c, %oh, %ow, %kh, %kw = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%n, %c, %oh, %ow, %kh, %kw, %n, %c, %oh, %ow, %kh, %kw) ({
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index, %i4: index, %i5: index):
      %v = "krnl.load"(%x, %i0, %i1, %i2, %i3) : (memref<1x2x8x8xf32>, index, index, index, index) -> f32
      "krnl.store"(%v, %y, %i0, %i1, %i2, %i3) : (f32, memref<1x2x4x4xf32>, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]], n_original = 6 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Trips from the inside: kw 2 (body 2), kh 2 (body 4), ow 4 (body 16), oh 4 (body 64 > 16:
// stop). With max_trip=2 max_body=4: kw, kh, and ow's trip 4 > 2 stops it.
// CHECK-LABEL: func.func @pool_window
// CHECK:         "krnl.unroll"(%kw)
// CHECK-NEXT:    "krnl.unroll"(%kh)
// CHECK-NEXT:    "krnl.unroll"(%ow)
// CHECK-NEXT:    "krnl.iterate"
// SMALL-LABEL: func.func @pool_window
// SMALL:         "krnl.unroll"(%kw)
// SMALL-NEXT:    "krnl.unroll"(%kh)
// SMALL-NEXT:    "krnl.iterate"

// -----
builtin.module {
  func.func @long_inner_loop(%x: memref<2x9xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = arith.constant 1.0 : f32
      "krnl.store"(%v, %x, %a, %b) : (f32, memref<2x9xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 9 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The innermost trip is 9 > 8: nothing is marked (not even the short outer loop).
// CHECK-LABEL: func.func @long_inner_loop
// CHECK-NOT:     "krnl.unroll"
// CHECK:         "krnl.iterate"

// -----
builtin.module {
  func.func @body_cap(%x: memref<3x3x3xf32>) {
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%a: index, %b: index, %c: index):
      %v = arith.constant 1.0 : f32
      "krnl.store"(%v, %x, %a, %b, %c) : (f32, memref<3x3x3xf32>, index, index, index) -> ()
    }) {bounds = [[0 : i64, 3 : i64], [0 : i64, 3 : i64], [0 : i64, 3 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// k: 3, j: 3 x 3 = 9 <= 16, i: 27 > 16, so two loops; with max_trip=2 none (3 > 2).
// CHECK-LABEL: func.func @body_cap
// CHECK:         "krnl.unroll"(%k)
// CHECK-NEXT:    "krnl.unroll"(%j)
// CHECK-NEXT:    "krnl.iterate"
// SMALL-LABEL: func.func @body_cap
// SMALL-NOT:     "krnl.unroll"

// -----
builtin.module {
  func.func @only_innermost_nest(%x: memref<2x4xf32>) {
    %i = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%i, %i) ({
    ^bb0(%a: index):
      %j = "krnl.define_loops"() : () -> !krnl.loop
      "krnl.iterate"(%j, %j) ({
      ^bb1(%b: index):
        %v = arith.constant 1.0 : f32
        "krnl.store"(%v, %x, %a, %b) : (f32, memref<2x4xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The outer loop (trip 2) holds a nest: only the inner loop (trip 4) is marked.
// CHECK-LABEL: func.func @only_innermost_nest
// CHECK-NOT:     "krnl.unroll"(%i)
// CHECK:         %j = "krnl.define_loops"()
// CHECK-NEXT:    "krnl.unroll"(%j)
// CHECK-NEXT:    "krnl.iterate"(%j, %j)
// CHECK-NOT:     "krnl.unroll"

// -----
builtin.module {
  func.func @matmul_nest_skipped(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%ii: index, %jj: index, %kk: index):
      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [4 : i64, 4 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64} : (memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Trips of 4 would qualify, but the matmul nest has its own schedule (tile-matmul).
// CHECK-LABEL: func.func @matmul_nest_skipped
// CHECK-NOT:     "krnl.unroll"
// CHECK:         "krnl.matmul"

// -----
builtin.module {
  func.func @blocked_loop_stops(%x: memref<4x8xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    %jo, %ji = "krnl.block"(%j) {tile = 4 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %jo, %ji) ({
    ^bb0(%a: index, %b: index):
      %v = arith.constant 1.0 : f32
      "krnl.store"(%v, %x, %a, %b) : (f32, memref<4x8xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The innermost emitted loop is a tile loop of a blocked loop: the walk stops at once.
// CHECK-LABEL: func.func @blocked_loop_stops
// CHECK-NOT:     "krnl.unroll"
// CHECK:         "krnl.iterate"(%i, %j, %i, %jo, %ji)

// -----
builtin.module {
  func.func @channels_innermost(%x: memref<6x8xf32>, %y: memref<6x8xf32>) {
    %p, %c = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%p, %c, %p, %c) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<6x8xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<6x8xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 6 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// c (trip 8) moves both accesses by one element; p moves them by a row of 8: c stays rolled
// (one contiguous vector) and nothing outside it is marked either.
// CHECK-LABEL: func.func @channels_innermost
// CHECK-NOT:     "krnl.unroll"
// CHECK:         "krnl.iterate"

// -----
builtin.module {
  func.func @flat_index(%x: memref<6x8xf32>, %y: memref<96xf32>) {
    %p, %c = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%p, %c, %p, %c) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<6x8xf32>, index, index) -> f32
      %s = arith.constant 16 : index
      %o = arith.constant 3 : index
      %r = arith.muli %a, %s : index
      %q = arith.addi %r, %b : index
      %t = arith.addi %q, %o : index
      "krnl.store"(%v, %y, %t) : (f32, memref<96xf32>, index) -> ()
    }) {bounds = [[0 : i64, 6 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The store's flat index p * 16 + c + 3 moves by 1 with c and by 16 with p: c stays rolled.
// CHECK-LABEL: func.func @flat_index
// CHECK-NOT:     "krnl.unroll"
// CHECK:         "krnl.iterate"

// -----
builtin.module {
  func.func @transpose(%x: memref<8x6xf32>, %y: memref<6x8xf32>) {
    %p, %c = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%p, %c, %p, %c) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %b, %a) : (memref<8x6xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<6x8xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 6 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// c reads x with a stride (a transpose): no loop order is contiguous for both, c is unrolled.
// CHECK-LABEL: func.func @transpose
// CHECK:         "krnl.unroll"(%c)
// CHECK-NEXT:    "krnl.iterate"

// -----
builtin.module {
  func.func @short_channels(%x: memref<6x3xf32>, %y: memref<6x3xf32>) {
    %p, %c = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%p, %c, %p, %c) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<6x3xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<6x3xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 6 : i64], [0 : i64, 3 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// c has 3 iterations, fewer than a vector's 4 lanes: unrolled (then p: 3 x 6 > 16 stops).
// CHECK-LABEL: func.func @short_channels
// CHECK:         "krnl.unroll"(%c)
// CHECK-NEXT:    "krnl.iterate"

// -----
builtin.module {
  func.func @window_over_a_row(%x: memref<20xf32>, %y: memref<16xf32>) {
    %w, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%w, %k, %w, %k) ({
    ^bb0(%a: index, %b: index):
      %i = arith.addi %a, %b : index
      %v = "krnl.load"(%x, %i) : (memref<20xf32>, index) -> f32
      "krnl.store"(%v, %y, %a) : (f32, memref<16xf32>, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 5 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// A 5-tap window: w moves every access by one element too, so unrolling k leaves the
// vectoriser a contiguous loop: k is unrolled.
// CHECK-LABEL: func.func @window_over_a_row
// CHECK:         "krnl.unroll"(%k)
// CHECK-NEXT:    "krnl.iterate"
