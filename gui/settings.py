"""Persistent settings (``QSettings``): recent files, window and dock state, view and
conversion preferences.

:class:`Settings` wraps one ``QSettings`` so tests can point it at a temporary ini file
(``Settings.at(path)``) while the application uses the user's (organisation ``pt2ncnn``,
application ``Studio``).
"""
from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QByteArray, QSettings

MAX_RECENT = 10


class Settings:
    def __init__(self, qsettings: QSettings | None = None):
        self.q = qsettings if qsettings is not None else QSettings("pt2ncnn", "Studio")

    @classmethod
    def at(cls, path: str | os.PathLike) -> "Settings":
        """Settings stored in an ini file (tests, portable use)."""
        return cls(QSettings(os.fspath(path), QSettings.Format.IniFormat))

    # ---------------------------------------------------------------- generic
    def get(self, key: str, default: Any = None, type_: type | None = None) -> Any:
        value = self.q.value(key, default)
        if type_ is bool:
            if isinstance(value, str):
                return value.lower() in ("1", "true", "yes")
            return bool(value)
        if type_ is not None and value is not None:
            try:
                return type_(value)
            except (TypeError, ValueError):
                return default
        return value

    def set(self, key: str, value: Any) -> None:
        self.q.setValue(key, value)

    def sync(self) -> None:
        self.q.sync()

    # ---------------------------------------------------------------- recent files
    def recent_files(self) -> list[str]:
        value = self.q.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or []) if v]

    def add_recent(self, path: str) -> list[str]:
        path = os.path.abspath(path)
        files = [p for p in self.recent_files() if p != path]
        files.insert(0, path)
        del files[MAX_RECENT:]
        self.q.setValue("recent", files)
        return files

    def remove_recent(self, path: str) -> None:
        self.q.setValue("recent", [p for p in self.recent_files() if p != path])

    def clear_recent(self) -> None:
        self.q.setValue("recent", [])

    # ---------------------------------------------------------------- window state
    def window_state(self) -> tuple[QByteArray | None, QByteArray | None]:
        return self.q.value("window/geometry"), self.q.value("window/state")

    def save_window_state(self, geometry: QByteArray, state: QByteArray) -> None:
        self.q.setValue("window/geometry", geometry)
        self.q.setValue("window/state", state)

    @property
    def first_run(self) -> bool:
        return not self.get("first_run_done", False, bool)

    def mark_first_run_done(self) -> None:
        self.q.setValue("first_run_done", True)
