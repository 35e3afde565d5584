"""MkDocs hooks of the docs site (mkdocs.yml).  docs/configuration.md shows config/README.md, the
settings reference written from config/schema.yaml (python -m gcpipe.schema_doc): one file, read on
GitHub where it lies and on the site in the docs' navigation.  Its links to ../docs/PAGE.md become
PAGE.md, so they resolve on the site as in the repository."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# A page of docs/ whose text on the site is another file of the repository.
SHOWN = {"configuration.md": "config/README.md"}


def on_config(config):
    """`mkdocs serve` rebuilds when a shown file changes."""
    for source in SHOWN.values():
        config.watch.append(str(ROOT / source))
    return config


def on_page_markdown(markdown, page, config, files):
    source = SHOWN.get(page.file.src_uri)
    if source is None:
        return markdown
    return (ROOT / source).read_text(encoding="utf-8").replace("](../docs/", "](")
