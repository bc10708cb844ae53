// RUN: python -m compilerkit.opt --split-input-file -p gpu-map %s | filecheck %s
// gpu-map: every top-level krnl.iterate (one CUDA kernel) gets a #krnl.gpu_map attribute.
// A loop becomes threads only if every buffer the nest writes is indexed by that loop's
// induction variable, at one fixed position, in all its stores and loads (iterations never
// touch one element); whole loops only. flat: those loops flattened over grid x block, with
// block = min(256, points rounded up to whole 32-thread warps). matmul: a 16x16 tile per
// thread block, batch loops on grid z. split: outer loops sharing a scratch buffer around
// inner nests, each inner nest mapped on its own. serial: nothing provably parallel.

builtin.module {
  func.func @elementwise_2d(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<8x64xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<8x64xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Both loops index y at their own position: flat over 8 x 64 = 512 points, block min(256, 512).
// CHECK-LABEL: func.func @elementwise_2d
// CHECK:         gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 256>

// -----
builtin.module {
  func.func @small_nest_one_warp(%x: memref<2x5xf32>, %y: memref<2x5xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<2x5xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<2x5xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 5 : i64]], n_original = 2 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// 10 points round up to one warp: block 32, not 256.
// CHECK-LABEL: func.func @small_nest_one_warp
// CHECK:         gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 32>

// -----
builtin.module {
  func.func @row_sum_keeps_reduction_serial(%x: memref<4x100xf32>, %y: memref<4xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %s = "krnl.load"(%y, %a) : (memref<4xf32>, index) -> f32
      %v = "krnl.load"(%x, %a, %b) : (memref<4x100xf32>, index, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %a) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 100 : i64]], n_original = 2 : i64, onnx_node = "sum"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// y[i] += x[i, j]: iterations of j write the same y[i], so only i becomes threads (4 points:
// one warp) and each thread adds its row in order.
// CHECK-LABEL: func.func @row_sum_keeps_reduction_serial
// CHECK:         gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>

// -----
builtin.module {
  func.func @total_sum_is_serial(%x: memref<16xf32>, %y: memref<f32>) {
    %i = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%i, %i) ({
    ^bb0(%a: index):
      %s = "krnl.load"(%y) : (memref<f32>) -> f32
      %v = "krnl.load"(%x, %a) : (memref<16xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y) : (f32, memref<f32>) -> ()
    }) {bounds = [[0 : i64, 16 : i64]], n_original = 1 : i64, onnx_node = "sum"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Every iteration writes the one element of y: no loop is parallel, and there is no inner
// nest to split around.
// CHECK-LABEL: func.func @total_sum_is_serial
// CHECK:         gpu_map = #krnl.gpu_map<serial>
// CHECK-NOT:     #krnl.gpu_map<flat

// -----
builtin.module {
  func.func @blocked_loop_not_mapped(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    %jo, %ji = "krnl.block"(%j) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %jo, %ji) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<4x64xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<4x64xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// j is blocked (emitted as j_o, j_i): only the whole loop i becomes threads.
// CHECK-LABEL: func.func @blocked_loop_not_mapped
// CHECK:         gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>

// -----
builtin.module {
  func.func @matmul_nest(%a: memref<32x8xf32>, %b: memref<8x48xf32>, %c: memref<32x48xf32>) {
    %z = arith.constant 0 : index
    %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%ii: index, %jj: index, %kk: index):
      "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [32 : i64, 48 : i64, 8 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [8 : i64, 1 : i64, 48 : i64, 48 : i64], simd = 1 : i64} : (memref<32x8xf32>, memref<8x48xf32>, memref<32x48xf32>, index, index, index, index, index, index) -> ()
    }) {bounds = [[0 : i64, 32 : i64], [0 : i64, 48 : i64], [0 : i64, 8 : i64]], n_original = 3 : i64, onnx_node = "mm"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// CHECK-LABEL: func.func @matmul_nest
// CHECK:         gpu_map = #krnl.gpu_map<matmul, tile = 16>

// -----
builtin.module {
  func.func @batched_matmul_on_grid_z(%a: memref<3x4x4xf32>, %b: memref<4x4xf32>, %c: memref<3x4x4xf32>) {
    %z = arith.constant 0 : index
    %n = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%n, %n) ({
    ^bb0(%nn: index):
      %s = arith.constant 16 : index
      %off = arith.muli %nn, %s : index
      %i, %j, %k = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
      "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
      ^bb1(%ii: index, %jj: index, %kk: index):
        "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %off, %z, %off) {sizes = [4 : i64, 4 : i64, 4 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [4 : i64, 1 : i64, 4 : i64, 4 : i64], simd = 1 : i64} : (memref<3x4x4xf32>, memref<4x4xf32>, memref<3x4x4xf32>, index, index, index, index, index, index) -> ()
      }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]], n_original = 3 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 3 : i64]], n_original = 1 : i64, onnx_node = "bmm"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The batch loop (3 points) goes on grid z; the inner nest is part of the same kernel and
// gets no mapping of its own.
// CHECK-LABEL: func.func @batched_matmul_on_grid_z
// CHECK:           "krnl.iterate"(%i, %j, %k, %i, %j, %k)
// CHECK:           }) {bounds = {{\[\[}}0 : i64, 4 : i64], [0 : i64, 4 : i64], [0 : i64, 4 : i64]], n_original = 3 : i64} :
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]], n_original = 1 : i64, onnx_node = "bmm", gpu_map = #krnl.gpu_map<matmul, loops = [0], tile = 16>}

// -----
builtin.module {
  func.func @split_around_shared_scratch(%x: memref<2x4xf32>, %y: memref<2x4xf32>) attributes {arena_bytes = 16 : i64} {
    %scratch = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4xf32>
    %n = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%n, %n) ({
    ^bb0(%nn: index):
      %j1 = "krnl.define_loops"() : () -> !krnl.loop
      "krnl.iterate"(%j1, %j1) ({
      ^bb1(%a: index):
        %v = "krnl.load"(%x, %nn, %a) : (memref<2x4xf32>, index, index) -> f32
        "krnl.store"(%v, %scratch, %a) : (f32, memref<4xf32>, index) -> ()
      }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "fill"} : (!krnl.loop, !krnl.loop) -> ()
      %j2 = "krnl.define_loops"() : () -> !krnl.loop
      "krnl.iterate"(%j2, %j2) ({
      ^bb2(%b: index):
        %w = "krnl.load"(%scratch, %b) : (memref<4xf32>, index) -> f32
        "krnl.store"(%w, %y, %nn, %b) : (f32, memref<2x4xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "drain"} : (!krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "outer"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Both outer iterations write all of %scratch (indexed by the inner loop only), so the outer
// loop cannot be threads: split, one launch per outer point and inner nest; each inner nest
// (4 points) is flat with one warp.
// CHECK-LABEL: func.func @split_around_shared_scratch
// CHECK:           {bounds = {{\[\[}}0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "fill", gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>}
// CHECK:           {bounds = {{\[\[}}0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "drain", gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>}
// CHECK:         {bounds = {{\[\[}}0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "outer", gpu_map = #krnl.gpu_map<split, loops = [0]>}

// -----
builtin.module {
  func.func @offset_index_is_parallel(%x: memref<8xf32>, %y: memref<12xf32>, %q0: index) {
    %i = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%i, %i) ({
    ^bb0(%a: index):
      %c3 = arith.constant 3 : index
      %at = arith.addi %q0, %a : index
      %at3 = arith.addi %at, %c3 : index
      %v = "krnl.load"(%x, %a) : (memref<8xf32>, index) -> f32
      %s = "krnl.load"(%y, %at3) : (memref<12xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %at3) : (f32, memref<12xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "panel"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// y[q0 + i + 3]: the loop variable plus terms that are the same in every iteration (a Conv
// panel's first column, a padding shift), in the load and the store alike: distinct i touch
// distinct elements, so i becomes threads.
// CHECK-LABEL: func.func @offset_index_is_parallel
// CHECK:         gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>

// -----
builtin.module {
  func.func @shifted_read_of_the_output_stays_serial(%y: memref<9xf32>) {
    %i = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%i, %i) ({
    ^bb0(%a: index):
      %c1 = arith.constant 1 : index
      %next = arith.addi %a, %c1 : index
      %v = "krnl.load"(%y, %a) : (memref<9xf32>, index) -> f32
      "krnl.store"(%v, %y, %next) : (f32, memref<9xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "scan"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// y[i + 1] = y[i]: iteration i reads what iteration i - 1 wrote. Both indices are i plus an
// invariant, but not the same one, so i is not independent: serial.
// CHECK-LABEL: func.func @shifted_read_of_the_output_stays_serial
// CHECK:         gpu_map = #krnl.gpu_map<serial>
// CHECK-NOT:     #krnl.gpu_map<flat

// -----
builtin.module {
  func.func @split_inside_split(%x: memref<2x8xf32>, %y: memref<2x8xf32>) attributes {arena_bytes = 16 : i64} {
    %scratch = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4xf32>
    %n = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%n, %n) ({
    ^bb0(%nn: index):
      %p = "krnl.define_loops"() : () -> !krnl.loop
      "krnl.iterate"(%p, %p) ({
      ^bb1(%jp: index):
        %c4 = arith.constant 4 : index
        %q0 = arith.muli %jp, %c4 : index
        %j1 = "krnl.define_loops"() : () -> !krnl.loop
        "krnl.iterate"(%j1, %j1) ({
        ^bb2(%a: index):
          %at = arith.addi %q0, %a : index
          %v = "krnl.load"(%x, %nn, %at) : (memref<2x8xf32>, index, index) -> f32
          "krnl.store"(%v, %scratch, %a) : (f32, memref<4xf32>, index) -> ()
        }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
        %j2 = "krnl.define_loops"() : () -> !krnl.loop
        "krnl.iterate"(%j2, %j2) ({
        ^bb3(%b: index):
          %w = "krnl.load"(%scratch, %b) : (memref<4xf32>, index) -> f32
          %bt = arith.addi %q0, %b : index
          "krnl.store"(%w, %y, %nn, %bt) : (f32, memref<2x8xf32>, index, index) -> ()
        }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
      }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "conv"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Conv's GEMM schedule: batch x group around panels, each panel reusing one column buffer.
// Both the outer nest and the panel nest are split (the launch order is batch, panel, inner
// nest); the inner nests index by their loop plus the panel's first column: flat.
// CHECK-LABEL: func.func @split_inside_split
// CHECK:             gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>
// CHECK:             gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>
// CHECK:           gpu_map = #krnl.gpu_map<split, loops = [0]>
// CHECK:         onnx_node = "conv", gpu_map = #krnl.gpu_map<split, loops = [0]>
