"""The torch-free, lazy, validating reader of ``.pt2`` ExportedProgram packages.

Modules, one concern each:

* :mod:`~engine.reader.archive` — zip central directory, member validation, mmap views, CRC,
  bounded inflate;
* :mod:`~engine.reader.layout` — which package layout a zip is and where each model's parts live;
* :mod:`~engine.reader.jsonload` — bounded JSON loading;
* :mod:`~engine.reader.decode` — program JSON → :mod:`~engine.reader.schema` objects;
* :mod:`~engine.reader.metadata` — node metadata strings (module stack, source location, ...);
* :mod:`~engine.reader.tensors` — dtype table, bounds-checked strided views, the tensor store;
* :mod:`~engine.reader.unpickler` — restricted unpickler for ``torch.save`` payloads;
* :mod:`~engine.reader.signature` — graph input/output classification, symbols;
* :mod:`~engine.reader.pytree` — in/out treespecs;
* :mod:`~engine.reader.modules` — the module hierarchy;
* :mod:`~engine.reader.symexpr` — readable text for symbolic sizes;
* :mod:`~engine.reader.summary` — the JSON-able summary ``pt2ncnn inspect`` prints;
* :mod:`~engine.reader.package` — :func:`load`, :class:`Package`, :class:`ExportedProgram`.

Nothing here imports torch; numpy is imported only when a tensor is materialized.
"""
