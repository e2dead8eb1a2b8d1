"""Graphics items of a graph view: nodes, edges, and the overview drawn when zoomed out.

* :class:`NodeItem` paints one operator with level of detail: a flat box when small on screen,
  the op type when medium, op type and output shape when readable. Inputs and outputs are pills,
  parameters small dashed boxes, problems red; selection, provenance links, search hits and
  diff marks are outlines and badges; a tint (verify's error colour) replaces the category fill
  and a flagged node gets an alert border and badge. Text is kept as ``QStaticText`` per item.
* edges are drawn in :class:`EdgeChunk` items (one path for many edges, built the first time
  the chunk is painted, then stroked by Qt in C++); an :class:`EdgeRef` stands for one of them
  (tooltips, emphasis, tests); arrow heads are such chunks too (:class:`ArrowHeads`).
* :class:`GroupItem` is a module box, collapsed or expanded.
* :class:`OverviewItem` draws the whole graph as a handful of paths (one per colour), used
  instead of the individual items below a zoom threshold so a frame costs one Python call
  however large the graph is.

Sizes come from :func:`measure`, which the scene calls before the layout runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (QColor, QFontMetricsF, QPainter, QPainterPath, QPainterPathStroker, QPen,
                           QStaticText)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem

from .model import INPUT, OUTPUT, PARAM, DisplayEdge, DisplayNode, elide

if TYPE_CHECKING:  # pragma: no cover
    from ..theme import GraphTheme

#: Zoom below which the overview replaces individual items.
OVERVIEW_BELOW = 0.28
#: Zoom below which node text is not drawn (only the box).
TEXT_BELOW = 0.45

LABEL_CHARS = 34
PARAM_CHARS = 30
PAD_X = 10.0
OP_H = 38.0
OP_H_ONE_LINE = 26.0
PARAM_H = 30.0
IO_H = 34.0
MIN_W = 64.0


def measure(nodes: Sequence[DisplayNode], theme: "GraphTheme") -> list[tuple[float, float]]:
    """Width and height of every node as it will be drawn."""
    fm_b = QFontMetricsF(theme.bold)
    fm_s = QFontMetricsF(theme.small)
    cache: dict[tuple[int, str], float] = {}

    def width(fm: QFontMetricsF, key: int, text: str) -> float:
        w = cache.get((key, text))
        if w is None:
            w = fm.horizontalAdvance(text)
            cache[(key, text)] = w
        return w

    sizes = []
    for n in nodes:
        if n.kind == PARAM:
            w = max(width(fm_s, 1, elide(n.label, PARAM_CHARS)), width(fm_s, 1, n.detail)) + 2 * 7
            sizes.append((max(48.0, w), PARAM_H))
        elif n.kind in (INPUT, OUTPUT):
            w = max(width(fm_b, 0, n.label), width(fm_s, 1, n.detail)) + 2 * 18
            sizes.append((max(MIN_W, w), IO_H))
        else:
            w = max(width(fm_b, 0, elide(n.label, LABEL_CHARS)), width(fm_s, 1, n.detail)) + 2 * PAD_X
            sizes.append((max(MIN_W, w), OP_H if n.detail else OP_H_ONE_LINE))
    return sizes


def static_texts(first: str, second: str, first_font, second_font) -> tuple[QStaticText, QStaticText]:
    """Two lines of plain text laid out once (``QStaticText``), for an item to draw each frame."""
    a, b = QStaticText(first), QStaticText(second)
    for t in (a, b):
        t.setTextFormat(Qt.TextFormat.PlainText)
        t.setPerformanceHint(QStaticText.PerformanceHint.AggressiveCaching)
    a.prepare(font=first_font)
    b.prepare(font=second_font)
    return a, b


def paint_outline(painter: QPainter, theme: "GraphTheme", rect: QRectF, radius: float, selected: bool,
                  linked: bool, hit: bool) -> None:
    """The state outline around a node or box: selected (blue) over linked (orange) over a
    search hit (amber)."""
    colour = (theme.accent("selected") if selected else theme.accent("linked") if linked
              else theme.accent("changed") if hit else None)
    if colour is None:
        return
    pen = QPen(colour, 2.6)
    pen.setCosmetic(True)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawRoundedRect(rect.adjusted(-2.5, -2.5, 2.5, 2.5), radius + 2, radius + 2)


class NodeItem(QGraphicsItem):
    """One operator. ``index`` is its position in the scene's display graph."""

    def __init__(self, index: int, node: DisplayNode, size: tuple[float, float], theme: "GraphTheme"):
        super().__init__()
        self.index = index
        self.node = node
        self.w, self.h = size
        self.theme = theme
        self.selected = False  #: selected in this view (the scene keeps the set; not Qt's selection)
        self.linked = False  #: highlighted as a provenance counterpart of the other view's selection
        self.hit = False  #: a search hit
        self.mark = ""  #: diff mark: "added" | "changed" | "removed" | ""
        self.tint: QColor | None = None  #: fill set from outside (verify's error colouring), None: by category
        self.flagged = False  #: drawn with an alert border and badge (verify's first divergent layer)
        self._texts: tuple[QStaticText, QStaticText] | None = None
        self._rect = QRectF(-self.w / 2, -self.h / 2, self.w, self.h)
        self._bounds = self._rect.adjusted(-4, -4, 4, 4)
        self.setAcceptHoverEvents(False)
        if node.ghost:
            self.setOpacity(0.5)

    # ---------------------------------------------------------------- geometry
    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        p = QPainterPath()
        p.addRect(self._rect)
        return p

    @property
    def rect(self) -> QRectF:
        return self._rect

    # ---------------------------------------------------------------- state
    def set_state(self, *, selected: bool | None = None, linked: bool | None = None, hit: bool | None = None,
                  mark: str | None = None) -> None:
        changed = False
        if selected is not None and selected != self.selected:
            self.selected, changed = selected, True
        if linked is not None and linked != self.linked:
            self.linked, changed = linked, True
        if hit is not None and hit != self.hit:
            self.hit, changed = hit, True
        if mark is not None and mark != self.mark:
            self.mark, changed = mark, True
        if changed:
            self.update()

    def set_tint(self, colour: QColor | None, flagged: bool = False) -> None:
        """Fill with ``colour`` instead of the category colour (None: back to it); ``flagged``
        adds the alert border and badge."""
        if colour != self.tint or flagged != self.flagged:
            self.tint, self.flagged = colour, flagged
            self.update()

    def set_theme(self, theme: "GraphTheme") -> None:
        self.theme = theme
        self._texts = None
        self.update()

    # ---------------------------------------------------------------- painting
    def _static_texts(self) -> tuple[QStaticText, QStaticText]:
        if self._texts is None:
            n = self.node
            limit = PARAM_CHARS if n.kind == PARAM else LABEL_CHARS
            self._texts = static_texts(elide(n.label, limit), n.detail,
                                       self.theme.small if n.kind == PARAM else self.theme.bold, self.theme.small)
        return self._texts

    def _fill(self) -> QColor:
        t = self.theme
        if self.node.problem:
            return t.accent("error_fill")
        if self.tint is not None:
            return self.tint
        return t.fill(self.node.category)

    def _border(self) -> tuple[QColor, float, Qt.PenStyle]:
        t, n = self.theme, self.node
        if self.mark == "removed" or n.ghost:
            return t.accent("removed"), 1.6, Qt.PenStyle.DashLine
        if self.flagged:
            return t.accent("error"), 2.6, Qt.PenStyle.SolidLine
        if self.mark in ("added", "changed"):
            return t.accent(self.mark), 2.4, Qt.PenStyle.SolidLine
        if n.problem:
            return t.accent("error"), 2.0, Qt.PenStyle.SolidLine
        if n.kind == INPUT:
            return t.accent("input_border"), 1.6, Qt.PenStyle.SolidLine
        if n.kind == OUTPUT:
            return t.accent("output_border"), 1.6, Qt.PenStyle.SolidLine
        if n.kind == PARAM:  # parameters dashed, buffers dotted, constants solid
            style = {"buffer": Qt.PenStyle.DotLine, "constant": Qt.PenStyle.SolidLine}.get(n.category,
                                                                                        Qt.PenStyle.DashLine)
            return t.border, 0.8, style
        return t.border, 0.9, Qt.PenStyle.SolidLine

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        n, t, r = self.node, self.theme, self._rect
        radius = r.height() / 2 if n.kind in (INPUT, OUTPUT) else (3.0 if n.kind == PARAM else 6.0)
        colour, width, style = self._border()
        pen = QPen(colour, width, style)
        pen.setCosmetic(lod < 1.0)
        painter.setPen(pen)
        painter.setBrush(self._fill())
        if lod < TEXT_BELOW:
            painter.drawRect(r)
        else:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
            painter.drawRoundedRect(r, radius, radius)
            self._paint_text(painter, lod)
        self._paint_outline(painter, radius)

    def _paint_text(self, painter: QPainter, lod: float) -> None:
        n, t, r = self.node, self.theme, self._rect
        label, detail = self._static_texts()
        two_lines = bool(n.detail) and lod >= 0.6
        ls, ds = label.size(), detail.size()
        gap = 1.0
        total = ls.height() + (ds.height() + gap if two_lines else 0.0)
        top = r.center().y() - total / 2
        offset = 0.0
        painter.setPen(t.text)
        painter.setFont(t.small if n.kind == PARAM else t.bold)
        painter.drawStaticText(QPointF(r.center().x() - ls.width() / 2 + offset, top), label)
        if two_lines:
            painter.setPen(t.muted)
            painter.setFont(t.small)
            painter.drawStaticText(QPointF(r.center().x() - ds.width() / 2 + offset, top + ls.height() + gap), detail)
        if (n.problem and n.kind != PARAM) or self.flagged:
            self._paint_badge(painter, QPointF(r.right() - 1, r.top() + 1), t.accent("error"), "!")
        elif self.mark == "added":
            self._paint_badge(painter, QPointF(r.right() - 1, r.top() + 1), t.accent("added"), "+")
        elif self.mark == "changed":
            self._paint_badge(painter, QPointF(r.right() - 1, r.top() + 1), t.accent("changed"), "~")

    def _paint_badge(self, painter: QPainter, centre: QPointF, colour: QColor, glyph: str) -> None:
        """A filled circle with a vector glyph: ``!`` problem, ``+`` added, ``~`` changed."""
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawEllipse(centre, 6.5, 6.5)
        pen = QPen(QColor("white"), 1.6)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        x, y = centre.x(), centre.y()
        if glyph == "+":
            painter.drawLine(QPointF(x - 3.2, y), QPointF(x + 3.2, y))
            painter.drawLine(QPointF(x, y - 3.2), QPointF(x, y + 3.2))
        elif glyph == "~":
            p = QPainterPath(QPointF(x - 3.6, y + 0.8))
            p.cubicTo(x - 2.2, y - 2.6, x - 0.6, y - 1.2, x, y)
            p.cubicTo(x + 0.6, y + 1.2, x + 2.2, y + 2.6, x + 3.6, y - 0.8)
            painter.drawPath(p)
        else:
            painter.drawLine(QPointF(x, y - 3.4), QPointF(x, y + 0.8))
            painter.drawPoint(QPointF(x, y + 3.0))

    def _paint_outline(self, painter: QPainter, radius: float) -> None:
        paint_outline(painter, self.theme, self._rect, radius, self.selected, self.linked, self.hit)


ARROW = 5.5
#: an arrow head: half its width and its length (it ends at the route's last point)
ARROW_HALF_WIDTH, ARROW_LENGTH = ARROW * 0.7, ARROW * 1.5


class EdgePens:
    """The few pens edges use, made once per theme and shared by every edge."""

    def __init__(self, theme: "GraphTheme"):
        self.normal = self._pen(theme.edge, 1.3)
        self.param = self._pen(theme.edge_param, 1.0, Qt.PenStyle.DashLine)
        self.emphasis = self._pen(theme.accent("selected"), 2.2)

    @staticmethod
    def _pen(colour: QColor, width: float, style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> QPen:
        pen = QPen(colour, width, style)
        pen.setCosmetic(True)
        return pen

    def for_edge(self, edge: DisplayEdge, emphasis: bool) -> QPen:
        if emphasis:
            return self.emphasis
        return self.param if edge.from_param else self.normal


class EdgeRef:
    """One visible connection. Not an item: edges are painted by Qt in chunks of one path each
    (:class:`EdgeChunk`), so a graph of 20k edges costs a few dozen items; this object answers
    what one edge is (``edge``), where it runs (``points``, :meth:`path`) and whether it is
    emphasized (drawn by the scene's emphasis item)."""

    __slots__ = ("index", "edge", "points", "emphasis", "_path", "_hover_shape")

    def __init__(self, index: int, edge: DisplayEdge, points: Sequence[tuple[float, float]]):
        self.index = index
        self.edge = edge
        self.points = points
        self.emphasis = False
        self._path: QPainterPath | None = None
        self._hover_shape: QPainterPath | None = None

    def path(self) -> QPainterPath:
        if self._path is None:
            self._path = QPainterPath()
            add_smooth_route(self._path, self.points)
        return self._path

    def set_emphasis(self, on: bool) -> None:
        self.emphasis = on

    def hover_shape(self) -> QPainterPath:
        """A wide stroke of the path, for tooltips."""
        if self._hover_shape is None:
            s = QPainterPathStroker()
            s.setWidth(8)
            self._hover_shape = s.createStroke(self.path())
        return self._hover_shape


#: scene units around a lazy path's points that its bounds include: the cosmetic pens' width
#: at the smallest zoom that shows items, and antialiasing
PATH_MARGIN = 8.0


class LazyPathItem(QGraphicsItem):
    """A path drawn with one pen and brush whose ``QPainterPath`` is built the first time it is
    painted (or asked for): a scene cut into thousands of chunks builds the paths of the few
    on screen. ``bounds`` holds every point the path will have."""

    def __init__(self, bounds: QRectF, pen: QPen | Qt.PenStyle, brush: QColor | Qt.BrushStyle = Qt.BrushStyle.NoBrush):
        super().__init__()
        self._bounds = bounds.adjusted(-PATH_MARGIN, -PATH_MARGIN, PATH_MARGIN, PATH_MARGIN)
        self._pen, self._brush = pen, brush
        self._path: QPainterPath | None = None

    def build(self) -> QPainterPath:  # pragma: no cover - every subclass builds its own
        raise NotImplementedError

    def path(self) -> QPainterPath:
        if self._path is None:
            self._path = self.build()
        return self._path

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        path = self.path()
        if path.isEmpty():  # nothing (an empty path would be an invalid d="" in an SVG)
            return
        painter.setPen(self._pen)
        painter.setBrush(self._brush)
        painter.drawPath(path)


def _bounds(xs: Sequence[float], ys: Sequence[float]) -> QRectF:
    if not xs:
        return QRectF()
    x0, y0 = min(xs), min(ys)
    return QRectF(x0, y0, max(xs) - x0, max(ys) - y0)


class EdgeChunk(LazyPathItem):
    """Pieces of many edges (each a pair of consecutive route points) as one path, drawn with
    one pen. A piece's curve stays inside the box of its two points (its control points share
    their x and lie between their y), so the points bound the chunk."""

    def __init__(self, pieces: Sequence[Sequence[tuple[float, float]]], pen: QPen):
        self.pieces = pieces
        pts = [q for piece in pieces for q in piece]
        super().__init__(_bounds([q[0] for q in pts], [q[1] for q in pts]), pen)

    def build(self) -> QPainterPath:
        path = QPainterPath()
        for pts in self.pieces:
            add_smooth_route(path, pts)
        return path


class ArrowHeads(LazyPathItem):
    """The arrow heads of routes ending near each other, filled with ``colour``."""

    def __init__(self, routes: Sequence[Sequence[tuple[float, float]]], colour: QColor):
        self.routes = routes
        ends = [pts[-1] for pts in routes if len(pts) >= 2]
        dx, dy = ARROW_HALF_WIDTH, ARROW_LENGTH
        xs = [x for x, _ in ends]
        ys = [y for _, y in ends]
        box = _bounds(xs, ys)
        super().__init__(box.adjusted(-dx, -dy, dx, 0) if ends else box, Qt.PenStyle.NoPen, colour)

    def build(self) -> QPainterPath:
        return arrow_heads(self.routes)


def arrow_heads(routes: Sequence[Sequence[tuple[float, float]]]) -> QPainterPath:
    """One path with a small triangle at the end of every route."""
    path = QPainterPath()
    dx, dy = ARROW_HALF_WIDTH, ARROW_LENGTH
    for pts in routes:  # the elements addPolygon makes, without building a polygon per head
        if len(pts) < 2:
            continue
        x, y = pts[-1]
        path.moveTo(x, y)
        path.lineTo(x - dx, y - dy)
        path.lineTo(x + dx, y - dy)
        path.lineTo(x, y)
    return path


def add_smooth_route(path: QPainterPath, points: Sequence[tuple[float, float]]) -> None:
    """Append a route to ``path``: vertical-tangent cubic segments through its points (straight
    where vertical)."""
    if not points:
        return
    x0, y0 = points[0]
    path.moveTo(x0, y0)
    for x1, y1 in points[1:]:
        if abs(x1 - x0) < 0.5:
            path.lineTo(x1, y1)
        else:
            dy = (y1 - y0) * 0.5
            path.cubicTo(x0, y0 + dy, x1, y1 - dy, x1, y1)
        x0, y0 = x1, y1


class OverviewItem(QGraphicsItem):
    """Part of the graph as a few paths, drawn instead of the items when zoomed far out. The
    scene cuts the graph into spatial chunks, one item each, so Qt's index skips the chunks
    outside the view; each chunk renders once into a pixmap at a fixed resolution
    (``ItemCoordinateCache``) and later frames only scale that pixmap."""

    #: resolution of the cached pixmap, in pixels per scene unit
    CACHE_SCALE = 0.25

    def __init__(self, bounds: QRectF):
        super().__init__()
        self._bounds = bounds.adjusted(-10, -10, 10, 10)
        self.edges = QPainterPath()
        self.fills: list[tuple[QColor, QPainterPath]] = []
        self.frames: list[tuple[QColor, QColor, QPainterPath]] = []
        self.overlays: list[tuple[QColor, QPainterPath]] = []
        self.edge_colour = QColor("gray")
        self.setZValue(0)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def set_content(self, edges: QPainterPath, fills: list[tuple[QColor, QPainterPath]], edge_colour: QColor,
                    frames: list[tuple[QColor, QColor, QPainterPath]] = (), cached: bool = False) -> None:
        self.prepareGeometryChange()
        self.edges, self.fills, self.edge_colour, self.frames = edges, fills, edge_colour, list(frames)
        if cached:
            w, h = self._bounds.width(), self._bounds.height()
            scale = min(self.CACHE_SCALE, 2048 / max(w, 1.0), 2048 / max(h, 1.0))
            self.setCacheMode(QGraphicsItem.CacheMode.ItemCoordinateCache,
                              QSize(max(int(w * scale), 1), max(int(h * scale), 1)))
        self.update()

    def set_overlays(self, overlays: list[tuple[QColor, QPainterPath]]) -> None:
        self.overlays = overlays
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for fill, _border, path in self.frames:
            painter.setBrush(fill)
            painter.drawPath(path)
        pen = QPen(self.edge_colour, 1.0)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.edges)
        for _fill, border, path in self.frames:
            fpen = QPen(border, 1.0)
            fpen.setCosmetic(True)
            painter.setPen(fpen)
            painter.drawPath(path)
        painter.setPen(Qt.PenStyle.NoPen)
        for colour, path in self.fills:
            painter.setBrush(colour)
            painter.drawPath(path)
        for colour, path in self.overlays:
            pen = QPen(colour, 3.0)
            pen.setCosmetic(True)
            painter.setPen(pen)
            painter.setBrush(colour)
            painter.drawPath(path)


GROUP_RADIUS = 7.0
#: height of a pinned header label's tab
HEADER_TAB = 22.0
GLYPH = 5.0


def group_box_sizes(texts: Sequence[tuple[str, str]], theme: "GraphTheme") -> list[tuple[float, float]]:
    """Size of every collapsed group box (label and detail lines, an expander glyph at the
    left); an expanded box is at least as wide."""
    fm_b, fm_s = QFontMetricsF(theme.bold), QFontMetricsF(theme.small)
    out = []
    for label, detail in texts:
        w = max(fm_b.horizontalAdvance(label), fm_s.horizontalAdvance(detail)) + 2 * PAD_X + 26
        out.append((max(MIN_W + 30, w), 44.0))
    return out


def group_header_widths(texts: Sequence[tuple[str, str]], theme: "GraphTheme") -> list[float]:
    """Width an expanded box needs for its header (label and detail side by side)."""
    fm_b, fm_s = QFontMetricsF(theme.bold), QFontMetricsF(theme.small)
    return [fm_b.horizontalAdvance(label) + fm_s.horizontalAdvance(detail) + 56 for label, detail in texts]


class GroupItem(QGraphicsItem):
    """One module box: collapsed (a stacked box with the module path, its class and how many
    operators it holds; click to expand) or expanded (a tinted frame with a header; click the
    header to collapse). A collapsed box carries the state of the nodes hidden in it: selected,
    linked, search hit, and the strongest diff / problem mark."""

    def __init__(self, gid: int, label: str, detail: str, depth: int, theme: "GraphTheme"):
        super().__init__()
        self.gid = gid
        self.label = label
        self.detail = detail
        self.depth = depth
        self.theme = theme
        self.expanded = False
        self.selected = self.linked = self.hit = False
        self.mark = ""  #: strongest mark of a hidden node ("removed", "added", "changed", a problem "error", …)
        self._rect = QRectF()
        self._bounds = QRectF()
        self._texts: tuple[QStaticText, QStaticText] | None = None
        self.setAcceptHoverEvents(False)

    def set_box(self, x0: float, y0: float, x1: float, y1: float, expanded: bool) -> None:
        self.prepareGeometryChange()
        self.expanded = expanded
        self._rect = QRectF(x0, y0, x1 - x0, y1 - y0)
        self._bounds = self._rect.adjusted(-5, -5, 9, 9)
        # expanded frames under everything, deeper ones above their parents; collapsed boxes
        # with the nodes
        self.setZValue(-100 + self.depth if expanded else 3)

    @property
    def rect(self) -> QRectF:
        return self._rect

    def header_rect(self) -> QRectF:
        from .hierarchy import HEADER
        return QRectF(self._rect.left(), self._rect.top(), self._rect.width(), HEADER)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        p = QPainterPath()
        p.addRect(self._rect if not self.expanded else self.header_rect())
        return p

    def set_state(self, *, selected: bool, linked: bool, hit: bool, mark: str) -> None:
        if (selected, linked, hit, mark) != (self.selected, self.linked, self.hit, self.mark):
            self.selected, self.linked, self.hit, self.mark = selected, linked, hit, mark
            self.update()

    set_theme = NodeItem.set_theme

    def _static_texts(self) -> tuple[QStaticText, QStaticText]:
        if self._texts is None:
            self._texts = static_texts(self.label, self.detail, self.theme.bold, self.theme.small)
        return self._texts

    def fill(self) -> QColor:
        t = self.theme
        base = QColor(t.text)
        if self.expanded:
            base.setAlphaF(0.035 if not t.dark else 0.05)
        else:
            base = QColor(t.fill("other"))
            base = base.darker(104) if not t.dark else base.lighter(112)
        return base

    def border(self) -> QColor:
        t = self.theme
        if self.mark:
            return _mark_colour(t, self.mark)
        c = QColor(t.border)
        if self.expanded:
            c.setAlphaF(0.55)
        return c

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        t, r = self.theme, self._rect
        pen = QPen(self.border(), 1.8 if self.mark else 1.0)
        pen.setCosmetic(True)
        if self.expanded:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod >= TEXT_BELOW)
            painter.setPen(pen)
            painter.setBrush(self.fill())
            painter.drawRoundedRect(r, GROUP_RADIUS, GROUP_RADIUS)
            if lod >= TEXT_BELOW:
                self._paint_header(painter, lod)
        else:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod >= TEXT_BELOW)
            painter.setPen(pen)
            painter.setBrush(self.fill().darker(108) if not t.dark else self.fill().lighter(115))
            painter.drawRoundedRect(r.translated(4, 4), GROUP_RADIUS, GROUP_RADIUS)  # the stack behind
            painter.setBrush(self.fill())
            painter.drawRoundedRect(r, GROUP_RADIUS, GROUP_RADIUS)
            if lod >= TEXT_BELOW:
                self._paint_collapsed_text(painter, lod)
        self._paint_outline(painter)

    def _glyph(self, painter: QPainter, centre: QPointF, plus: bool) -> None:
        pen = QPen(self.theme.muted, 1.4)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(QRectF(centre.x() - GLYPH, centre.y() - GLYPH, 2 * GLYPH, 2 * GLYPH))
        painter.drawLine(QPointF(centre.x() - 2.6, centre.y()), QPointF(centre.x() + 2.6, centre.y()))
        if plus:
            painter.drawLine(QPointF(centre.x(), centre.y() - 2.6), QPointF(centre.x(), centre.y() + 2.6))

    def _paint_header(self, painter: QPainter, lod: float) -> None:
        t, r = self.theme, self._rect
        label, detail = self._static_texts()
        self._glyph(painter, QPointF(r.left() + 13, r.top() + 13), plus=False)
        painter.setPen(t.text)
        painter.setFont(t.bold)
        ls = label.size()
        painter.drawStaticText(QPointF(r.left() + 24, r.top() + 13 - ls.height() / 2), label)
        if lod >= 0.6 and ls.width() + 40 + detail.size().width() < r.width():
            painter.setPen(t.muted)
            painter.setFont(t.small)
            ds = detail.size()
            painter.drawStaticText(QPointF(r.right() - 10 - ds.width(), r.top() + 13 - ds.height() / 2), detail)

    def label_width(self) -> float:
        return self._static_texts()[0].size().width()

    def paint_pinned_label(self, painter: QPainter, left: float) -> QRectF:
        """The header's label drawn from scene x ``left`` (inside the box) on a tab of the header's
        colour — the view pins a label there when the box's own left edge is scrolled away.
        Returns the tab's scene rectangle."""
        t, r = self.theme, self._rect
        label = self._static_texts()[0]
        ls = label.size()
        tab = QRectF(left, r.top() + 2, ls.width() + 30, HEADER_TAB)
        fill = QColor(t.background)
        painter.setPen(QPen(self.border(), 1.0))
        painter.setBrush(fill)
        painter.drawRoundedRect(tab, 4, 4)
        self._glyph(painter, QPointF(tab.left() + 11, r.top() + 13), plus=False)
        painter.setPen(t.text)
        painter.setFont(t.bold)
        painter.drawStaticText(QPointF(tab.left() + 22, r.top() + 13 - ls.height() / 2), label)
        return tab

    def _paint_collapsed_text(self, painter: QPainter, lod: float) -> None:
        t, r = self.theme, self._rect
        label, detail = self._static_texts()
        self._glyph(painter, QPointF(r.left() + 13, r.center().y()), plus=True)
        ls, ds = label.size(), detail.size()
        two = lod >= 0.6
        total = ls.height() + (ds.height() + 1 if two else 0)
        top = r.center().y() - total / 2
        x = r.left() + 24 + (r.width() - 24 - 8 - max(ls.width(), ds.width() if two else 0)) / 2
        painter.setPen(t.text)
        painter.setFont(t.bold)
        painter.drawStaticText(QPointF(x, top), label)
        if two:
            painter.setPen(t.muted)
            painter.setFont(t.small)
            painter.drawStaticText(QPointF(x, top + ls.height() + 1), detail)

    def _paint_outline(self, painter: QPainter) -> None:
        paint_outline(painter, self.theme, self._rect if not self.expanded else self.header_rect(), GROUP_RADIUS,
                      self.selected, self.linked, self.hit)


def _mark_colour(theme: "GraphTheme", mark: str) -> QColor:
    """The accent of a mark; unknown marks (added by later features) fall back to the error
    accent."""
    try:
        return theme.accent(mark)
    except KeyError:
        return theme.accent("error")
