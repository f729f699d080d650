"""ARCHITECTURE.md names files and folders; every one it names must exist, so the map
cannot silently drift from the tree when code moves."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Short names in the text are relative to one of these folders.
BASES = ["", "cpp", "cpp/kernels", "cpp/src", "cpp/include/ldpfast", "cpp/bind",
         "python/ldpfast", "python/ldpfast/protocols"]
PATH = re.compile(r"`([A-Za-z0-9_./*-]+\.(?:py|pyi|cpp|hpp|md)|[A-Za-z0-9_.-]+/(?:[A-Za-z0-9_.*-]+/)*)`")


def _exists(name: str) -> bool:
    return any(list(ROOT.glob(str(pathlib.Path(base) / name.rstrip("/")))) for base in BASES)


def test_every_path_in_architecture_md_exists():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    names = sorted(set(PATH.findall(text)))
    assert len(names) > 30, names  # the pattern still finds the file names
    missing = [name for name in names if not _exists(name)]
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_protocol_module_is_on_the_map():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    shared = sorted(p.stem for p in (ROOT / "python/ldpfast/protocols").glob("_*.py") if p.stem != "__init__")
    missing = [name for name in shared if f"`{name}`" not in text]
    assert not missing, f"ARCHITECTURE.md does not describe the shared protocol modules {missing}"
