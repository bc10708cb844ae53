// RUN: not python %S/split_cases.py compilerkit %s --emit llvm-ir --target gpu -O0 2>&1 | filecheck %s
// RUN: not python %S/split_cases.py compilerkit %s --emit asm --target gpu -O0 2>&1 | filecheck %s --check-prefix=PTX
// Code generation for CUDA GPUs (nvptx64), Kernel IR in (with the #krnl.gpu_map attributes
// the gpu-map pass writes, or hand-edited ones), LLVM IR out at -O0: one `ptx_kernel` function
// per top-level nest, named after its node, doing what its gpu_map says; no host entry point
// (the GPU backend launches the kernels in program order). Each kernel requires exactly its
// map's block shape (nvvm.reqntid): flat (block, 1, 1), matmul (tile, tile, 1), serial
// (1, 1, 1). A mapping that does not fit its nest is an error naming the node. The
// split_cases.py harness prints `// case @NAME` before each case's output.

func.func @flat_2d(%x: memref<8x64xf32>, %y: memref<8x64xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i, %j = "krnl.define_loops"() {onnx_node = "copy"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %v = "krnl.load"(%x, %a, %b) : (memref<8x64xf32>, index, index) -> f32
    %n = arith.negf %v : f32
    "krnl.store"(%n, %y, %a, %b) : (f32, memref<8x64xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64, onnx_node = "copy", gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 256>} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// One thread per point: t = ctaid.x * ntid.x + tid.x, guarded by t < 8 * 64 = 512. Every
// kernel takes the inputs, the outputs, the arena and the constant buffer (4 pointers here).
// CHECK-LABEL: // case @flat_2d
// CHECK:       target triple = "nvptx64-nvidia-cuda"
// CHECK-NOT:   define i64 @main_graph(
// CHECK:       define ptx_kernel void @main_graph_1_copy(ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}) #[[K:[0-9]+]] {
// CHECK:         %[[CTA:.*]] = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
// CHECK-NEXT:    %[[CTA64:.*]] = zext i32 %[[CTA]] to i64
// CHECK-NEXT:    %[[NT:.*]] = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
// CHECK-NEXT:    %[[NT64:.*]] = zext i32 %[[NT]] to i64
// CHECK-NEXT:    %[[BASE:.*]] = mul i64 %[[CTA64]], %[[NT64]]
// CHECK-NEXT:    %[[TID:.*]] = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
// CHECK-NEXT:    %[[TID64:.*]] = zext i32 %[[TID]] to i64
// CHECK-NEXT:    %[[T:.*]] = add i64 %[[BASE]], %[[TID64]]
// CHECK-NEXT:    icmp slt i64 %[[T]], 512
// The last listed loop runs fastest: i = t / 64, j = t % 64.
// CHECK:         udiv i64 %[[T]], 64
// CHECK:         urem i64 %[[T]], 64
// CHECK:         fneg float
// CHECK-NOT:   define {{.*}}@main_graph_arena_bytes
// CHECK:       attributes #[[K]] = { "nvvm.reqntid"="256,1,1" }

// -----
func.func @flat_hand_edited(%x: memref<8x64xf32>, %y: memref<8x64xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i, %j = "krnl.define_loops"() {onnx_node = "copy_cols"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %v = "krnl.load"(%x, %a, %b) : (memref<8x64xf32>, index, index) -> f32
    "krnl.store"(%v, %y, %a, %b) : (f32, memref<8x64xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 8 : i64], [0 : i64, 64 : i64]], n_original = 2 : i64, onnx_node = "copy_cols", gpu_map = #krnl.gpu_map<flat, loops = [1], block = 64>} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// Only loop 1 (64 points) is threads, as the attribute says: the guard is t < 64 and each
// thread runs loop 0 (8 trips) itself.
// CHECK-LABEL: // case @flat_hand_edited
// CHECK:       define ptx_kernel void @main_graph_1_copy_cols({{.*}}) #[[K:[0-9]+]] {
// CHECK:         %[[T:.*]] = add i64
// CHECK-NEXT:    icmp slt i64 %[[T]], 64
// CHECK:         icmp slt i64 %{{.*}}, 8
// CHECK:       attributes #[[K]] = { "nvvm.reqntid"="64,1,1" }

// -----
func.func @flat_offset_bounds(%x: memref<8xf32>, %y: memref<8xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i = "krnl.define_loops"() {onnx_node = "tail"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %v = "krnl.load"(%x, %a) : (memref<8xf32>, index) -> f32
    "krnl.store"(%v, %y, %a) : (f32, memref<8xf32>, index) -> ()
  }) {bounds = [[2 : i64, 7 : i64]], n_original = 1 : i64, onnx_node = "tail", gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// A loop over [2, 7): 5 threads, thread t works on element t + 2.
// CHECK-LABEL: // case @flat_offset_bounds
// CHECK:       define ptx_kernel void @main_graph_1_tail(
// CHECK:         %[[T:.*]] = add i64
// CHECK-NEXT:    icmp slt i64 %[[T]], 5
// CHECK:         %[[I:.*]] = add i64 %[[T]], 2
// CHECK-NEXT:    getelementptr float, ptr %{{.*}}, i64 %[[I]]
// In PTX (--emit asm; for the device present, else sm_80): a visible entry point whose
// required block shape is the map's 32 x 1 x 1.
// PTX-LABEL: // case @flat_offset_bounds
// PTX:       .target sm_{{[0-9]+}}
// PTX:       .address_size 64
// PTX:       .visible .entry main_graph_1_tail(
// PTX:       .reqntid 32, 1, 1

// -----
func.func @matmul_tiled(%a: memref<32x8xf32>, %b: memref<8x48xf32>, %c: memref<32x48xf32>) attributes {input_names = ["a", "b"], output_names = ["c"], num_inputs = 2 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %z = arith.constant 0 : index
  %i, %j, %k = "krnl.define_loops"() {onnx_node = "mm"} : () -> (!krnl.loop, !krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %k, %i, %j, %k) ({
  ^bb0(%ii: index, %jj: index, %kk: index):
    "krnl.matmul"(%a, %b, %c, %ii, %jj, %kk, %z, %z, %z) {sizes = [32 : i64, 48 : i64, 8 : i64], tile = [1 : i64, 1 : i64, 1 : i64], strides = [8 : i64, 1 : i64, 48 : i64, 48 : i64], simd = 1 : i64} : (memref<32x8xf32>, memref<8x48xf32>, memref<32x48xf32>, index, index, index, index, index, index) -> ()
  }) {bounds = [[0 : i64, 32 : i64], [0 : i64, 48 : i64], [0 : i64, 8 : i64]], n_original = 3 : i64, onnx_node = "mm", gpu_map = #krnl.gpu_map<matmul, tile = 16>} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// A 16x16 tile of C per thread block: A and B tiles of 16 x 16 = 256 floats in shared memory
// (address space 3), threads synchronised at a barrier between loading and using them.
// CHECK-LABEL: // case @matmul_tiled
// CHECK:       @main_graph_1_mm_As = internal addrspace(3) global [256 x float]
// CHECK:       @main_graph_1_mm_Bs = internal addrspace(3) global [256 x float]
// CHECK:       define ptx_kernel void @main_graph_1_mm({{.*}}) #[[K:[0-9]+]] {
// CHECK:         call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
// CHECK:         call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
// CHECK:         store float %{{.*}}, ptr addrspace(3)
// CHECK:         call void @llvm.nvvm.barrier
// CHECK:         load float, ptr addrspace(3)
// CHECK:       attributes #[[K]] = { "nvvm.reqntid"="16,16,1" }
// Shared tiles in the PTX are 256 floats = 1024 bytes each, with a barrier between staging
// and use.
// PTX-LABEL: // case @matmul_tiled
// PTX:       .visible .entry main_graph_1_mm(
// PTX:       .reqntid 16, 16, 1
// PTX:       .shared .align {{[0-9]+}} .b8 main_graph_1_mm_As[1024];
// PTX:       .shared .align {{[0-9]+}} .b8 main_graph_1_mm_Bs[1024];
// PTX:       st.shared
// PTX:       bar.sync{{\s+}}0;
// PTX:       ld.shared

// -----
func.func @serial_sum(%x: memref<16xf32>, %y: memref<f32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i = "krnl.define_loops"() {onnx_node = "total"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %s = "krnl.load"(%y) : (memref<f32>) -> f32
    %v = "krnl.load"(%x, %a) : (memref<16xf32>, index) -> f32
    %t = arith.addf %s, %v : f32
    "krnl.store"(%t, %y) : (f32, memref<f32>) -> ()
  }) {bounds = [[0 : i64, 16 : i64]], n_original = 1 : i64, onnx_node = "total", gpu_map = #krnl.gpu_map<serial>} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// serial: one thread walks all 16 elements in order; no thread index is read.
// CHECK-LABEL: // case @serial_sum
// CHECK:       define ptx_kernel void @main_graph_1_total({{.*}}) #[[K:[0-9]+]] {
// CHECK-NOT:     sreg.tid
// CHECK:         icmp slt i64 %{{.*}}, 16
// CHECK:         fadd float
// CHECK:       attributes #[[K]] = { "nvvm.reqntid"="1,1,1" }

// -----
func.func @split_shared_scratch(%x: memref<2x4xf32>, %y: memref<2x4xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 64 : i64, naive_bytes = 64 : i64} {
  %scratch = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4xf32>
  %n = "krnl.define_loops"() {onnx_node = "outer"} : () -> !krnl.loop
  "krnl.iterate"(%n, %n) ({
  ^bb0(%nn: index):
    %j1 = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%j1, %j1) ({
    ^bb1(%a: index):
      %v = "krnl.load"(%x, %nn, %a) : (memref<2x4xf32>, index, index) -> f32
      "krnl.store"(%v, %scratch, %a) : (f32, memref<4xf32>, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "fill", gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>} : (!krnl.loop, !krnl.loop) -> ()
    %j2 = "krnl.define_loops"() : () -> !krnl.loop
    "krnl.iterate"(%j2, %j2) ({
    ^bb2(%b: index):
      %w = "krnl.load"(%scratch, %b) : (memref<4xf32>, index) -> f32
      "krnl.store"(%w, %y, %nn, %b) : (f32, memref<2x4xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "drain", gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>} : (!krnl.loop, !krnl.loop) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "outer", gpu_map = #krnl.gpu_map<split, loops = [0]>} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// split: the outer loop stays on the host (one launch per n and inner nest); each inner
// nest is its own kernel taking the outer index as a trailing i64 (x[n, j] is at n * 4 + j).
// CHECK-LABEL: // case @split_shared_scratch
// CHECK:       define ptx_kernel void @main_graph_1_fill_0(ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, i64 %[[N:[.0-9a-z]+]])
// CHECK:         mul i64 %[[N]], 4
// CHECK:       define ptx_kernel void @main_graph_1_drain_1(ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, i64 %[[N2:[.0-9a-z]+]])
// CHECK:         mul i64 %[[N2]], 4
// CHECK-NOT:   define ptx_kernel void @main_graph_1_outer

// -----
func.func @split_inside_split(%x: memref<2x8xf32>, %y: memref<2x8xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 64 : i64, naive_bytes = 64 : i64} {
  %scratch = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4xf32>
  %n = "krnl.define_loops"() {onnx_node = "conv"} : () -> !krnl.loop
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
      }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>} : (!krnl.loop, !krnl.loop) -> ()
      %j2 = "krnl.define_loops"() : () -> !krnl.loop
      "krnl.iterate"(%j2, %j2) ({
      ^bb3(%b: index):
        %w = "krnl.load"(%scratch, %b) : (memref<4xf32>, index) -> f32
        %bt = arith.addi %q0, %b : index
        "krnl.store"(%w, %y, %nn, %bt) : (f32, memref<2x8xf32>, index, index) -> ()
      }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, gpu_map = #krnl.gpu_map<flat, loops = [0], block = 32>} : (!krnl.loop, !krnl.loop) -> ()
    }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, gpu_map = #krnl.gpu_map<split, loops = [0]>} : (!krnl.loop, !krnl.loop) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "conv", gpu_map = #krnl.gpu_map<split, loops = [0]>} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// A split inside a split (Conv: batch x group around panels that share a column buffer):
// each innermost nest is one kernel named by its path (nest_0_0, nest_0_1), taking the indices of
// both enclosing splits as trailing i64s (n, then the panel), and the panel's first column
// (panel * 4) is recomputed inside it.
// CHECK-LABEL: // case @split_inside_split
// CHECK:       define ptx_kernel void @main_graph_1_nest_0_0(ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, i64 %[[N:[.0-9a-z]+]], i64 %[[P:[.0-9a-z]+]])
// CHECK:         mul i64 %[[P]], 4
// CHECK:       define ptx_kernel void @main_graph_1_nest_0_1(ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, ptr noalias %{{.*}}, i64 %[[N2:[.0-9a-z]+]], i64 %[[P2:[.0-9a-z]+]])
// CHECK:         mul i64 %[[P2]], 4
// CHECK-NOT:   define ptx_kernel

// -----
func.func @racing_map_refused(%x: memref<4x100xf32>, %y: memref<4xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i, %j = "krnl.define_loops"() {onnx_node = "rowsum"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %s = "krnl.load"(%y, %a) : (memref<4xf32>, index) -> f32
    %v = "krnl.load"(%x, %a, %b) : (memref<4x100xf32>, index, index) -> f32
    %t = arith.addf %s, %v : f32
    "krnl.store"(%t, %y, %a) : (f32, memref<4xf32>, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 100 : i64]], n_original = 2 : i64, onnx_node = "rowsum", gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 256>} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// A hand-edited map making the reduction loop 1 threads would race on y[i]: refused.
// CHECK-LABEL: // case @racing_map_refused
// CHECK:       error: {{.*}}node 'rowsum'
// CHECK-SAME:    loop 1 write the same elements
// CHECK-NOT:   define ptx_kernel

// -----
func.func @unmapped_module_is_mapped(%x: memref<4xf32>, %y: memref<4xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i = "krnl.define_loops"() {onnx_node = "unmapped"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %v = "krnl.load"(%x, %a) : (memref<4xf32>, index) -> f32
    "krnl.store"(%v, %y, %a) : (f32, memref<4xf32>, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "unmapped"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// Kernel IR scheduled for the host (no gpu_map at all): the stage driver runs gpu-map first,
// so the nest becomes a flat kernel over its 4 points.
// CHECK-LABEL: // case @unmapped_module_is_mapped
// CHECK:       define ptx_kernel void @main_graph_1_unmapped({{.*}}) #[[K:[0-9]+]] {
// CHECK:         %[[T:.*]] = add i64
// CHECK-NEXT:    icmp slt i64 %[[T]], 4
// CHECK:       attributes #[[K]] = { "nvvm.reqntid"="32,1,1" }
