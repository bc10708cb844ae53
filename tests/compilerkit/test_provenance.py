"""Op provenance from the IR and from codegen's record of which node each function came from.

Checked on a 2-node model (MatMul then Relu) whose listings are small enough to count by hand,
on hand-written asm and PTX snippets with hand-made function records, and on the datasets and
light models against facts found independently of measure/provenance.py (the tags a text
search finds, the ONNX file's node names, the functions the listing defines)."""

import re

import mlsys_datasets
import numpy as np
import onnx
import pytest
from ckhelpers import make_model
from onnx import helper

import compilerkit as ck
from compilerkit.backends import get_backend
from compilerkit.codegen.emit import emit_host
from compilerkit.codegen.gpu import emit_gpu
from compilerkit.dialects import krnl
from compilerkit.measure.conformance import light_model_path, random_inputs
from compilerkit.measure.provenance import (
    Provenance,
    asm_function_lines,
    function_ranges,
    kernel_owners,
    listing,
    merge,
    node_of_symbol,
    provenance,
    ptx_function_lines,
)
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.views import ir_view_data


def two_nodes():
    x = np.zeros((2, 4), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    return make_model(nodes, [("x", x)], ["y"], [("w", np.ones((4, 3), np.float32))])


def build(model, target="host", input_shapes=None):
    """Every stage by the step functions: (Provenance, stage texts, emitter)."""
    backend = get_backend(target)
    m = ck.import_onnx(model, input_shapes)
    ck.optimize_onnx(m)
    k = ck.lower(m, 3, backend.target)
    e = (emit_host if target != "gpu" else emit_gpu)(k, backend.target)
    text, mod = backend.optimize(str(e.module), 3)
    stages = {"onnx-ir": ck.print_ir(m), "kernel-ir": ck.print_ir(k), "llvm-ir": text,
              backend.code_stage: backend.assembly(mod, 3)}
    return Provenance(m, k, e.functions), stages, e


@pytest.fixture(scope="module")
def built():
    return build(two_nodes())


def lines_of(text, ranges):
    rows = text.splitlines()
    return [rows[n - 1] for a, b in ranges for n in range(a, b + 1)]


def test_codegen_records_the_node_of_each_function(built):
    prov, stages, e = built
    assert {f: n for f, n in e.functions.items() if n} == {"main_graph_1_mm": "mm",
                                                          "main_graph_2_relu": "relu"}
    # Everything else it defines belongs to no node: the entry, its helpers, the micro-kernel.
    defined = set(re.findall(r'^define [^@]*@"?([\w.$]+)"?\(', str(e.module), re.M))
    assert defined == set(e.functions)
    # the micro-kernel's lane count is the host's: v8 with AVX2, v16 with AVX-512
    (kernel,) = [f for f in e.functions if re.fullmatch(r"ck_matmul_f32_v\d+", f)]
    assert e.functions["main_graph"] is None and e.functions[kernel] is None


def test_listing_is_print_ir_and_spans_start_at_the_op(built):
    prov, stages, _ = built
    for stage in ("onnx-ir", "kernel-ir"):
        lst = listing(prov.modules[stage])
        assert lst.text == stages[stage]
        rows = lst.text.splitlines()
        for op, (a, b) in lst.spans.items():
            assert a <= b and op.name in rows[a - 1], (op.name, rows[a - 1])


def test_onnx_ir_one_line_per_node(built):
    prov, stages, _ = built
    p = prov.ranges(stages)
    assert list(p) == ["mm", "relu"]
    assert prov.nodes == [{"name": "mm", "op": "MatMul"}, {"name": "relu", "op": "Relu"}]
    # builtin.module, func.func, the weight's onnx.Constant, then the two nodes.
    assert p["mm"]["onnx-ir"] == [(4, 4)] and p["relu"]["onnx-ir"] == [(5, 5)]


def test_kernel_ir_ranges_cover_each_nodes_ops(built):
    prov, stages, _ = built
    text = stages["kernel-ir"]
    p = prov.ranges(stages)
    # mm: its alloc (line 4) and the wrapped matmul nest (it starts from zeros itself: no
    # fill nest), which closes on line 18; relu: handles, two unroll hints, one nest (19-28).
    assert p["mm"]["kernel-ir"] == [(4, 18)]
    assert p["relu"]["kernel-ir"] == [(19, 28)]
    mm = lines_of(text, p["mm"]["kernel-ir"])
    assert '"krnl.alloc"' in mm[0] and 'onnx_node = "mm"' in mm[0]
    assert '"krnl.matmul"' in "\n".join(mm)
    relu = lines_of(text, p["relu"]["kernel-ir"])
    assert sum('"krnl.unroll"' in t for t in relu) == 2  # untagged, but between relu's ops
    assert "arith.maximumf" in "\n".join(relu) and relu[-1].strip().startswith("})")
    # The global (a Constant, no node) and the return belong to nobody.
    owners = {op.name: node for op, node in kernel_owners(prov.modules["kernel-ir"])}
    assert owners["krnl.global"] is None and owners["func.return"] is None
    assert '"krnl.global"' in text.splitlines()[2]


def test_llvm_and_asm_ranges_are_the_outlined_functions_and_their_calls(built):
    prov, stages, _ = built
    p = prov.ranges(stages)
    for node, fn in (("mm", "main_graph_1_mm"), ("relu", "main_graph_2_relu")):
        llvm = lines_of(stages["llvm-ir"], p[node]["llvm-ir"])
        assert llvm[0].strip().startswith("tail call") and f"@{fn}(" in llvm[0]  # the call
        assert llvm[1].startswith("define") and f"@{fn}(" in llvm[1]
        assert llvm[-1] == "}"
        assert not any("define" in t and fn not in t for t in llvm)  # not the micro-kernel
        asm = lines_of(stages["asm"], p[node]["asm"])
        # main_graph loads its address (into a register of LLVM's choosing)
        assert re.fullmatch(rf"movabsq\t\${fn}, %r\w+", asm[0].strip())
        assert f"{fn}:" in asm and asm[-1].strip().startswith(".size")
        assert "ck_matmul_f32_v8:" not in asm


def test_kernel_ir_tags_survive_a_round_trip(built):
    _, stages, _ = built
    text = stages["kernel-ir"]
    module = ck.parse_ir(text)
    assert ck.print_ir(module) == text
    allocs = [op for op in module.walk() if isinstance(op, krnl.AllocOp)]
    assert [a.attributes["onnx_node"].data for a in allocs] == ["mm"]
    # Saved IR text maps as the modules do (it is parsed back, not scanned).
    again = Provenance.from_texts({s: stages[s] for s in ("onnx-ir", "kernel-ir")})
    p, q = again.ranges({"kernel-ir": text}), built[0].ranges({"kernel-ir": text})
    assert p == q


ASM = """\t.text
\t.globl\tmain_graph
\t.type\tmain_graph,@function
main_graph:
\tmovabsq\t$main_graph_1_conv_a, %rax
\tcallq\t*%rax
\tmovabsq\t$main_graph_2_nest_0, %rax
\tcallq\t*%rax
.Lfunc_end0:
\t.size\tmain_graph, .Lfunc_end0-main_graph
\t.type\tmain_graph_1_conv_a,@function
main_graph_1_conv_a:
.LBB1_1:
\tretq
.Lfunc_end1:
\t.size\tmain_graph_1_conv_a, .Lfunc_end1-main_graph_1_conv_a
\t.type\tmain_graph_2_nest_0,@function
main_graph_2_nest_0:
\tretq
.Lfunc_end2:
\t.size\tmain_graph_2_nest_0, .Lfunc_end2-main_graph_2_nest_0
g_const:
\t.long\t1
"""


def test_asm_functions_and_references():
    assert asm_function_lines(ASM) == {"main_graph": (4, 10), "main_graph_1_conv_a": (12, 16),
                                       "main_graph_2_nest_0": (18, 21)}
    # The node comes from codegen's record, not from the name: "nest_0" is conv/b's.
    functions = {"main_graph": None, "main_graph_1_conv_a": "conv/a",
                 "main_graph_2_nest_0": "conv/b"}
    p = function_ranges("asm", ASM, functions)
    # The function, its .type line and the movabsq in main_graph; not .LBB or data labels.
    assert p == {"conv/a": [(5, 5), (11, 16)], "conv/b": [(7, 7), (17, 21)]}


PTX = """//
// .globl\tmain_graph_1_relu_0
.visible .entry main_graph_1_relu_0(
\t.param .u64 main_graph_1_relu_0_param_0
)
.reqntid 64, 1, 1
{
\tret;
}
.visible .entry main_graph_2_relu2(
)
{
}
"""


def test_ptx_kernels_map_to_the_recorded_nodes():
    assert ptx_function_lines(PTX) == {"main_graph_1_relu_0": (3, 9),
                                       "main_graph_2_relu2": (10, 13)}
    p = function_ranges("ptx", PTX, {"main_graph_1_relu_0": "relu",
                                     "main_graph_2_relu2": "relu2"})
    assert p["relu"] == [(2, 9)]   # the .globl comment names it too
    assert p["relu2"] == [(10, 13)]


def test_names_that_look_alike_are_told_apart_by_the_record():
    # Codegen cuts labels to 40 characters and maps "/" to "_": "a/b" and "a_b" give one label;
    # the record keeps them apart where the old name matching gave both nodes both functions.
    functions = {"main_graph_1_a_b": "a/b", "main_graph_2_a_b": "a_b"}
    assert node_of_symbol("main_graph_1_a_b", functions) == "a/b"
    assert node_of_symbol("main_graph_2_a_b", functions) == "a_b"
    # LLVM's derived copies and Mach-O's underscore map to the function they copy.
    assert node_of_symbol("main_graph_1_a_b.constprop.0", functions) == "a/b"
    assert node_of_symbol("_main_graph_2_a_b", functions) == "a_b"
    assert node_of_symbol("ck_matmul_f32_v8", functions) is None


def test_merge():
    assert merge([5, 3, 4, 4, 9]) == [(3, 5), (9, 9)]
    assert merge([]) == []


def test_view_data_for_a_model(built):
    prov, stages, _ = built
    data = ir_view_data(stages, provenance=prov)
    assert list(data["stages"]) == ["onnx-ir", "kernel-ir", "llvm-ir", "asm"]
    assert data["nodes"] == [{"name": "mm", "op": "MatMul"}, {"name": "relu", "op": "Relu"}]
    assert data["ranges"]["relu"]["kernel-ir"] == [(19, 28)]


def test_what_provenance_cannot_know_is_an_error(built):
    prov, stages, _ = built
    with pytest.raises(ValueError, match="record of which node"):
        Provenance(prov.modules["onnx-ir"], prov.modules["kernel-ir"]).ranges(
            {"llvm-ir": stages["llvm-ir"]})
    with pytest.raises(ValueError, match="not the printout"):
        prov.ranges({"kernel-ir": stages["kernel-ir"].replace("krnl.unroll", "krnl.unroll ")})
    with pytest.raises(ValueError, match="no onnx-ir module"):
        Provenance(None, prov.modules["kernel-ir"], {}).ranges({"onnx-ir": ""})
    with pytest.raises(ValueError, match="CompiledModel or a mapping"):
        provenance(42)


def test_a_kernel_ir_compile_names_its_nodes_from_the_tags(built):
    prov, stages, e = built
    kprov = Provenance(None, prov.modules["kernel-ir"], e.functions)
    assert kprov.nodes == [{"name": "mm", "op": None}, {"name": "relu", "op": None}]
    assert kprov.ranges({"kernel-ir": stages["kernel-ir"]})["relu"]["kernel-ir"] == [(19, 28)]


# ---- every datasets model and some light models, against independent facts ---------------------

def _proto_nodes(path) -> set[str]:
    """Node names as the ONNX file gives them (the frontend's OpType_index for unnamed ones)."""
    g = onnx.load(path, load_external_data=False).graph
    return {n.name or f"{n.op_type}_{k}" for k, n in enumerate(g.node)}


def check_against_facts(path, target):
    feeds = random_inputs(path)
    prov, stages, e = build(path, target, {n: list(a.shape) for n, a in feeds})
    p = prov.ranges(stages)
    names = _proto_nodes(path)
    # Nodes are the file's nodes (or the pieces decomposition cut one into).
    for node in p:
        assert node in names or re.sub(r"_(mul|add)$", "", node) in names, node
    kmodule = prov.modules["kernel-ir"]
    tagged = {}
    for op in main_func(kmodule).body.block.ops:
        tag = op.attributes.get("onnx_node")
        if tag is not None:
            tagged.setdefault(tag.data, []).append(op)
    kir = stages["kernel-ir"]
    for node, ops in tagged.items():
        assert node in p, node  # every Kernel IR tag names a node of the model
        # A text search finds the tag on exactly as many lines of the node's ranges as the node
        # has top-level ops, and no other node's tag there.
        mine = lines_of(kir, p[node]["kernel-ir"])
        assert sum(f'onnx_node = "{node}"' in t for t in mine) >= len(ops)
        assert not any(re.search(r'onnx_node = "', t) and f'onnx_node = "{node}"' not in t
                       for t in mine)
        # A node with loops has a function, and each of its functions is in its ranges.
        if any(isinstance(op, krnl.IterateOp) for op in ops):
            fns = [f for f, n in e.functions.items() if node in _nodes(n)]
            assert fns, f"node {node!r} has loops but no function"
            llvm = lines_of(stages["llvm-ir"], p[node]["llvm-ir"])
            code = lines_of(stages[prov_code(stages)], p[node][prov_code(stages)])
            for fn in fns:
                assert any(t.startswith("define") and f"@{fn}(" in t for t in llvm), fn
                assert any(t.startswith(f"{fn}:") or f".entry {fn}(" in t for t in code), fn
    assert {x for n in e.functions.values() for x in _nodes(n)} <= set(tagged)


def _nodes(entry) -> tuple:
    """The nodes of an Emitter.functions entry (None, a node, or the nodes sharing it)."""
    return entry if isinstance(entry, tuple) else (entry,) if entry else ()


def prov_code(stages):
    return "ptx" if "ptx" in stages else "asm"


@pytest.mark.parametrize("name", mlsys_datasets.ONNX_MODELS)
def test_datasets_models_against_independent_facts(name):
    check_against_facts(str(mlsys_datasets.onnx_path(name)), "host")


@pytest.mark.parametrize("name,target", [("zfnet512", "host"), ("squeezenet", "gpu")])
def test_light_models_against_independent_facts(name, target):
    check_against_facts(light_model_path(name), target)


def test_every_gpu_kernel_has_its_node():
    # The inner kernels of a split Conv are named main_graph_<n>_nest_<k>: their name does not
    # say the node, the record does.
    path = str(mlsys_datasets.onnx_path("lenet"))
    prov, stages, e = build(path, "gpu", {"input": [1, 28, 28, 1]})
    assert all(launch.node == e.functions[launch.name] and launch.node for launch in e.launches)
    nests = [launch for launch in e.launches if "_nest_" in launch.name]
    assert nests and all(launch.node.endswith("BiasAdd") for launch in nests)
    p = prov.ranges(stages)
    for launch in nests:
        assert any(f".entry {launch.name}(" in t
                   for t in lines_of(stages["ptx"], p[launch.node]["ptx"]))


@pytest.mark.parametrize("target", ["host", "gpu"])
def test_a_nest_lowering_added_on_its_own_belongs_to_no_node(target):
    # conv_bn_pool ends in a Flatten view copied into the output buffer by an untagged nest;
    # its function must not be given to the node emitted before it (GlobalAveragePool).
    path = str(mlsys_datasets.onnx_path("conv_bn_pool"))
    prov, stages, e = build(path, target)
    untagged = [op for op in main_func(prov.modules["kernel-ir"]).body.block.ops
                if isinstance(op, krnl.IterateOp) and "onnx_node" not in op.attributes]
    assert len(untagged) == 1
    copies = [f for f in e.functions if re.fullmatch(r"main_graph_\d+_nest", f)]
    assert len(copies) == 1 and e.functions[copies[0]] is None
    assert "gap" in e.functions.values()


def test_real_ptx_of_a_gpu_compile_maps_every_node():
    # target="gpu" produces PTX on a machine without a GPU; every node's kernels are found in
    # it, and the lines found for a node really are its kernel's entry and body.
    model = ck.compile(two_nodes(), target="gpu", opt_level=3)
    p = provenance(model)
    ptx = model.stages["ptx"]
    for node in ("mm", "relu"):
        lines = lines_of(ptx, p[node]["ptx"])
        assert any(".entry" in line and f"_{node}" in line for line in lines), node
    relu_body = "\n".join(lines_of(ptx, p["relu"]["ptx"]))
    assert "max.f32" in relu_body or "setp" in relu_body  # a Relu computes a max or a compare
