// RUN: python %S/split_cases.py compilerkit %s --emit llvm-ir --target host -O0 | filecheck %s
// Code generation for the host (the machine's own triple), Kernel IR in, LLVM IR out, at -O0
// so the IR is the emitter's own: the entry point `main_graph` (whatever the Kernel IR function
// is called) takes one array of pointers (inputs, outputs, then the arena) and the thread count
// of its parallel loops, and returns a status; each ONNX node's nest is an internal noinline function named after the node, called
// in program order; intermediate buffers are the arena plus their planned offset;
// `main_graph_arena_bytes` returns the plan's size and `main_graph_check_message` maps a failed
// run-time check's number to its text. The split_cases.py harness prints `// case @NAME`
// before each case's output.

func.func @relu_2x4(%x: memref<2x4xf32>, %y: memref<2x4xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i, %j = "krnl.define_loops"() {onnx_node = "relu"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%a: index, %b: index):
    %v = "krnl.load"(%x, %a, %b) : (memref<2x4xf32>, index, index) -> f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    "krnl.store"(%r, %y, %a, %b) : (f32, memref<2x4xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 4 : i64]], n_original = 2 : i64, onnx_node = "relu"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// Element (i, j) of a row-major 2x4 buffer is at i * 4 + j. maximumf propagates NaN and
// orders -0 below +0: LLVM's llvm.maximum intrinsic, not compares and selects (a scalar float
// select is a branch on x86).
// CHECK-LABEL: // case @relu_2x4
// CHECK:       target triple = "{{.+}}"
// CHECK-NOT:   {{nvptx|s390x}}
// CHECK:       define i64 @main_graph(ptr %[[ARGS:[^,]*]], i64 %{{.*}}) #{{[0-9]+}} {
// CHECK:         getelementptr ptr, ptr %[[ARGS]], i64 0
// CHECK:         getelementptr ptr, ptr %[[ARGS]], i64 1
// CHECK:         call i64 @main_graph_1_relu(ptr
// CHECK:       define internal i64 @main_graph_1_relu(ptr noalias %{{.*}}, ptr noalias %{{.*}}) #[[NOINLINE:[0-9]+]] {
// CHECK:         %[[I:.*]] = phi i64 [ 0, %entry ]
// CHECK-NEXT:    icmp slt i64 %[[I]], 2
// CHECK:         %[[J:.*]] = phi i64 [ 0, %body ]
// CHECK-NEXT:    icmp slt i64 %[[J]], 4
// CHECK:         %[[ROW:.*]] = mul i64 %[[I]], 4
// CHECK-NEXT:    %[[IDX:.*]] = add i64 %[[ROW]], %[[J]]
// CHECK-NEXT:    %[[P:.*]] = getelementptr float, ptr %{{.*}}, i64 %[[IDX]]
// CHECK-NEXT:    %[[V:.*]] = load float, ptr %[[P]]
// CHECK-NEXT:    call float @llvm.maximum.f32(float %[[V]], float 0.000000e+00)
// CHECK:       declare float @llvm.maximum.f32(float, float)
// CHECK:       define i64 @main_graph_arena_bytes() {
// CHECK-NEXT:  {{.*}}:
// CHECK-NEXT:    ret i64 0
// CHECK:       attributes #[[NOINLINE]] = { noinline nounwind }

// -----
func.func @div_guarded(%x: memref<4xi32>, %d: memref<4xi32>, %y: memref<4xi32>) attributes {input_names = ["x", "d"], output_names = ["y"], num_inputs = 2 : i64, arena_bytes = 128 : i64, naive_bytes = 128 : i64} {
  %t = "krnl.alloc"() {offset = 64 : i64} : () -> memref<4xi32>
  %i = "krnl.define_loops"() {onnx_node = "div"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%x, %a) : (memref<4xi32>, index) -> i32
    %v = "krnl.load"(%d, %a) : (memref<4xi32>, index) -> i32
    %z = arith.constant 0 : i32
    %ok = arith.cmpi ne, %v, %z : i32
    "krnl.check"(%ok) {message = "node 'div' (Div): integer division by zero"} : (i1) -> ()
    %q = arith.divsi %u, %v : i32
    "krnl.store"(%q, %t, %a) : (i32, memref<4xi32>, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "div"} : (!krnl.loop, !krnl.loop) -> ()
  %j = "krnl.define_loops"() {onnx_node = "neg"} : () -> !krnl.loop
  "krnl.iterate"(%j, %j) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%t, %a) : (memref<4xi32>, index) -> i32
    %z = arith.constant 0 : i32
    %n = arith.subi %z, %u : i32
    "krnl.store"(%n, %y, %a) : (i32, memref<4xi32>, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64]], n_original = 1 : i64, onnx_node = "neg"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// Inputs x, d, output y, then the arena (pointer 3); %t lives at arena + 64 and is passed to
// both nodes. The division never traps: a zero divisor, or INT32_MIN / -1, divides by 1
// instead and sets the status (the krnl.check's message is check 1). The arena is 128 bytes.
// CHECK-LABEL: // case @div_guarded
// CHECK:       target triple = "{{.+}}"
// CHECK:       @check_message_1 = internal constant [43 x i8] c"node 'div' (Div): integer division by zero\00"
// CHECK:       define i64 @main_graph(ptr %[[ARGS:[^,]*]], i64 %{{.*}}) #{{[0-9]+}} {
// CHECK:         %[[AP:.*]] = getelementptr ptr, ptr %[[ARGS]], i64 3
// CHECK-NEXT:    %[[ARENA:.*]] = load ptr, ptr %[[AP]]
// CHECK:         %[[T0:.*]] = getelementptr i8, ptr %[[ARENA]], i64 64
// CHECK-NEXT:    %[[T:.*]] = bitcast ptr %[[T0]] to ptr
// CHECK:         call i64 @main_graph_1_div(ptr %{{.*}}, ptr %{{.*}}, ptr %[[T]])
// CHECK:         call i64 @main_graph_2_neg(ptr %[[T]], ptr
// CHECK:       define internal i64 @main_graph_1_div(
// CHECK:         %[[X:.*]] = load i32
// CHECK:         %[[D:.*]] = load i32
// CHECK:         %[[ZERO:.*]] = icmp eq i32 %[[D]], 0
// CHECK-NEXT:    %[[MIN:.*]] = icmp eq i32 %[[X]], -2147483648
// CHECK-NEXT:    %[[NEG1:.*]] = icmp eq i32 %[[D]], -1
// CHECK-NEXT:    %[[OVF:.*]] = and i1 %[[MIN]], %[[NEG1]]
// CHECK:         %[[BAD:.*]] = or i1 %[[ZERO]], %[[OVF]]
// CHECK-NEXT:    %[[SAFE:.*]] = select i1 %[[BAD]], i32 1, i32 %[[D]]
// CHECK-NEXT:    sdiv i32 %[[X]], %[[SAFE]]
// CHECK:       define i64 @main_graph_arena_bytes() {
// CHECK-NEXT:  {{.*}}:
// CHECK-NEXT:    ret i64 128
// CHECK:       define ptr @main_graph_check_message(i64 %[[CODE:.*]]) {
// CHECK:         icmp eq i64 %[[CODE]], 1
// CHECK-NEXT:    bitcast ptr @check_message_1

// -----
func.func @const_add_exp(%x: memref<2xf32>, %y: memref<2xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 64 : i64, naive_bytes = 64 : i64} {
  %c = "krnl.global"() {sym_name = "const_0", value = dense<[1.5, -2.0]> : tensor<2xf32>} : () -> memref<2xf32>
  %t = "krnl.alloc"() {onnx_node = "add", offset = 0 : i64} : () -> memref<2xf32>
  %i = "krnl.define_loops"() {onnx_node = "add"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%x, %a) : (memref<2xf32>, index) -> f32
    %v = "krnl.load"(%c, %a) : (memref<2xf32>, index) -> f32
    %s = arith.addf %u, %v : f32
    "krnl.store"(%s, %t, %a) : (f32, memref<2xf32>, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "add"} : (!krnl.loop, !krnl.loop) -> ()
  %j = "krnl.define_loops"() {onnx_node = "exp"} : () -> !krnl.loop
  "krnl.iterate"(%j, %j) ({
  ^bb0(%a: index):
    %u = "krnl.load"(%t, %a) : (memref<2xf32>, index) -> f32
    %e = math.exp %u : f32
    "krnl.store"(%e, %y, %a) : (f32, memref<2xf32>, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64]], n_original = 1 : i64, onnx_node = "exp"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
// A krnl.global is an internal constant aligned to 64 bytes: the string of its bytes in the
// host's (little-endian) order, f32 1.5 = 0x3FC00000 -> 00 00 C0 3F, -2.0 = 0xC0000000 -> 00 00
// 00 C0 (LLVM prints 0x3F as `?`); math.exp calls compilerkit's own IR math library (ck_expf,
// defined in the module), never libm's expf.
// CHECK-LABEL: // case @const_add_exp
// CHECK:       target triple = "{{.+}}"
// CHECK-NOT:   @expf
// CHECK:       @g_const_0 = internal constant [8 x i8] c"\00\00\C0?\00\00\00\C0", align 64
// CHECK:       define internal i64 @main_graph_1_add(
// CHECK:         fadd float
// CHECK:       define internal i64 @main_graph_2_exp(
// CHECK:         call float @ck_expf(float
// CHECK:       define internal float @ck_expf(float
// CHECK-NOT:   @expf
// CHECK:       define i64 @main_graph_arena_bytes()

// -----
func.func @unrolled_window(%x: memref<6xf32>, %y: memref<2xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i, %k = "krnl.define_loops"() {onnx_node = "win"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.unroll"(%k) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %k, %i, %k) ({
  ^bb0(%a: index, %b: index):
    %c3 = arith.constant 3 : index
    %base = arith.muli %a, %c3 : index
    %idx = arith.addi %base, %b : index
    %v = "krnl.load"(%x, %idx) : (memref<6xf32>, index) -> f32
    %s = "krnl.load"(%y, %a) : (memref<2xf32>, index) -> f32
    %t = arith.addf %s, %v : f32
    "krnl.store"(%t, %y, %a) : (f32, memref<2xf32>, index) -> ()
  }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 3 : i64]], n_original = 2 : i64, onnx_node = "win"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// krnl.unroll on the 3-trip inner loop: the emitter writes its body three times with k = 0, 1,
// 2 (x[3 i + k]), in order, and only the outer loop remains a loop.
// CHECK-LABEL: // case @unrolled_window
// CHECK:       define internal i64 @main_graph_1_win(
// CHECK:         %[[I:.*]] = phi i64 [ 0, %entry ]
// CHECK-NEXT:    icmp slt i64 %[[I]], 2
// CHECK-NOT:     phi i64
// CHECK:         %[[B0:.*]] = mul i64 %[[I]], 3
// CHECK-NEXT:    add i64 %[[B0]], 0
// CHECK:         fadd float
// CHECK:         %[[B1:.*]] = mul i64 %[[I]], 3
// CHECK-NEXT:    add i64 %[[B1]], 1
// CHECK:         fadd float
// CHECK:         %[[B2:.*]] = mul i64 %[[I]], 3
// CHECK-NEXT:    add i64 %[[B2]], 2
// CHECK:         fadd float
// CHECK-NOT:     phi i64
// CHECK:         ret i64

// -----
func.func @shared_parallel(%x: memref<4x8xf32>, %y: memref<4x8xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 128 : i64, naive_bytes = 128 : i64} {
  %t = "krnl.alloc"() {offset = 0 : i64} : () -> memref<4x8xf32>
  %i, %j = "krnl.define_loops"() {onnx_node = "a"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%i) : (!krnl.loop) -> ()
  "krnl.iterate"(%i, %j, %i, %j) ({
  ^bb0(%p: index, %q: index):
    %v = "krnl.load"(%x, %p, %q) : (memref<4x8xf32>, index, index) -> f32
    %one = arith.constant 1.0 : f32
    %r = arith.addf %v, %one : f32
    "krnl.store"(%r, %t, %p, %q) : (f32, memref<4x8xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64, onnx_node = "a"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  %k, %l = "krnl.define_loops"() {onnx_node = "b"} : () -> (!krnl.loop, !krnl.loop)
  "krnl.parallel"(%k) : (!krnl.loop) -> ()
  "krnl.iterate"(%k, %l, %k, %l) ({
  ^bb0(%p: index, %q: index):
    %v = "krnl.load"(%t, %p, %q) : (memref<4x8xf32>, index, index) -> f32
    %one = arith.constant 1.0 : f32
    %r = arith.addf %v, %one : f32
    "krnl.store"(%r, %y, %p, %q) : (f32, memref<4x8xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 4 : i64], [0 : i64, 8 : i64]], n_original = 2 : i64, onnx_node = "b"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
  func.return
}
// Two nodes with the same code (same shapes, a parallel outer loop) call one function: its
// buffers are parameters, so node b passes (t, y) where node a passed (x, t). The parallel nest
// is one function `body(ctx)`, ctx = {status, threads, span, arrived, x, t}: GOMP_parallel
// runs it on the threads, and with one thread the node calls it directly; no other wrapper is
// made. A thread counts itself in ctx.arrived (the first one takes chunks from the front, the
// others from the back) and claims chunks of the outer loop with a compare-and-swap on
// ctx.span (back << 32 | front, [0, 4) at the start) until the two ends meet.
// CHECK-LABEL: // case @shared_parallel
// CHECK:       define i64 @main_graph(ptr %{{.*}}, i64 %[[N:[^)]*]]) #{{[0-9]+}} {
// CHECK:         call i64 @main_graph_1_a(ptr %[[X:[^,]*]], ptr %[[T:[^,]*]], i64 %[[N]])
// CHECK:         call i64 @main_graph_1_a(ptr %[[T]], ptr %[[Y:[^,]*]], i64 %[[N]])
// CHECK-NOT:   define {{.*}}@main_graph_2_b
// CHECK:       define internal i64 @main_graph_1_a(ptr noalias %[[A:[^,]*]], ptr noalias %[[B:[^,]*]], i64 %{{.*}})
// CHECK:         alloca { i64, i64, i64, i64, ptr, ptr }
// CHECK:         store i64 17179869184, ptr
// CHECK:         store i64 0, ptr
// CHECK:         store ptr %[[A]], ptr
// CHECK:         store ptr %[[B]], ptr
// CHECK:         call void @GOMP_parallel(ptr @main_graph_1_a_par1, ptr %[[CTX:[^,]*]], i32 %{{.*}}, i32 0)
// CHECK:         call void @main_graph_1_a_par1(ptr %[[CTX]])
// CHECK:       define internal void @main_graph_1_a_par1(ptr noalias %{{.*}})
// CHECK:         %[[SPAN:.*]] = getelementptr { i64, i64, i64, i64, ptr, ptr }, ptr %{{.*}}, i32 0, i32 2
// CHECK:         %[[ARRIVED:.*]] = getelementptr { i64, i64, i64, i64, ptr, ptr }, ptr %{{.*}}, i32 0, i32 3
// CHECK:         %[[NTH:.*]] = atomicrmw add ptr %[[ARRIVED]], i64 1 monotonic
// CHECK:         %[[BACK_ROLE:.*]] = icmp sgt i64 %[[NTH]], 0
// CHECK:       [[TAKE:take[0-9.]*]]:
// CHECK:         load atomic i64, ptr %[[SPAN]] monotonic
// CHECK:       check{{[0-9.]*}}:
// CHECK:         %[[CUR:.*]] = phi i64
// CHECK:         %[[FRONT:.*]] = zext i32 %{{.*}} to i64
// CHECK:         %[[BACK:.*]] = lshr i64 %[[CUR]], 32
// CHECK:         icmp slt i64 %[[FRONT]], %[[BACK]]
// CHECK:       claim{{[0-9.]*}}:
// CHECK:         select i1 %[[BACK_ROLE]]
// CHECK:         cmpxchg ptr %[[SPAN]], i64 %[[CUR]], i64 %{{.*}} monotonic monotonic
// CHECK:         br label %[[TAKE]]
// CHECK:         atomicrmw umax
// CHECK-NOT:   define {{.*}}@main_graph_{{.*}}_omp
// CHECK-NOT:   define {{.*}}@main_graph_2_b
// CHECK:       define i64 @main_graph_arena_bytes()
