"""Which labels the series of a PromQL expression carry, worked out from the expression alone.

A label that no series of a query carries is no error to Prometheus: ``sum by (stage_role)
(stream_dedup_consumer_lag_records)`` returns one series with an empty ``stage_role``, a legend
``{{topic}}`` on ``sum(...)`` prints nothing, an alert's ``{{ $labels.topic }}`` renders as an
empty string, ``x{stage_role=~"all|shards"}`` matches what the misspelt alternative was meant
to. Every one of them still parses and still returns series, so neither promtool nor a live
Prometheus asked for "some series" notices. This module parses the subset of PromQL that the
dashboard and the alert rules use and tells which labels each part yields, following
Prometheus' own rules:

- a selector yields its metric's labels and the target's ``job`` and ``instance``;
- ``rate``, ``increase``, ``deriv`` and the like keep their argument's labels,
  ``histogram_quantile`` drops ``le``, ``vector`` and ``time`` yield none;
- ``sum by (a, b)`` yields ``a`` and ``b``; ``sum`` alone none; ``sum without (a)`` the rest;
- ``and`` and ``unless`` keep the left side's series, ``or`` adds the right's; an arithmetic
  or comparison operator between vectors keeps the left side's labels, only the ``on (...)``
  ones with ``on`` (one-to-one), and adds the ``group_left (...)`` ones; with a scalar or a
  number, the vector's.

Anything else raises :class:`UnsupportedQueryError`, so that a new construct in a panel gets
looked at rather than passed unchecked.

Example::

    catalogue = LabelCatalogue({"stream_dedup_consumer_lag_records": {"topic", "partition"}})
    tree = parse("sum by (stage_role) (stream_dedup_consumer_lag_records)")
    result_labels(tree, catalogue)  # {"stage_role"}
    [use for use in label_uses(tree, catalogue) if use.label not in use.available]  # the stage_role of sum by
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

#: Labels every scraped series carries: the target's.
TARGET_LABELS = frozenset({"job", "instance"})

_AGGREGATIONS = frozenset({"sum", "max", "min", "avg", "count", "group", "stddev", "stdvar"})
#: Functions of one range or instant vector that keep its labels.
_LABEL_KEEPING = frozenset(
    {"rate", "irate", "increase", "delta", "idelta", "deriv", "abs", "ceil", "floor", "round", "clamp_min", "clamp_max"}
)
_SET_OPERATORS = frozenset({"and", "or", "unless"})
_COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})
# Lowest binding first, as in Prometheus: or; and unless; comparisons; + -; * / % (^ is not modelled).
_PRECEDENCE = {"or": 1, "and": 2, "unless": 2, **dict.fromkeys(_COMPARISONS, 3), "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<range>\[[^\]]*\])
    | (?P<matchers>\{[^}]*\})
    | (?P<op>==|!=|>=|<=|=~|!~|[-+*/%^<>(),])
    )""",
    re.VERBOSE,
)
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


class UnsupportedQueryError(ValueError):
    """The expression uses PromQL this module does not model; extend it rather than skip the query."""


#: ``label operator "value"`` inside a selector's braces: (label, ``=``/``!=``/``=~``/``!~``, value).
Matcher = tuple[str, str, str]


@dataclass(frozen=True)
class Selector:
    """A metric name with its matchers (and, ignored here, a range such as ``[5m]``)."""

    metric: str
    matchers: tuple[Matcher, ...]


@dataclass(frozen=True)
class Call:
    """A function call: ``rate(x[5m])``, ``histogram_quantile(0.95, ...)``, ``time()``, ``vector(0)``."""

    function: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True)
class Aggregation:
    """``sum by (a) (...)``, ``max (...)``, ``count without (b) (...)``."""

    operator: str
    grouping: str | None  # "by", "without" or None
    labels: tuple[str, ...]
    argument: Node


@dataclass(frozen=True)
class Binary:
    """``left operator right``, with its vector matching: ``on``/``ignoring (...)`` and ``group_left (...)``."""

    operator: str
    left: Node
    right: Node
    matching: str | None = None  # "on", "ignoring" or None
    matching_labels: tuple[str, ...] = ()
    group_left: tuple[str, ...] | None = None


#: A number literal is a float: a scalar, with no labels.
Node = Selector | float | Call | Aggregation | Binary


@dataclass
class LabelCatalogue:
    """The labels of each metric name (beside ``job`` and ``instance``), and where known the values each label takes."""

    labels: Mapping[str, frozenset[str] | set[str]]
    values: Mapping[tuple[str, str], set[str]] = field(default_factory=dict)

    def of(self, metric: str) -> frozenset[str]:
        if metric not in self.labels:
            raise UnsupportedQueryError(f"unknown metric {metric}: no labels known for it")
        return frozenset(self.labels[metric]) | TARGET_LABELS


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    expr = expr.rstrip()
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        if not match or match.end() == position:
            raise UnsupportedQueryError(f"cannot read {expr[position : position + 20]!r} in {expr!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.tokens = _tokens(expr)
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise UnsupportedQueryError(
                f"expected {value or 'more'} at token {self.at} of {self.expr!r}, found {token}"
            )
        self.at += 1
        return token

    def label_list(self) -> tuple[str, ...]:
        self.take("(")
        labels: list[str] = []
        while self.peek() != ("op", ")"):
            kind, name = self.take()
            if kind != "ident":
                raise UnsupportedQueryError(f"a label name expected in {self.expr!r}, found {name!r}")
            labels.append(name)
            if self.peek() == ("op", ","):
                self.take(",")
        self.take(")")
        return tuple(labels)

    def expression(self, lowest: int = 0) -> Node:
        left = self.unary()
        while True:
            token = self.peek()
            operator = token[1] if token and token[0] in ("op", "ident") else None
            if operator not in _PRECEDENCE or _PRECEDENCE[operator] <= lowest:
                return left
            self.take()
            if self.peek() == ("ident", "bool"):
                raise UnsupportedQueryError(f"bool modifier in {self.expr!r}")
            matching: str | None = None
            matching_labels: tuple[str, ...] = ()
            group_left: tuple[str, ...] | None = None
            if self.peek() in (("ident", "on"), ("ident", "ignoring")):
                matching = self.take()[1]
                matching_labels = self.label_list()
            if self.peek() == ("ident", "group_right"):
                raise UnsupportedQueryError(f"group_right in {self.expr!r}")
            if self.peek() == ("ident", "group_left"):
                self.take()
                group_left = self.label_list() if self.peek() == ("op", "(") else ()
            right = self.expression(_PRECEDENCE[operator])
            left = Binary(operator, left, right, matching, matching_labels, group_left)

    def unary(self) -> Node:
        kind, value = self.take()
        if kind == "number":
            return float(value)
        if value == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if value == "-" and self.peek() and self.peek()[0] == "number":  # type: ignore[index]
            return -float(self.take()[1])
        if kind != "ident":
            raise UnsupportedQueryError(f"unexpected {value!r} in {self.expr!r}")
        if value in _AGGREGATIONS:
            return self.aggregation(value)
        if self.peek() == ("op", "("):
            return self.call(value)
        return self.selector(value)

    def aggregation(self, operator: str) -> Aggregation:
        grouping: str | None = None
        labels: tuple[str, ...] = ()
        if self.peek() in (("ident", "by"), ("ident", "without")):
            grouping = self.take()[1]
            labels = self.label_list()
        self.take("(")
        argument = self.expression()
        self.take(")")
        if self.peek() in (("ident", "by"), ("ident", "without")):
            raise UnsupportedQueryError(f"write the grouping first, {operator} by (...) (...), in {self.expr!r}")
        return Aggregation(operator, grouping, labels, argument)

    def call(self, function: str) -> Call:
        self.take("(")
        arguments: list[Node] = []
        while self.peek() != ("op", ")"):
            arguments.append(self.expression())
            if self.peek() == ("op", ","):
                self.take(",")
        self.take(")")
        return Call(function, tuple(arguments))

    def selector(self, metric: str) -> Selector:
        matchers: list[Matcher] = []
        if self.peek() and self.peek()[0] == "matchers":  # type: ignore[index]
            text = self.take()[1][1:-1]
            position = 0
            while position < len(text.rstrip()):
                match = _MATCHER.match(text, position)
                if not match:
                    raise UnsupportedQueryError(f"cannot read the matchers {{{text}}} in {self.expr!r}")
                matchers.append((match.group(1), match.group(2), match.group(3)))
                position = match.end()
        if self.peek() and self.peek()[0] == "range":  # type: ignore[index]
            self.take()
        if self.peek() == ("ident", "offset"):
            raise UnsupportedQueryError(f"offset in {self.expr!r}")
        return Selector(metric, tuple(matchers))


def parse(expr: str) -> Node:
    """The expression as a tree; :class:`UnsupportedQueryError` for PromQL outside the subset modelled."""
    parser = _Parser(expr)
    tree = parser.expression()
    if parser.peek() is not None:
        raise UnsupportedQueryError(f"unread {parser.tokens[parser.at :]} at the end of {expr!r}")
    return tree


def _is_scalar(node: Node) -> bool:
    if isinstance(node, float):
        return True
    if isinstance(node, Call):
        return node.function in ("time", "scalar")
    if isinstance(node, Binary):
        return _is_scalar(node.left) and _is_scalar(node.right)
    return False


def result_labels(node: Node, catalogue: LabelCatalogue) -> frozenset[str]:
    """The labels the series of ``node``'s result can carry (as far as the series of its inputs carry them)."""
    if isinstance(node, float):
        return frozenset()
    if isinstance(node, Selector):
        labels = catalogue.of(node.metric)
        return labels | {"le"} if node.metric.endswith("_bucket") else labels
    if isinstance(node, Call):
        if node.function in ("time", "vector", "scalar"):
            return frozenset()
        if node.function in _LABEL_KEEPING:
            return result_labels(node.arguments[0], catalogue)
        if node.function == "histogram_quantile":
            return result_labels(node.arguments[1], catalogue) - {"le"}
        raise UnsupportedQueryError(f"function {node.function}() is not modelled")
    if isinstance(node, Aggregation):
        inner = result_labels(node.argument, catalogue)
        if node.grouping == "by":
            return frozenset(node.labels)
        if node.grouping == "without":
            return inner - set(node.labels)
        return frozenset()
    left, right = result_labels(node.left, catalogue), result_labels(node.right, catalogue)
    if _is_scalar(node.left):
        return right
    if _is_scalar(node.right):
        return left
    if node.operator in _SET_OPERATORS:
        return left | right if node.operator == "or" else left
    if node.matching == "on" and node.group_left is None:
        return frozenset(node.matching_labels)
    return left | set(node.group_left or ())


@dataclass(frozen=True)
class LabelUse:
    """A label name an expression relies on a series carrying: where (``by``, ``on``...) and what it reads."""

    label: str
    where: str
    available: frozenset[str]


def label_uses(node: Node, catalogue: LabelCatalogue) -> Iterator[LabelUse]:
    """Every grouping, matching and matcher label of ``node``, with the labels there to be had at that place."""
    if isinstance(node, Selector):
        available = result_labels(node, catalogue)
        for label, _, _ in node.matchers:
            yield LabelUse(label, f"matcher of {node.metric}", available)
        return
    if isinstance(node, Call):
        for argument in node.arguments:
            yield from label_uses(argument, catalogue)
        return
    if isinstance(node, Aggregation):
        yield from label_uses(node.argument, catalogue)
        available = result_labels(node.argument, catalogue)
        for label in node.labels:
            yield LabelUse(label, f"{node.operator} {node.grouping}", available)
        return
    if isinstance(node, Binary):
        yield from label_uses(node.left, catalogue)
        yield from label_uses(node.right, catalogue)
        left, right = result_labels(node.left, catalogue), result_labels(node.right, catalogue)
        for label in node.matching_labels:
            where = f"{node.operator} {node.matching}"
            # on () and ignoring () name labels of both sides; one missing either side matches nothing.
            yield LabelUse(label, f"{where} (left side)", left)
            yield LabelUse(label, f"{where} (right side)", right)
        for label in node.group_left or ():
            yield LabelUse(label, f"{node.operator} group_left", right)


def nodes(node: Node) -> Iterator[Node]:
    """``node`` and every node below it."""
    yield node
    if isinstance(node, Call):
        for argument in node.arguments:
            yield from nodes(argument)
    elif isinstance(node, Aggregation):
        yield from nodes(node.argument)
    elif isinstance(node, Binary):
        yield from nodes(node.left)
        yield from nodes(node.right)


def selectors(node: Node) -> Iterator[Selector]:
    """Every metric selector of ``node``."""
    return (each for each in nodes(node) if isinstance(each, Selector))
