// RUN: not python -m compilerkit.opt --split-input-file -p parallelize %s 2>&1 | filecheck %s
// parallelize (krnl_passes/parallelize.py) marks the outer loop of each loop nest `krnl.parallel`
// where its iterations write disjoint memory and the nest does at least 32768 innermost
// iterations; the host runs such a loop on libgomp's threads, the emulated targets serially.
// A safe loop that is not outermost is permuted to the front; a tiled matmul whose tile loops
// have fewer than 4 iterations gets its column tile cut to floor(N / 4 / strip) * strip
// columns, at least one strip (strip: the micro-kernel's 2 vectors, 16 at simd 8), or where N
// is one strip, its row tile to ceil(ceil(M / 4) / 6) * 6 rows.
// The first pieces are hand-written krnl.parallel ops the verifier refuses (errors are
// printed as they happen, the modules at the end: hence `not` and this order).

func.func @verify_reduction_is_not_parallel(%x: memref<256x256xf32>, %y: memref<1xf32>) {
  %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%i) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %z = arith.constant 0 : index
    %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
    %s = "krnl.load"(%y, %z) : (memref<1xf32>, index) -> f32
    %t = arith.addf %s, %v : f32
    "krnl.store"(%t, %y, %z) : (f32, memref<1xf32>, index) -> ()
  }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// All of the sum goes into y[0]: two threads would race on it.
// CHECK-LABEL: error: {{.*}}(piece 1) does not verify:
// CHECK-SAME:    krnl.parallel: iterations of the loop may touch the same memory: %y is written at indices that do not all follow the loop

// -----
func.func @verify_inner_loop_is_not_parallel(%x: memref<256x256xf32>, %y: memref<256x256xf32>) {
  %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%j) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
    "krnl.store"(%v, %y, %a, %b) : (f32, memref<256x256xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 2) does not verify:
// CHECK-SAME:    krnl.parallel: only the outermost loop a krnl.iterate emits can run in parallel

// -----
func.func @verify_inner_tile_loop_is_not_parallel(%x: memref<256xf32>, %y: memref<256xf32>) {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  %o, %t = "krnl.block"(%i) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
  "krnl.permute"(%o, %t) {map = [1 : i64, 0 : i64]} : (!krnl.loop, !krnl.loop) -> ()
  "krnl.parallel"(%t) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %t) ({
  ^bb0(%a: index):
    %v = "krnl.load"(%x, %a) : (memref<256xf32>, index) -> f32
    "krnl.store"(%v, %y, %a) : (f32, memref<256xf32>, index) -> ()
  }) {bounds = [[0 : i64, 256 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 3) does not verify:
// CHECK-SAME:    krnl.parallel: an inner tile loop cannot run in parallel

// -----
func.func @verify_no_parallel_inside_parallel(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
  %i = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.parallel"(%i) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %j = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.parallel"(%j) : (!krnl.loop) -> ()
    "krnl.iterate"(%j, %j) ({
    ^bb1(%b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<64x64xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<64x64xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 64 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  }) {bounds = [[0 : i64, 64 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 4) does not verify:
// CHECK-SAME:    krnl.parallel: the nest is already inside a parallel loop

// -----
// The panel loop below (@panels_disjoint_by_columns, last piece) with panels one column too
// wide: panel jp writes out[oc, jp * 128 + q] for q < 129 (a bias fill and a matmul tile of
// N = 129 columns at C offset jp * 128, row stride 1024), so column jp * 128 + 128 is written
// by panels jp and jp + 1. The per-dimension rule fails first (the matmul's C offset moves
// with the loop and its i, j are inner loops); the flat-offset rule (krnl_ranges.py) fails
// too: on whole offsets one iteration spans 7 * 1024 + 128 + 1 = 7297 elements, more than the
// 128 between iterations, and within rows of 1024 the columns reach 7 * 128 + 128 = 1024, past
// the row. The verifier reports the per-dimension rule's reason.
func.func @verify_overlapping_panels(%w: memref<8x16xf32>, %x: memref<16x1024xf32>, %out: memref<8x1024xf32>) {
  %p = "krnl.define_loops"() : () -> !krnl.loop
  "krnl.parallel"(%p) : (!krnl.loop) -> ()
  "krnl.iterate"(%p, %p) ({
  ^bb0(%jp: index):
    %c128 = arith.constant 128 : index
    %q0 = arith.muli %jp, %c128 : index
    %o, %q = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%o, %q, %o, %q) ({
    ^bb1(%oc: index, %e: index):
      %zero = arith.constant 0.0 : f32
      %col = arith.addi %q0, %e : index
      "krnl.store"(%zero, %out, %oc, %col) : (f32, memref<8x1024xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 129 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %z = arith.constant 0 : index
    %mi, %mj, %mk = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%mi, %mj, %mk, %mi, %mj, %mk) ({
    ^bb2(%i: index, %j: index, %k: index):
      "krnl.matmul"(%w, %x, %out, %i, %j, %k, %z, %q0, %q0) {sizes = [8 : i64, 129 : i64, 16 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [16 : i64, 1 : i64, 1024 : i64, 1024 : i64], simd = 1 : i64} : (memref<8x16xf32>, memref<16x1024xf32>, memref<8x1024xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 129 : i64], [0 : i64, 16 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 5) does not verify:
// CHECK-SAME:    krnl.parallel: iterations of the loop may touch the same memory: a krnl.matmul whose C tile does not follow the loop with a fixed offset

// -----
// A clamped index: y[min(i, 255), j] = x[i, j] for i < 300, so iterations 255..299 all write
// row 255. arith.minsi is neither the loop plus a fixed offset (per-dimension rule) nor a
// sum the flat-offset rule understands (it answers "unknown"): refused, with the
// per-dimension rule's reason.
func.func @verify_clamped_index(%x: memref<300x256xf32>, %y: memref<256x256xf32>) {
  %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%i) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %c255 = arith.constant 255 : index
    %row = arith.minsi %a, %c255 : index
    %v = "krnl.load"(%x, %a, %b) : (memref<300x256xf32>, index, index) -> f32
    "krnl.store"(%v, %y, %row, %b) : (f32, memref<256x256xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 300 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: error: {{.*}}(piece 6) does not verify:
// CHECK-SAME:    krnl.parallel: iterations of the loop may touch the same memory: %y is written at indices that do not all follow the loop

// -----
builtin.module {
  func.func @elementwise_outer_loop(%x: memref<64x32x32xf32>, %y: memref<64x32x32xf32>) {
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%a: index, %b: index, %c: index):
      %v = "krnl.load"(%x, %a, %b, %c) : (memref<64x32x32xf32>, index, index, index) -> f32
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %v, %z : f32
      "krnl.store"(%r, %y, %a, %b, %c) : (f32, memref<64x32x32xf32>, index, index, index) -> ()
    }) {bounds = [[0 : i64, 64 : i64], [0 : i64, 32 : i64], [0 : i64, 32 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Relu over 64 x 32 x 32 = 65536 elements: the outer loop (64 iterations) runs in parallel,
// krnl.parallel right before the nest.
// CHECK-LABEL: func.func @elementwise_outer_loop
// CHECK:         %i, %j, %k = "krnl.define_loops"()
// CHECK-NEXT:    "krnl.parallel"(%i) : (!krnl.loop) -> ()
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %k, %i, %j, %k)

// -----
builtin.module {
  func.func @small_nest_stays_serial(%x: memref<16x16xf32>, %y: memref<16x16xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<16x16xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<16x16xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 16 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// 256 elements: starting threads would cost more than the copy.
// CHECK-LABEL: func.func @small_nest_stays_serial
// CHECK-NOT:     "krnl.parallel"
// CHECK:         "krnl.iterate"(%i, %j, %i, %j)

// -----
builtin.module {
  func.func @sum_into_one_accumulator_stays_serial(%x: memref<256x256xf32>, %y: memref<1xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %z = arith.constant 0 : index
      %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
      %s = "krnl.load"(%y, %z) : (memref<1xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %z) : (f32, memref<1xf32>, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// CHECK-LABEL: func.func @sum_into_one_accumulator_stays_serial
// CHECK-NOT:     "krnl.parallel"
// CHECK-NOT:     "krnl.permute"
// CHECK:         "krnl.iterate"(%i, %j, %i, %j)

// -----
builtin.module {
  func.func @row_sums_run_rows_in_parallel(%x: memref<256x256xf32>, %y: memref<256xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
      %s = "krnl.load"(%y, %a) : (memref<256xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %a) : (f32, memref<256xf32>, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Each row's sum is its own accumulator y[i]: rows are independent, the j reduction stays
// inside one thread, in order.
// CHECK-LABEL: func.func @row_sums_run_rows_in_parallel
// CHECK-NOT:     "krnl.permute"
// CHECK:         "krnl.parallel"(%i)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %i, %j)

// -----
builtin.module {
  func.func @column_sums_move_columns_out(%x: memref<256x256xf32>, %y: memref<256xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
      %s = "krnl.load"(%y, %b) : (memref<256xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %b) : (f32, memref<256xf32>, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The outer loop i is the reduction (y[j] += x[i, j]); j is independent, so it moves to the
// front (krnl.permute: i to depth 1, j to depth 0) and runs in parallel. Each y[j] still adds
// its terms in i order.
// CHECK-LABEL: func.func @column_sums_move_columns_out
// CHECK:         "krnl.permute"(%i, %j) {map = [1 : i64, 0 : i64]}
// CHECK-NEXT:    "krnl.parallel"(%j)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %j, %i)

// -----
builtin.module {
  func.func @matmul_column_tiles(%a: memref<256x256xf32>, %b: memref<256x256xf32>, %c: memref<256x256xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    %ko, %ki = "krnl.block"(%k) {tile = 256 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %jo, %ji = "krnl.block"(%j) {tile = 128 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %io, %ii = "krnl.block"(%i) {tile = 256 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%io, %ii, %jo, %ji, %ko, %ki) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    "krnl.iterate"(%i, %j, %k, %jo, %ko, %io) ({
    ^bb0(%r: index, %s: index, %t: index):
      "krnl.matmul"(%a, %b, %c, %r, %s, %t, %z, %z, %z) {sizes = [256 : i64, 256 : i64, 256 : i64], tile = [256 : i64, 128 : i64, 256 : i64], strides = [256 : i64, 1 : i64, 256 : i64, 256 : i64], simd = 8 : i64} : (memref<256x256xf32>, memref<256x256xf32>, memref<256x256xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// tile-matmul's schedule (j_o, k_o, i_o) of a 256^3 product has 2 column tiles and 1 row
// tile: the column tile is cut to 64 columns (floor(256 / 4 / 16) * 16), giving 4 column
// tiles, and j_o, already in front, runs in parallel: each thread packs only its own columns
// of B (row tiles would each pack all of B).
// CHECK-LABEL: func.func @matmul_column_tiles
// CHECK:         %jo, %ji = "krnl.block"(%j) {tile = 64 : i64}
// CHECK:         %io, %ii = "krnl.block"(%i) {tile = 256 : i64}
// CHECK:         "krnl.parallel"(%jo)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %k, %jo, %ko, %io)
// CHECK:           "krnl.matmul"
// CHECK-SAME:      tile = [256 : i64, 64 : i64, 256 : i64]

// -----
builtin.module {
  func.func @matmul_row_tiles(%a: memref<256x256xf32>, %b: memref<256x16xf32>, %c: memref<256x16xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    %ko, %ki = "krnl.block"(%k) {tile = 256 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %jo, %ji = "krnl.block"(%j) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    %io, %ii = "krnl.block"(%i) {tile = 256 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%io, %ii, %jo, %ji, %ko, %ki) {map = [2 : i64, 3 : i64, 0 : i64, 4 : i64, 1 : i64, 5 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    "krnl.iterate"(%i, %j, %k, %jo, %ko, %io) ({
    ^bb0(%r: index, %s: index, %t: index):
      "krnl.matmul"(%a, %b, %c, %r, %s, %t, %z, %z, %z) {sizes = [256 : i64, 16 : i64, 256 : i64], tile = [256 : i64, 16 : i64, 256 : i64], strides = [256 : i64, 1 : i64, 16 : i64, 16 : i64], simd = 8 : i64} : (memref<256x256xf32>, memref<256x16xf32>, memref<256x16xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 16 : i64], [0 : i64, 256 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// 16 columns are one strip: the row tile is cut to 66 rows (ceil(ceil(256 / 4) / 6) * 6),
// giving 4 row tiles, and i_o moves to the front and runs in parallel; k_o stays serial
// inside each thread.
// CHECK-LABEL: func.func @matmul_row_tiles
// CHECK:         %io, %ii = "krnl.block"(%i) {tile = 66 : i64}
// CHECK:         "krnl.permute"(%jo, %ko, %io) {map = [1 : i64, 2 : i64, 0 : i64]}
// CHECK-NEXT:    "krnl.parallel"(%io)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %k, %io, %jo, %ko)
// CHECK:           "krnl.matmul"
// CHECK-SAME:      tile = [66 : i64, 16 : i64, 256 : i64]

// -----
builtin.module {
  func.func @shared_scratch_keeps_outer_loop_serial(%x: memref<8x64x64xf32>, %y: memref<8x64x64xf32>, %s: memref<64x64xf32>) {
    %n = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%n, %n) ({
    ^bb0(%b: index):
      %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
      "krnl.iterate"(%i, %j, %i, %j) ({
      ^bb1(%p: index, %q: index):
        %v = "krnl.load"(%x, %b, %p, %q) : (memref<8x64x64xf32>, index, index, index) -> f32
        "krnl.store"(%v, %s, %q, %p) : (f32, memref<64x64xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 64 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
      %k, %l = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
      "krnl.iterate"(%k, %l, %k, %l) ({
      ^bb2(%p2: index, %q2: index):
        %w = "krnl.load"(%s, %p2, %q2) : (memref<64x64xf32>, index, index) -> f32
        "krnl.store"(%w, %y, %b, %p2, %q2) : (f32, memref<8x64x64xf32>, index, index, index) -> ()
      }) {bounds = [[0 : i64, 64 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Every batch iteration writes the whole scratch %s (as Conv's im2col buffer): the batch loop
// stays serial. The nests inside are too small (4096 iterations each) to pay.
// CHECK-LABEL: func.func @shared_scratch_keeps_outer_loop_serial
// CHECK-NOT:     "krnl.parallel"
// CHECK:         func.return

// -----
builtin.module {
  func.func @integer_division_stays_serial(%x: memref<256x256xi32>, %y: memref<256x256xi32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<256x256xi32>, index, index) -> i32
      %q = arith.divsi %v, %v : i32
      "krnl.store"(%q, %y, %a, %b) : (i32, memref<256x256xi32>, index, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Integer division carries a run-time check (division by zero): which failure a run reports
// must not depend on the thread count, so the nest stays serial.
// CHECK-LABEL: func.func @integer_division_stays_serial
// CHECK-NOT:     "krnl.parallel"
// CHECK:         func.return

// -----
builtin.module {
  func.func @offset_index_follows_the_loop(%x: memref<64x512xf32>, %y: memref<400x512xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %c3 = arith.constant 3 : index
      %c100 = arith.constant 100 : index
      %off = arith.muli %c3, %c100 : index
      %row = arith.addi %a, %off : index
      %v = "krnl.load"(%x, %a, %b) : (memref<64x512xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %row, %b) : (f32, memref<400x512xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 64 : i64], [0 : i64, 512 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Lowering writes offsets into the body (here row a + 3 * 100, as Concat or a Conv's batch
// offset do): a + (a value fixed for the nest) still differs for every a.
// CHECK-LABEL: func.func @offset_index_follows_the_loop
// CHECK:         "krnl.parallel"(%i)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %i, %j)

// -----
builtin.module {
  func.func @shifted_read_pins_the_rows(%x: memref<256x256xf32>, %y: memref<257x256xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %c1 = arith.constant 1 : index
      %next = arith.addi %a, %c1 : index
      %u = "krnl.load"(%y, %next, %b) : (memref<257x256xf32>, index, index) -> f32
      %v = "krnl.load"(%x, %a, %b) : (memref<256x256xf32>, index, index) -> f32
      %w = arith.addf %u, %v : f32
      "krnl.store"(%w, %y, %a, %b) : (f32, memref<257x256xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 256 : i64], [0 : i64, 256 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// y[a] = y[a + 1] + x[a]: row a reads the row that iteration a + 1 writes, so rows depend on
// each other; columns do not (both accesses use b): the column loop moves out and runs in
// parallel.
// CHECK-LABEL: func.func @shifted_read_pins_the_rows
// CHECK:         "krnl.permute"(%i, %j) {map = [1 : i64, 0 : i64]}
// CHECK-NEXT:    "krnl.parallel"(%j)
// CHECK-NEXT:    "krnl.iterate"(%i, %j, %j, %i)

// -----
// A panel loop as Conv's GEMM panels: 8 panels of W = 128 output columns of an [8, 1024]
// output (8 channels, a plane of 1024). Panel jp writes out[oc, jp * 128 + q], q < 128 (the
// bias fill) and a krnl.matmul tile C at offset jp * 128, M = 8 rows of row stride 1024,
// N = 128 columns (B = x at the same offset). The per-dimension rule cannot take it (the C
// offset moves with jp); the flat-offset rule does: as whole offsets both accesses are
// 128 * jp + [0, 7 * 1024 + 127] (spans 7296 >= 128: not enough), but within rows of 1024
// (the matmul's row stride, and out's row) the column part is 128 * jp + [0, 127], never
// leaving the row (7 * 128 + 127 = 1023 < 1024), and one iteration spans 128 <= the 128
// between iterations: disjoint. Work 8 * 8 * 128 * 16 = 131072 >= 32768, 8 >= 2 iterations:
// the panel loop is marked.
builtin.module {
  func.func @panels_disjoint_by_columns(%w: memref<8x16xf32>, %x: memref<16x1024xf32>, %out: memref<8x1024xf32>) {
    %p = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%p, %p) ({
    ^bb0(%jp: index):
      %c128 = arith.constant 128 : index
      %q0 = arith.muli %jp, %c128 : index
      %o, %q = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
      "krnl.iterate"(%o, %q, %o, %q) ({
      ^bb1(%oc: index, %e: index):
        %zero = arith.constant 0.0 : f32
        %col = arith.addi %q0, %e : index
        "krnl.store"(%zero, %out, %oc, %col) : (f32, memref<8x1024xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 128 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
      %z = arith.constant 0 : index
      %mi, %mj, %mk = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
      "krnl.iterate"(%mi, %mj, %mk, %mi, %mj, %mk) ({
      ^bb2(%i: index, %j: index, %k: index):
        "krnl.matmul"(%w, %x, %out, %i, %j, %k, %z, %q0, %q0) {sizes = [8 : i64, 128 : i64, 16 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [16 : i64, 1 : i64, 1024 : i64, 1024 : i64], simd = 1 : i64} : (memref<8x16xf32>, memref<16x1024xf32>, memref<8x1024xf32>, index, index, index, index, index, index) -> ()
      }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 128 : i64], [0 : i64, 16 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// CHECK-LABEL: func.func @panels_disjoint_by_columns
// CHECK:         %p = "krnl.define_loops"() : () -> !krnl.loop
// CHECK-NEXT:    "krnl.parallel"(%p) : (!krnl.loop) -> ()
// CHECK-NEXT:    "krnl.iterate"(%p, %p)
// CHECK-NOT:       "krnl.parallel"
// CHECK:         func.return

// -----
// A column buffer per panel (as Conv's im2col panels when threads share the panel loop):
// col [8 panels, K = 16, 128 columns]; panel jp fills col[jp, k, q] = x[k, jp * 128 + q] with
// an element nest, then a matmul reads it as B at b_off = jp * (16 * 128) = jp * 2048 (ldb
// 128) and writes out as in @panels_disjoint_by_columns. col, flat: store 2048 * jp +
// 128 * k + q, B tile 2048 * jp + 128 * [0, 16) + [0, 128): both 2048 * jp + [0, 2047], a span
// of 2047 < 2048 between iterations: disjoint as whole offsets. out passes by columns as
// before; x and w are only read. Work 8 * 16384 = 131072: marked.
builtin.module {
  func.func @column_buffer_per_panel(%w: memref<8x16xf32>, %x: memref<16x1024xf32>, %out: memref<8x1024xf32>, %colbuf: memref<8x16x128xf32>) {
    %p = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%p, %p) ({
    ^bb0(%jp: index):
      %c128 = arith.constant 128 : index
      %q0 = arith.muli %jp, %c128 : index
      %o, %q = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
      "krnl.iterate"(%o, %q, %o, %q) ({
      ^bb1(%oc: index, %e: index):
        %zero = arith.constant 0.0 : f32
        %col = arith.addi %q0, %e : index
        "krnl.store"(%zero, %out, %oc, %col) : (f32, memref<8x1024xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 128 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
      %ck, %cq = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
      "krnl.iterate"(%ck, %cq, %ck, %cq) ({
      ^bb3(%kk: index, %e2: index):
        %xc = arith.addi %q0, %e2 : index
        %v = "krnl.load"(%x, %kk, %xc) : (memref<16x1024xf32>, index, index) -> f32
        "krnl.store"(%v, %colbuf, %jp, %kk, %e2) : (f32, memref<8x16x128xf32>, index, index, index) -> ()
      }) {bounds = [[0 : i64, 16 : i64], [0 : i64, 128 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
      %z = arith.constant 0 : index
      %c2048 = arith.constant 2048 : index
      %boff = arith.muli %jp, %c2048 : index
      %mi, %mj, %mk = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
      "krnl.iterate"(%mi, %mj, %mk, %mi, %mj, %mk) ({
      ^bb2(%i: index, %j: index, %k: index):
        "krnl.matmul"(%w, %colbuf, %out, %i, %j, %k, %z, %boff, %q0) {sizes = [8 : i64, 128 : i64, 16 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [16 : i64, 1 : i64, 128 : i64, 1024 : i64], simd = 1 : i64} : (memref<8x16xf32>, memref<8x16x128xf32>, memref<8x1024xf32>, index, index, index, index, index, index) -> ()
      }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 128 : i64], [0 : i64, 16 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// CHECK-LABEL: func.func @column_buffer_per_panel
// CHECK:         %p = "krnl.define_loops"() : () -> !krnl.loop
// CHECK-NEXT:    "krnl.parallel"(%p) : (!krnl.loop) -> ()
// CHECK-NEXT:    "krnl.iterate"(%p, %p)
// CHECK-NOT:       "krnl.parallel"
// CHECK:         func.return
