"""The stage driver: the one place that runs compilerkit's pipeline, from an ONNX model (or MLIR
at ONNX IR or Kernel IR level) to any stage, for any target.

    compile_to(stage, source, target="host", opt_level=3, input_shapes=None, max_bytes=None)

    stage        compile_to returns
    "onnx-ir"    the ONNX IR module after passes.onnx_pipeline()
    "kernel-ir"  the Kernel IR module after passes.kernel_pipeline(target, opt_level)
    "llvm-ir"    LLVM IR text from the target's backend, optimised at -O`opt_level`
    "asm"/"ptx"  the target's machine code as text (its `code_stage`: "ptx" on the GPU)
    "obj"        an ELF object file (bytes); CPU targets only
    "lib"        a shared library at `out`, with its C header beside it (host only); the path
    "native"     a CompiledModel: loaded, runnable, with `.stages` and `.timings`

`source` is an ONNX model (a path, bytes or a ModelProto), or MLIR: a ModuleOp, its text, or a
`.mlir` path. The level of MLIR is read from its ops (any `krnl` op, or memref arguments, make
it Kernel IR) and the input is taken as that stage's output: ONNX IR as already optimised (run
`python -m compilerkit.opt` for its passes), Kernel IR as already scheduled (its buffers are
planned if they are not yet, on a copy: a caller's module is only read).

`compilerkit.compile`, `compile_kernel`, `import_onnx`, `optimize_onnx`, `lower`, `to_llvm`, the
command line (`python -m compilerkit`) and the byte-order demo's `compile_with_host_bytes` are
thin calls into `Compilation`, so they cannot drift apart. After Kernel IR the chosen code
generator (CODEGENS; the interface is codegen/interface.py) returns its stage products, and
`Compilation.native` builds the CompiledModel from them, the same for every generator; LLVM's
goes through the target's Backend (`Backend.emit_llvm`), which is how the GPU gets kernels.

Choices that change what is generated are options of this one pipeline (`Compilation(...,
**options)`), not new pipelines: `onnx_passes` and `schedule` replace the ONNX IR passes and
the Kernel IR schedule (a tuned schedule, an algorithm chosen by a pass); `codegen` names the
code generator in CODEGENS; `emitter` swaps the LLVM emitter class (the endianness demo's
HostBytesEmitter); `conv_algorithm` picks how Convs are lowered (lowering/conv_algorithm.py);
`fuse_nests` (None: on for the LLVM code generator) computes elementwise chains in one nest;
`conv_taps` (None: on for the LLVM code generator) lets Convs take the tap schedule.
Every stage's time goes to `.timings` and every pass's to `.pass_timings`.

Verification (the option `verify`; stages.py): xDSL's verifier checks every IR that comes from
outside compilerkit's own passes before it is compiled further (the ONNX IR as imported, the
MLIR given, the IR after passes the caller chose: `onnx_passes`, a `schedule` other than the
target's), and the ONNX IR after its passes (hundredths of a second). The Kernel IR that
compilerkit's own lowering and schedule make is verified too with verify="all": a compilerkit
bug is then a ModelError naming the stage's passes, not code computing wrong answers. Its
verification cost a third of a second of DenseNet-121's 5 s compile, so verify="input" (the
default) leaves it out; the environment's CK_VERIFY, when set, is the default instead, and the
test suite sets CK_VERIFY=all (tests/conftest.py): every compile it runs verifies everything.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections import OrderedDict
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass

from compilerkit.backends.base import Backend, Target, check_target_name, get_backend
from compilerkit.codegen.interface import CodeGenerator, CodegenProducts
from compilerkit.codegen.llvm_codegen import LlvmCodegen, private_copy
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, import_model
from compilerkit.frontend.arguments import (  # noqa: F401 (check_opt_level, header_path: API)
    OptionError,
    check_choice,
    check_flag,
    check_input_shapes,
    check_max_bytes,
    check_opt_level,
    check_path,
    header_path,
    library_paths,
)
from compilerkit.frontend.arguments import _got as option_got
from compilerkit.frontend.control_flow import check_max_unroll
from compilerkit.ir import check_main, parse_ir
from compilerkit.lowering.conv_algorithm import ALGORITHMS
from compilerkit.lowering.conv_algorithm import DEFAULT as DEFAULT_CONV_ALGORITHM
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.passes import kernel_pipeline, onnx_pipeline, parse_pipeline, run_passes
from compilerkit.runtime import check_num_threads
from compilerkit.stages import Stages, verify_ir, verify_level

# In pipeline order. "asm" stands for the target's machine-code stage ("ptx" on the GPU).
STAGES = ("onnx-ir", "kernel-ir", "llvm-ir", "asm", "obj", "lib", "native")
CODE_STAGES = ("asm", "ptx")


class LoopnestCodegen:
    """codegen="loopnest" (compilerkit/loopnest): x86-64 machine code straight from Kernel IR,
    LLVM only for the nodes it leaves (loopnest/driver.py: `finish`, `fallback_llvm_ir`).
    Imported on first use: a compile through LLVM does not pay for loading it."""

    name = "loopnest"

    def generate(self, kmodule, backend, *, opt_level: int, stage: str, options,
                 owned: bool) -> CodegenProducts:
        from compilerkit.loopnest.driver import finish

        return finish(kmodule, backend, opt_level=opt_level, stage=stage, options=options,
                      owned=owned)

    def llvm_ir(self, kmodule, backend, emitter=None, **how) -> str:
        from compilerkit.loopnest.driver import fallback_llvm_ir

        return fallback_llvm_ir(kmodule, backend)


# name -> a CodeGenerator (codegen/interface.py), chosen with codegen=NAME: each turns a planned
# Kernel IR module into the products of the stages after it, and Compilation builds the
# stage or CompiledModel from them the same way for all. A new code generator registers here.
CODEGENS: dict[str, CodeGenerator] = {"llvm": LlvmCodegen(), "loopnest": LoopnestCodegen()}

# name -> fn(target, opt_level) -> Kernel IR schedule passes, chosen with schedule=NAME; a
# package that computes schedules registers here on import (compilerkit.tune: "tuned"), so the
# pipeline does not import it.
NAMED_SCHEDULES: dict = {}


@dataclass
class Options:
    """What a Compilation may vary besides target and -O; the defaults are `compile`'s."""

    input_shapes: dict | None = None  # ONNX input name -> dims, fixing dynamic dimensions
    max_bytes: int | None = None  # the compile budget (default 2 GiB; see frontend.checks)
    max_unroll: int | None = None  # loop iterations unrolled (frontend/control_flow.py)
    onnx_passes: list | str | None = None  # None: passes.onnx_pipeline()
    schedule: list | str | None = None  # Kernel IR passes; None: target.schedule_passes(O)
    codegen: str = "llvm"  # a name in CODEGENS
    conv_algorithm: str = DEFAULT_CONV_ALGORITHM  # lowering/conv_algorithm.py ALGORITHMS
    emitter: type | None = None  # an Emitter subclass for the LLVM codegen
    asm: bool = True  # "native": list the machine-code stage in `.stages` (made on first look)
    overwrite: bool = False  # stage "lib" may replace an existing C header (frontend.arguments)
    verify: str | None = None  # "input" or "all" (the module's docstring); None: CK_VERIFY's
    # fuse-nests (krnl_passes/fuse_nests.py) from -O1; None: the code generator's choice (on for
    # "llvm"; off for "loopnest", which writes and reports code node by node)
    fuse_nests: bool | None = None
    # the Conv tap schedule (lowering/conv_taps.py); None: the code generator's choice (on for
    # "llvm"; off for "loopnest", whose matmul kernels read A by strides only)
    conv_taps: bool | None = None


def signature(func_op) -> tuple[list, list]:
    """([(name, shape, numpy dtype)] of the inputs, the same of the outputs) of a main
    function: Kernel IR's takes the inputs then the output buffers (`num_inputs` says where they
    split); ONNX IR's takes the inputs and returns the outputs."""
    names_in = [a.data for a in func_op.attributes["input_names"].data]
    names_out = [a.data for a in func_op.attributes["output_names"].data]
    args = [a.type for a in func_op.body.block.args]
    if "num_inputs" in func_op.attributes:
        n_in = func_op.attributes["num_inputs"].value.data
        ins, outs = args[:n_in], args[n_in:]
    else:
        ins, outs = args, list(func_op.function_type.outputs.data)
    return ([(n, tuple(t.get_shape()), onnx_d.numpy_dtype(t.element_type))
             for n, t in zip(names_in, ins, strict=True)],
            [(n, tuple(t.get_shape()), onnx_d.numpy_dtype(t.element_type))
             for n, t in zip(names_out, outs, strict=True)])


def stage_of(module: ModuleOp) -> str:
    """"kernel-ir" when `module` holds a `krnl` op or its function takes memrefs, else
    "onnx-ir" (read from the ops, never from printed text)."""
    if any(op.name.startswith("krnl.") for op in module.walk()):
        return "kernel-ir"
    f = main_func(module)  # a ModelError naming the functions unless there is exactly one
    check_main(f)  # what signature() and the backends read: names, opset, element types
    return "kernel-ir" if any(isinstance(a.type, MemRefType) for a in f.body.block.args) \
        else "onnx-ir"


def text_stages(target: str = "host", source_stage: str = "model", asm: bool = True) -> list:
    """The stage names `compile_to("native", ...)` lists in `.stages`, in order, for a source
    at `source_stage` ("model" or "onnx-ir": all of them; "kernel-ir": from Kernel IR on)."""
    code = get_backend(target).code_stage
    names = ["onnx-ir", "kernel-ir", "llvm-ir"] + ([code] if asm else [])
    return names[1:] if source_stage == "kernel-ir" else names


def read_source(source, max_bytes: int | None = None) -> tuple[str, object]:
    """("model", source) for an ONNX model; ("onnx-ir" | "kernel-ir", module) for MLIR (a
    ModuleOp, MLIR text, or a path ending in .mlir), parsed and verified."""
    if isinstance(source, ModuleOp):
        return stage_of(source), source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.endswith(".mlir") and os.path.isfile(check_path("the model path", path)):
            with open(path, encoding="utf-8", errors="replace") as f:
                return _parse_source(f.read(), path, max_bytes)
        if isinstance(source, str) and not os.path.exists(path) and "{" in source:
            return _parse_source(source, "<mlir text>", max_bytes)
    return "model", source


def _parse_source(text: str, where: str, max_bytes: int | None) -> tuple[str, ModuleOp]:
    try:
        module = parse_ir(text, max_bytes=max_bytes)
        module.verify()
    except ModelError as e:
        place = getattr(e, "parse_place", None)
        if place is None:
            raise  # a type above the budget, an unterminated string: already names the line
        line, col, msg = place  # xDSL's parse error: one line, naming the file
        raise ModelError(f"{where}:{line}:{col}: not valid ONNX IR or Kernel IR: {msg}"
                         ) from None
    except Exception as e:  # noqa: BLE001 (xDSL's parse and verify errors)
        lines = [ln for ln in str(e).splitlines() if ln.strip() and ln.strip() != "^"]
        at = lines[0].replace("<unknown>", where) if lines else where
        what = lines[-1].strip() if len(lines) > 1 else type(e).__name__
        raise ModelError(f"{at}: not valid ONNX IR or Kernel IR: {what}") from None
    return stage_of(module), module


# ---- what a caller hands the driver, checked before any work ------------------------------
# The generic checks (types, paths, output files) live in frontend.arguments; these need the
# driver's own tables (Options, CODEGENS, NAMED_SCHEDULES, the pass registry, the conv
# algorithms), so they live here, above everything that uses them.

def check_passes(name: str, value, named=()) -> None:
    """None, a pass pipeline string (every pass known, `python -m compilerkit.opt
    --list-passes`), one of `named` (schedules registered by name), or a list of passes."""
    if value is None or isinstance(value, str) and value in named:
        return
    if isinstance(value, str):
        parse_pipeline(value, name)  # an OptionError naming `name` and the text
        return
    # A pass is what run_passes calls: an xDSL ModulePass, or any object with a `name` and an
    # `apply(ctx, module)` (a test's or a student's own pass).
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(p, ModulePass) or isinstance(getattr(p, "name", None), str)
            and callable(getattr(p, "apply", None)) for p in value):
        raise OptionError(f"{name} must be None, a pass pipeline string or a list of passes "
                          f"(xDSL ModulePass instances, or objects with a name and "
                          f"apply(ctx, module)), got {option_got(value)}")


def check_module(call: str, module, level: str | None = None) -> None:
    """The IR argument of a step function (`optimize_onnx`, `lower`, `to_llvm`,
    `compile_kernel`): an xDSL ModuleOp, at `level` ("onnx-ir" or "kernel-ir") if given."""
    if not isinstance(module, ModuleOp):
        hint = (" (an ONNX model goes to import_onnx or compile first)"
                if not isinstance(module, (int, float)) and module is not None else "")
        raise OptionError(f"{call} takes an IR module (xDSL ModuleOp), got "
                          f"{type(module).__name__}{hint}")
    if level is not None:
        got = stage_of(module)
        if got != level:
            names = {"onnx-ir": "ONNX IR (from import_onnx)", "kernel-ir": "Kernel IR (from "
                     "lower)"}
            raise OptionError(f"{call} takes {names[level]}; this module is {names[got]}")


def check_options(target=None, opt_level=3, **options) -> None:
    """Every option of a Compilation (pipeline.Options' fields, by name), checked before any
    work; raises OptionError naming the first one that is wrong."""
    unknown = sorted(set(options) - set(Options.__dataclass_fields__))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(unknown)}; the options are "
                          f"{', '.join(Options.__dataclass_fields__)}")
    check_opt_level(opt_level)
    if isinstance(target, str):
        try:
            check_target_name(target)
        except ValueError as e:
            raise OptionError(str(e)) from None
    elif target is not None and not isinstance(target, (Target, Backend)):
        raise OptionError(f"target must be a name, a Target or a Backend, got {option_got(target)}")
    check_input_shapes(options.get("input_shapes"))
    check_max_bytes(options.get("max_bytes"))
    if options.get("max_unroll") is not None:
        check_max_unroll(options["max_unroll"])
    check_passes("onnx_passes", options.get("onnx_passes"))
    schedule = options.get("schedule")
    if schedule == "tuned" and "tuned" not in NAMED_SCHEDULES:
        raise OptionError("schedule='tuned' needs `import compilerkit.tune` first (it "
                          "registers the tuned schedule)")
    check_passes("schedule", schedule, NAMED_SCHEDULES)
    if "codegen" in options:
        check_choice("codegen", options["codegen"], CODEGENS)
    if "conv_algorithm" in options:
        check_choice("conv_algorithm", options["conv_algorithm"], ALGORITHMS)
    emitter = options.get("emitter")
    if emitter is not None and not isinstance(emitter, type):
        raise OptionError(f"emitter must be an Emitter subclass, got {option_got(emitter)}")
    for flag in ("asm", "overwrite"):
        if flag in options:
            check_flag(flag, options[flag])
    for flag in ("fuse_nests", "conv_taps"):
        if options.get(flag) is not None:
            check_flag(flag, options[flag])
    verify_level(options.get("verify"))


class Compilation:
    """One compile for one target at one -O: the stage methods below, in pipeline order, and
    what they produced (`.stages`: text, lazily printed; `.timings`: stage -> seconds;
    `.pass_timings`: [(stage, pass name, seconds)]). `run(source, stage)` chains them."""

    def __init__(self, target: str | Target | Backend = "host", opt_level: int = 3, **options):
        # Every option's type and value, before any work: an OptionError naming it.
        check_options(target, opt_level, **options)
        self.opt_level = int(opt_level)
        self.options = Options(**options)
        # The backend is made when first needed (optimize_onnx needs none).
        self._backend = target if isinstance(target, Backend) else None
        self._target = target
        self.stages = Stages()
        self.timings = OrderedDict()
        self.pass_timings = []
        self.provenance = None  # provenance.Provenance of the latest run
        self.later = None  # llvm_codegen.LaterStages of the latest JIT compile

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = get_backend(self._target)
        return self._backend

    @property
    def target(self) -> Target:
        return self._target if isinstance(self._target, Target) else self.backend.target

    @property
    def verify_all(self) -> bool:
        """Whether the Kernel IR of compilerkit's own passes is verified (option verify)."""
        return verify_level(self.options.verify) == "all"

    def stage_name(self, stage: str) -> str:
        """`stage` checked for this target: "asm"/"ptx" become the target's code stage; a
        stage the target cannot produce is an OptionError saying what to ask for instead."""
        name = self.target.name
        if stage in CODE_STAGES:
            code = self.backend.code_stage
            if stage != code and stage == "ptx":
                raise OptionError(f"stage 'ptx' is the GPU's; target {name!r} emits 'asm'")
            return code
        if stage not in STAGES:
            raise OptionError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)} "
                              "('ptx' on the GPU)")
        if stage == "obj" and not hasattr(self.backend, "object_code"):
            raise OptionError(f"target {name!r} has no object file; its machine code is "
                              f"{self.backend.code_stage!r} text")
        if stage == "lib" and name != "host":
            raise OptionError(f"a shared library links with the host's C compiler; for target "
                              f"{name!r} emit an object file ('obj', --emit obj)")
        return stage

    # ---- reading the input -----------------------------------------------------------------
    def read(self, source) -> tuple[str, object]:
        """read_source(source) within this compile's max_bytes."""
        return read_source(source, self.options.max_bytes)

    # ---- the stages ------------------------------------------------------------------------
    def _passes(self, module, passes, stage: str, unverified=(), verify: bool = True) -> None:
        """`passes` on `module` in place, each timed; the module verified after the last one
        if `verify`."""
        mark = [time.perf_counter()]

        def timed(p, _module):
            now = time.perf_counter()
            self.pass_timings.append((stage, p.name, now - mark[0]))
            mark[0] = now

        run_passes(module, passes, after_each=timed, verify="last" if verify else "none",
                   unverified=unverified)

    def import_model(self, model) -> ModuleOp:
        """ONNX model -> ONNX IR as imported (verified)."""
        t = time.perf_counter()
        module = import_model(model, self.options.input_shapes, self.options.max_bytes,
                              self.options.max_unroll)
        verify_ir(module, "import")
        self.pass_timings.append(("onnx-ir", "import", time.perf_counter() - t))
        return module

    def optimize(self, module) -> ModuleOp:
        """The ONNX IR passes, in place."""
        passes = self.options.onnx_passes
        if passes is None:
            passes = onnx_pipeline()
        elif isinstance(passes, str):
            passes = parse_pipeline(passes)
        self._passes(module, passes, "onnx-ir")
        return module

    def lower(self, module) -> ModuleOp:
        """ONNX IR -> a new, scheduled and planned Kernel IR module (`module` is unchanged),
        verified after lowering and schedule if they are not all compilerkit's own (a
        caller's `schedule`) or with verify="all"."""
        from compilerkit.lowering import LowerToKrnlPass, lower_to_krnl

        schedule = self.options.schedule
        if isinstance(schedule, str) and schedule in NAMED_SCHEDULES:
            schedule = NAMED_SCHEDULES[schedule](self.target, self.opt_level)
        elif isinstance(schedule, str):
            schedule = parse_pipeline(schedule)
        fuse, taps = self.options.fuse_nests, self.options.conv_taps
        if fuse is None:
            fuse = self.options.codegen == "llvm"
        if taps is None:
            taps = self.options.codegen == "llvm"
        lowering, *rest = kernel_pipeline(self.target, self.opt_level, schedule,
                                          self.options.conv_algorithm, fuse, taps)
        verify = self.verify_all or self.options.schedule is not None
        assert isinstance(lowering, LowerToKrnlPass)
        t = time.perf_counter()
        # The lowering pass's out-of-place form: `module` stays ONNX IR, so the "onnx-ir"
        # stage can still be printed from it after this.
        kmodule = lower_to_krnl(module, lowering.conv_algorithm, lowering.lanes, lowering.taps)
        if not rest and verify:
            verify_ir(kmodule, f"pass {lowering.name!r}")
        self.pass_timings.append(("kernel-ir", lowering.name, time.perf_counter() - t))
        # One verification for the whole stage (lowering and schedule): each took a tenth of
        # a real model's compile.
        self._passes(kmodule, rest, "kernel-ir", unverified=[lowering.name], verify=verify)
        # Lowering clamps the indices it computes from data (Gather); one that does not gets
        # a run-time check here instead of a wild access (a no-op walk otherwise)
        from compilerkit.krnl_passes.guard_indices import guard_indices

        guard_indices(kmodule)
        return kmodule

    def planned(self, kmodule) -> ModuleOp:
        """Kernel IR given as input: verified, and completed on a copy (a caller's module is
        only read) with what it lacks: the target's mapping (Target.completion_passes) and the
        buffer plan (verified again after them with verify="all")."""
        from compilerkit.krnl_passes.guard_indices import GuardIndicesPass, unguarded
        from compilerkit.krnl_passes.plan_buffers import PlanBuffersPass

        verify_ir(kmodule, "hand-edited Kernel IR")
        passes = list(self.target.completion_passes(kmodule))
        if "arena_bytes" not in main_func(kmodule).attributes:
            # (a hand-edited concat_slab tag is not trusted to place a buffer)
            passes.append(PlanBuffersPass(slabs=False))
        if unguarded(kmodule):  # indices computed from data: checked at run time
            passes.append(GuardIndicesPass())
        if not passes:
            return kmodule
        copy = private_copy(kmodule)
        self._passes(copy, passes, "kernel-ir", verify=self.verify_all)
        return copy

    # ---- after Kernel IR: the code generator's products, then the stage asked for ----------
    def emit(self, kmodule, **how) -> str:
        """Kernel IR -> unoptimised LLVM IR text, by the chosen codegen through the backend."""
        return CODEGENS[self.options.codegen].llvm_ir(kmodule, self.backend,
                                                      self.options.emitter, **how)

    def generate(self, kmodule, stage: str, owned: bool = True) -> CodegenProducts:
        """The chosen code generator's products for the stages up to `stage` (CODEGENS),
        recorded here: the "llvm-ir" text and every time it took. `owned`: `kmodule` is this
        compile's own (not a caller's module)."""
        self.later = None
        products = CODEGENS[self.options.codegen].generate(
            kmodule, self.backend, opt_level=self.opt_level, stage=stage, options=self.options,
            owned=owned)
        self.later = products.later
        self.timings.update(products.timings)
        self.pass_timings.extend(products.pass_timings)
        self.stages.set("llvm-ir", products.llvm_ir)
        return products

    def finish(self, kmodule, stage: str, out: str | None = None, owned: bool = True):
        """`kmodule` through the code generator to `stage` (after "kernel-ir"); returns that
        stage's product."""
        products = self.generate(kmodule, stage, owned)
        if stage == "llvm-ir":
            return products.llvm_ir  # text: a JIT's is made on first look only for "native"
        if stage == self.backend.code_stage:
            return products.code()
        if stage == "obj":
            return products.obj()
        if stage == "lib":
            return self.lib(products, kmodule, out)
        return self.native(kmodule, products)

    def lib(self, products: CodegenProducts, kmodule, out: str) -> str:
        """A shared library at `out` and its C header at header_path(out); returns `out`."""
        from compilerkit.backends.host import c_header, uses_threads, write_shared_library

        out, header = library_paths(out, overwrite=self.options.overwrite)
        threads = uses_threads(products.llvm_module)
        write_shared_library(products.obj(), out, threads=threads)
        ins, outs = signature(main_func(kmodule))
        # The header lists the tensors' names in a C comment: a name holding "*/" would end
        # it (and a newline would break its layout); they may be any Unicode.
        def shown(name):
            return " ".join(name.replace("*/", "*\\/").split()) if name.strip() else repr(name)

        with open(header, "w", encoding="utf-8") as fh:
            fh.write(c_header([(shown(n), s, d.name) for n, s, d in ins],
                              [(shown(n), s, d.name) for n, s, d in outs]))
        return out

    def native(self, kmodule, products: CodegenProducts) -> CompiledModel:
        """The one place a CompiledModel is built, whichever code generator made `products`:
        the code loaded, holding this compile's stages (the machine code listed on first look
        unless asm=False), times and provenance (which ONNX node each function of the code
        came from), plus the generator's own attributes (loopnest's `.loopnest` report)."""
        backend = self.backend
        if products.code is not None:
            self.stages.set(backend.code_stage, products.code)
        f = main_func(kmodule)
        inputs, outputs = signature(f)
        session = products.load(inputs, outputs)
        # The machine-code stage's time: what generating and loading took beyond the stages
        # the generator timed itself.
        self.timings[backend.code_stage] = (time.perf_counter() - products.started
                                            - sum(products.timings.values()))
        cm = CompiledModel(self.stages, self.timings, session, inputs, outputs,
                           session.arena_bytes, f.attributes["naive_bytes"].value.data,
                           products.llvm_module, backend, self.opt_level, self.pass_timings)
        for name, value in products.attributes.items():
            setattr(cm, name, value)
        cm.provenance = self._provenance(kmodule, products.functions)
        return cm

    def _provenance(self, kmodule, functions: dict | None):
        """This compile's Provenance (a new one for a `kmodule` this run did not make), with
        the code's functions -> ONNX nodes."""
        from compilerkit.measure.provenance import Provenance

        if self.provenance is None or self.provenance.modules["kernel-ir"] is not kmodule:
            self.provenance = Provenance(None, kmodule)  # native() called on its own
        self.provenance.functions = dict(functions) if functions is not None else None
        return self.provenance

    def _ir_stage(self, stage: str, module, now: bool = False) -> None:
        """The "onnx-ir" / "kernel-ir" text of `module`, printed once through the provenance
        (which records where each node's lines are): on first access, or `now` for a
        caller's module that may change after this call."""
        from compilerkit.measure.provenance import Provenance

        if self.provenance is None:
            self.provenance = Provenance()
        self.provenance.modules[stage] = module
        prov = self.provenance
        self.stages.set(stage, prov.text(stage) if now else lambda: prov.text(stage))

    def run(self, source, stage: str = "native", out: str | None = None):
        """`source` through every stage up to `stage`; returns that stage's product (see the
        module's docstring)."""
        with caller_objects_frozen() as owns_freeze:
            return self._run(source, stage, out, owns_freeze)

    def _run(self, source, stage: str, out: str | None, owns_freeze: bool):
        stage = self.stage_name(stage)
        level, thing = self._checked_source(source, stage, out)
        self.provenance = None
        # A caller's module may change after this call: its text is printed now. The modules
        # this compile makes (or parses) are private and printed on first access.
        caller = isinstance(source, ModuleOp)
        module = self._onnx_ir(level, thing, caller)
        if stage == "onnx-ir":
            return module
        kmodule = self._kernel_ir(level, module, caller)
        if stage == "kernel-ir":
            return kmodule
        if owns_freeze:
            # The IR made so far lives until the compile ends: out of the collector's full
            # passes too (one landed in a single node's code generation and took 24 ms)
            gc.freeze()
        return self.finish(kmodule, stage, out, owned=not (caller and kmodule is module))

    def _checked_source(self, source, stage: str, out: str | None) -> tuple[str, object]:
        """read(source), refused before any compiling where the request cannot be met."""
        if stage == "lib":  # before compiling: neither file may replace one it should not
            library_paths(out, reads=(source,), overwrite=self.options.overwrite)
        level, thing = self.read(source)
        if level != "model" and self.options.input_shapes:
            raise OptionError("input_shapes fixes the inputs of an ONNX model; an MLIR input's "
                              "shapes are in its function type")
        if stage == "onnx-ir" and level == "kernel-ir":
            raise OptionError("the input is Kernel IR: it has no ONNX IR stage")
        return level, thing

    def _onnx_ir(self, level: str, thing, caller: bool):
        """The "onnx-ir" stage: a model imported and optimised, or the ONNX IR given (verified
        when it is a caller's module); Kernel IR given passes through."""
        if level == "model":
            t = time.perf_counter()
            module = self.optimize(self.import_model(thing))
            self._ir_stage("onnx-ir", module)
            self.timings["onnx-ir"] = time.perf_counter() - t
            return module
        if level == "onnx-ir":
            if caller:
                verify_ir(thing, "building the ONNX IR given")
            self._ir_stage("onnx-ir", thing, now=caller)
        return thing

    def _kernel_ir(self, level: str, module, caller: bool):
        """The "kernel-ir" stage: `module` lowered, or the Kernel IR given, completed (on a
        copy if it lacks anything)."""
        if level == "kernel-ir":
            kmodule = self.planned(module)  # a completed copy, or `module` itself
            self._ir_stage("kernel-ir", kmodule, now=caller and kmodule is module)
            return kmodule
        t = time.perf_counter()
        kmodule = self.lower(module)
        self.timings["kernel-ir"] = time.perf_counter() - t
        self._ir_stage("kernel-ir", kmodule)
        return kmodule


# During a compile, a full collection every this many generation-1 collections (CPython's
# default is 10; see caller_objects_frozen).
FULL_COLLECTION_EVERY = 100


@contextlib.contextmanager
def caller_objects_frozen():
    """Keep the caller's objects out of the garbage collector's full passes while compiling,
    and make those passes rarer. A compile makes about 10^6 short-lived IR objects, which
    trigger a few full (generation 2) collections; each one walks every object of the process,
    so the same MobileNetV2 compile took 0.04 s of collection in a fresh process and 0.6 s
    beside two compiled models (480k objects), a third of the 3 s target. gc.freeze() moves
    what exists now to the permanent generation (still alive, never walked) until
    gc.unfreeze(). Frozen objects no longer count as long-lived, so CPython's rule that a full
    collection waits until the objects promoted since the last one are a quarter of the
    long-lived ones always held: every tenth generation-1 collection became a full one over
    all of the compile's IR (DenseNet-121: six, 0.2 s of its 4.5 s). The third threshold is
    FULL_COLLECTION_EVERY until the compile ends (the compile's IR is garbage only when it
    ends; its peak memory did not grow). Left alone when the caller froze objects itself
    (their unfreeze is theirs to do)."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield False
        return
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(*thresholds[:2], max(thresholds[2], FULL_COLLECTION_EVERY))
    try:
        yield True  # the compile may freeze more of its own objects: all are unfrozen here
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def compile_to(stage: str, source, target: str | Target | Backend = "host", opt_level: int = 3,
               input_shapes=None, max_bytes=None, out: str | None = None, **options):
    """`source` (ONNX model or MLIR, see the module's docstring) compiled for `target` at
    -O`opt_level` up to `stage`; returns that stage's product. `out` is the library's path for
    stage "lib". `options` are Options' fields (onnx_passes, schedule, codegen, emitter, asm,
    verify)."""
    c = Compilation(target, opt_level, input_shapes=input_shapes, max_bytes=max_bytes,
                    **options)
    return c.run(source, stage, out=out)


class CompiledModel:
    """A compiled model: `.run(*arrays) -> list[np.ndarray]`, `.stages` (stage -> text; the IR
    texts of `compile` and the machine code ("asm", or "ptx" on the GPU) are generated on first
    access), `.timings` (stage -> seconds; the machine-code entry times loading the code),
    `.pass_timings` ([(stage, pass, seconds)]), `.arena_bytes` / `.naive_bytes` (buffer
    planning)."""

    def __init__(self, stages, timings, session, inputs, outputs, arena_bytes, naive_bytes,
                 llvm_module, backend, opt_level, pass_timings=None):
        self.stages = stages
        self.timings = timings
        self.session = session
        self.inputs = inputs
        self.outputs = outputs
        self.arena_bytes = arena_bytes
        self.naive_bytes = naive_bytes
        self.llvm_module = llvm_module
        self.backend = backend
        self.opt_level = opt_level
        self.pass_timings = pass_timings if pass_timings is not None else []
        self.num_threads = None  # threads of the parallel loops; None: the machine's cores

    def close(self) -> None:
        """Release the native objects now (idempotent): the loaded code (JIT engine, emulator
        instance, GPU module) once runs in progress have returned, then the LLVM module(s).
        A run after it is a RuntimeError. Without close(), each owner releases them when the
        model is dropped, in the same order (backends/lifetimes.py), garbage collector or
        not; `with compile(...) as cm:` closes on leaving the block."""
        close = getattr(self.session, "close", None)
        if close is not None:
            close()
        close = getattr(self.llvm_module, "close", None)
        if close is not None:
            close()  # an engine's module only detaches: the engine freed it

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, *arrays, num_threads=None):
        """Run on numpy arrays; returns the outputs. Raises `InputError` for arguments that do
        not match the signature and `RunError` for data the code cannot compute with (a
        Gather index out of range, integer division by zero). Thread-safe: on the host each
        call takes its own arena from a pool (see runtime.Session); emulated and GPU runs of
        one model take turns. `num_threads` overrides `.num_threads` for this call (the
        answer is the same for every count; the GPU and the emulated targets ignore it)."""
        if num_threads is None:
            num_threads = self.num_threads
        if getattr(self.session, "takes_num_threads", False):
            return self.session.run(*arrays, num_threads=num_threads)  # it checks the count
        check_num_threads(num_threads)
        return self.session.run(*arrays)

    __call__ = run

    def __repr__(self):
        return (f"CompiledModel(inputs={self.inputs}, outputs={self.outputs}, "
                f"arena={self.arena_bytes} B vs naive {self.naive_bytes} B)")


__all__ = ["compile_to", "Compilation", "CompiledModel", "Options", "STAGES", "CODEGENS",
           "signature", "stage_of", "text_stages", "header_path"]
