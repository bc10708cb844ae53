// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Unary elementwise ops (lowering/elementwise.py): one krnl.iterate over the output, a load at
// the same indices, the op's scalar formula from the ONNX definition, a store. The model's
// output buffer is the function's last argument (destination passing), so a single-node graph
// allocates nothing; a chain of two nodes allocates the intermediate.

// Relu(x) = max(x, 0).
func.func @relu_f32(%x: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK-LABEL: func.func @relu_f32(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x4xf32>, [[Y:%[0-9]+]]: memref<2x4xf32>)
// CHECK-NOT:     krnl.alloc
// CHECK:         "krnl.define_loops"() {onnx_node = "relu"} : () -> (!krnl.loop, !krnl.loop)
// CHECK-NEXT:    "krnl.iterate"
// CHECK-NEXT:    ^bb0([[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]], [[J]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.maximumf [[V]], [[Z]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]], [[J]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:    func.return

// -----
// Relu on int32 (opset 14): the integer max and an i32 zero.
func.func @relu_i32(%x: tensor<3xi32>) -> tensor<3xi32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 14 : i64} {
  %y = "onnx.Relu"(%x) {onnx_node_name = "relu"} : (tensor<3xi32>) -> tensor<3xi32>
  func.return %y : tensor<3xi32>
}
// CHECK-LABEL: func.func @relu_i32(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0 : i32
// CHECK-NEXT:    arith.maxsi [[V]], [[Z]] : i32
// CHECK:         bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// Sigmoid(x) = 1 / (1 + exp(-x)), computed with e = exp(-|x|) as x < 0 ? e / (1 + e) : 1 / (1 + e)
// (no overflow of exp for x < -88.7, where the answer is still a subnormal float).
func.func @sigmoid(%x: tensor<3xf32>) -> tensor<3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Sigmoid"(%x) {onnx_node_name = "sig"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
// CHECK-LABEL: func.func @sigmoid(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3xf32>, [[Y:%[0-9]+]]: memref<3xf32>)
// CHECK:         ^bb0([[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[I]])
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      [[A:%[0-9]+]] = math.absf [[V]] : f32
// CHECK-NEXT:      [[N:%[0-9]+]] = arith.negf [[A]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = math.exp [[N]] : f32
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.divf [[ONE]], [[D]] : f32
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:      [[ES:%[0-9]+]] = arith.mulf [[E]], [[S]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.select [[NEG]], [[ES]], [[S]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64]]

// -----
// LeakyRelu(x) = x < 0 ? alpha * x : x, alpha = 0.1.
func.func @leaky_relu(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.LeakyRelu"(%x) {alpha = 0.1 : f32, onnx_node_name = "lrelu"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @leaky_relu(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.constant 1.000000e-01 : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[NEG:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:    [[AX:%[0-9]+]] = arith.mulf [[A]], [[V]] : f32
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.select [[NEG]], [[AX]], [[V]] : f32
// CHECK-NEXT:    "krnl.store"([[R]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64]]

// -----
// Elu(x) = x < 0 ? alpha * (exp(x) - 1) : x, alpha = 0.5.
func.func @elu(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Elu"(%x) {alpha = 0.5 : f32, onnx_node_name = "elu"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @elu(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[NEG:%[0-9]+]] = arith.cmpf olt, [[V]], [[Z]] : f32
// CHECK-NEXT:    [[E:%[0-9]+]] = math.exp [[V]] : f32
// CHECK-NEXT:    [[EM1:%[0-9]+]] = arith.subf [[E]], [[ONE]] : f32
// CHECK-NEXT:    [[AE:%[0-9]+]] = arith.mulf [[A]], [[EM1]] : f32
// CHECK-NEXT:    arith.select [[NEG]], [[AE]], [[V]] : f32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// Selu with the default alpha, gamma (ONNX: 1.67326319..., 1.05070102...):
// gamma * (x <= 0 ? alpha * (exp(x) - 1) : x), then Exp: the Selu result goes to a buffer of
// its own, which the Exp nest reads.
func.func @selu_then_exp(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Selu"(%x) {onnx_node_name = "selu"} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "onnx.Exp"(%s) {onnx_node_name = "exp"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @selu_then_exp(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4xf32>, [[Y:%[0-9]+]]: memref<4xf32>)
// CHECK-NEXT:    [[S:%[0-9]+]] = "krnl.alloc"() {onnx_node = "selu"} : () -> memref<4xf32>
// CHECK:         [[V:%[0-9]+]] = "krnl.load"([[X]],
// CHECK-NEXT:    [[G:%[0-9]+]] = arith.constant 1.05070102 : f32
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.constant 1.67326319 : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[LE:%[0-9]+]] = arith.cmpf ole, [[V]], [[Z]] : f32
// CHECK-NEXT:    [[E:%[0-9]+]] = math.exp [[V]] : f32
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    [[EM1:%[0-9]+]] = arith.subf [[E]], [[ONE]] : f32
// CHECK-NEXT:    [[AE:%[0-9]+]] = arith.mulf [[A]], [[EM1]] : f32
// CHECK-NEXT:    [[SEL:%[0-9]+]] = arith.select [[LE]], [[AE]], [[V]] : f32
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.mulf [[G]], [[SEL]] : f32
// CHECK-NEXT:    "krnl.store"([[R]], [[S]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]
// CHECK:         "krnl.define_loops"() {onnx_node = "exp"}
// CHECK:         [[W:%[0-9]+]] = "krnl.load"([[S]],
// CHECK-NEXT:    [[EW:%[0-9]+]] = math.exp [[W]] : f32
// CHECK-NEXT:    "krnl.store"([[EW]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// HardSigmoid(x) = max(0, min(1, alpha * x + beta)), alpha = 0.25, beta = 0.375.
func.func @hard_sigmoid(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.HardSigmoid"(%x) {alpha = 0.25 : f32, beta = 0.375 : f32, onnx_node_name = "hs"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @hard_sigmoid(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[A:%[0-9]+]] = arith.constant 2.500000e-01 : f32
// CHECK-NEXT:    [[B:%[0-9]+]] = arith.constant 3.750000e-01 : f32
// CHECK-NEXT:    [[AX:%[0-9]+]] = arith.mulf [[A]], [[V]] : f32
// CHECK-NEXT:    [[L:%[0-9]+]] = arith.addf [[AX]], [[B]] : f32
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[LO:%[0-9]+]] = arith.maximumf [[L]], [[Z]] : f32
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    arith.minimumf [[LO]], [[ONE]] : f32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// Softplus(x) = log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) (no overflow), log1p(e)
// as log(u) * e / (u - 1) with u = 1 + e, or e where u rounds to 1 (Kahan's: exact for tiny e).
func.func @softplus(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Softplus"(%x) {onnx_node_name = "sp"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @softplus(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    [[ABS:%[0-9]+]] = math.absf [[V]] : f32
// CHECK-NEXT:    [[N:%[0-9]+]] = arith.negf [[ABS]] : f32
// CHECK-NEXT:    [[E:%[0-9]+]] = math.exp [[N]] : f32
// CHECK-NEXT:    [[U:%[0-9]+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT:    [[L:%[0-9]+]] = math.log [[U]] : f32
// CHECK-NEXT:    [[UM1:%[0-9]+]] = arith.subf [[U]], [[ONE]] : f32
// CHECK-NEXT:    [[Q:%[0-9]+]] = arith.divf [[E]], [[UM1]] : f32
// CHECK-NEXT:    [[LQ:%[0-9]+]] = arith.mulf [[L]], [[Q]] : f32
// CHECK-NEXT:    [[EQ:%[0-9]+]] = arith.cmpf oeq, [[U]], [[ONE]] : f32
// CHECK-NEXT:    [[L1P:%[0-9]+]] = arith.select [[EQ]], [[E]], [[LQ]] : f32
// CHECK-NEXT:    [[M:%[0-9]+]] = arith.maximumf [[V]], [[Z]] : f32
// CHECK-NEXT:    [[R:%[0-9]+]] = arith.addf [[M]], [[L1P]] : f32
// CHECK-NEXT:    "krnl.store"([[R]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 4 : i64]]

// -----
// Softsign(x) = x / (1 + |x|); Reciprocal(x) = 1 / x.
func.func @softsign_reciprocal(%x: tensor<2xf32>) -> tensor<2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %s = "onnx.Softsign"(%x) {onnx_node_name = "ss"} : (tensor<2xf32>) -> tensor<2xf32>
  %y = "onnx.Reciprocal"(%s) {onnx_node_name = "rcp"} : (tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
// CHECK-LABEL: func.func @softsign_reciprocal(
// CHECK:         [[V:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    [[ABS:%[0-9]+]] = math.absf [[V]] : f32
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.addf [[ONE]], [[ABS]] : f32
// CHECK-NEXT:    arith.divf [[V]], [[D]] : f32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]
// CHECK:         "krnl.define_loops"() {onnx_node = "rcp"}
// CHECK:         [[W:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:    [[ONE2:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    arith.divf [[ONE2]], [[W]] : f32
// CHECK-NEXT:    "krnl.store"
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64]]

// -----
// Floor, Ceil, Abs, Neg, Sqrt, Log, Tanh: one math/arith op each, in graph order.
func.func @math_chain(%x: tensor<2x2xf32>) -> tensor<2x2xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %a = "onnx.Floor"(%x) {onnx_node_name = "floor"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %b = "onnx.Ceil"(%a) {onnx_node_name = "ceil"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %c = "onnx.Abs"(%b) {onnx_node_name = "abs"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %d = "onnx.Neg"(%c) {onnx_node_name = "neg"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %e = "onnx.Sqrt"(%d) {onnx_node_name = "sqrt"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %f = "onnx.Log"(%e) {onnx_node_name = "log"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = "onnx.Tanh"(%f) {onnx_node_name = "tanh"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
// CHECK-LABEL: func.func @math_chain(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x2xf32>, [[Y:%[0-9]+]]: memref<2x2xf32>)
// CHECK:         "krnl.alloc"() {onnx_node = "floor"} : () -> memref<2x2xf32>
// CHECK:         math.floor
// CHECK:         "krnl.alloc"() {onnx_node = "ceil"}
// CHECK:         math.ceil
// CHECK:         "krnl.alloc"() {onnx_node = "abs"}
// CHECK:         math.absf
// CHECK:         "krnl.alloc"() {onnx_node = "neg"}
// CHECK:         arith.negf
// CHECK:         "krnl.alloc"() {onnx_node = "sqrt"}
// CHECK:         math.sqrt
// CHECK:         "krnl.alloc"() {onnx_node = "log"}
// CHECK:         math.log
// CHECK-NOT:     "krnl.alloc"
// CHECK:         [[T:%[0-9]+]] = math.tanh
// CHECK-NEXT:    "krnl.store"([[T]], [[Y]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 2 : i64]]
