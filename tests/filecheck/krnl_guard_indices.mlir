// RUN: python -m compilerkit.opt -p guard-indices %s | filecheck %s
// An index computed from data (a value loaded from a tensor) has no range the verifier can
// bound: guard-indices checks it against its dimension (krnl.check, reported as RunError
// after the call) and clamps it, so the access stays inside the buffer; the nest loses its
// krnl.parallel (which failure a run reports must not depend on the thread count). An index
// the loops bound is left alone.

func.func @pick(%x: memref<3x4xf32>, %i: memref<2xi64>, %y: memref<2x4xf32>) attributes {input_names = ["x", "i"], output_names = ["y"], num_inputs = 2 : i64} {
  %l:2 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%l#0) : (!krnl.loop) -> ()
  "krnl.iterate"(%l#0, %l#1, %l#0, %l#1) ({
  ^bb0(%a: index, %b: index):
    %r = "krnl.load"(%i, %a) : (memref<2xi64>, index) -> i64
    %ri = arith.index_cast %r : i64 to index
    %v = "krnl.load"(%x, %ri, %b) : (memref<3x4xf32>, index, index) -> f32
    "krnl.store"(%v, %y, %a, %b) : (f32, memref<2x4xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 4 : i64]], n_original = 2 : i64, onnx_node = "pick"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// CHECK-LABEL: func.func @pick
// CHECK-NOT:     krnl.parallel
// CHECK:         %r = "krnl.load"(%i, %a) : (memref<2xi64>, index) -> i64
// CHECK-NEXT:    %ri = arith.index_cast %r : i64 to index
// CHECK:         arith.cmpi sge, %ri, %{{.*}} : index
// CHECK:         arith.cmpi slt, %ri, %{{.*}} : index
// CHECK:         %[[LOW:.*]] = arith.maxsi %ri, %{{.*}} : index
// CHECK-NEXT:    %[[SAFE:.*]] = arith.minsi %[[LOW]], %{{.*}} : index
// CHECK-NEXT:    "krnl.check"(%{{.*}}) {message = "node 'pick': krnl.load of model input 'x' (memref<3x4xf32>): an index computed from data is out of range"}
// CHECK-NEXT:    %v = "krnl.load"(%x, %[[SAFE]], %b)
// CHECK-NEXT:    "krnl.store"(%v, %y, %a, %b)
