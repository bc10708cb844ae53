// RUN: python -m compilerkit.opt --split-input-file -p fuse-nests %s | filecheck %s
// fuse-nests (-O1 and up, before the schedule): an elementwise nest whose buffer only the next
// nest reads, element for element, is computed inside that nest; its loops and the buffer go.
// The consumer keeps its node's tag and lists the nodes it absorbed in `fused_nodes`. The ops
// are the same, in the same order, so every element gets the same bits.

builtin.module {
  func.func @chain(%x: memref<1x4x6xf32>, %y: memref<1x4x6xf32>) {
    %s = "krnl.global"() {sym_name = "s", value = dense<[[[2.0]], [[3.0]], [[4.0]], [[5.0]]]> : tensor<4x1x1xf32>} : () -> memref<4x1x1xf32>
    %s3 = "krnl.reshape"(%s) {onnx_node = "mul"} : (memref<4x1x1xf32>) -> memref<1x4x1xf32>
    %t = "krnl.alloc"() {onnx_node = "mul"} : () -> memref<1x4x6xf32>
    %tv = "krnl.reshape"(%t) {onnx_node = "mul"} : (memref<1x4x6xf32>) -> memref<1x24xf32>
    %i, %j, %k = "krnl.define_loops"() {onnx_node = "mul"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
    ^bb0(%a: index, %b: index, %c: index):
      %z = arith.constant 0 : index
      %v = "krnl.load"(%x, %a, %b, %c) : (memref<1x4x6xf32>, index, index, index) -> f32
      %w = "krnl.load"(%s3, %z, %b, %z) : (memref<1x4x1xf32>, index, index, index) -> f32
      %m = arith.mulf %v, %w : f32
      "krnl.store"(%m, %t, %a, %b, %c) : (f32, memref<1x4x6xf32>, index, index, index) -> ()
    }) {bounds = [[0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 6 : i64]], n_original = 3 : i64, onnx_node = "mul"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %u = "krnl.alloc"() {onnx_node = "add"} : () -> memref<1x4x6xf32>
    %i1, %j1, %k1 = "krnl.define_loops"() {onnx_node = "add"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i1, %j1, %k1, %i1, %j1, %k1) ({
    ^bb0(%a1: index, %b1: index, %c1: index):
      %z1 = arith.constant 0 : index
      %v1 = "krnl.load"(%t, %z1, %b1, %c1) : (memref<1x4x6xf32>, index, index, index) -> f32
      %one = arith.constant 1.0 : f32
      %p = arith.addf %v1, %one : f32
      "krnl.store"(%p, %u, %a1, %b1, %c1) : (f32, memref<1x4x6xf32>, index, index, index) -> ()
    }) {bounds = [[0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 6 : i64]], n_original = 3 : i64, onnx_node = "add"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %i2, %j2, %k2 = "krnl.define_loops"() {onnx_node = "relu"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
    "krnl.iterate"(%i2, %j2, %k2, %i2, %j2, %k2) ({
    ^bb0(%a2: index, %b2: index, %c2: index):
      %v2 = "krnl.load"(%u, %a2, %b2, %c2) : (memref<1x4x6xf32>, index, index, index) -> f32
      %zero = arith.constant 0.0 : f32
      %r = arith.maximumf %v2, %zero : f32
      "krnl.store"(%r, %y, %a2, %b2, %c2) : (f32, memref<1x4x6xf32>, index, index, index) -> ()
    }) {bounds = [[0 : i64, 1 : i64], [0 : i64, 4 : i64], [0 : i64, 6 : i64]], n_original = 3 : i64, onnx_node = "relu"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// Mul -> Add -> Relu: one nest, Relu's, computing x * s + 1 then max(., 0) per element. The
// batch index of one iteration reads as the constant 0 in Add's load and as the induction
// variable in Mul's store: the same element. Both buffers and their view are gone; the
// scale's view stays (the fused body reads it).
// CHECK-LABEL: func.func @chain
// CHECK-NOT:     "krnl.alloc"
// CHECK:         %[[S3:.*]] = "krnl.reshape"(%{{.*}}) {onnx_node = "mul"}
// CHECK-NOT:     "krnl.alloc"
// CHECK:         "krnl.define_loops"() {onnx_node = "relu"}
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: index, %[[B:.*]]: index, %[[C:.*]]: index):
// CHECK:           %[[V:.*]] = "krnl.load"(%x, %[[A]], %[[B]], %[[C]])
// CHECK:           %[[W:.*]] = "krnl.load"(%[[S3]], %{{.*}}, %[[B]], %{{.*}})
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[V]], %[[W]] : f32
// CHECK:           %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[M]], %[[ONE]] : f32
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %[[P]], %[[Z]] : f32
// CHECK-NEXT:      "krnl.store"(%[[R]], %y, %[[A]], %[[B]], %[[C]])
// CHECK-NEXT:    }) {{{.*}}onnx_node = "relu", fused_nodes = ["mul", "add"]}
// CHECK-NOT:     "krnl.iterate"
// CHECK:         func.return

// -----
builtin.module {
  func.func @two_readers(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %t = "krnl.alloc"() {onnx_node = "neg"} : () -> memref<8xf32>
    %i = "krnl.define_loops"() {onnx_node = "neg"} : () -> !krnl.loop
    "krnl.iterate"(%i, %i) ({
    ^bb0(%a: index):
      %v = "krnl.load"(%x, %a) : (memref<8xf32>, index) -> f32
      %n = arith.negf %v : f32
      "krnl.store"(%n, %t, %a) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "neg"} : (!krnl.loop, !krnl.loop) -> ()
    %j = "krnl.define_loops"() {onnx_node = "copy"} : () -> !krnl.loop
    "krnl.iterate"(%j, %j) ({
    ^bb0(%b: index):
      %v1 = "krnl.load"(%t, %b) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v1, %y, %b) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop) -> ()
    %k = "krnl.define_loops"() {onnx_node = "copy2"} : () -> !krnl.loop
    "krnl.iterate"(%k, %k) ({
    ^bb0(%c: index):
      %v2 = "krnl.load"(%t, %c) : (memref<8xf32>, index) -> f32
      "krnl.store"(%v2, %z, %c) : (f32, memref<8xf32>, index) -> ()
    }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "copy2"} : (!krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// A buffer a second nest reads too stays, and so does the nest that writes it.
// CHECK-LABEL: func.func @two_readers
// CHECK:         "krnl.alloc"
// CHECK-COUNT-3: "krnl.iterate"
// CHECK-NOT:     fused_nodes

// -----
builtin.module {
  func.func @transposed(%x: memref<2x3xf32>, %y: memref<3x2xf32>) {
    %t = "krnl.alloc"() {onnx_node = "neg"} : () -> memref<2x3xf32>
    %i, %j = "krnl.define_loops"() {onnx_node = "neg"} : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%i, %j, %i, %j) ({
    ^bb0(%a: index, %b: index):
      %v = "krnl.load"(%x, %a, %b) : (memref<2x3xf32>, index, index) -> f32
      %n = arith.negf %v : f32
      "krnl.store"(%n, %t, %a, %b) : (f32, memref<2x3xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 3 : i64]], n_original = 2 : i64, onnx_node = "neg"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %k, %l = "krnl.define_loops"() {onnx_node = "transpose"} : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%k, %l, %k, %l) ({
    ^bb0(%c: index, %d: index):
      %v1 = "krnl.load"(%t, %c, %d) : (memref<2x3xf32>, index, index) -> f32
      "krnl.store"(%v1, %y, %d, %c) : (f32, memref<3x2xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 3 : i64]], n_original = 2 : i64, onnx_node = "transpose"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    %m, %o = "krnl.define_loops"() {onnx_node = "swap"} : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%m, %o, %m, %o) ({
    ^bb0(%e: index, %f: index):
      %v2 = "krnl.load"(%y, %f, %e) : (memref<3x2xf32>, index, index) -> f32
      "krnl.store"(%v2, %x, %e, %f) : (f32, memref<2x3xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 3 : i64]], n_original = 2 : i64, onnx_node = "swap"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
// The transpose stores at (d, c) but reads its input element for element: neg fuses into it.
// swap reads y, a function argument (not an allocated buffer): it stays.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT:     "krnl.alloc"
// CHECK:         "krnl.iterate"
// CHECK:           arith.negf
// CHECK:         }) {{{.*}}onnx_node = "transpose", fused_nodes = ["neg"]}
// CHECK:         "krnl.iterate"
// CHECK-NOT:     fused_nodes
