"""``verify(source, options) -> VerifyResult``: compare every ncnn layer with PyTorch.

The run:

1. choose inputs (user ``.npy`` files, the package's sample inputs, or seeded random ones);
2. convert the program (or take the user's ``.ncnn.param``/``.ncnn.bin``, still converting the
   program when possible to learn which blob holds which ATen value);
3. run the program in PyTorch once, capturing every ATen value the blobs hold (:mod:`.torch_run`:
   straight from the decoded graph, :mod:`.torch_direct`, or through ``torch.export.load``);
4. run the ncnn model once, reading every blob (:mod:`.ncnn_run`), and compare each blob with its
   ATen value in the blob's layout (:mod:`.mapping`, :mod:`.layout`, :mod:`.metrics`);
5. run each compared layer again in isolation, fed PyTorch's values of its inputs, so a layer is
   blamed only for its own error, never for one it inherited — all layers in a few ncnn runs
   (:mod:`.isolate`).

torch and ncnn are imported only here, lazily.
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import ConversionError
from ..ir import Graph, Operator
from ..records import record
from .custom_layers import CustomRun
from .errors import VerifyError, check_cancel, require
from .inputs import choose_inputs
from .isolate import plan_isolation
from .layout import as_batch, as_blob
from .mapping import INPUT_TYPES, BlobMap, ValueRef, map_blobs, map_by_name, sources
from .metrics import ErrorStats, compare
from .ncnn_run import BlobFailure, NcnnModel, int32_input_blobs
from .result import (DIVERGENT, FAILED, INHERITED, NOT_COMPARED, OK, BlobRecord, LayerRecord, OutputRecord,
                     VerifyResult)

log = logging.getLogger(__name__)

#: (atol, rtol) by whether the ncnn weights are stored as fp16. Errors are measured relative to
#: the PyTorch value's largest magnitude: fp32 weights agree to ~1e-6, fp16 ones to ~1e-3.
DEFAULT_TOLERANCE = {False: (1e-5, 1e-4), True: (1e-4, 1e-2)}


@record
class VerifyOptions:
    """Options of one verification."""

    fp16: bool = True  #: convert with fp16 weights (ignored for user-given ncnn files)
    converters: Sequence[str | Path] = ()  #: converter plug-in files
    input_shapes: Sequence[Sequence[int]] | None = None  #: concrete input shapes (random inputs)
    model: str | None = None  #: which model of a multi-model package
    ncnn_param: str | Path | None = None  #: verify these ncnn files instead of converting
    ncnn_bin: str | Path | None = None
    inputs: Sequence[str | Path] = ()  #: ``.npy`` files, one per tensor input, in call order
    atol: float | None = None  #: default: :data:`DEFAULT_TOLERANCE`
    rtol: float | None = None
    seed: int = 0  #: for random inputs
    isolate: bool = True  #: run each layer in isolation to tell own errors from inherited ones


Progress = Callable[[int, int, str], None]


def _program_of(source, model: str | None):
    """(path, engine ExportedProgram) for a path, an engine Package or ExportedProgram."""
    from ..reader.package import load

    if isinstance(source, (str, os.PathLike)):
        pkg = load(source)
        ep = pkg.models.get(model) if model else pkg.model
        if ep is None:
            raise VerifyError(f"{source}: no model named {model!r} (models: {', '.join(pkg.model_names)})")
        return os.fspath(source), ep
    if hasattr(source, "models") and hasattr(source, "path"):  # a Package
        return source.path, (source.models[model] if model else source.model)
    if hasattr(source, "package"):  # an ExportedProgram
        return source.package.path, source
    raise VerifyError(f"cannot verify a {type(source).__name__}: give a .pt2 path, a Package or an ExportedProgram")


class _Verifier:
    """One verification run (holds the state the steps share)."""

    def __init__(self, source, opts: VerifyOptions, conversion, progress: Progress | None,
                 cancel: Callable[[], bool] | None):
        self.opts = opts
        self.progress = progress
        self.cancel = cancel
        self.notes: list[str] = []
        require("torch")
        require("ncnn")
        if (opts.ncnn_param is None) != (opts.ncnn_bin is None):
            raise VerifyError("an ncnn model to verify needs both its .param and its .bin file")
        self.path, self.ep = _program_of(source, opts.model)
        self.conversion = conversion
        self.step = 0
        self.total = 4
        self.aten: Graph | None = None  # the program's ATen graph (node order, module, source)
        self.graph: Graph | None = None  # the ncnn graph verified
        self.ref_graph: Graph | None = None  # the ncnn graph of the conversion (provenance, shapes)
        self.full: dict = {}  # every blob of the whole-model ncnn run: array or BlobFailure
        self.atol, self.rtol = DEFAULT_TOLERANCE[opts.fp16]

    def report(self, message: str) -> None:
        check_cancel(self.cancel, message)
        if self.progress is not None:
            self.progress(self.step, self.total, message)
        self.step += 1

    # ---------------------------------------------------------------- conversion and files
    def convert(self):
        from ..convert import ConvertOptions, convert

        if self.conversion is not None:
            return self.conversion
        copts = ConvertOptions(fp16=self.opts.fp16, input_shapes=self.opts.input_shapes,
                               converters=list(self.opts.converters), model=self.opts.model, snapshots=False)
        try:
            return convert(self.ep, copts, cancel=self.cancel)
        except ConversionError as e:
            if self.opts.ncnn_param is None:
                raise
            self.notes.append(f"the program did not convert ({e}); blobs are matched by name only")
            return None

    def ncnn_files(self, conversion, tmp: Path) -> tuple[Graph, Path, Path, BlobMap, bool]:
        from ..build import build_graph
        from ..writers import read_ncnn_param

        reference = map_blobs(conversion.ncnn, conversion.aten) if conversion is not None else None
        if self.opts.ncnn_param is not None:
            param, bin_path = Path(self.opts.ncnn_param), Path(self.opts.ncnn_bin)
            graph = read_ncnn_param(param, bin_path)
            aten = self.aten = conversion.aten if conversion is not None else build_graph(self.ep)
            fp16 = any(a.dtype == "f16" for op in graph.ops for a in op.attrs.values())
            return graph, param, bin_path, map_by_name(graph, reference, aten), fp16
        if not conversion.ok:
            first = conversion.errors[0]
            raise VerifyError(f"{self.path}: conversion incomplete: {len(conversion.errors)} operator(s) not "
                              f"converted (first: {first}); see 'pt2ncnn convert'")
        self.aten = conversion.aten
        param, bin_path = tmp / "model.ncnn.param", tmp / "model.ncnn.bin"
        conversion.write(param, bin_path)
        return conversion.ncnn, param, bin_path, reference, bool(conversion.options.fp16)

    # ---------------------------------------------------------------- the run
    def run(self) -> VerifyResult:
        t0 = time.perf_counter()
        self.report("choosing inputs")
        inputs = choose_inputs(self.ep, files=self.opts.inputs, input_shapes=self.opts.input_shapes,
                               seed=self.opts.seed)
        self.notes += inputs.notes
        self.report("converting")
        conversion = self.convert()
        with tempfile.TemporaryDirectory(prefix="pt2ncnn-verify-") as tmp:
            graph, param, bin_path, blobmap, fp16 = self.ncnn_files(conversion, Path(tmp))
            self.ref_graph = conversion.ncnn if conversion is not None else None
            atol, rtol = DEFAULT_TOLERANCE[fp16]
            self.atol = atol if self.opts.atol is None else float(self.opts.atol)
            self.rtol = rtol if self.opts.rtol is None else float(self.opts.rtol)
            self.total = 4 + len(graph.ops)
            self.report("running PyTorch")
            from .torch_run import run_torch

            keep = {ref.value for ref in blobmap.refs.values()}
            tv = run_torch(self.path, self.ep, inputs, model=self.opts.model, keep=keep, cancel=self.cancel)
            self.report("running ncnn")
            model = NcnnModel(param, bin_path, _custom_runs(graph))
            try:
                layers, outputs = self.compare_all(graph, blobmap, model, tv)
            finally:
                model.close()
        return VerifyResult(layers=layers, outputs=outputs, atol=self.atol, rtol=self.rtol, torch_runner=tv.runner,
                            input_source=inputs.source, graph=graph, conversion=conversion, fp16=fp16,
                            ncnn_files=(str(param), str(bin_path)) if self.opts.ncnn_param is not None else None,
                            notes=self.notes, seconds=time.perf_counter() - t0)

    # ---------------------------------------------------------------- comparison
    def _input_feeds(self, graph: Graph, blobmap: BlobMap, values) -> tuple[dict[str, np.ndarray], frozenset[str]]:
        """The model inputs in ncnn's layout, and the input blobs fed as a batch of several
        samples: PyTorch's whole batch, samples first (a model may gather its batch into one
        blob, as PatchTST gathers its channels: one sample alone is not its input). Verify still
        compares one sample: a blob is read back as its first."""
        feeds, batched = {}, set()
        for op in graph.ops:
            if op.type not in INPUT_TYPES:
                continue
            for o in op.outputs:
                ref = blobmap.get(o.name)
                if ref is None or ref.value not in values:
                    raise VerifyError(f"ncnn input blob {o.name!r} matches no model input")
                v = values[ref.value]
                b = ref.batch
                if b is None and self.ref_graph is None and v.ndim > 1:
                    b = 0  # user-given files of an unconverted program: the old default
                if b is not None and b < v.ndim:
                    if v.shape[b] > 1:
                        self.notes.append(f"PyTorch ran a batch of {v.shape[b]} (input {ref.value}); verify "
                                          f"compares the first sample")
                        v = np.moveaxis(v, b, 0)
                        batched.add(o.name)
                    else:
                        v = np.take(v, 0, axis=b)
                feeds[o.name] = v
        return feeds, frozenset(batched)

    def _laid_out(self, blob: str, got, blobmap: BlobMap, values) -> tuple[np.ndarray | None, str, bool]:
        """PyTorch's value of ``blob`` in the layout of ``got`` (ncnn's array): see
        :func:`.layout.as_blob`."""
        ref = blobmap.get(blob)
        if not isinstance(got, np.ndarray):
            return None, str(got) if got is not None else "not computed", True
        return as_blob(values[ref.value], ref, tuple(got.shape))

    def compare_all(self, graph: Graph, blobmap: BlobMap, model: NcnnModel, tv):
        self.graph = graph
        values = tv.values
        model.int32_blobs = int32_input_blobs(graph)
        feeds, batched = self._input_feeds(graph, blobmap, values)
        #: the blobs ncnn computed as a batch of several samples, whole (``self.full``: the first)
        self.full_batches: dict[str, np.ndarray] = {}
        self.full = model.run(feeds, [o.name for op in graph.ops for o in op.outputs], batched=batched,
                              batches=self.full_batches)
        # PyTorch's values in the blobs' layouts: what the layers are compared with and fed
        self.laid: dict[str, np.ndarray] = {}
        self.laid_note: dict[str, tuple[str, bool]] = {}
        #: blobs that are a batch of several samples in PyTorch (Swin's windows moved into the
        #: batch, RAFT's two images): compared on their first sample; fed alone whole
        #: (``laid_batches``) where ncnn computed the same batch, else never (one sample is not
        #: the layer's input)
        self.batches: set[str] = set()
        self.laid_batches: dict[str, np.ndarray] = {}
        for blob, ref in blobmap.refs.items():
            v = values.get(ref.value)
            if ref.batch is not None and v is not None and ref.batch < v.ndim and v.shape[ref.batch] > 1:
                self.batches.add(blob)
            if ref.value in values and blob in self.full:
                arr, note, wrong = self._laid_out(blob, self.full[blob], blobmap, values)
                if arr is not None:
                    self.laid[blob] = arr
                    whole = self.full_batches.get(blob)
                    batch = as_batch(v, ref, arr.shape) if blob in self.batches and whole is not None else None
                    if batch is not None and _same_samples(batch, whole):
                        self.laid_batches[blob] = batch
                else:
                    self.laid_note[blob] = (note, wrong)
        aten_ops = {op.name: op for op in self.aten.ops}
        order = {name: k for k, name in enumerate(aten_ops)}
        ref_layers = {op.name: op for op in self.ref_graph.ops} if self.ref_graph is not None else {}
        records: list[LayerRecord] = []
        by_blob: dict[str, BlobRecord] = {}
        for index, op in enumerate(graph.ops):
            self.report(f"layer {op.name}")
            rec = self._layer_record(index, op, blobmap, values, by_blob, aten_ops, order, ref_layers)
            if not op.inputs:  # an Input layer: nothing to isolate
                for b in rec.blobs:
                    b.own = b.error
            records.append(rec)
        if self.opts.isolate:
            self._isolate_all(graph, records, model, blobmap, values)
        for op, rec in zip(graph.ops, records):
            self._judge(op, rec, by_blob)
        outputs = self._outputs(graph, blobmap, tv, values)
        if self.progress is not None:
            self.progress(self.total, self.total, "done")
        return records, outputs

    def _layer_record(self, index: int, op: Operator, blobmap: BlobMap, values, by_blob, aten_ops, order,
                      ref_layers) -> LayerRecord:
        prov = op.provenance.nodes or (ref_layers[op.name].provenance.nodes if op.name in ref_layers else ())
        nodes = list(prov) or [r.node for o in op.outputs if (r := blobmap.get(o.name)) is not None]
        nodes = sorted(dict.fromkeys(n for n in nodes if n), key=lambda n: order.get(n, len(order)))
        module, source = _where(nodes, aten_ops)
        rec = LayerRecord(index=index, layer=op.name, type=op.type, aten_nodes=nodes, module=module, source=source)
        for o in op.outputs:
            b = self._blob_record(o.name, blobmap, values)
            rec.blobs.append(b)
            by_blob[o.name] = b
        return rec

    def _blob_record(self, blob: str, blobmap: BlobMap, values) -> BlobRecord:
        ref = blobmap.get(blob)
        got = self.full.get(blob)
        shape = tuple(got.shape) if isinstance(got, np.ndarray) else None
        if ref is None:
            return BlobRecord(blob, None, "unmapped", shape, note=blobmap.unmapped.get(blob, "no PyTorch counterpart"))
        want = values.get(ref.value)
        if want is None:
            return BlobRecord(blob, ref.value, ref.how, shape, note="PyTorch produced no tensor for this value")
        b = BlobRecord(blob, ref.value, ref.how, shape, tuple(want.shape))
        if blob in self.laid:
            b.error = compare(got, self.laid[blob])
        else:
            b.note, wrong = self.laid_note.get(blob, ("not computed", True))
            if wrong:  # ncnn's blob cannot be this value (failed, or of another size)
                b.error = ErrorStats.mismatch()
        return b

    # ---------------------------------------------------------------- layers alone
    def _isolate_all(self, graph: Graph, records: list[LayerRecord], model: NcnnModel, blobmap: BlobMap,
                     values) -> None:
        """Run every compared layer again on PyTorch's values of its inputs, in as few ncnn runs
        as possible (:func:`.isolate.plan_isolation`)."""
        # a batch of several samples is set whole: PyTorch's (laid_batches) or ncnn's own
        fed = lambda b: b in self.laid and (b not in self.batches or b in self.laid_batches)  # noqa: E731
        jobs = plan_isolation(graph, [rec for rec in records if rec.blobs and any(b.compared for b in rec.blobs)],
                              fed, lambda b: isinstance(self.full.get(b), np.ndarray))
        self.total += len(jobs.rounds)
        by_layer = {rec.layer: rec for rec in records}
        for k, batch in enumerate(jobs.rounds, 1):
            self.report(f"layers alone: run {k} of {len(jobs.rounds)} ({len(batch)} layers)")
            feeds, whole = {}, set()
            for b in (b for job in batch for b in job.feeds):
                sets = (self.laid_batches, self.laid) if fed(b) else (self.full_batches, self.full)
                feeds[b] = sets[0][b] if b in sets[0] else sets[1][b]
                if b in sets[0]:
                    whole.add(b)
            out = model.run(feeds, [b for job in batch for b in job.wanted], batched=frozenset(whole))
            for job in batch:
                rec = by_layer[job.layer]
                rec.isolated_with = list(job.region)
                for b in rec.blobs:
                    if b.compared:
                        b.own = self._own(b, out.get(b.blob), blobmap, values)

    def _own(self, b: BlobRecord, got, blobmap: BlobMap, values) -> ErrorStats | None:
        """The blob's error when its layer ran alone; None when that run says nothing: ncnn
        failed there on what it computed in the whole model (the inputs set, not the layer, are
        then at fault, and the layer is judged as if it had not run alone)."""
        if isinstance(got, BlobFailure) and isinstance(self.full.get(b.blob), np.ndarray):
            b.note = "; ".join(filter(None, (b.note, f"could not run alone ({got}); judged on the whole model")))
            return None
        arr, note, _ = self._laid_out(b.blob, got, blobmap, values)
        if arr is None:
            if not b.note:
                b.note = f"alone: {note}"
            return ErrorStats.mismatch()
        return compare(got, arr)

    def _judge(self, op: Operator, rec: LayerRecord, by_blob: dict[str, BlobRecord]) -> None:
        compared = [b for b in rec.blobs if b.compared]
        if not compared:
            rec.status = NOT_COMPARED
            rec.note = "; ".join(dict.fromkeys(b.note for b in rec.blobs if b.note))
            return
        rec.error = ErrorStats.worst([b.error for b in compared])
        rec.within_tolerance = rec.error.within(self.atol, self.rtol)
        owns = [b.own for b in compared if b.own is not None]
        if owns:
            rec.own = ErrorStats.worst(owns)
            own_ok = rec.own.within(self.atol, self.rtol)
            broken = not np.isfinite(rec.own.max_abs)
        else:  # no isolated run: blame it when what it computes from was fine
            sources = _compared_sources(op, by_blob)
            inputs_ok = sources is not None and all(b.error.within(self.atol, self.rtol) for b in sources)
            own_ok = rec.within_tolerance or not inputs_ok
            broken = not np.isfinite(rec.error.max_abs)
        if not own_ok:
            rec.status = FAILED if broken else DIVERGENT
        else:
            rec.status = OK if rec.within_tolerance else INHERITED
        rec.note = "; ".join(dict.fromkeys(b.note for b in compared if b.note))

    def _outputs(self, graph: Graph, blobmap: BlobMap, tv, values) -> list[OutputRecord]:
        meta = graph.meta.get("outputs") or (self.ref_graph.meta.get("outputs") if self.ref_graph is not None else None)
        blobs = iter([d["blob"] for d in meta] if meta else [])
        infos = self.ep.signature.user_outputs
        out = []
        for k, name in enumerate(tv.outputs):
            if k < len(infos) and infos[k].meta is None and name not in values:
                continue  # a Python constant returned (None...): no tensor, no ncnn blob
            blob = next(blobs, f"out{len(out)}")
            rec = OutputRecord(name, blob)
            if name not in values:
                rec.note = "PyTorch returned no tensor"
            elif blob not in self.full:
                rec.note = f"the ncnn model has no blob {blob!r}"
            else:
                ref = blobmap.get(blob)
                ref = ref if ref is not None and ref.value == name else ValueRef(name, name, "output")
                got = self.full[blob]
                arr, rec.note, _ = as_blob(values[name], ref, tuple(got.shape)) if isinstance(got, np.ndarray) \
                    else (None, str(got), True)
                rec.error = compare(got, arr) if arr is not None else ErrorStats.mismatch()
                rec.ok = rec.error.within(self.atol, self.rtol)
            out.append(rec)
        return out


#: how much further from PyTorch's than its first sample (relative error) ncnn's whole batch may
#: be for the two to hold the same samples in the same order (then each sample is as right as the
#: first: rounding, drift, or an error upstream that damaged them all alike); samples in another
#: order, or damaged past the first, which alone is compared, are far further
SAME_SAMPLES = 0.05


def _same_samples(torch_batch: np.ndarray, ncnn_batch: np.ndarray) -> bool:
    """Whether PyTorch's batch, laid out as the blob, holds ncnn's samples in ncnn's order: only
    then may it be set whole for a layer run alone (the first sample alone is compared)."""
    if torch_batch.shape != ncnn_batch.shape:
        return False
    whole, first = compare(ncnn_batch, torch_batch), compare(ncnn_batch[0], torch_batch[0])
    if not (np.isfinite(whole.max_abs) and np.isfinite(first.max_abs)):
        return False
    return whole.max_abs <= 10 * first.max_abs + SAME_SAMPLES * max(whole.ref_max, 1e-12)


def _model_input(b) -> bool:
    return b.producer is None or b.producer.type in INPUT_TYPES


def _compared_sources(op: Operator, by_blob: dict[str, BlobRecord]) -> list[BlobRecord] | None:
    """The compared blobs ``op`` computes from: its inputs, and through an input without a
    comparison (an intermediate of an op lowered to several layers, a batch re-laid out) the
    inputs of the layer producing it; a model input counts as right (PyTorch's value is what
    was set). None past :data:`~.mapping.MAX_REGION` layers: then nothing says the inputs were
    fine."""
    found = sources(op, lambda b: (r := by_blob.get(b.name)) is not None and r.compared, _model_input)
    return None if found is None else [by_blob[b.name] for b in found[0] if b.name in by_blob and by_blob[b.name].compared]


def _custom_runs(graph: Graph) -> list[CustomRun]:
    """The plug-in custom layers of the model, in file order."""
    return [CustomRun(op.name, op.meta["plugin_layer"], dict(op.params), [np.asarray(a.data) for a in op.attrs.values()],
                      len(op.inputs), len(op.outputs)) for op in graph.ops if op.meta.get("plugin_layer")]


def _where(nodes: list[str], aten_ops: dict[str, Operator]) -> tuple[str, str]:
    """Module path and ``file:line`` of the first of ``nodes`` that has them."""
    module = source = ""
    for n in nodes:
        op = aten_ops.get(n)
        if op is None:
            continue
        if not module and op.provenance.modules and op.provenance.modules[0]:
            module = op.provenance.modules[0]
        if not source and op.meta.get("source"):
            source = str(op.meta["source"])
    return module, source


def verify(source, options: VerifyOptions | None = None, *, conversion=None,
           progress: Progress | None = None, cancel: Callable[[], bool] | None = None) -> VerifyResult:
    """Compare every ncnn layer of the converted ``source`` (a ``.pt2`` path, an engine Package
    or ExportedProgram) with PyTorch.

    ``conversion``: an existing ConversionResult of the same program to verify (the GUI's), so
    the program is not converted again. ``progress(done, total, message)`` is called before
    each step and layer; ``cancel()`` is polled as often, and a True answer raises the engine's
    ``Cancelled``. Bad input raises :class:`~engine.verify.errors.VerifyError` (or another
    PT2Error); missing torch/ncnn raises :class:`~engine.verify.errors.MissingDependency`."""
    return _Verifier(source, options or VerifyOptions(), conversion, progress, cancel).run()
