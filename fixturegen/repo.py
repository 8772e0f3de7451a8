"""A fake Python repository for synthetic sessions: file contents and the outputs tools give on it.

Everything is drawn from one `random.Random`, so the same seed gives the same repository, the same
test failures and the same logs. Contents are plausible, not runnable: they only need to look and
tokenize like a real service's code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PROJECT_NAMES = ("orderly", "stockpile", "shipyard", "ledgerly", "tallyhub", "parcelpost")
USERS = ("dev", "alex", "sam", "kim", "robin")
ENTITIES = ("order", "customer", "invoice", "shipment", "product", "warehouse", "payment", "refund",
            "coupon", "supplier", "carrier", "return_request")
FIELD_POOL = ("id", "created_at", "updated_at", "status", "amount_cents", "currency", "quantity",
              "sku", "email", "name", "notes", "due_date", "tracking_code", "region", "discount",
              "tax_rate", "external_ref", "priority", "weight_grams", "archived")
FIELD_TYPES = {"id": "int", "created_at": "datetime", "updated_at": "datetime", "status": "str",
               "amount_cents": "int", "currency": "str", "quantity": "int", "sku": "str", "email": "str",
               "name": "str", "notes": "str | None", "due_date": "date | None", "tracking_code": "str | None",
               "region": "str", "discount": "Decimal", "tax_rate": "Decimal", "external_ref": "str | None",
               "priority": "int", "weight_grams": "int", "archived": "bool"}
VERBS = ("validate", "normalize", "compute", "resolve", "apply", "summarize", "reconcile", "refresh",
         "estimate", "allocate", "sync", "format")
SERVICE_MODULES = ("billing", "inventory", "shipping", "pricing", "notifications", "reporting")
# Lines per ordinary module: long enough to be worth re-reading, short enough that a read is 1-3k tokens.
MODULE_LINES = (90, 260)
LOG_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARNING", "ERROR")
ENDPOINTS = ("/orders", "/orders/{id}", "/customers", "/invoices", "/shipments/{id}/track", "/health",
             "/products", "/payments/webhook", "/refunds")


def camel(snake: str) -> str:
    return "".join(p.capitalize() for p in snake.split("_"))


@dataclass
class FakeRepo:
    """Files of the fake project (relative path -> text), mutated by the session's edits."""

    rng: random.Random
    name: str
    user: str
    files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, rng: random.Random) -> "FakeRepo":
        repo = cls(rng, rng.choice(PROJECT_NAMES), rng.choice(USERS))
        repo._populate()
        return repo

    @property
    def pkg(self) -> str:
        return self.name

    @property
    def home_root(self) -> str:
        return f"/home/{self.user}/projects/{self.name}"

    # --- contents ---------------------------------------------------------------------------------

    def _populate(self) -> None:
        pkg, f = self.pkg, self.files
        f["pyproject.toml"] = self._pyproject()
        f["Makefile"] = ("PY ?= python\n\n.PHONY: test lint fmt\n\ntest:\n\t$(PY) -m pytest -q\n\n"
                         f"lint:\n\truff check src tests\n\tmypy src/{pkg}\n\nfmt:\n\truff format src tests\n")
        f["README.md"] = (f"# {self.name}\n\nOrder management service: API, billing and fulfilment jobs.\n\n"
                          "## Development\n\n    make test\n    make lint\n\nMigrations live in `migrations/` "
                          "and are owned by the DBA team; do not edit them in feature branches.\n")
        f[f"src/{pkg}/__init__.py"] = f'"""{self.name}: order management service."""\n\n__version__ = "1.4.2"\n'
        for name in ("models", "api", "db", "schemas", "utils", "cli"):
            f[f"src/{pkg}/{name}.py"] = self.module(name, self.rng.randint(*MODULE_LINES))
        for name in SERVICE_MODULES:
            f[f"src/{pkg}/services/{name}.py"] = self.module(name, self.rng.randint(*MODULE_LINES))
        f["tests/conftest.py"] = self._conftest()
        for name in ("api", "models", "billing", "inventory", "shipping"):
            f[f"tests/test_{name}.py"] = self.test_module(name, self.rng.randint(6, 14))
        for i, what in enumerate(("initial", "add_orders", "add_invoices", "add_tracking_code"), 1):
            f[f"migrations/{i:04d}_{what}.py"] = self._migration(what)
        f["services/notifier/pyproject.toml"] = self._pyproject("notifier")
        f["services/notifier/notifier/worker.py"] = self.module("worker", self.rng.randint(*MODULE_LINES))
        f["services/notifier/tests/test_worker.py"] = self.test_module("worker", 5)

    def _pyproject(self, name: str | None = None) -> str:
        return (f'[project]\nname = "{name or self.name}"\nversion = "1.4.2"\nrequires-python = ">=3.11"\n'
                'dependencies = ["flask>=3", "sqlalchemy>=2", "pydantic>=2", "httpx"]\n\n'
                '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-q"\n\n'
                '[tool.ruff]\nline-length = 100\n')

    def _conftest(self) -> str:
        return (f'import pytest\nfrom sqlalchemy import create_engine\nfrom sqlalchemy.orm import Session\n\n'
                f'from {self.pkg}.db import Base\nfrom {self.pkg}.api import create_app\n\n\n'
                '@pytest.fixture\ndef db(tmp_path):\n    """A throwaway SQLite database with the schema '
                'applied."""\n    engine = create_engine(f"sqlite:///{tmp_path}/test.db")\n'
                '    Base.metadata.create_all(engine)\n    with Session(engine) as session:\n'
                '        yield session\n\n\n@pytest.fixture\ndef client(db):\n'
                '    app = create_app(session=db)\n    app.testing = True\n    return app.test_client()\n')

    def _migration(self, what: str) -> str:
        ent = self.rng.choice(ENTITIES)
        cols = "\n".join(f'        sa.Column("{c}", sa.{self._sa_type(c)}),' for c in self._fields(5))
        return (f'"""{what.replace("_", " ")}"""\n\nimport sqlalchemy as sa\nfrom alembic import op\n\n'
                f'revision = "{self.rng.getrandbits(48):012x}"\n\n\ndef upgrade() -> None:\n'
                f'    op.create_table(\n        "{ent}s",\n{cols}\n    )\n\n\ndef downgrade() -> None:\n'
                f'    op.drop_table("{ent}s")\n')

    @staticmethod
    def _sa_type(col: str) -> str:
        t = FIELD_TYPES[col]
        return {"int": "Integer()", "bool": "Boolean()", "Decimal": "Numeric(12, 4)",
                "datetime": "DateTime()"}.get(t, "String(255)")

    def _fields(self, n: int) -> list[str]:
        return ["id"] + self.rng.sample(FIELD_POOL[1:], n - 1)

    def module(self, name: str, lines: int) -> str:
        """A module of about `lines` lines: imports, then classes and functions about a few entities."""
        rng = self.rng
        out = [f'"""{name.replace("_", " ").capitalize()}: {rng.choice(ENTITIES)} handling for {self.name}."""',
               "", "from __future__ import annotations", "", "import logging",
               "from dataclasses import dataclass, field", "from datetime import date, datetime",
               "from decimal import Decimal", "", f"from {self.pkg}.db import Session, transaction", "",
               "log = logging.getLogger(__name__)", ""]
        while len(out) < lines:
            out.extend(self._unit(rng.choice(ENTITIES)))
        return "\n".join(out) + "\n"

    def _unit(self, ent: str) -> list[str]:
        rng, cls = self.rng, camel(ent)
        kind = rng.randrange(4)
        if kind == 0:
            fields = self._fields(rng.randint(4, 8))
            body = [f"    {f}: {FIELD_TYPES[f]}" + (" = None" if "None" in FIELD_TYPES[f] else "")
                    for f in fields]
            return ["", "@dataclass", f"class {cls}{rng.choice(('', 'Record', 'Summary', 'Draft'))}:",
                    f'    """A {ent.replace("_", " ")} as the {rng.choice(VERBS)} step sees it."""', "",
                    *sorted(body, key=lambda s: "=" in s), ""]
        verb = rng.choice(VERBS)
        if kind == 1:
            f1, f2 = rng.sample(FIELD_POOL[1:], 2)
            return ["", f"def {verb}_{ent}(session: Session, {ent}_id: int, *, strict: bool = False) -> {cls}:",
                    f'    """{verb.capitalize()} one {ent.replace("_", " ")}; raises LookupError if it is gone."""',
                    f"    {ent} = session.get({cls}, {ent}_id)", f"    if {ent} is None:",
                    f'        raise LookupError(f"{ent} {{{ent}_id}} not found")',
                    f"    if strict and not {ent}.{f1}:",
                    f'        log.warning("%s %s has no {f1}", "{ent}", {ent}_id)',
                    f"        raise ValueError(\"{f1} is required\")",
                    f"    {ent}.{f2} = _{verb}_{f2}({ent}.{f2})",
                    f"    log.info(\"{verb} {ent} id=%s {f2}=%s\", {ent}_id, {ent}.{f2})", f"    return {ent}", ""]
        if kind == 2:
            page = rng.choice(("limit", "per_page", "page_size"))
            return ["", f"def list_{ent}s(session: Session, *, {page}: int = 50, offset: int = 0,",
                    f"        status: str | None = None) -> list[{cls}]:",
                    f'    """{camel(ent)}s ordered by creation time, newest first."""',
                    f"    query = session.query({cls}).order_by({cls}.created_at.desc())",
                    "    if status is not None:", f"        query = query.filter({cls}.status == status)",
                    f"    rows = query.offset(offset).limit({page}).all()",
                    f'    log.debug("listed %d {ent}s (offset=%d)", len(rows), offset)', "    return rows", ""]
        total = rng.choice(("amount_cents", "quantity", "weight_grams"))
        return ["", f"def {verb}_{ent}_totals(items: list[{cls}], tax_rate: Decimal) -> dict[str, Decimal]:",
                '    """Totals per currency, tax included, rounded half-up to cents."""',
                "    totals: dict[str, Decimal] = {}", "    for item in items:",
                "        if item.archived:", "            continue",
                f"        net = Decimal(item.{total}) / 100",
                "        totals[item.currency] = totals.get(item.currency, Decimal(0)) + net * (1 + tax_rate)",
                '    return {k: v.quantize(Decimal("0.01")) for k, v in totals.items()}', ""]

    def snippet(self, lines: int) -> list[str]:
        """About `lines` lines of new code (an edit's replacement text)."""
        out: list[str] = []
        while len(out) < lines:
            out.extend(self._unit(self.rng.choice(ENTITIES)))
        return out[1:lines + 1]

    def test_module(self, name: str, tests: int) -> str:
        out = ["import pytest", "", f"from {self.pkg} import {name if name != 'worker' else 'api'}", ""]
        for _ in range(tests):
            ent, verb = self.rng.choice(ENTITIES), self.rng.choice(VERBS)
            case = self.rng.choice(("basic", "empty", "rounding", "missing", "paged"))
            status = self.rng.choice(("open", "paid", "shipped"))
            out += ["", f"def test_{verb}_{ent}_{case}(db):", f"    {ent} = make_{ent}(db, status=\"{status}\")",
                    f"    result = {name}.{verb}_{ent}(db, {ent}.id)",
                    f"    assert result.id == {ent}.id", "    assert result.status != \"deleted\"", ""]
        return "\n".join(out) + "\n"

    def big_module(self, lines: int) -> str:
        """A long legacy module (a read of it is one of the session's large tool outputs)."""
        return self.module("legacy_reports", lines)

    def log_lines(self, n: int, failing: str | None = None) -> str:
        """Application log lines; `failing` makes some of them an error with that message."""
        rng, out = self.rng, []
        minute = rng.randint(0, 59)
        for i in range(n):
            second = i * 7 % 60
            minute += second == 0
            level = rng.choice(LOG_LEVELS)
            ts = f"2024-05-14 {2 + minute // 60 % 20:02d}:{minute % 60:02d}:{second:02d},{rng.randint(0, 999):03d}"
            if failing and level == "ERROR":
                out.append(f"{ts} ERROR [{self.pkg}.jobs.sync] {failing} request_id={rng.getrandbits(32):08x}")
                continue
            ep = rng.choice(ENDPOINTS).replace("{id}", str(rng.randint(1, 9999)))
            out.append(f"{ts} {level} [{self.pkg}.api] {rng.choice(('GET', 'POST', 'PATCH'))} {ep} "
                       f"{rng.choice((200, 200, 200, 201, 204, 404, 422))} {rng.uniform(1, 250):.1f}ms "
                       f"request_id={rng.getrandbits(32):08x}")
        return "\n".join(out) + "\n"


def numbered(text: str, offset: int = 1) -> str:
    """Claude Code's Read output: `cat -n` style, right-aligned line numbers and an arrow."""
    return "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(text.split("\n"), offset))


def pytest_output(rng: random.Random, passed: int, failures: list[tuple[str, str]],
                  seconds: float) -> str:
    """`pytest -q` output with tracebacks for `failures` ((test id, error line) pairs) and a summary."""
    lines = []
    total = passed + len(failures)
    dots = "".join(rng.sample("F" * len(failures) + "." * passed, total))
    for i in range(0, total, 60):
        chunk = dots[i:i + 60]
        lines.append(f"{chunk:<60} [{min(100, (i + len(chunk)) * 100 // max(total, 1)):>3}%]")
    if failures:
        lines.append("=" * 30 + " FAILURES " + "=" * 30)
        for test_id, error in failures:
            file, name = test_id.split("::")
            kind = error.split(":", 1)[0]
            address = rng.getrandbits(40)
            lines += [f"{'_' * 20} {name} {'_' * 20}", "",
                      f"db = <sqlalchemy.orm.session.Session object at 0x7f{address:010x}>", "",
                      f"    def {name}(db):", "        result = call_under_test(db)",
                      f">       {kind.lower()}_check(result)", f"E       {error}", "",
                      f"{file}:{rng.randint(8, 90)}: {kind}"]
        lines.append("=" * 27 + " short test summary info " + "=" * 27)
        lines += [f"FAILED {t} - {e}" for t, e in failures]
    summary = (f"{len(failures)} failed, {passed} passed" if failures else f"{passed} passed") + f" in {seconds:.2f}s"
    lines.append(summary)
    return "\n".join(lines)
