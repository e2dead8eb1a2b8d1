"""Recognizing which kind of package a zip is, and where each model's parts live.

Three ExportedProgram layouts are accepted (see ``docs/pt2-format.md`` §1):

* ``"pt2"`` — the current archive (torch ≥ 2.8): one root folder, ``archive_format`` = ``pt2``,
  ``models/<m>.json``, payload configs and one payload per storage group;
* ``"pt2-2.8"`` — the same container with weights / constants as ``torch.save`` dicts at
  ``data/weights/<m>.pt`` and ``data/constants/<m>.pt``;
* ``"legacy"`` — torch 2.1–2.7's flat zip (``serialized_exported_program.json``, ...).

Anything else is refused with a message that says what the file is when it can tell: a
TorchScript archive (``torch.jit.save``), a plain ``torch.save`` checkpoint, or a package that
holds only AOTInductor / ExecuTorch compiled artifacts.
"""
from __future__ import annotations

import logging
import posixpath

from engine.errors import PT2FormatError
from engine.reader.archive import ZipArchive

from ..records import field, record

log = logging.getLogger(__name__)

PT2, PT2_28, LEGACY = "pt2", "pt2-2.8", "legacy"
SUPPORTED_ARCHIVE_VERSIONS = ("0",)
TORCHSCRIPT_HINT = ("this is a TorchScript archive, not an ExportedProgram; use pnnx or re-export "
                    "with torch.export")

_LEGACY_PROGRAM = "serialized_exported_program.json"
_LEGACY_STATE = ("serialized_state_dict.pt", "serialized_state_dict.json")
_LEGACY_CONSTANTS = ("serialized_constants.pt", "serialized_constants.json")
_LEGACY_INPUTS = "serialized_example_inputs.pt"


@record
class ModelMembers:
    """Where one model's parts are (full member names; None when absent).

    ``weights_dir`` / ``constants_dir`` are the folders the payload configs' ``path_name``s are
    relative to. ``weights_pickle`` / ``constants_pickle`` are ``torch.save`` payloads (2.8 and
    legacy layouts)."""

    name: str
    program: str
    weights_config: str | None = None
    constants_config: str | None = None
    weights_pickle: str | None = None
    constants_pickle: str | None = None
    sample_inputs: str | None = None
    weights_dir: str = ""
    constants_dir: str = ""


@record
class PackageLayout:
    """Where a package's members are: its kind, root folder, archive version and models."""

    kind: str
    root: str  # "m/" (with the slash) or "" for the legacy flat zip
    archive_version: str
    byteorder: str = "little"
    models: dict[str, ModelMembers] = field(default_factory=dict)
    extra_files: dict[str, str] = field(default_factory=dict)  # user name -> member


def detect_layout(archive: ZipArchive) -> PackageLayout:
    label = archive.label
    names = [m.name for m in archive.members if not m.is_dir]
    if not names:
        raise PT2FormatError(label, "empty zip archive (no members)")
    if _LEGACY_PROGRAM in archive:
        return _legacy(archive, names)
    first = names[0]
    if "/" not in first:
        raise PT2FormatError(label, f"not an ExportedProgram package: no root folder and no "
                                    f"{_LEGACY_PROGRAM} (first member {first!r})")
    root = first.split("/", 1)[0] + "/"
    _refuse_other_formats(archive, root, names)
    fmt = root + "archive_format"
    if fmt not in archive:
        raise PT2FormatError(label, f"not a .pt2 package: no {fmt} member and no {_LEGACY_PROGRAM}")
    for n in names:
        if not n.startswith(root):
            raise PT2FormatError(n, f"member outside the archive root folder '{root}'")
    value = archive.read(fmt, limit=64).decode("utf-8", "replace").strip()
    if value != "pt2":
        raise PT2FormatError(fmt, f"archive format is {value!r}, expected 'pt2'")
    version = _read_text(archive, root + "archive_version", "0")
    if version not in SUPPORTED_ARCHIVE_VERSIONS:
        raise PT2FormatError(root + "archive_version", f"archive version {version!r} is not supported "
                                                       f"(this reader knows {', '.join(SUPPORTED_ARCHIVE_VERSIONS)})")
    byteorder = _byteorder(archive, root + "byteorder")
    models = _pt2_models(archive, root, names)
    kinds = {PT2_28 if m.weights_pickle else PT2 for m in models.values()}
    kind = PT2_28 if PT2_28 in kinds else PT2
    extra = {n[len(root) + len("extra/"):]: n for n in names if n.startswith(root + "extra/")}
    return PackageLayout(kind, root, version, byteorder, models, extra)


def _refuse_other_formats(archive: ZipArchive, root: str, names: list[str]) -> None:
    label = archive.label
    if root + "constants.pkl" in archive or any(n.startswith(root + "code/") for n in names):
        raise PT2FormatError(label, TORCHSCRIPT_HINT)
    if root + "data.pkl" in archive and root + "archive_format" not in archive:
        raise PT2FormatError(label, "this is a torch.save checkpoint (state dict or pickled module), "
                                    "not an ExportedProgram; export the model with torch.export.save")


def _pt2_models(archive: ZipArchive, root: str, names: list[str]) -> dict[str, ModelMembers]:
    models_dir = root + "models/"
    found = sorted(n[len(models_dir):-len(".json")] for n in names
                   if n.startswith(models_dir) and n.endswith(".json") and "/" not in n[len(models_dir):])
    if not found:
        if any(n.startswith(root + "data/aotinductor/") for n in names):
            raise PT2FormatError(archive.label, "this package holds only AOTInductor compiled artifacts, "
                                                "no ExportedProgram graph (save with torch.export.save)")
        if any(n.startswith(root + "data/executorch/") for n in names):
            raise PT2FormatError(archive.label, "this package holds only ExecuTorch artifacts, no "
                                                "ExportedProgram graph")
        raise PT2FormatError(archive.label, f"no models/*.json in the package (expected {models_dir}model.json)")
    wdir, cdir = root + "data/weights/", root + "data/constants/"
    out = {}
    for name in found:
        m = ModelMembers(name, f"{models_dir}{name}.json", weights_dir=wdir, constants_dir=cdir)
        for attr_cfg, attr_pkl, folder, suffix in (("weights_config", "weights_pickle", wdir, "weights"),
                                                   ("constants_config", "constants_pickle", cdir, "constants")):
            cfg = f"{folder}{name}_{suffix}_config.json"
            pkl = f"{folder}{name}.pt"
            if cfg in archive:
                setattr(m, attr_cfg, cfg)
            elif pkl in archive:
                setattr(m, attr_pkl, pkl)
            else:
                raise PT2FormatError(cfg, f"missing member: the {suffix} of model '{name}' "
                                          f"(neither {posixpath.basename(cfg)} nor {posixpath.basename(pkl)})")
        si = f"{root}data/sample_inputs/{name}.pt"
        m.sample_inputs = si if si in archive else None
        out[name] = m
    return out


def _legacy(archive: ZipArchive, names: list[str]) -> PackageLayout:
    version = _read_text(archive, "version", "")
    m = ModelMembers("model", _LEGACY_PROGRAM)
    m.weights_pickle = next((n for n in _LEGACY_STATE if n in archive), None)
    m.constants_pickle = next((n for n in _LEGACY_CONSTANTS if n in archive), None)
    m.sample_inputs = _LEGACY_INPUTS if _LEGACY_INPUTS in archive else None
    extra = {n[len("extra_files/"):]: n for n in names if n.startswith("extra_files/")}
    return PackageLayout(LEGACY, "", version, "little", {"model": m}, extra)


def _read_text(archive: ZipArchive, name: str, default: str) -> str:
    if name not in archive:
        return default
    return archive.read(name, limit=256).decode("utf-8", "replace").strip()


def _byteorder(archive: ZipArchive, name: str) -> str:
    value = _read_text(archive, name, "little")
    if value not in ("little", "big"):
        raise PT2FormatError(name, f"unknown byte order {value!r} (expected 'little' or 'big')")
    return value
