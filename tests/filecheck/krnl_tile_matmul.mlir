// RUN: python -m compilerkit.opt --split-input-file -p tile-matmul %s | filecheck %s
// RUN: python -m compilerkit.opt --split-input-file -p 'tile-matmul{simd=4}' %s | filecheck %s --check-prefix=SIMD4
// tile-matmul (the -O3 matmul schedule): every (i, j, k) nest whose body is one krnl.matmul
// with tile [1, 1, 1] is blocked by (TM, TN, TK) chosen from the sizes (tile_sizes in the
// pass's docstring: for large ones (480, 128, 256), all of N when the K-tile x N panel fits
// 32768 elements, each clamped to its dimension), permuted to (j_o, k_o, i_o) (GotoBLAS
// order), the inner tile loops are no longer emitted and the matmul works on whole tiles with
// `simd` lanes.
// krnl.permute's map gives each loop (in order i_o, i_i, j_o, j_i, k_o, k_i) its depth in
// the new order j_o, k_o, i_o, i_i, j_i, k_i: [2, 3, 0, 4, 1, 5].

builtin.module {
  func.func @tile_large(%a: memref<100x520xf32>, %b: memref<520x300xf32>, %c: memref<100x300xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%ii: index, %jj: index, %kk: index):
      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [100 : i64, 300 : i64, 520 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [520 : i64, 1 : i64, 300 : i64, 300 : i64], simd = 1 : i64} : (memref<100x520xf32>, memref<520x300xf32>, memref<100x300xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 100 : i64], [0 : i64, 300 : i64], [0 : i64, 520 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// M, N, K = 100, 300, 520: K and N exceed (TN, TK) = (128, 256) (300 x 256 > 32768: no
// single panel), M = 100 is below TM = 480, so one i tile. k is blocked first, then j, i.
// CHECK-LABEL: func.func @tile_large
// CHECK:         %i, %j, %k = "krnl.define_loops"()
// CHECK-NEXT:    %[[KO:[0-9a-z_]+]], %[[KI:[0-9a-z_]+]] = "krnl.block"(%k) {tile = 256 : i64}
// CHECK-NEXT:    %[[JO:[0-9a-z_]+]], %[[JI:[0-9a-z_]+]] = "krnl.block"(%j) {tile = 128 : i64}
// CHECK-NEXT:    %[[IO:[0-9a-z_]+]], %[[II:[0-9a-z_]+]] = "krnl.block"(%i) {tile = 100 : i64}
// CHECK-NEXT:    "krnl.permute"(%[[IO]], %[[II]], %[[JO]], %[[JI]], %[[KO]], %[[KI]]) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]}
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %k, %[[JO]], %[[KO]], %[[IO]]) ({
// CHECK-NEXT:    ^bb0(%ii: index, %jj: index, %kk: index):
// CHECK-NEXT:      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z)
// CHECK-SAME:      sizes = [100 : i64, 300 : i64, 520 : i64], tile = [100 : i64, 128 : i64, 256 : i64]
// CHECK-SAME:      simd = 8 : i64
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 100 : i64], [0 : i64, 300 : i64], [0 : i64, 520 : i64]], n_original = 3 : i64}
// SIMD4-LABEL: func.func @tile_large
// SIMD4:         "krnl.matmul"
// SIMD4-SAME:    tile = [100 : i64, 128 : i64, 256 : i64]
// SIMD4-SAME:    simd = 4 : i64

// -----
builtin.module {
  func.func @tile_clamped_to_sizes(%a: memref<16x24xf32>, %b: memref<24x40xf32>, %c: memref<16x40xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%ii: index, %jj: index, %kk: index):
      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [16 : i64, 40 : i64, 24 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [24 : i64, 1 : i64, 40 : i64, 40 : i64], simd = 1 : i64} : (memref<16x24xf32>, memref<24x40xf32>, memref<16x40xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 40 : i64], [0 : i64, 24 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// M, N, K = 16, 40, 24 are below (480, 128, 256): one tile is the whole matrix.
// CHECK-LABEL: func.func @tile_clamped_to_sizes
// CHECK:         "krnl.block"(%k) {tile = 24 : i64}
// CHECK-NEXT:    "krnl.block"(%j) {tile = 40 : i64}
// CHECK-NEXT:    "krnl.block"(%i) {tile = 16 : i64}
// CHECK:         "krnl.matmul"
// CHECK-SAME:    tile = [16 : i64, 40 : i64, 24 : i64]

// -----
builtin.module {
  func.func @already_tiled_is_left_alone(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%ii: index, %jj: index, %kk: index):
      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [8 : i64, 8 : i64, 8 : i64], tile = [4 : i64, 4 : i64, 4 : i64], strides = [8 : i64, 1 : i64, 8 : i64, 8 : i64], simd = 4 : i64} : (memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 8 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// A matmul that already has a tile is not tiled twice.
// CHECK-LABEL: func.func @already_tiled_is_left_alone
// CHECK-NOT:     "krnl.block"
// CHECK-NOT:     "krnl.permute"
// CHECK:         "krnl.iterate"(%i, %j, %k, %i, %j, %k)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      "krnl.matmul"
// CHECK-SAME:      tile = [4 : i64, 4 : i64, 4 : i64]
// CHECK-SAME:      simd = 4 : i64

// -----
builtin.module {
  func.func @batched_inner_nest_is_tiled(%a: memref<2x8x8xf32>, %b: memref<8x8xf32>, %c: memref<2x8x8xf32>) {
    %z = arith.constant 0 : index
    %n = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%n, %n) ({
    ^bb0(%nn: index):
      %s = arith.constant 64 : index
      %off = arith.muli %nn, %s : index
      %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
      "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
      ^bb1(%ii: index, %jj: index, %kk: index):
        "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %off, %z, %off) {sizes = [8 : i64, 8 : i64, 8 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [8 : i64, 1 : i64, 8 : i64, 8 : i64], simd = 1 : i64} : (memref<2x8x8xf32>, memref<8x8xf32>, memref<2x8x8xf32>, index, index, index, index, index, index) -> ()
      }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 8 : i64], [0 : i64, 8 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The batch loop around the (i, j, k) nest is not a matmul nest itself: it stays as it is,
// the nest inside it is tiled (8 x 8 x 8: one tile).
// CHECK-LABEL: func.func @batched_inner_nest_is_tiled
// CHECK:         "krnl.iterate"(%n, %n) ({
// CHECK:           %i, %j, %k = "krnl.define_loops"()
// CHECK-NEXT:      "krnl.block"(%k) {tile = 8 : i64}
// CHECK-NEXT:      "krnl.block"(%j) {tile = 8 : i64}
// CHECK-NEXT:      "krnl.block"(%i) {tile = 8 : i64}
// CHECK-NEXT:      "krnl.permute"
// CHECK:             "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %off, %z, %off)
// CHECK-SAME:        tile = [8 : i64, 8 : i64, 8 : i64]
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 2 : i64]], n_original = 1 : i64}

// -----
builtin.module {
  func.func @elementwise_nest_untouched(%x: memref<4x4xf32>, %y: memref<4x4xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%ii: index, %jj: index):
      %v = "krnl.load"(%x, %ii, %jj) : (memref<4x4xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %ii, %jj) : (f32, memref<4x4xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 4 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// No krnl.matmul: no schedule.
// CHECK-LABEL: func.func @elementwise_nest_untouched
// CHECK-NEXT:    %i, %j = "krnl.define_loops"()
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %i, %j)
